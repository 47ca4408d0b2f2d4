"""What every trace reader shares: files, CSV columns, the range check, the rounding policy, and the table's assembly.

A reader (SWF, ALCF, Mustang, generic CSV, and any new one) turns its file into a dict of numpy columns and calls
:func:`finish`, which applies the invalid-job policy, the duplicate-id policy, sorts, compacts and attaches the
``attrs``. On the way it uses:

- **The range check** (:func:`range_flag`, :data:`LIMITS`): the one place where numbers become invalid jobs because
  they are out of range. Values are checked as float64 *before* any integer cast, so a corrupt value is reported,
  never wrapped: a submit time above :data:`MAX_TIMESTAMP`, or a runtime or walltime above :data:`MAX_DURATION`,
  makes its job invalid with its own reason (``"submit out of range"``, ``"run out of range"``,
  ``"walltime out of range"``), counted beside the reasons of :data:`hpcgym.jobs.INVALID_REASONS`, and with
  ``on_invalid="error"`` raised as ``job <id>: run out of range: '1e30', expected at most 2147483647 s``. So does a
  submit time before 1973 in a file whose times are Unix times (:func:`unix_times` tells them from relative times,
  which stay relative whatever their span: no guess drops a large part of a log). A negative submit time is the
  usual "unknown" (reason ``"submit unknown"``). Ids and counts beyond :data:`MAX_EXACT` (:func:`exact_dtype`,
  :func:`exact_ints`) are a format error.
- **The rounding policy** (:class:`Rounding`, the readers' ``round=`` and the CLIs' ``--round``): what to do with a
  value that should be a whole number and is not. Counts (``nodes``, ``procs``) must be whole unless ``round=``
  names them; times have the canonical table's defaults (runtimes and walltimes round up, submit times down), which
  ``round=`` may replace. What an explicit policy changed is counted in ``attrs["repaired"]``.
- **Compact dtypes** (:func:`hpcgym.jobs.compact_ints`, the readers' ``compact=True``).
- **Duplicate job ids** (the readers' ``on_duplicate=``): ``"warn"`` (the default) keeps every job and warns once,
  counting them and naming the first repeated id's line (``attrs["duplicate_ids"]``); ``"error"`` raises there.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import InvalidJobError, TraceFormatError, warn
from hpcgym.io import write_bytes
from hpcgym.traces import known

#: The largest submit time accepted (seconds; as a Unix time, the year 2106).
MAX_TIMESTAMP = 2**32
#: The largest runtime or walltime accepted (seconds; about 68 years).
MAX_DURATION = 2**31 - 1
#: Maps a row of a reader's table to the (file, 1-based line) it came from, for messages.
Locate = Callable[[int], tuple[str, int]]
#: Submit times above this are Unix times (1973 onwards); in a file of such times, smaller ones are out of range.
EPOCH_THRESHOLD = 100_000_000
#: Whole numbers beyond this magnitude are not exact in float64 (and ids, node counts beyond it are corrupt).
MAX_EXACT = 2**53
#: The range check: canonical column -> (the largest value accepted, what it is).
LIMITS: dict[str, tuple[int, str]] = {
    "submit": (MAX_TIMESTAMP, f"at most {MAX_TIMESTAMP}"),
    "run": (MAX_DURATION, f"at most {MAX_DURATION} s"),
    "walltime": (MAX_DURATION, f"at most {MAX_DURATION} s"),
}


def read_bytes(path: str | Path) -> bytes:
    """Return the file's bytes, decompressed when it is gzipped (detected by magic number, not name)."""
    raw = Path(path).read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


@contextlib.contextmanager
def spooled(path: str | Path) -> Iterator[Path]:
    """``path`` itself, or for a pipe (``<(cat x.swf)``, a named FIFO) a temporary copy read from it once.

    The readers open a file more than once (its gzip magic, its first line, then the data); a pipe gives its bytes
    to the first reader only. The copy keeps the pipe's name, and errors raised while it is used name ``path``.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = stat.S_IFREG  # the reader says what is wrong with it
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        yield Path(path)
        return
    with tempfile.TemporaryDirectory(prefix="hpcgym-pipe-") as folder:
        copy = Path(folder) / Path(path).name
        with open(path, "rb") as src, open(copy, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        try:
            yield copy
        except (ValueError, OSError) as exc:  # name the pipe the user gave, not the copy
            exc.args = tuple(a.replace(str(copy), str(path)) if isinstance(a, str) else a for a in exc.args)
            if isinstance(exc, TraceFormatError):
                exc.path = str(path)
            raise


def is_gzip(path: str | Path) -> bool:
    """Whether the file starts with gzip's magic number."""
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` atomically (gzipped for ``.gz``): :func:`hpcgym.io.write_bytes`."""
    write_bytes(path, data, gzip_by_suffix=True)


def integral(values: np.ndarray) -> np.ndarray:
    """Boolean mask of the entries that are whole numbers (NaN is not)."""
    return np.isfinite(values) & (np.floor(values) == values)


# ---- the range check ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Flag:
    """Jobs a reader found invalid for a reason of its own (a value out of range), checked before the usual ones.

    Attributes:
        reason: the label counted in ``attrs["invalid"]``, e.g. ``"run out of range"``.
        field: the source column, for ``on_invalid="error"`` messages.
        mask: per row, whether the job has this problem.
        text: the source values as written, for messages: an array, or row -> text (called for one row only, so
            a reader can fetch it lazily).
        limit: what the value should be, for messages.
    """

    reason: str
    field: str
    mask: np.ndarray
    text: np.ndarray | Callable[[int], str]
    limit: str

    def shown(self, row: int) -> str:
        """The value of ``row`` as written."""
        return str(self.text(row)) if callable(self.text) else str(self.text[row])


def range_flag(values: np.ndarray, column: str, field: str, text: np.ndarray | Callable[[int], str]) -> Flag:
    """The range check of :data:`LIMITS`: the jobs whose ``column`` value (float64, as read) is above its limit."""
    limit, what = LIMITS[column]
    return Flag(f"{column} out of range", field, values > limit, text, what)


def seconds(values: np.ndarray, column: str, field: str,
            text: np.ndarray | Callable[[int], str]) -> tuple[np.ndarray, Flag]:
    """Whole seconds (float64, already rounded; NaN: unknown) -> (int64 with -1 for unknown, the range :class:`Flag`).

    Values out of range are flagged and held as 0, and negative ones (unknown) become -1, so no cast ever overflows.
    """
    flag = range_flag(values, column, field, text)
    missing = np.isnan(values)
    secs = np.where(missing | (values < 0), -1, np.where(flag.mask | missing, 0, values))  # < 0: unknown, no wrap
    return secs.astype(np.int64), flag


def submit_column(values: np.ndarray, text: np.ndarray | Callable[[int], str], field: str, rebase: bool = True,
                  unix: bool | None = None, path: str | Path = "") -> tuple[np.ndarray, int, Flag]:
    """Submit times (float64 seconds, whole) -> (int64 seconds, the start, the range :class:`Flag`).

    Negative times are unknown (-1, reason ``"submit unknown"``). Times above :data:`MAX_TIMESTAMP`, and times
    before 1973 among Unix times, are out of range: flagged, held as 0. ``unix=None`` tells Unix times from relative
    ones by :func:`unix_times`. Unix times are rebased to the first (the start); relative times are rebased only
    with ``rebase`` (the start is then the first), else kept (the start is 0).

    Raises:
        TraceFormatError: ``unix=None`` and the times cannot be placed (see :func:`unix_times`), naming ``path``.
    """
    known = values >= 0
    flag = range_flag(values, "submit", field, text)
    over = flag.mask
    fine = known & ~over
    limit = flag.limit
    if unix is None:
        unix = unix_times(values, fine, path, field)
    if unix:
        early = fine & (values < EPOCH_THRESHOLD)
        over = over | early
        fine &= ~early
        limit = f"a Unix time between {EPOCH_THRESHOLD} (1973) and {MAX_TIMESTAMP}, as the file's others are"
    start = int(values[fine].min()) if fine.any() and (rebase or unix) else 0
    rel = np.where(fine, values - start, np.where(known, 0, -1)).astype(np.int64)
    return rel, start, Flag(flag.reason, field, over, text, limit)


#: Relative times run on without a break: a gap this long (a year) between the times below
#: :data:`EPOCH_THRESHOLD` and those above it parts two kinds of times (Unix ones and strays near 0).
EPOCH_GAP = 365 * 86400
#: Below a gap, the times under the threshold are strays among Unix times (dropped as out of range) when they are at
#: most this share of the known times (or a single job); more of them and the file cannot be placed in time.
STRAY_SHARE = 0.05


def unix_times(values: np.ndarray, fine: np.ndarray, path: str | Path = "", field: str = "submit") -> bool:
    """Whether submit times (``values`` where ``fine``: known and in range) are Unix times rather than relative ones.

    Relative times are relative whatever their span: a log of years may pass :data:`EPOCH_THRESHOLD` (1e8 s, about
    3.2 years). So the times are Unix times when all are above the threshold, and relative when some are below it
    and the times run on across it (no gap of :data:`EPOCH_GAP`). Below such a gap they are Unix times with a few
    strays near 0 (a corrupt or zeroed field, dropped as out of range) when the strays are at most
    :data:`STRAY_SHARE` of the times, and relative times when those above the gap are the few.

    Raises:
        TraceFormatError: a gap with many times on both sides: which are right cannot be told, and no guess may drop
            a large part of a log. The message says how to mark the times.
    """
    times = values[fine]
    low = times < EPOCH_THRESHOLD
    n_low = int(low.sum())
    if n_low == len(times):
        return False
    if not n_low:
        return True
    gap = float(times[~low].min() - times[low].max())
    if gap < EPOCH_GAP:
        return False
    if n_low <= max(1, STRAY_SHARE * len(times)):
        return True
    n_high = len(times) - n_low
    if n_high <= max(1, STRAY_SHARE * len(times)):
        return False
    first = pd.Timestamp(int(times[~low].min()), unit="s")
    raise TraceFormatError(path, None, field, f"cannot place the submit times in time: {n_high:,} look like Unix "
                           f"times (from {first:%Y-%m-%d}) and {n_low:,} lie below {EPOCH_THRESHOLD:,} s, "
                           f"{gap / 86400:,.0f} days before them. Make them all one kind (for SWF, a UnixStartTime "
                           "header line marks its times as relative)")


def exact_dtype(low: float, high: float, values: np.ndarray, path: str | Path, field: str,
                line: Callable[[int], int], text: Callable[[int], str], compact: bool = True) -> type:
    """The integer dtype of whole float64 ``values`` whose (min, max) is (``low``, ``high``).

    int32 where all fit and ``compact``, else int64. A magnitude beyond :data:`MAX_EXACT` raises naming its line
    and field.
    """
    if max(high, -low) > MAX_EXACT:
        row = int(np.flatnonzero(np.abs(values) > MAX_EXACT)[0])
        raise TraceFormatError(path, line(row), field, f"{text(row)!r} is out of range (more than {MAX_EXACT:.3g})")
    small = np.iinfo(np.int32)
    return np.int32 if compact and small.min <= low and high <= small.max else np.int64


def exact_ints(values: np.ndarray, path: str | Path, field: str, line: Callable[[int], int],
               text: Callable[[int], str], compact: bool = False) -> np.ndarray:
    """Whole float64 values as int64 (int32 where all fit, when ``compact``); see :func:`exact_dtype`."""
    if not len(values):
        return values.astype(np.int32 if compact else np.int64)
    return values.astype(exact_dtype(values.min(), values.max(), values, path, field, line, text, compact))


# ---- the rounding policy -----------------------------------------------------------------------------------------

#: Rounding modes: name -> function. ``nearest`` rounds halves up.
ROUND_MODES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ceil": np.ceil, "floor": np.floor, "nearest": lambda v: np.floor(v + 0.5),
}
#: Fields a rounding policy names (``interarrival`` counts as ``submit``).
ROUND_KEYS = ("submit", "run", "walltime", "wait", "nodes", "procs")
#: How the canonical table rounds times without a policy (counts have no default: they must be whole).
ROUND_DEFAULTS = {"submit": "floor", "run": "ceil", "walltime": "ceil", "wait": None, "nodes": None, "procs": None}
ROUND_EXAMPLE = "nodes=ceil,run=nearest"


def parse_round(spec: str | Mapping[str, str] | None) -> dict[str, str]:
    """A rounding policy from ``"ceil"`` (every field), ``"nodes=ceil,run=nearest"`` or a dict.

    Raises:
        ValueError: an unknown field or mode, naming the ones that exist.
    """
    if spec is None or spec == "":
        return {}
    if isinstance(spec, str):
        if "=" not in spec:
            spec = {key: spec.strip() for key in ROUND_KEYS}
        else:
            pairs = [p.split("=", 1) for p in spec.split(",") if p.strip()]
            if any(len(p) != 2 for p in pairs):
                raise ValueError(f"round {spec!r}: expected a mode ({', '.join(ROUND_MODES)}) or FIELD=MODE pairs, "
                                 f"e.g. {ROUND_EXAMPLE}")
            spec = {k.strip(): v.strip() for k, v in pairs}
    policy = {("submit" if k == "interarrival" else str(k)): str(v) for k, v in dict(spec).items()}
    for key, mode in policy.items():
        if key not in ROUND_KEYS:
            raise ValueError(f"round: unknown field {key!r}; fields: {', '.join(ROUND_KEYS)} (e.g. {ROUND_EXAMPLE})")
        if mode not in ROUND_MODES:
            raise ValueError(f"round: unknown mode {mode!r} for {key}; modes: {', '.join(ROUND_MODES)}")
    return policy


class Rounding:
    """A reader's rounding policy (see the module docstring) and the count of what it changed.

    Args:
        spec: ``round=`` as given (see :func:`parse_round`).
        path: the file, for messages.
    """

    def __init__(self, spec: str | Mapping[str, str] | None, path: str | Path):
        self.policy = parse_round(spec)
        self.path = path
        self.repaired: dict[str, int] = {}

    def whole(self, values: np.ndarray, key: str, field: str, line: Callable[[int], int],
              text: Callable[[int], str]) -> np.ndarray:
        """``values`` (float64) with the fractions rounded as the policy (or the default) says; NaN stays NaN.

        Raises:
            TraceFormatError: a fraction where neither the policy nor a default says how to round it, naming the
                line, the field and the ``round=`` option.
        """
        frac = np.isfinite(values) & (np.floor(values) != values)
        if not frac.any():
            return values
        mode = self.policy.get(key, ROUND_DEFAULTS[key])
        if mode is None:
            row = int(np.flatnonzero(frac)[0])
            raise TraceFormatError(self.path, line(row), field, f"{text(row)!r} is not a whole number. Pass "
                                   f"round= (--round {key}=ceil, or floor or nearest) to round such values; "
                                   'what it changes is counted in attrs["repaired"]')
        if key in self.policy:
            label = f"{key} rounded ({mode})"
            self.repaired[label] = self.repaired.get(label, 0) + int(frac.sum())
        return np.where(frac, ROUND_MODES[mode](values), values)


# ---- CSV files ---------------------------------------------------------------------------------------------------

def _empty_csv(path: str | Path):
    return TraceFormatError(path, None, None, "the file is empty: a CSV trace needs a header line naming its columns")


def csv_header(path: str | Path) -> list[str]:
    """The column names of a (plain or gzipped) CSV, from its first line only."""
    with (gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")) as fh:
        first = fh.readline()
    if not first.strip():
        raise _empty_csv(path)
    return [str(c) for c in pd.read_csv(io.BytesIO(first), nrows=0, dtype=str).columns]


def check_field_counts(path: str | Path, fields: int, data: bytes | None = None) -> None:
    """Raise :class:`~hpcgym.errors.TraceFormatError` at the first line with more fields than the header's ``fields``.

    pandas reads only the columns it is asked for and drops the rest of a longer line without a word, so a value
    with an unquoted comma (which shifts every column after it) would go unnoticed. Lines with fewer fields are left
    to the column checks (their empty cells are reported there). Unquoted files are counted with numpy on the bytes;
    a file with quotes goes through :mod:`csv`, which knows a quoted comma from a separator.
    """
    data = read_bytes(path) if data is None else data  # ``data``: the file's bytes, when the caller has them
    if b'"' in data:
        text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline="")
        reader = csv.reader(text)
        for row in reader:
            if len(row) > fields:
                _too_many(path, reader.line_num, fields, len(row))  # line_num: physical lines read so far
        return
    raw = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(raw == ord("\n"))
    if not ends.size or ends[-1] != raw.size - 1:
        ends = np.append(ends, raw.size)  # a last line without a newline
    before = np.searchsorted(np.flatnonzero(raw == ord(",")), ends)  # commas before each line's end
    per_line = np.diff(before, prepend=0) + 1
    over = np.flatnonzero(per_line > fields)
    if over.size:
        line = int(over[0])
        _too_many(path, line + 1, fields, int(per_line[line]))


def _too_many(path: str | Path, line: int, fields: int, found: int) -> None:
    raise TraceFormatError(path, line, str(fields + 1), f"{found} fields where the header has {fields} (a "
                           f"value with an unquoted comma shifts the columns after it)")


def csv_columns(path: str | Path, required: tuple[str, ...], usecols: list[str] | None = None) -> pd.DataFrame:
    """Read a (plain or gzipped) CSV as strings, checking that the ``required`` columns are there."""
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, engine="c", usecols=usecols,
                          compression="gzip" if is_gzip(path) else None)
    except pd.errors.EmptyDataError:
        raise _empty_csv(path) from None
    except pd.errors.ParserError as exc:
        raise TraceFormatError(path, None, None, f"not a well-formed CSV: {exc}") from None
    missing = [c for c in required if c not in raw.columns]
    if missing:
        raise TraceFormatError(path, 1, ",".join(missing), "missing column(s) in the CSV header")
    return raw


def numeric_column(path: str | Path, raw, col: str, whole: bool = True, limit: float | None = MAX_EXACT,
                   optional: bool = False, line: Callable[[int], int] | None = None) -> np.ndarray:
    """A CSV column (strings) as float64; a value that is not a (whole) number raises naming its line and column.

    Args:
        path: the file, for messages.
        raw: the CSV read as strings.
        col: the column.
        whole: whether the values must be whole numbers.
        limit: the largest magnitude accepted (``None``: any finite value); beyond it raises.
        optional: whether empty cells are allowed (they become NaN).
        line: row -> its line in the file (default: a CSV's, the header being line 1).
    """
    line = line or (lambda row: row + 2)
    text = raw[col]
    values = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
    ok = integral(values) if whole else np.isfinite(values)
    if optional:
        ok |= (text.str.strip() == "").to_numpy()
    if not ok.all():
        row = int(np.flatnonzero(~ok)[0])
        what = "a whole number" if whole else "a number"
        raise TraceFormatError(path, line(row), col, f"{text.iat[row]!r} is not {what}")
    if limit is not None:
        over = np.abs(values) > limit
        if over.any():
            row = int(np.flatnonzero(over)[0])
            raise TraceFormatError(path, line(row), col, f"{text.iat[row]!r} is out of range (more than {limit:.3g})")
    return values


class CsvSource:
    """The columns of a (plain or gzipped) CSV: numbers parsed by pandas' C engine, text read only where needed.

    The numeric columns are read once as float64 and the text columns as categoricals (one string per distinct
    value, not per row). A column with anything unusual (a value that is not a number, an empty cell, NaN) is read
    again as strings and checked by :func:`numeric_column`, so messages name the value as written.

    Args:
        path: the file.
        required: columns the file must have (else :class:`~hpcgym.errors.TraceFormatError` naming them).
        numeric: columns to parse as numbers.
        text: columns to keep as text (categoricals).
        strings: columns to keep as strings, one per row (timestamps, say).
    """

    def __init__(self, path: str | Path, required: tuple[str, ...] = (), numeric: tuple[str, ...] = (),
                 text: tuple[str, ...] = (), strings: tuple[str, ...] = ()):
        self.path = path
        self.header = csv_header(path)
        data = read_bytes(path)  # once: the field counts are checked on it and pandas parses it
        check_field_counts(path, len(self.header), data)
        missing = [c for c in required if c not in self.header]
        if missing:
            raise TraceFormatError(path, 1, ",".join(missing), "missing column(s) in the CSV header")
        self._strings: dict[str, pd.Series] = {}
        numeric = tuple(dict.fromkeys(c for c in numeric if c in self.header))
        text = tuple(dict.fromkeys(c for c in text if c in self.header and c not in numeric))
        strings = tuple(c for c in dict.fromkeys(strings) if c in self.header and c not in numeric + text)
        dtypes = {c: np.float64 for c in numeric} | {c: "category" for c in text} | {c: str for c in strings}
        try:
            table = pd.read_csv(io.BytesIO(data), usecols=list(dtypes), dtype=dtypes, engine="c", na_values=[""],
                                keep_default_na=False)
        except (ValueError, pd.errors.ParserError):  # a bad value: every column the slow way, for the message
            raw = csv_columns(path, required, usecols=list(dtypes))
            self._strings = {c: raw[c] for c in raw.columns}
            table = None
        self.rows = len(table) if table is not None else len(next(iter(self._strings.values()), ()))
        self._numbers = {c: table[c].to_numpy() for c in numeric} if table is not None else {}
        self._text = {c: table[c] for c in text} if table is not None else {}
        if table is not None:
            self._strings |= {c: table[c].fillna("") for c in strings}

    def has_numbers(self, col: str) -> bool:
        """Whether the fast path read ``col`` as numbers."""
        return col in self._numbers

    def strings(self, col: str) -> pd.Series:
        """The column as written (strings, ``""`` for empty cells)."""
        if col not in self._strings:
            self._strings[col] = csv_columns(self.path, (), usecols=[col])[col]
        return self._strings[col]

    def text(self, col: str) -> pd.Series:
        """A text column (a categorical when read by the fast path)."""
        return self._text[col] if col in self._text else self.strings(col)

    def value_text(self, col: str) -> Callable[[int], str]:
        """A function of a row: the value of ``col`` as written (for messages)."""
        return lambda row: str(self.strings(col).iat[row])

    def number(self, col: str, whole: bool = True, limit: float | None = MAX_EXACT,
               optional: bool = False) -> np.ndarray:
        """:func:`numeric_column`: float64 values, or the error naming the line, the column and the value."""
        values = self._numbers.get(col)
        if values is not None:
            ok = np.isfinite(values) & (np.floor(values) == values) if whole else np.isfinite(values)
            if ok.all() and (limit is None or np.abs(values).max(initial=0) <= limit):
                return values
        return numeric_column(self.path, pd.DataFrame({col: self.strings(col)}), col, whole, limit, optional,
                              self.line)

    def whole(self, col: str, key: str, rounding: Rounding, optional: bool = False) -> np.ndarray:
        """A column of numbers that should be whole, rounded as ``rounding`` says (float64; NaN where empty)."""
        values = self.number(col, whole=False, limit=None, optional=optional)
        return rounding.whole(values, key, col, self.line, self.value_text(col))

    def ints(self, col: str, key: str | None = None, rounding: Rounding | None = None) -> np.ndarray:
        """A column of ids or counts as int64: whole (or rounded, for ``key``), within :data:`MAX_EXACT`."""
        if key is None or rounding is None:
            return self.number(col).astype(np.int64)
        return exact_ints(self.whole(col, key, rounding), self.path, col, self.line, self.value_text(col))

    def status(self, col: str, name_of: Callable[[str], str | None], expected: str) -> pd.Categorical:
        """A status column as the canonical categorical: ``name_of`` maps each distinct text to a status name.

        Raises:
            TraceFormatError: a text it does not know (``None``), naming its line and ``expected``.
        """
        cat = self.text(col)
        cat = cat if isinstance(cat.dtype, pd.CategoricalDtype) else cat.astype("category")
        index = np.array([-1 if (n := name_of(str(c))) is None else jobs.STATUSES.index(n)
                          for c in [*cat.cat.categories, ""]], np.int16)
        codes = index[cat.cat.codes.to_numpy()]  # code -1 (an empty cell) takes the last entry, ""'s
        if (codes < 0).any():
            row = int(np.flatnonzero(codes < 0)[0])
            raise TraceFormatError(self.path, self.line(row), col,
                                   f"unknown status {self.strings(col).iat[row]!r}; expected {expected}")
        return pd.Categorical.from_codes(codes.astype(np.int8), categories=jobs.STATUSES)

    def line(self, row: int) -> int:
        """The file line of a row (the header is line 1)."""
        return row + 2


# ---- the table: invalid jobs, duplicate ids, order, dtypes, attrs ------------------------------------------------

def _reasons(cols: dict[str, np.ndarray], max_nodes: int, flags: list[Flag]) -> tuple[np.ndarray, list[str]]:
    """Per row, the index of its first failed check among the flags, then :data:`hpcgym.jobs.INVALID_REASONS`."""
    reason = jobs.invalid_reasons(cols, max_nodes).astype(np.int16)
    if flags:
        reason[reason >= 0] += len(flags)
        for i, f in reversed(list(enumerate(flags))):
            reason[f.mask] = i
    return reason, [f.reason for f in flags] + list(jobs.INVALID_REASONS)


def invalid_policy(cols: dict[str, np.ndarray], max_nodes: int, on_invalid: str, path: str | Path,
                   line: Callable[[int], int], flags: list[Flag],
                   locate: Locate | None = None) -> tuple[np.ndarray | None, dict[str, int]]:
    """The rows to keep (``None``: all) and the count of the dropped ones by reason; or raise on the first.

    The reader's own reasons (``flags``) are checked before those of :data:`hpcgym.jobs.INVALID_REASONS`. The error
    names ``path`` and ``line(row)``, or ``locate(row)`` when given (a log spread over several files).
    """
    if on_invalid not in ("drop", "error"):
        raise ValueError(f'on_invalid must be "drop" or "error", not {on_invalid!r}')
    reason, names = _reasons(cols, max_nodes, [f for f in flags if f.mask.any()])
    bad = reason >= 0
    if not bad.any():
        return None, {}
    first = int(np.flatnonzero(bad)[0])
    if on_invalid == "error":
        k = int(reason[first]) - (len(names) - len(jobs.INVALID_REASONS))
        job = cols["job_id"][first]
        file, ln = locate(first) if locate is not None else (path, line(first))
        if k >= 0:
            raise jobs.invalid_job_error(k, job, int(cols["nodes"][first]), max_nodes, file, ln)
        f = [f for f in flags if f.mask.any()][int(reason[first])]
        raise InvalidJobError(file, ln, f.field, f"job {job}: {f.reason}: {f.shown(first)!r}, expected {f.limit}")
    counts = {names[i]: int(c) for i, c in enumerate(np.bincount(reason[bad], minlength=len(names))) if c}
    if not known.is_expected(counts):  # the catalog's documented cleaning is no news
        jobs.warn_dropped(path, counts, len(reason))
    return ~bad, counts


def duplicate_policy(job_id: np.ndarray, on_duplicate: str, path: str | Path, line: Callable[[int], int],
                     field: str = "job_id", locate: Locate | None = None, earlier: np.ndarray | None = None) -> int:
    """Count the jobs whose id an earlier job (in file order) has; warn once, or raise at the first.

    Ids that only grow (the usual order of a log) are checked in one pass; others through a hash table. The first
    repeat is named by ``line(row)`` in ``path``, or by ``locate(row)`` when given (a log spread over several files).
    ``earlier``: the sorted ids of the jobs before these rows (a file read in chunks); a repeat of one counts too.
    """
    if on_duplicate not in ("warn", "error"):
        raise ValueError(f'on_duplicate must be "warn" or "error", not {on_duplicate!r}')
    grows = len(job_id) < 2 or bool(np.all(job_id[1:] > job_id[:-1]))
    after = earlier is None or not len(earlier) or not len(job_id) or job_id.min() > earlier[-1]
    if grows and after:
        return 0
    repeated = pd.Index(job_id).duplicated(keep="first")
    if not after:
        at = np.minimum(np.searchsorted(earlier, job_id), len(earlier) - 1)
        repeated |= earlier[at] == job_id
    count = int(repeated.sum())
    if not count:
        return 0
    row = int(np.flatnonzero(repeated)[0])
    file, ln = locate(row) if locate is not None else (path, line(row))
    first = f"{'' if str(file) == str(path) else f'{file}, '}line {ln} repeats job {job_id[row]}"
    if on_duplicate == "error":
        raise TraceFormatError(file, ln, field, f"job id {job_id[row]} was used before; every job needs its "
                               'own id. Pass on_duplicate="warn" to read such a trace (the ids are kept as they are)')
    from hpcgym.errors import warn

    warn(f"{path}: {count} jobs have an id an earlier job has ({first}). They are kept as they are; tell them apart "
         'by their row (baselines.run --out writes it). Pass on_duplicate="error" to refuse such a trace.')
    return count


def _sorted(submit: np.ndarray, job_id: np.ndarray) -> bool:
    """Whether rows are already in (submit, job_id) order."""
    if len(submit) < 2:
        return True
    step = np.diff(submit)
    if (step < 0).any():
        return False
    ties = np.flatnonzero(step == 0)
    return not len(ties) or bool(np.all(job_id[ties + 1] > job_id[ties]))


def _status(values) -> pd.Categorical:
    """A status column as the canonical categorical (without a string per row when it is one already)."""
    if isinstance(values, pd.Categorical) and list(values.categories) == list(jobs.STATUSES):
        return values
    return jobs.status_categorical(np.asarray(values, dtype=object).astype(str))


#: The repair of a start before its submit (local times across a daylight-saving change, a mangled record).
NEGATIVE_WAIT = "wait < 0 (start before submit) set to unknown"


def _unknown_negative_waits(cols: dict[str, np.ndarray], repaired: dict[str, int]) -> dict[str, int]:
    """Set waits below -1 (-1 is "unknown") to unknown, counted in ``repaired`` as every other repair is."""
    wait = cols.get("wait")
    if wait is None:
        return repaired
    wait = np.asarray(wait)
    negative = wait < -1
    if negative.any():
        cols["wait"] = np.where(negative, -1, wait).astype(wait.dtype)
        repaired[NEGATIVE_WAIT] = repaired.get(NEGATIVE_WAIT, 0) + int(negative.sum())
    return repaired


#: The share of jobs outliving their walltime above which a reader warns (a units mistake, not killed jobs).
OVERRUN_SHARE = 0.5


def _warn_overruns(path: str | Path, cols: dict[str, np.ndarray]) -> None:
    """Warn when most jobs with a requested walltime ran longer than it (every one would be killed at it)."""
    known = np.asarray(cols.get("walltime_known", np.ones(len(cols["run"]), bool)), bool)
    over = int((cols["run"][known] > cols["walltime"][known]).sum())
    if known.sum() >= 10 and over > OVERRUN_SHARE * known.sum():
        warn(f"{path}: {over:,} of {int(known.sum()):,} jobs ran longer than their requested walltime, and a "
             "simulation kills each at its walltime; check the units (both in seconds?), or simulate with "
             "kill_at_walltime=False (--no-kill)")


def finish(cols: dict[str, np.ndarray] | pd.DataFrame, machine, on_invalid: str, path: str | Path, name: str | None,
           unix_start: int, line: Callable[[int], int] | np.ndarray, header: dict | None = None,
           flags: list[Flag] | None = None, *, on_duplicate: str = "warn", compact: bool = False,
           repaired: dict[str, int] | None = None, id_field: str = "job_id",
           locate: Locate | None = None, earlier_ids: np.ndarray | None = None) -> pd.DataFrame:
    """Apply the invalid-job and duplicate-id policies, sort, cast and attach the ``attrs``: the reader's table.

    Args:
        cols: the columns, in file order (:data:`hpcgym.jobs.COLUMNS`, plus optional ones), as a dict of arrays
            (``status`` a categorical), which is consumed (emptied as the table is built), or as a DataFrame.
        machine: the :class:`~hpcgym.machines.Machine`.
        on_invalid: ``"drop"`` or ``"error"`` (:func:`invalid_policy`).
        path: the file, for messages and ``attrs["source"]``.
        name: the trace name (default: the file name up to its first dot).
        unix_start: the Unix time of submit 0.
        line: row -> its line in the file (or an array of them), for messages.
        header: the file's header, for ``attrs["header"]``.
        flags: the reader's own invalid-job reasons (:class:`Flag`), checked before the usual ones and counted with
            them in the one warning and in ``attrs["invalid"]``.
        on_duplicate: ``"warn"`` or ``"error"`` (:func:`duplicate_policy`).
        compact: the canonical columns only, integers as int32 where they fit (:func:`hpcgym.jobs.compact_ints`).
        repaired: what the rounding policy changed (:attr:`Rounding.repaired`); waits below zero are set to -1
            (unknown) and counted here too (:data:`NEGATIVE_WAIT`).
        id_field: the source field of the job ids, for the duplicate-id error.
        locate: row -> (file, line), naming the rows of the invalid-job and duplicate-id messages instead of
            ``path`` and ``line`` (for a log spread over several files: a directory of PBS logs).
        earlier_ids: the sorted ids of the jobs kept before these rows (a file read in chunks): repeats of them
            count as duplicates too.
    """
    if isinstance(cols, pd.DataFrame):
        cols = {c: cols[c].array if c == "status" else cols[c].to_numpy() for c in cols.columns}
    repaired = _unknown_negative_waits(cols, dict(repaired or {}))
    lines = line
    if not callable(line):
        lines = lambda row: int(line[row])  # noqa: E731
    keep, dropped = invalid_policy(cols, machine.nodes, on_invalid, path, lines, list(flags or []), locate)
    ids = cols["job_id"] if keep is None else cols["job_id"][keep]
    kept = (lambda row: row) if keep is None else (lambda row: int(np.flatnonzero(keep)[row]))  # noqa: E731
    dup = duplicate_policy(ids, on_duplicate, path, lambda row: lines(kept(row)), id_field,
                           None if locate is None else (lambda row: locate(kept(row))), earlier_ids)
    submit = cols["submit"] if keep is None else cols["submit"][keep]
    order = None if _sorted(submit, ids) else np.lexsort((ids, submit))
    del ids, submit
    names = list(jobs.COLUMNS) + ([] if compact else [c for c in jobs.OPTIONAL_COLUMNS if c in cols])
    out = {}
    for col in names:
        values = cols.pop(col)
        if keep is not None:
            values = values[keep]
        if order is not None:
            values = values[order]
        if col == "status":
            values = _status(values)
        elif col == "walltime_known":
            values = np.asarray(values, bool)
        elif compact:
            values = jobs.compact_ints(values)
        elif col != "cpu_time":
            values = np.asarray(values, np.int64)
        out[col] = values
    cols.clear()
    _warn_overruns(path, out)
    df = pd.DataFrame(out, copy=False)
    df.attrs.update(name=name or Path(path).name.split(".")[0], machine=machine, header=header or {},
                    unix_start_time=int(unix_start), invalid=dropped, repaired=repaired,
                    duplicate_ids=dup, source=str(path))
    return df
