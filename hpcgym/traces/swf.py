"""Standard Workload Format (SWF) reader and writer.

The reader keeps all 18 fields (the canonical columns plus :data:`hpcgym.jobs.OPTIONAL_COLUMNS`) and parses the
``; Key: value`` header into a dict. The file is streamed in blocks and each block parsed by one compiled pass
(:mod:`hpcgym.traces._scan`); only the lines that pass cannot convert go through Python, to name the exact line
and field of a problem.

What the reader accepts, and what it refuses:

- **Status (field 11).** The SWF standard knows -1 (unknown) and 0 to 5 (failed, completed, partial,
  partial_completed, partial_failed, cancelled). Cleaned Parallel Workloads Archive logs also carry the jobs' real
  exit codes there (127, 126, 137, 255, 265, 267, ...). The simulator does not use the status, so such a code never
  fails the file: the job's ``status`` is ``"unknown"`` (what the code means depends on the log), the raw codes are
  counted in ``attrs["status_codes"]`` (code -> number of jobs in the table; empty when every code is standard),
  and the reader's one warning counts them.
- **Bytes.** A truncated or corrupt gzip file, an empty file and text in UTF-16 raise
  :class:`~hpcgym.errors.TraceFormatError` naming the file. A UTF-8 byte-order mark is skipped. Line ends may be
  LF, CRLF or CR alone (old Mac files); line numbers count each of them as one line.
- **Header vs machine.** With an explicit ``machine=``, the machine is used as given. If the header's ``MaxProcs``
  (or ``MaxNodes`` when it has no ``MaxProcs``) does not fit it, i.e. divided by the machine's nodes it differs by
  more than a quarter from the processors the machine maps onto one node (its cores per node, or 1 when its logs
  count nodes), every job's node count would differ from what the header implies: a warning names the file, both
  sets of values and the one used. Smaller differences (a log that covers a few nodes fewer than the machine, as
  Theta's does) pass silently.
"""

from __future__ import annotations

import gzip
import re
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import TraceFormatError, warn
from hpcgym.machines import Machine, from_swf_header, get, header_int
from hpcgym.traces import _scan
from hpcgym.traces._io import (
    LIMITS,
    ROUND_DEFAULTS,
    Flag,
    Rounding,
    atomic_write_bytes,
    exact_dtype,
    finish,
    is_gzip,
    range_flag,
    submit_column,
)

FIELDS: tuple[str, ...] = (
    "job number", "submit time", "wait time", "run time", "allocated processors", "average CPU time",
    "used memory", "requested processors", "requested time", "requested memory", "status", "user id",
    "group id", "executable id", "queue id", "partition id", "preceding job", "think time",
)
#: Fields (0-based) that may hold fractions; all others must be whole numbers.
_FRACTIONAL = {3, 5, 6, 9}
#: Whole-number fields a rounding policy may round (0-based field -> the policy's key).
_ROUND_KEYS = {1: "submit", 2: "wait", 4: "procs", 7: "procs", 8: "walltime"}
_KEY = re.compile(rb"^; ?([A-Za-z]\w*):\s*(.*?)\s*$")
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
#: How far (as a fraction) the header's processors per machine node may be from the machine's own mapping.
_HEADER_TOLERANCE = 0.25


def _field_name(i: int) -> str:
    return f"{i + 1} ({FIELDS[i]})"


def parse_header(lines: list[bytes]) -> dict[str, Any]:
    """Parse ``; Key: value`` comment lines. Repeated keys (Queue, Partition, Note) become lists.

    Lines without a key continue the previous key's value.
    """
    header: dict[str, Any] = {}
    last: str | None = None
    for raw in lines:
        m = _KEY.match(raw)
        if m:
            key, value = m.group(1).decode(), m.group(2).decode(errors="replace")
            if key in header:
                prev = header[key]
                header[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
            else:
                header[key] = value
            last = key
        elif last is not None and raw[1:].strip():
            text = raw[1:].strip().decode(errors="replace")
            prev = header[last]
            if isinstance(prev, list):
                prev[-1] = f"{prev[-1]}\n{text}"
            else:
                header[last] = f"{prev}\n{text}"
    return header


class _Stream:
    """A file's bytes, streamed in blocks of whole lines (:func:`hpcgym.traces._scan.blocks`), with its checks.

    Damaged gzip data, UTF-16 text and a file that holds only blank bytes raise
    :class:`~hpcgym.errors.TraceFormatError` naming the file; a UTF-8 byte-order mark is skipped. The blocks are
    views of one buffer (see :func:`~hpcgym.traces._scan.blocks`).
    """

    def __init__(self, path: str | Path):
        self.path = path
        self.size = 0
        self.blank = True

    def __iter__(self):
        try:
            with _scan.open_bytes(self.path) as fh:
                for i, block in enumerate(_scan.blocks(fh)):
                    if i == 0:
                        block = self._first(block)
                    self.size += len(block)
                    if self.blank:
                        self.blank = not len(block) or bytes(block[:4096]).isspace() and bytes(block).isspace()
                    yield block
        except _scan.BinaryDataError as exc:
            raise TraceFormatError(self.path, None, None, str(exc)) from None
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            cls = type(exc)
            kind = cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"
            raise TraceFormatError(self.path, None, None, f"truncated or corrupt gzip data ({kind}: {exc}). "
                                   "Check the download (gzip -t) and fetch the file again.") from exc
        if self.blank:
            raise TraceFormatError(self.path, None, None, "the file is empty: no header and no jobs"
                                   + (f" ({self.size} blank bytes)" if self.size else ""))

    def _first(self, block: memoryview) -> memoryview:
        if bytes(block[:2]) in _UTF16_BOMS:
            raise TraceFormatError(self.path, 1, None, "the text is UTF-16; SWF is ASCII. Convert it, e.g. with "
                                   "iconv -f UTF-16 -t UTF-8.")
        return block[len(_UTF8_BOM):] if bytes(block[:3]) == _UTF8_BOM else block

    def lines(self):
        """Yield ``(block, parsed)`` for each block (:meth:`hpcgym.traces._scan.Scanner.parse`, any field)."""
        scanner = _scan.Scanner(len(FIELDS))
        line = 0
        for block in self:
            parsed = scanner.parse(block, line)
            line = parsed[-1]
            yield block, parsed


def read_header(path: str | Path) -> dict[str, Any]:
    """Return the parsed header of an SWF file."""
    return parse_header([bytes(block[a:b]).strip() for block, parsed in _Stream(path).lines() for a, b in parsed[7]])


def _number(token: bytes) -> float:
    """A token as Python reads a number (what the compiled scan leaves to it); digit separators are refused."""
    if b"_" in token:
        raise ValueError(token)
    return float(token)


def _locate_error(path: str | Path, data: list[bytes], numbers: np.ndarray,
                  allowed: frozenset[int] = frozenset(_FRACTIONAL)) -> None:
    """Scan line by line and raise a :class:`TraceFormatError` at the first malformed line.

    ``allowed`` are the fields that may hold fractions (the fractional ones, and those a rounding policy rounds).
    """
    for ln, number in zip(data, numbers, strict=True):
        parts = ln.split()
        if len(parts) != len(FIELDS):
            field = _field_name(min(len(parts), len(FIELDS) - 1)) if len(parts) < len(FIELDS) else None
            raise TraceFormatError(path, int(number), field,
                                   f"expected {len(FIELDS)} fields, found {len(parts)}")
        for i, tok in enumerate(parts):
            try:
                value = _number(tok)
            except ValueError:
                raise TraceFormatError(path, int(number), _field_name(i),
                                       f"{tok.decode(errors='replace')!r} is not a number") from None
            if i not in allowed and not value.is_integer():
                hint = (f". Pass round= (--round {_ROUND_KEYS[i]}=ceil, or floor or nearest) to round such values"
                        if i in _ROUND_KEYS else "")
                raise TraceFormatError(path, int(number), _field_name(i), f"{value} is not a whole number{hint}")


def _check_block(path: str | Path, block: memoryview, parsed: tuple, allowed: frozenset[int]) -> None:
    """Re-parse the lines the compiled scan left to Python; raise at the first malformed line of the block."""
    values, lines, status, starts, ends = parsed[:5]
    bad = status == _scan.FIELDS
    for r in np.flatnonzero(status == _scan.SLOW):
        try:
            values[:, r] = [_number(t) for t in bytes(block[starts[r]:ends[r]]).split()]
        except ValueError:
            bad[r] = True
    whole = np.isfinite(values)
    fixed = [i for i in range(len(FIELDS)) if i not in allowed]
    whole[fixed] &= np.floor(values[fixed]) == values[fixed]
    bad |= ~whole.all(axis=0)
    if bad.any():
        r = int(np.argmax(bad))
        _locate_error(path, [bytes(block[starts[r]:ends[r]])], lines[r:r + 1], allowed)
        col = int(np.argmax(~whole[:, r]))
        raise TraceFormatError(path, int(lines[r]), _field_name(col), "missing or not a whole number")


def _row_token(path: str | Path, row: int, field: int) -> tuple[int, str]:
    """The line of data row ``row`` and the text of its ``field``, for a message: the file is read again."""
    for block, parsed in _Stream(path).lines():
        lines, starts, ends = parsed[1], parsed[3], parsed[4]
        if row < len(lines):
            tokens = bytes(block[starts[row]:ends[row]]).split()
            return int(lines[row]), tokens[field].decode(errors="replace") if field < len(tokens) else "?"
        row -= len(lines)
    return 0, "?"


def _resolve_machine(machine: str | Machine | None, header: dict[str, Any], path: str | Path) -> Machine:
    if machine is not None:
        return get(machine)
    for key in ("MaxNodes", "MaxProcs"):
        said = header.get(key)
        if isinstance(said, list) and len({str(v).strip() for v in said}) > 1:
            raise TraceFormatError(path, None, key, f"the header gives {key} {len(said)} times ({', '.join(said)}); "
                                   "keep the right line, or pass machine= (--machine)")
    try:
        return from_swf_header(header, name=Path(path).name.split(".")[0])
    except ValueError:
        said = {k: header[k] for k in ("MaxNodes", "MaxProcs") if k in header}
        what = f"no usable MaxNodes/MaxProcs header (it says {said})" if said else "no MaxNodes/MaxProcs header"
        raise TraceFormatError(path, None, None, f"the file has {what}; pass machine=") from None


def _header_conflict(header: dict[str, Any], mach: Machine, path: str | Path) -> str | None:
    """A message if the header's machine maps processors onto nodes differently from ``mach``, else ``None``."""
    max_nodes, max_procs = header_int(header, "MaxNodes"), header_int(header, "MaxProcs")
    procs = max_procs or max_nodes
    if procs is None:
        return None
    width = 1 if mach.procs_are_nodes else mach.cores_per_node
    if abs(procs / mach.nodes / width - 1) <= _HEADER_TOLERANCE:
        return None
    said = ", ".join(f"{k} {v}" for k, v in (("MaxNodes", max_nodes), ("MaxProcs", max_procs)) if v)
    own = from_swf_header(header)
    logged = "nodes" if mach.procs_are_nodes else "processors"
    return (f"{path}: the header says {said} (a machine of {own.nodes} nodes x {own.cores_per_node} processors), "
            f"but machine={mach.name!r} has {mach.nodes} nodes x {mach.cores_per_node} cores and its logs count "
            f"{logged} (MaxProcs {mach.nodes * width} expected). Used the machine={mach.name!r} passed: "
            f"nodes = ceil(procs / {width}). Pass machine=None to use the header, or a machine that matches it.")


_STATUS_CODES = np.array(sorted(jobs.SWF_STATUS), dtype=np.int64)  # -1 .. 5
#: Category index of each SWF code -1 .. 5; any other code reads as "unknown".
_STATUS_INDEX = np.array([jobs.STATUSES.index(jobs.SWF_STATUS[int(c)]) for c in _STATUS_CODES], np.int8)
_UNKNOWN = jobs.STATUSES.index("unknown")


def _status(codes: np.ndarray) -> pd.Categorical:
    """SWF status codes as the canonical categorical; codes outside the standard become ``"unknown"``."""
    standard = (codes >= _STATUS_CODES[0]) & (codes <= _STATUS_CODES[-1])
    index = np.where(standard, _STATUS_INDEX[np.where(standard, codes - _STATUS_CODES[0], 0)], _UNKNOWN)
    return pd.Categorical.from_codes(index.astype(np.int8), categories=jobs.STATUSES)


def _nonstandard_counts(codes: np.ndarray) -> dict[int, int]:
    """Count the codes outside the SWF standard, most frequent first."""
    odd = codes[(codes < _STATUS_CODES[0]) | (codes > _STATUS_CODES[-1])]
    values, counts = np.unique(odd, return_counts=True)
    order = np.lexsort((values, -counts))
    return {int(values[i]): int(counts[i]) for i in order}


def _status_note(counts: dict[int, int], limit: int = 8) -> str:
    shown = ", ".join(f"{code}: {n} job{'s' * (n != 1)}" for code, n in list(counts.items())[:limit])
    more = f", and {len(counts) - limit} more codes" if len(counts) > limit else ""
    return (f"{sum(counts.values())} jobs have status codes outside SWF's -1..5 ({shown}{more}); "
            'read as status "unknown", the raw counts are in attrs["status_codes"].')


#: The optional columns kept as numbers with fractions (the others are whole; memory fields are truncated).
_FLOAT_COLUMNS = ("cpu_time",)


class _Columns:
    """The columns of an SWF file, gathered block by block.

    Integers are compact, runtimes and walltimes range-checked (:func:`hpcgym.traces._io.range_flag`) as they
    come, submit times kept as float64 until the whole file is known.
    """

    def __init__(self, path: str | Path, rounding: Rounding, extra: bool, rows: int | None = None):
        self.path, self.rounding, self.extra = path, rounding, extra
        self.columns: dict[str, np.ndarray] = {}
        self.rows = 0
        try:  # a chunk of ``rows`` rows is sized as one; a whole file from its size
            self.size = Path(path).stat().st_size if not is_gzip(path) and rows is None else 0
        except OSError:
            self.size = 0
        self.seen = 0
        if rows is not None:
            self._grow(rows + rows // 4)

    def add(self, block: memoryview, parsed: tuple) -> None:
        """Convert one parsed block (its lines already checked) into the file's columns.

        The block's table (the scanner's, overwritten by the next block) is rounded and checked in place, and each
        column is written straight into the file's: a temporary per column and block would cost more in page
        faults than the conversion itself (the allocator hands such memory back to the system between blocks).
        """
        t, lines, status, starts, ends, lo, hi = parsed[:7]
        n = t.shape[1]
        self._reserve(n, len(block))
        if (status != _scan.OK).any():  # the slow lines' values came from Python
            lo, hi = t.min(axis=1), t.max(axis=1)

        def text(col: int):
            return lambda r: bytes(block[starts[r]:ends[r]]).split()[col].decode(errors="replace")

        def line(r: int) -> int:
            return int(lines[r])

        def whole(col: int, key: str) -> np.ndarray:  # the policy's rounding, else the canonical default's
            given = t[col]
            rounded = self.rounding.whole(given, key, _field_name(col), line, text(col))
            if rounded is not given:  # a fraction was rounded: the bounds may move
                t[col] = rounded
                lo[col], hi[col] = (t[col].min(), t[col].max()) if n else (0, 0)
            return t[col]

        def dtype(col: int) -> type | None:  # int32 or int64 from the bounds; beyond 2**53 raises
            return exact_dtype(lo[col], hi[col], t[col], self.path, _field_name(col), line, text(col)) if n else None

        def put(name: str, col: int) -> None:
            self._put(name, t[col], dtype(col))

        def duration(name: str, col: int, key: str) -> None:
            values = whole(col, key)
            over = range_flag(values, key, _field_name(col), text(col)).mask
            self._put(name + "_over", over)
            np.maximum(values, -1, out=values)  # negative: unknown (-1), never wrapped by the cast
            values[over] = 0
            self._put(name, values, np.int32)  # the range check leaves int32 values

        whole(7, "procs"), whole(4, "procs")
        wide = np.int64 in (dtype(7), dtype(4))
        self._put("procs", t[7], np.int64 if wide else None)  # requested processors, else allocated
        np.copyto(self._view("procs"), t[4], casting="unsafe", where=t[7] <= 0)
        duration("run", 3, "run")
        duration("wall", 8, "walltime")
        self._put("submit", whole(1, "submit"))
        for name, col in (("job_id", 0), ("user", 11), ("group", 12), ("queue", 14), ("code", 10)):
            put(name, col)
        if self.extra:
            self._optional(t, put, whole)
        self.rows += n

    def _optional(self, t: np.ndarray, put, whole) -> None:
        """The optional SWF columns of a block (:data:`hpcgym.jobs.OPTIONAL_COLUMNS`)."""
        for name, field in jobs.OPTIONAL_COLUMNS.items():
            if name in _FLOAT_COLUMNS:
                self._put(name, t[field - 1])
                continue
            if name == "wait":
                whole(field - 1, "wait")
            else:  # memory fields may hold fractions: kept as whole numbers, as before
                np.trunc(t[field - 1], out=t[field - 1])
            put(name, field - 1)

    def _reserve(self, n: int, size: int) -> None:
        """Room for ``n`` more rows. The columns are sized once from the file's size (and grown if short)."""
        self.seen += size
        if not self.columns or self.rows + n > self._capacity():
            guess = self.rows + n if not self.size else int((self.rows + n) * self.size / max(self.seen, 1) * 1.02)
            self._grow(max(guess, int((self.rows + n) * 1.25)) + 16)
        self._n = n

    def _view(self, name: str) -> np.ndarray:
        return self.columns[name][self.rows:self.rows + self._n]

    def _put(self, name: str, values: np.ndarray, dtype: type | None = None) -> None:
        """Write a block's column; an integer column turns int64 for good when a block needs it."""
        col = self.columns[name]
        if dtype is not None and np.dtype(dtype).itemsize > col.dtype.itemsize:
            col = self.columns[name] = col.astype(dtype)
        col[self.rows:self.rows + len(values)] = values

    def _capacity(self) -> int:
        return len(self.columns["job_id"]) if self.columns else 0

    def _grow(self, capacity: int) -> None:
        kinds = {"submit": np.float64, "cpu_time": np.float64, "run_over": bool, "wall_over": bool}
        names = ["job_id", "submit", "run", "run_over", "wall", "wall_over", "procs", "user", "group", "queue", "code"]
        for name in names + (list(jobs.OPTIONAL_COLUMNS) if self.extra else []):
            old = self.columns.get(name)
            col = np.empty(capacity, old.dtype if old is not None else kinds.get(name, np.int32))
            if old is not None:
                col[:self.rows] = old[:self.rows]
            self.columns[name] = col

    def pop(self, name: str) -> np.ndarray:
        """One column of the whole file (a view of its first rows)."""
        if not self.columns:
            self._grow(0)
        return self.columns.pop(name)[:self.rows]


def _scan_file(path: str | Path, rounding: Rounding, extra: bool) -> tuple[list[bytes], _Columns]:
    """Stream the file: (its comment lines, its columns). A malformed line raises naming its line and field."""
    return next(_scan_chunks(path, rounding, extra))


def _scan_chunks(path: str | Path, rounding: Rounding, extra: bool,
                 rows: int | None = None) -> Iterator[tuple[list[bytes], _Columns]]:
    """Stream the file: (the comment lines so far, the columns of the next ``rows`` or more data lines) until its end.

    With ``rows`` None, the whole file at once. A malformed line raises naming its line and field.
    """
    # fractions allowed: the fractional fields, the times with a default rounding (submit, walltime), and the fields
    # a policy rounds
    allowed = frozenset(_FRACTIONAL) | {i for i, key in _ROUND_KEYS.items()
                                        if key in rounding.policy or ROUND_DEFAULTS[key] is not None}
    scanner = _scan.Scanner(len(FIELDS), np.array([i not in allowed for i in range(len(FIELDS))]))
    comments: list[bytes] = []
    cols = _Columns(path, rounding, extra, rows)
    line = given = 0
    for block in _Stream(path):
        parsed = scanner.parse(block, line)
        *_, spans, line = parsed
        comments += [bytes(block[a:b]).strip() for a, b in spans]
        if (parsed[2] != _scan.OK).any():
            _check_block(path, block, parsed, allowed)
        cols.add(block, parsed)
        if rows is not None and cols.rows >= rows:
            yield comments, cols
            cols, given = _Columns(path, rounding, extra, rows), given + 1
    if cols.rows or not given:
        yield comments, cols


def _unix_start(header: dict[str, Any]) -> int:
    try:
        return int(str(header.get("UnixStartTime", "0")).split()[0])
    except (ValueError, IndexError):
        return 0


def read_swf(
    path: str | Path,
    machine: str | Machine | None = None,
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
    round: str | dict[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
    on_duplicate: jobs.OnDuplicate = "warn",
    compact: bool = False,
) -> pd.DataFrame:
    """Read an SWF file (plain or gzipped) into the canonical job table.

    The file is streamed in blocks: memory holds the table and one block, never the whole text.

    Args:
        path: the file.
        machine: the machine, by catalog name or object. ``None`` builds it from the ``MaxNodes``/``MaxProcs``
            header, so header-less files need it.
        on_invalid: ``"drop"`` (default) drops impossible jobs with one warning counting them by reason;
            ``"error"`` raises :class:`~hpcgym.errors.InvalidJobError` at the first, naming its line.
        name: the trace name stored in ``attrs["name"]``.
        round: how to round fractions in fields that should be whole (``"ceil"``, or e.g. ``"procs=ceil"``; fields
            ``submit``, ``wait``, ``procs`` (fields 5 and 8), ``walltime`` and ``run``); see
            :mod:`hpcgym.traces._io`. Without it, runtimes and walltimes round up and submit times down (the
            canonical defaults), and a fraction in any other such field raises, naming the option.
        on_duplicate: ``"warn"`` (default: keep jobs whose id an earlier job has, with one warning) or ``"error"``.
        compact: the canonical columns only, integers as int32 where they fit (see :mod:`hpcgym.jobs`).

    Returns:
        The job table, sorted by submit time. Absolute Unix submit times (``UnixStartTime`` 0 or absent) are
        rebased to the first submit, which is kept in ``attrs["unix_start_time"]``; relative times stay as they are,
        whatever their span (:func:`hpcgym.traces._io.unix_times` tells the two apart). Status codes outside the SWF
        standard read as ``"unknown"`` and are counted in ``attrs["status_codes"]``; dropped jobs and such codes
        are counted in one warning.

    Raises:
        TraceFormatError: a malformed line (wrong field count, a non-number), naming the line and field; an
            empty, truncated or corrupt (gzip) file, naming the file.

    Warns:
        UserWarning: once, counting dropped invalid jobs and non-standard status codes; and once when the header's
            MaxNodes/MaxProcs contradict an explicit ``machine`` (the machine is used).
    """
    rounding = Rounding(round, path)
    comments, cols = _scan_file(path, rounding, extra=not compact)
    header = parse_header(comments)
    mach = _resolve_machine(machine, header, path)
    conflict = _header_conflict(header, mach, path) if machine is not None else None
    if conflict:
        warn(conflict)
    table, flags, unix_start = _table(path, cols, mach, _unix_start(header))
    codes = table.pop("code")
    odd = _odd_codes(codes, table, mach, flags)
    table["status"] = _status(codes)
    del codes
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = finish(table, mach, on_invalid, path, name, unix_start, lambda row: _row_token(path, row, 0)[0],
                     header, flags, on_duplicate=on_duplicate, compact=compact, repaired=rounding.repaired,
                     id_field=_field_name(0))
    _one_warning(path, caught, odd)
    out.attrs["status_codes"] = odd
    return out


def _table(path: str | Path, cols: _Columns, mach: Machine, unix_start: int, offset: int = 0,
           unix: bool | None = None):
    """The reader's columns from the file's: (columns, range flags, Unix start).

    ``offset``: the data lines before ``cols``' first (in messages, the file is read again to find a row's text).
    ``unix``: whether the submit times are Unix times (default: :func:`hpcgym.traces._io.unix_times` says, unless
    ``unix_start``).
    """

    def text(field: int):
        return lambda r: _row_token(path, offset + r, field)[1]

    unix = False if unix_start else unix
    submit, first, submit_flag = submit_column(cols.pop("submit"), text(1), _field_name(1), rebase=False, unix=unix,
                                               path=path)
    unix_start = unix_start or first
    run, wall = cols.pop("run"), cols.pop("wall")
    flags = [submit_flag, Flag("run out of range", _field_name(3), cols.pop("run_over"), text(3), LIMITS["run"][1]),
             Flag("walltime out of range", _field_name(8), cols.pop("wall_over"), text(8), LIMITS["walltime"][1])]
    known = wall > 0
    wall = np.where(known, wall, run)
    procs = cols.pop("procs")
    width = 1 if mach.procs_are_nodes else mach.cores_per_node
    nodes = procs.copy() if width == 1 else np.where(procs > 0, -(-procs // width), procs)
    table = {"job_id": cols.pop("job_id"), "submit": submit, "run": run, "walltime": wall, "nodes": nodes,
             "procs": procs, "user": cols.pop("user"), "group": cols.pop("group"), "queue": cols.pop("queue"),
             "walltime_known": known, "code": cols.pop("code")}
    for name in list(cols.columns):
        table[name] = cols.pop(name)
    return table, flags, unix_start


def _odd_codes(codes: np.ndarray, table: dict[str, np.ndarray], mach: Machine, flags: list) -> dict[int, int]:
    """The non-standard status codes of the jobs that are kept (valid), counted."""
    odd = (codes < _STATUS_CODES[0]) | (codes > _STATUS_CODES[-1])
    if not odd.any():
        return {}
    kept = jobs.invalid_reasons(table, mach.nodes) < 0
    for f in flags:
        kept &= ~f.mask
    return _nonstandard_counts(codes[kept & odd])


def _one_warning(path: str | Path, caught: list, odd: dict[int, int]) -> None:
    """Fold the invalid-job count and the status codes into the reader's one warning; pass the others on."""
    notes = []
    for w in caught:
        text = str(w.message)
        if w.category is UserWarning and text.startswith(f"{path}: dropped "):
            notes.append(text[len(f"{path}: "):])
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if odd:
        notes.append(_status_note(odd))
    if notes:
        warn(f"{path}: " + " ".join(notes))


def _column(df: pd.DataFrame, name: str, default: np.ndarray | int) -> np.ndarray:
    if name in df.columns:
        return df[name].to_numpy()
    return np.broadcast_to(np.asarray(default), (len(df),))


def _header_lines(header: dict[str, Any]) -> list[str]:
    out = []
    for key, value in header.items():
        for v in value if isinstance(value, list) else [value]:
            first, *rest = str(v).split("\n")
            out.append(f"; {key}: {first}".rstrip())
            out.extend(f";   {r}" for r in rest)
    return out


def write_swf(df: pd.DataFrame, path: str | Path, machine: str | Machine | None = None,
              header: dict[str, Any] | None = None) -> None:
    """Write a job table as SWF (gzipped if ``path`` ends in ``.gz``), atomically.

    The header comes from ``header`` or else ``df.attrs["header"]``; ``UnixStartTime``, ``MaxNodes`` and
    ``MaxProcs`` are set from the table's attrs and the machine. Statuses ``killed`` and ``timeout`` have no SWF
    code and are written as 0 (failed). Processor fields hold what the machine's reader maps back to the same
    nodes (nodes themselves for a machine whose logs count nodes, such as Theta). A table read from SWF and
    written back reads as the same table.
    """
    machine = machine or df.attrs.get("machine")
    mach = get(machine) if machine else None
    hdr = dict(header if header is not None else df.attrs.get("header", {}))
    hdr["UnixStartTime"] = str(int(df.attrs.get("unix_start_time", 0)))
    if mach is not None:
        hdr["MaxNodes"], hdr["MaxProcs"] = str(mach.nodes), str(mach.nodes if mach.procs_are_nodes else mach.cores)
    procs, nodes = df["procs"].to_numpy(), df["nodes"].to_numpy()
    if mach is not None:  # write what the reader maps back to the same nodes on this machine
        width = 1 if mach.procs_are_nodes else mach.cores_per_node
        consistent = (procs > 0) & (-(-procs // width) == nodes)
        procs = np.where(consistent, procs, nodes * width)
    status = df["status"].astype(str).map(jobs.STATUS_TO_SWF).fillna(-1).to_numpy(np.int64)
    cols = [
        df["job_id"].to_numpy(), df["submit"].to_numpy(), _column(df, "wait", -1), df["run"].to_numpy(),
        _column(df, "alloc_procs", procs), _column(df, "cpu_time", -1), _column(df, "mem_used", -1),
        _column(df, "req_procs", procs), np.where(df["walltime_known"].to_numpy(), df["walltime"].to_numpy(), -1),
        _column(df, "mem_req", -1), status, df["user"].to_numpy(), df["group"].to_numpy(),
        _column(df, "executable", -1), df["queue"].to_numpy(), _column(df, "partition", -1),
        _column(df, "preceding_job", -1), _column(df, "think_time", -1),
    ]
    body = pd.DataFrame({i: c for i, c in enumerate(cols)})
    text = body.to_csv(sep=" ", header=False, index=False, float_format="%.10g", lineterminator="\n")
    head = "\n".join(_header_lines(hdr))
    atomic_write_bytes(path, (head + "\n" + text if head else text).encode())
