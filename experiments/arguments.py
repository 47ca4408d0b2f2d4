"""Command lines from ``Args`` dataclasses: one flag per field, documented by the field's ``help`` metadata.

The experiment scripts read top to bottom from one ``Args`` dataclass each (``experiments.train``,
``experiments.study``). :func:`parser` turns such a class into its command line: ``--flag-name`` per field, typed by
the field's annotation (``bool``: a switch; ``list[int]``/``list[str]``: one or more values; ``int``, ``float``,
``str``), with the default shown. A field may spell its flag otherwise (metadata ``flag``, e.g. ``--workers``
for the field ``jobs``, which keeps the settings saved in run folders readable) and keep old spellings working as
deprecated aliases (metadata ``aliases``; :func:`hpcgym.cli.alias`). The trace fields of :class:`TraceArgs` get
the flags every trace-reading tool shares (:func:`hpcgym.cli.add_trace_args`). A field whose metadata has
``remainder`` collects the arguments after ``--``. :func:`parse` returns the dataclass and the fields given
explicitly (presets and resumed runs yield to them).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hpcgym import cli

T = TypeVar("T")
#: the fields whose flags come from :func:`hpcgym.cli.add_trace_args`
TRACE_FLAGS = ("format", "machine", "columns", "round", "on_duplicate")


def flag(default: Any, text: str, **metadata: Any) -> Any:
    """A dataclass field that is a command-line flag: its default and its ``text`` (a list default: a copy each)."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": text, **metadata})
    return field(default=default, metadata={"help": text, **metadata})


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


def parser(cls: type, prog: str, description: str | None) -> cli.ArgumentParser:
    """The command line of the dataclass ``cls`` (see the module docstring).

    Raises:
        TypeError: :func:`hpcgym.cli.add_trace_args` adds a flag that ``cls`` has no field for.
    """
    ap = cli.ArgumentParser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for f in dataclasses.fields(cls):
        if f.name == TRACE_FLAGS[0]:
            _add_trace_flags(ap, fields)
        elif f.name not in TRACE_FLAGS:
            _add_flag(ap, f)
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
    f = next((f for f in dataclasses.fields(cls) if f.name == name), None)
    return (f.metadata.get("flag") if f is not None else None) or "--" + name.replace("_", "-")


def _add_flag(ap: argparse.ArgumentParser, f: dataclasses.Field) -> None:
    _add_field(ap, f)
    for old in f.metadata.get("aliases", ()):
        cli.alias(ap, old, f.metadata.get("flag") or "--" + f.name.replace("_", "-"))


def _add_field(ap: argparse.ArgumentParser, f: dataclasses.Field) -> None:
    flag, helptext, kind = f.metadata.get("flag") or "--" + f.name.replace("_", "-"), f.metadata["help"], str(f.type)
    metavar = flag.lstrip("-").replace("-", "_").upper()
    if f.metadata.get("aliases"):
        helptext += f" [formerly {', '.join(f.metadata['aliases'])}]"
    if f.metadata.get("remainder"):
        ap.add_argument(f.name, nargs=argparse.REMAINDER, help=helptext)
    elif kind == "bool":
        ap.add_argument(flag, dest=f.name, action="store_true", help=helptext)
    elif kind.startswith("list"):
        default = f.default_factory()
        shown = f" (default: {' '.join(map(str, default))})" if default else ""
        ap.add_argument(flag, dest=f.name, type=int if "int" in kind else str, nargs="+", default=default,
                        help=helptext + shown, metavar=metavar)
    else:
        shown = f" (default: {f.default})" if f.default != "" else ""
        ap.add_argument(flag, dest=f.name, type={"int": int, "float": float}.get(kind, str), default=f.default,
                        help=helptext + shown, metavar=metavar)


def parse(cls: type[T], ap: argparse.ArgumentParser, argv: Sequence[str] | None) -> tuple[T, set[str]]:
    """Parse ``argv`` with ``ap`` (from :func:`parser`) into ``cls``; return it and the fields given explicitly."""
    values = vars(ap.parse_args(argv))
    for f in dataclasses.fields(cls):
        if f.metadata.get("remainder"):
            values[f.name] = [a for a in values[f.name] if a != "--"]
    probe = copy.deepcopy(ap)
    unset = object()  # not a str: argparse would type-convert a string default
    probe.set_defaults(**{f.name: unset for f in dataclasses.fields(cls)})
    given = {k for k, v in vars(probe.parse_args(argv)).items() if v is not unset}
    return cls(**values), given


def flat(name: str, module: str, sections: Sequence[type], base: type = TraceReading,
         namespace: dict[str, Any] | None = None) -> type:
    """One mutable dataclass with every field of the dataclasses ``sections``, in order.

    A command line's ``Args`` (:func:`parser`) built from a recipe's sections: each field keeps its default and its
    flag's metadata, so a setting is defined once, in its section. ``module``: where the class is bound to ``name``
    (so that it pickles: runs in other processes get it); ``namespace``: its methods and properties.
    """
    fields = [(f.name, f.type, _copy(f)) for s in sections for f in dataclasses.fields(s)]
    cls = dataclasses.make_dataclass(name, fields, bases=(base,), namespace=namespace or {})
    cls.__module__ = module
    return cls


def _copy(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return field(default_factory=f.default_factory, metadata=f.metadata)
    return field(default=f.default, metadata=f.metadata)
