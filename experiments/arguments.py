"""Command lines from ``Args`` dataclasses: one flag per field, documented and checked by the field's metadata.

The experiment scripts read top to bottom from one ``Args`` dataclass each (``experiments.train``,
``experiments.study``). :func:`parser` turns such a class into its command line: ``--flag-name`` per field, typed by
the field's annotation (``bool``: a switch, ``--no-...`` too when it defaults to True; ``list[int]``/``list[str]``:
one or more values; ``int``, ``float``, ``str``), with the default shown. A field whose type is itself a dataclass
(``experiments.train.Args.recipe``, a :class:`~experiments.recipe.Recipe` of sections) contributes its own fields'
flags, flat: every setting is declared once, on its dataclass, and its flag comes with it.

A field's metadata (:func:`flag`) says everything about its flag and its values:

==============  ===================================================================================================
``help``        the flag's help (required)
``flag``        the flag, when it is not ``--`` + the name with dashes (``--workers`` for the field ``jobs``, which
                keeps the settings saved in run folders readable)
``aliases``     old spellings that still work, as deprecated aliases (:func:`hpcgym.cli.alias`)
``choices``     the values it may take
``at_least``,   the least value (closed), or the bound it must be above (open)
``above``
``at_most``,    the greatest value (closed), or the bound it must be below (open)
``below``
``remainder``   the field collects the arguments after ``--``
==============  ===================================================================================================

:func:`check` refuses a value outside its field's ``choices`` or bounds (:class:`hpcgym.cli.UsageError`, naming the
flag): a dataclass calls it from its ``__post_init__``, so a value is checked where its field is declared. The trace
fields of :class:`TraceArgs` get the flags every trace-reading tool shares (:func:`hpcgym.cli.add_trace_args`).
:func:`parse` returns the dataclass and the fields given explicitly (presets and resumed runs yield to them).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hpcgym import cli

T = TypeVar("T")
#: the fields whose flags come from :func:`hpcgym.cli.add_trace_args`
TRACE_FLAGS = ("format", "machine", "columns", "round", "on_duplicate")


def flag(default: Any, text: str, **metadata: Any) -> Any:
    """A dataclass field that is a command-line flag: its default, its help ``text`` and its metadata (see above).

    A list default is copied for each instance.
    """
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": text, **metadata})
    return field(default=default, metadata={"help": text, **metadata})


def flag_of(f: dataclasses.Field) -> str:
    """The command-line flag of the field ``f`` (metadata ``flag``, else ``--`` + its name with dashes)."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _number(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _bounds(f: dataclasses.Field) -> tuple[str, Any] | None:
    """The test of ``f``'s bounds as ``(words, predicate)``, or None when it has none."""
    m = f.metadata
    lo, lo_open = (m["above"], True) if "above" in m else (m.get("at_least"), False)
    hi, hi_open = (m["below"], True) if "below" in m else (m.get("at_most"), False)
    if lo is None and hi is None:
        return None
    if lo is not None and hi is not None:
        words = f"between {_number(lo)} and {_number(hi)}" + (" (both excluded)" if lo_open and hi_open else "")
    elif lo is not None:
        words = f"> {_number(lo)}" if lo_open else (f"at least {lo}" if isinstance(lo, int) else f">= {lo:g}")
    else:
        words = f"< {_number(hi)}" if hi_open else f"<= {_number(hi)}"

    def within(v: Any) -> bool:  # NaN fails every comparison
        return ((lo is None or (v > lo if lo_open else v >= lo)) and
                (hi is None or (v < hi if hi_open else v <= hi)))
    return words, within


def check(obj: Any) -> None:
    """Refuse a field of the dataclass ``obj`` outside its ``choices`` or bounds (metadata; :func:`flag`).

    Raises:
        cli.UsageError: naming the flag, what it must be, and the value given.
    """
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        choices = f.metadata.get("choices")
        if choices is not None and value not in choices:
            raise cli.UsageError(f"{flag_of(f)} must be one of {tuple(choices)}")
        bounds = _bounds(f)
        if bounds is not None and not bounds[1](value):
            raise cli.UsageError(f"{flag_of(f)} must be {bounds[0]}, not {value}")


class TraceReading:
    """How to read a trace, for a dataclass with the fields of :class:`TraceArgs` (``trace``, :data:`TRACE_FLAGS`)."""

    trace: str

    def read_kwargs(self) -> dict[str, Any]:
        """How to read the trace: :func:`hpcgym.traces.read`'s keyword arguments (:data:`TRACE_FLAGS`)."""
        return {name: getattr(self, name) or None for name in TRACE_FLAGS}

    @property
    def trace_label(self) -> str:
        """The trace's short name (a path's file name without extensions)."""
        return Path(self.trace).name.split(".")[0] or "trace"


@dataclass
class TraceArgs(TraceReading):
    """The real trace an experiment reads, and how to read it (an ``Args`` dataclass's first fields)."""

    trace: str = flag("theta", "real trace (bundled name or file)")
    format: str = ""  #: ``--format`` (:func:`hpcgym.cli.add_trace_args`); empty: from the file's name and header
    machine: str = ""  #: ``--machine`` as text; empty: the trace's own
    columns: str = ""  #: ``--columns`` as text (for ``--format csv``)
    round: str = ""  #: ``--round`` as text; empty: the readers' defaults (counts must be whole)
    on_duplicate: str = "warn"  #: ``--on-duplicate``: ``warn`` (keep jobs whose id repeats) or ``error``


def _group(cls: type, name: str) -> type | None:
    """The dataclass that the field ``name`` of ``cls`` holds (its flags are that class's fields), or None."""
    hint = typing.get_type_hints(cls)[name]
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def leaves(cls: type) -> Iterator[tuple[dataclasses.Field, type]]:
    """Every field of ``cls`` that is a flag, with its type, in order: a dataclass-typed field's own, flat.

    Raises:
        TypeError: two fields would have the same name (one flag, one setting).
    """
    seen: set[str] = set()
    for f in dataclasses.fields(cls):
        group = _group(cls, f.name)
        for leaf, kind in leaves(group) if group is not None else [(f, typing.get_type_hints(cls)[f.name])]:
            if leaf.name in seen:
                raise TypeError(f"{cls.__name__} has two fields named {leaf.name!r}: a flag needs one")
            seen.add(leaf.name)
            yield leaf, kind


def parser(cls: type, prog: str, description: str | None) -> cli.ArgumentParser:
    """The command line of the dataclass ``cls`` (see the module docstring).

    Raises:
        TypeError: :func:`hpcgym.cli.add_trace_args` adds a flag that ``cls`` has no field for.
    """
    ap = cli.ArgumentParser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    found = list(leaves(cls))
    fields = {f.name: f for f, _ in found}
    for f, kind in found:
        if f.name == TRACE_FLAGS[0]:
            _add_trace_flags(ap, fields)
        elif f.name not in TRACE_FLAGS:
            _add_flag(ap, f, kind)
    return ap


def _add_trace_flags(ap: argparse.ArgumentParser, fields: dict[str, dataclasses.Field]) -> None:
    cli.add_trace_args(ap, as_text=True)
    probe = argparse.ArgumentParser(add_help=False)
    cli.add_trace_args(probe, as_text=True)
    added = set(vars(probe.parse_args([])))
    if added - set(fields):
        raise TypeError(f"hpcgym.cli.add_trace_args adds {sorted(added - set(fields))}: give TraceArgs such fields")
    ap.set_defaults(**{dest: fields[dest].default for dest in added})  # the dataclass's own ("" is unset)


def flag_name(cls: type, name: str) -> str:
    """The command-line flag of the field ``name`` of the dataclass ``cls`` (``--eval-window`` for ``eval_length``)."""
    f = next((f for f, _ in leaves(cls) if f.name == name), None)
    return flag_of(f) if f is not None else "--" + name.replace("_", "-")


def _add_flag(ap: argparse.ArgumentParser, f: dataclasses.Field, kind: Any) -> None:
    _add_field(ap, f, kind)
    for old in f.metadata.get("aliases", ()):
        cli.alias(ap, old, flag_of(f))


def _add_field(ap: argparse.ArgumentParser, f: dataclasses.Field, kind: Any) -> None:
    name, helptext = flag_of(f), f.metadata["help"]
    metavar = name.lstrip("-").replace("-", "_").upper()
    if f.metadata.get("aliases"):
        helptext += f" [formerly {', '.join(f.metadata['aliases'])}]"
    if f.metadata.get("remainder"):
        ap.add_argument(f.name, nargs=argparse.REMAINDER, help=helptext)
    elif kind is bool:
        action = argparse.BooleanOptionalAction if f.default else "store_true"
        ap.add_argument(name, dest=f.name, action=action, default=f.default, help=helptext)
    elif typing.get_origin(kind) is list:
        default = f.default_factory()
        shown = f" (default: {' '.join(map(str, default))})" if default else ""
        ap.add_argument(name, dest=f.name, type=typing.get_args(kind)[0], nargs="+", default=default,
                        help=helptext + shown, metavar=metavar)
    else:
        shown = f" (default: {f.default})" if f.default != "" else ""
        ap.add_argument(name, dest=f.name, type=kind if kind in (int, float) else str, default=f.default,
                        help=helptext + shown, metavar=metavar)


def parse(cls: type[T], ap: argparse.ArgumentParser, argv: Sequence[str] | None) -> tuple[T, set[str]]:
    """Parse ``argv`` with ``ap`` (from :func:`parser`) into ``cls``; return it and the fields given explicitly.

    A value its field refuses (:func:`check`, or a rule of the dataclass) is a usage error (``ap.error``: one line).
    """
    values = vars(ap.parse_args(argv))
    found = list(leaves(cls))
    for f, _ in found:
        if f.metadata.get("remainder"):
            values[f.name] = [a for a in values[f.name] if a != "--"]
    probe = copy.deepcopy(ap)
    unset = object()  # not a str: argparse would type-convert a string default
    probe.set_defaults(**{f.name: unset for f, _ in found})
    given = {k for k, v in vars(probe.parse_args(argv)).items() if v is not unset}
    try:
        return build(cls, values), given
    except cli.UsageError as exc:
        ap.error(str(exc))


def build(cls: type[T], values: dict[str, Any]) -> T:
    """``cls`` from flat ``values`` (one per flag: :func:`leaves`), a dataclass-typed field built from its own."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        group = _group(cls, f.name)
        if group is not None:
            kwargs[f.name] = build(group, values)
        elif f.name in values:
            kwargs[f.name] = values[f.name]
    return cls(**kwargs)
