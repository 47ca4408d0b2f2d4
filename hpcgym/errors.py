"""The exceptions hpcgym raises; every message says what went wrong and how to fix it."""

from __future__ import annotations

import difflib
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path

_PACKAGE = str(Path(__file__).resolve().parent)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first caller outside hpcgym (the user's line, not a reader's internals)."""
    level, frame = 2, sys._getframe(1)  # level 2: the caller of this function
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)


class HpcgymError(Exception):
    """Base class of every hpcgym error."""


class TraceFormatError(HpcgymError, ValueError):
    """A trace file is malformed: the message names the file, the line and the field."""

    def __init__(self, path: object, line: int | None, field: str | None, message: str):
        self.path = str(path)
        self.line = line
        self.field = field
        where = self.path if line is None else f"{self.path}, line {line}"
        what = f" field {field!s}:" if field else ""
        super().__init__(f"{where}:{what} {message}")


class InvalidJobError(HpcgymError, ValueError):
    """A job cannot run on the machine (raised with ``on_invalid="error"``)."""

    def __init__(self, path: object, line: int | None, field: str, reason: str):
        self.path = str(path)
        self.line = line
        self.field = field
        self.reason = reason
        where = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(
            f"{where}: field {field}: invalid job ({reason}). "
            'Pass on_invalid="drop" to skip such jobs with a warning that counts them.'
        )


class UnknownNameError(HpcgymError, KeyError):
    """A name (of a trace, an environment id, a synthesizer, a policy, ...) is unknown; suggests the closest names.

    Args:
        kind: what was looked up, for the message (``"trace"``, ``"policy"``).
        name: the name given.
        known: the names that exist.
        hint: a sentence added to the message.
    """

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = ""):
        known = sorted(known)
        close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5)
        mean = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        self.kind, self.name = kind, name
        super().__init__(f"Unknown {kind} {name!r}.{mean} Known: {', '.join(known)}.{' ' + hint if hint else ''}")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


class UnknownMachineError(UnknownNameError):
    """A machine name is not in the catalog."""

    def __init__(self, name: str, known: Iterable[str], hint: str = ""):
        super().__init__("machine", name, known, hint)


class EmptyTraceError(HpcgymError, ValueError):
    """A trace has no (valid) jobs left to use; the message says how many were dropped and why."""

    def __init__(self, path: object, invalid: dict[str, int] | None = None, need: str = "to use"):
        self.path = str(path)
        self.invalid = dict(invalid or {})
        dropped = sum(self.invalid.values())
        why = ", ".join(f"{n} {r}" for r, n in self.invalid.items())
        detail = f"all {dropped} jobs were dropped as invalid ({why})" if dropped else "it holds no jobs"
        super().__init__(f"{self.path}: no valid jobs {need}: {detail}.")


class NoDecisionError(HpcgymError, RuntimeError):
    """A workload's windows need no decision: every job starts on arrival, so an agent has nothing to learn.

    The environment raises it after :data:`hpcgym.env.MAX_REDRAWS` such windows in a row. It is a result about the
    workload (too light for its machine, or too short a window), not a bug: a study records the source as
    untrainable. A :class:`RuntimeError`, as before it had its own type.

    Args:
        windows: the windows drawn in a row, none of which needed a decision.
        window: jobs per window.
        offered_load: the mean offered load (:func:`hpcgym.jobs.offered_load`) of those windows.
        source: what the windows came from (a workload, a ``--synthesizer``), for the message; empty: unnamed.
    """

    def __init__(self, windows: int, window: int, offered_load: float, source: str = ""):
        self.windows, self.window, self.offered_load, self.source = windows, window, offered_load, source
        super().__init__(f"{source + ': ' if source else ''}{windows} windows of {window} jobs in a row needed no "
                         f"decision (every job started on arrival; their mean offered load is {offered_load:.3f}), "
                         "so an agent cannot train on them; use a longer window (--window), a busier workload or "
                         "another source")

    def __reduce__(self):  # pickles with its fields (a study's worker processes send it back)
        return type(self), (self.windows, self.window, self.offered_load, self.source)


class DependencyNotInstalled(HpcgymError, ImportError):
    """An optional dependency is missing; the message names the pip extra that provides it."""

    def __init__(self, package: str, extra: str):
        self.package = package
        self.extra = extra
        super().__init__(f"{package} is not installed. Install it with: pip install 'hpcgym[{extra}]'")
