"""The trace formats :func:`hpcgym.traces.read` knows, and how to add one (a reader registry).

The built-in formats are :data:`BUILTIN`. Another format is a :class:`TraceFormat`: a function that reads the file
into a table of canonical columns, and optionally how to recognise such files. Register it for this process with
:func:`register`, or for every process (every ``--format`` of every CLI) through the ``hpcgym.readers`` entry
points of an installed package (:mod:`hpcgym.plugins`; ``docs/extend.md`` has a complete example).

The reader returns a ``pandas.DataFrame``, one row per job in file order, whose columns use the canonical names of
a CSV column mapping (:data:`hpcgym.traces.csvtable.KEYS`): ``submit`` (seconds; Unix times are rebased) or
``interarrival``, ``run``, ``nodes`` or ``procs``; optionally ``walltime``, ``job_id``, ``user``, ``group``,
``queue`` (numbers or names), ``status`` and ``wait``. An optional ``line`` column gives each row's line in the file,
so that messages name it. hpcgym does the rest exactly as for a CSV job table: the rounding policy (``round=``),
the range check, unknown walltimes, the invalid-job and duplicate-id policies, sorting, compact tables. A malformed
value is best raised by the reader itself as :class:`~hpcgym.errors.TraceFormatError` (file, line, field).

The machine is the one given (``machine=``, ``--machine``), else the table's ``attrs["machine"]``, else the
format's :attr:`TraceFormat.machine`, else one sized from the largest job that ran, with a warning (as for Slurm).

For example (``traces.read("jobs.tiny")`` then gives two jobs on a 4-node machine)::

    def read_tiny(path, machine):
        return pd.DataFrame({"submit": [0, 60], "run": [30, 40], "nodes": [1, 2]})

    register(TraceFormat("tiny", read_tiny, suffixes=(".tiny",), machine="4"))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs, plugins
from hpcgym.errors import TraceFormatError, UnknownNameError
from hpcgym.machines import Machine, parse
from hpcgym.traces._accounting import infer_machine
from hpcgym.traces._io import MAX_EXACT, CsvSource, Rounding, finish, numeric_column
from hpcgym.traces.csvtable import KEYS, missing_keys, table_columns

#: The formats hpcgym reads itself (see :func:`hpcgym.traces.read`).
BUILTIN = ("swf", "alcf", "mustang", "csv", "slurm", "pbs")
#: The entry-point group of installed packages' formats.
ENTRY_POINTS = "hpcgym.readers"
#: A reader: ``(path, machine or None) -> DataFrame`` of canonical columns (see the module docstring).
Reader = Callable[[Path, "Machine | None"], pd.DataFrame]


@dataclass(frozen=True)
class TraceFormat:
    """A trace format added to :func:`hpcgym.traces.read` and the CLIs' ``--format``.

    Attributes:
        name: what ``format=`` / ``--format`` calls it.
        read: the reader, ``read(path, machine) -> DataFrame`` (see the module docstring).
        suffixes: file-name parts that mean this format (``".mylog"``: ``x.mylog`` and ``x.mylog.gz``).
        looks_like: the file's first line (bytes) -> whether it is this format, for files without such a suffix.
        machine: the machine its logs come from when neither the user nor the table says (a catalog name or
            ``NODES[xCORES]``); None: sized from the log.
        description: one line, for listings.
    """

    name: str
    read: Reader
    suffixes: tuple[str, ...] = ()
    looks_like: Callable[[bytes], bool] | None = field(default=None, compare=False)
    machine: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name or self.name in BUILTIN:
            raise ValueError(f"a trace format needs a name of its own, not {self.name!r} (built in: {BUILTIN})")
        if not callable(self.read):
            raise TypeError(f"format {self.name!r}: read must be a function (path, machine) -> DataFrame")


_FORMATS: dict[str, TraceFormat] = {}


def register(fmt: TraceFormat) -> TraceFormat:
    """Make ``format=fmt.name`` read files with ``fmt`` in this process (replacing a format of that name)."""
    if not isinstance(fmt, TraceFormat):
        raise TypeError(f"register takes a TraceFormat, not {type(fmt).__name__}")
    _FORMATS[fmt.name] = fmt
    return fmt


def _from_plugin(name: str, obj: Any) -> TraceFormat:
    if isinstance(obj, TraceFormat):
        return obj if obj.name == name else TraceFormat(name, obj.read, obj.suffixes, obj.looks_like, obj.machine,
                                                        obj.description)
    if callable(obj):
        return TraceFormat(name, obj)
    raise TypeError(f"expected a TraceFormat or a reader function, got {type(obj).__name__}")


def load_plugins() -> None:
    """Register the installed packages' formats (once per process; a name registered already is kept)."""
    plugins.add_to(_FORMATS, ENTRY_POINTS, _from_plugin)


def added() -> dict[str, TraceFormat]:
    """The formats registered or installed, by name."""
    load_plugins()
    return dict(_FORMATS)


def names() -> tuple[str, ...]:
    """Every format :func:`hpcgym.traces.read` takes: the built-in ones, then the added ones."""
    return BUILTIN + tuple(n for n in added() if n not in BUILTIN)


def get(name: str) -> TraceFormat:
    """An added format by name."""
    found = added()
    if name not in found:
        raise UnknownNameError("trace format", name, names(),
                               hint="Add one with hpcgym.traces.formats.register or the hpcgym.readers entry points "
                                    "(docs/extend.md).")
    return found[name]


def detect(path: str | Path, first_line: bytes | None) -> str | None:
    """The added format a file is, by its name's suffixes, then its first line (None: none of them)."""
    name = Path(path).name.lower()
    found = added()
    for fmt in found.values():
        if any(s.lower() in name for s in fmt.suffixes):
            return fmt.name
    if first_line is not None:
        for fmt in found.values():
            if fmt.looks_like is not None and fmt.looks_like(first_line):
                return fmt.name
    return None


# ---- reading -----------------------------------------------------------------------------------------------------
class FrameSource(CsvSource):
    """A reader's table in memory, read as :mod:`hpcgym.traces.csvtable` reads a CSV file's columns.

    Args:
        path: the file, for messages.
        frame: the reader's table (see the module docstring).
    """

    def __init__(self, path: str | Path, frame: pd.DataFrame):
        self.path = path
        self.header = [str(c) for c in frame.columns if c != "line"]
        self.rows = len(frame)
        lines = frame["line"].to_numpy() if "line" in frame else None
        self._line = (lambda row: int(lines[row])) if lines is not None else (lambda row: row + 1)
        self._numbers = {c: frame[c].to_numpy(np.float64) for c in self.header
                         if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])}
        self._strings = {c: frame[c].astype(object).where(frame[c].notna(), "").astype(str) for c in self.header}
        self._text = {}

    def number(self, col: str, whole: bool = True, limit: float | None = MAX_EXACT,
               optional: bool = False) -> np.ndarray:
        """The column as float64, or the error naming the row's line, the column and the value."""
        values = self._numbers.get(col)
        if values is not None and not optional:
            ok = np.isfinite(values) & (np.floor(values) == values) if whole else np.isfinite(values)
            if ok.all() and (limit is None or np.abs(values).max(initial=0) <= limit):
                return values
        return numeric_column(self.path, pd.DataFrame({col: self._strings[col]}), col, whole, limit, optional,
                              self._line)

    def line(self, row: int) -> int:
        """The file line of a row: the table's ``line`` column, else the row number from 1."""
        return self._line(row)


def read_with(fmt: TraceFormat, path: str | Path, machine: str | Machine | None = None,
              on_invalid: jobs.OnInvalid = "drop", name: str | None = None,
              round: str | dict[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
              on_duplicate: jobs.OnDuplicate = "warn", compact: bool = False) -> pd.DataFrame:
    """Read ``path`` with an added format: its reader's table, finished as a CSV job table is.

    The options are :func:`hpcgym.traces.read`'s.
    """
    frame = fmt.read(Path(path), parse(machine) if machine is not None else None)
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"the {fmt.name} reader returned {type(frame).__name__}, not a pandas DataFrame")
    cols = {k: k for k in KEYS if k in frame.columns}
    lacking = missing_keys(cols)
    if lacking:
        raise TraceFormatError(path, None, None, f"the {fmt.name} reader gave no {', '.join(lacking)} column(s); a "
                               f"reader returns the canonical columns ({', '.join(KEYS)})")
    src = FrameSource(path, frame)
    rounding = Rounding(round, path)
    given = machine if machine is not None else frame.attrs.get("machine") or fmt.machine
    mach = parse(given) if given is not None else _sized(path, src, cols)
    table, start, flags = table_columns(src, cols, mach, rounding)
    out = finish(table, mach, on_invalid, path, name, start, src.line, flags=flags, on_duplicate=on_duplicate,
                 compact=compact, repaired=rounding.repaired, id_field=cols.get("job_id", "job_id"))
    if given is None:
        out.attrs["machine_note"] = "sized from the log (its largest job); pass --machine for the real machine"
    return out


def _sized(path: str | Path, src: FrameSource, cols: dict[str, str]) -> Machine:
    """A machine sized from the largest job of a table read without one (:func:`infer_machine`)."""
    count = "nodes" if "nodes" in cols else "procs"
    sizes = np.nan_to_num(src.number(cols[count], whole=False), nan=-1).astype(np.int64)
    procs = sizes if count == "procs" else np.full(len(sizes), -1, np.int64)
    return infer_machine(path, sizes, procs, np.ones(len(sizes), bool), count)
