"""Helpers shared by the trace readers: files, CSV columns, range checks of times, the invalid-job policy.

Time values are range-checked before they become int64, so a corrupt value is reported rather than wrapped or
silently reinterpreted: a submit time above :data:`MAX_TIMESTAMP`, or a duration (runtime, walltime) above
:data:`MAX_DURATION`, makes its job invalid with its own reason (``"submit out of range"``, ``"run out of range"``,
``"walltime out of range"``), counted beside the reasons of :data:`hpcgym.jobs.INVALID_REASONS`. So does a submit
time before 1973 in a file whose times are Unix times. A negative submit time is the usual "unknown" (reason
``"submit unknown"``).
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpcgym.io import write_bytes

#: The largest submit time accepted (seconds; as a Unix time, the year 2106).
MAX_TIMESTAMP = 2**32
#: The largest runtime or walltime accepted (seconds; about 68 years).
MAX_DURATION = 2**31 - 1
#: Submit times above this are Unix times (1973 onwards); in a file of such times, smaller ones are out of range.
EPOCH_THRESHOLD = 100_000_000
#: Whole numbers beyond this magnitude are not exact in float64 (and ids, node counts beyond it are corrupt).
MAX_EXACT = 2**53


def read_bytes(path: str | Path) -> bytes:
    """Return the file's bytes, decompressed when it is gzipped (detected by magic number, not name)."""
    raw = Path(path).read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` atomically (gzipped for ``.gz``): :func:`hpcgym.io.write_bytes`."""
    write_bytes(path, data, gzip_by_suffix=True)


def integral(values: np.ndarray) -> np.ndarray:
    """Boolean mask of the entries that are whole numbers (NaN is not)."""
    return np.isfinite(values) & (np.floor(values) == values)


def _empty_csv(path: str | Path):
    from hpcgym.errors import TraceFormatError

    return TraceFormatError(path, None, None, "the file is empty: a CSV trace needs a header line naming its columns")


def csv_header(path: str | Path) -> list[str]:
    """The column names of a (plain or gzipped) CSV, from its first line only."""
    import pandas as pd

    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rb") if gz else open(path, "rb")) as fh:
        first = fh.readline()
    if not first.strip():
        raise _empty_csv(path)
    return [str(c) for c in pd.read_csv(io.BytesIO(first), nrows=0, dtype=str).columns]


def csv_columns(path: str | Path, required: tuple[str, ...]):
    """Read a (plain or gzipped) CSV as strings, checking that the ``required`` columns are there."""
    import pandas as pd

    from hpcgym.errors import TraceFormatError

    try:
        raw = pd.read_csv(io.BytesIO(read_bytes(path)), dtype=str, keep_default_na=False, engine="c")
    except pd.errors.EmptyDataError:
        raise _empty_csv(path) from None
    except pd.errors.ParserError as exc:
        raise TraceFormatError(path, None, None, f"not a well-formed CSV: {exc}") from None
    missing = [c for c in required if c not in raw.columns]
    if missing:
        raise TraceFormatError(path, 1, ",".join(missing), "missing column(s) in the CSV header")
    return raw


def numeric_column(path: str | Path, raw, col: str, whole: bool = True, limit: float | None = MAX_EXACT,
                   optional: bool = False) -> np.ndarray:
    """A CSV column as float64; a value that is not a (whole) number raises naming its line and column.

    Args:
        path: the file, for messages.
        raw: the CSV read as strings.
        col: the column.
        whole: whether the values must be whole numbers.
        limit: the largest magnitude accepted (``None``: any finite value); beyond it raises.
        optional: whether empty cells are allowed (they become NaN).
    """
    import pandas as pd

    from hpcgym.errors import TraceFormatError

    text = raw[col]
    values = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
    ok = integral(values) if whole else np.isfinite(values)
    if optional:
        ok |= (text.str.strip() == "").to_numpy()
    if not ok.all():
        row = int(np.flatnonzero(~ok)[0])
        what = "a whole number" if whole else "a number"
        raise TraceFormatError(path, row + 2, col, f"{text.iat[row]!r} is not {what}")
    if limit is not None:
        over = np.abs(values) > limit
        if over.any():
            row = int(np.flatnonzero(over)[0])
            raise TraceFormatError(path, row + 2, col, f"{text.iat[row]!r} is out of range (more than {limit:.3g})")
    return values


@dataclass(frozen=True)
class Flag:
    """Jobs a reader found invalid for a reason of its own (a value out of range), checked before the usual ones.

    Attributes:
        reason: the label counted in ``attrs["invalid"]``, e.g. ``"run out of range"``.
        field: the source column, for ``on_invalid="error"`` messages.
        mask: per row, whether the job has this problem.
        text: per row, the source value, for messages.
        limit: what the value should be, for messages.
    """

    reason: str
    field: str
    mask: np.ndarray
    text: np.ndarray
    limit: str


def duration_column(path: str | Path, raw, col: str, reason: str, optional: bool = False):
    """A runtime or walltime column in whole seconds (rounded up), and the :class:`Flag` of its values out of range.

    Values above :data:`MAX_DURATION` are flagged and held as 0; empty cells (when ``optional``) become -1.
    """
    values = numeric_column(path, raw, col, whole=False, limit=None, optional=optional)
    over = values > MAX_DURATION
    missing = np.isnan(values)
    secs = np.where(missing, -1, np.ceil(np.where(over | missing, 0, values)))
    flag = Flag(reason, col, over, raw[col].to_numpy(), f"at most {MAX_DURATION} s")
    return secs.astype(np.int64), flag


def submit_column(values: np.ndarray, texts: np.ndarray, col: str, rebase: bool = True):
    """Submit times (float seconds, whole) -> (int64 seconds relative to the first, the first, its :class:`Flag`).

    Negative times are unknown (-1, reason ``"submit unknown"``). Times above :data:`MAX_TIMESTAMP`, and times
    before 1973 in a file whose median time is a Unix time, are out of range: flagged, held as 0. With ``rebase``
    False, only Unix times are rebased (to the first); relative times are kept, and the start is 0.
    """
    known = values >= 0
    over = values > MAX_TIMESTAMP
    fine = known & ~over
    limit = f"at most {MAX_TIMESTAMP}"
    unix = fine.any() and np.median(values[fine]) > EPOCH_THRESHOLD
    if unix:
        early = fine & (values < EPOCH_THRESHOLD)
        over |= early
        fine &= ~early
        limit = f"a Unix time between {EPOCH_THRESHOLD} (1973) and {MAX_TIMESTAMP}, as the file's others are"
    start = int(values[fine].min()) if fine.any() and (rebase or unix) else 0
    rel = np.where(fine, values - start, np.where(known, 0, -1)).astype(np.int64)
    return rel, start, Flag("submit out of range", col, over, texts, limit)


def _apply_policy(df, max_nodes: int, on_invalid: str, path: str | Path, lines: np.ndarray,
                  flags: list[Flag]):
    """:func:`hpcgym.jobs.apply_invalid_policy` with the reader's own reasons checked first."""
    from hpcgym import jobs
    from hpcgym.errors import InvalidJobError

    flags = [f for f in flags if f.mask.any()]
    if not flags or on_invalid not in ("drop", "error"):
        return jobs.apply_invalid_policy(df, max_nodes, on_invalid, path, lines)
    names = [f.reason for f in flags] + list(jobs.INVALID_REASONS)
    reason = jobs.invalid_reasons(df, max_nodes).astype(np.int16)
    reason[reason >= 0] += len(flags)
    for i, f in reversed(list(enumerate(flags))):
        reason[f.mask] = i
    bad = reason >= 0
    if on_invalid == "error":
        first = int(np.flatnonzero(bad)[0])
        if reason[first] >= len(flags):  # a usual reason: the usual message
            return jobs.apply_invalid_policy(df.iloc[first:first + 1], max_nodes, on_invalid, path,
                                             lines[first:first + 1])
        f = flags[reason[first]]
        raise InvalidJobError(path, int(lines[first]), f.field,
                              f"job {df['job_id'].iat[first]}: {f.reason}: {f.text[first]!r}, expected {f.limit}")
    counts = {names[i]: int(c) for i, c in enumerate(np.bincount(reason[bad], minlength=len(names))) if c}
    jobs.warn_dropped(path, counts, len(df))
    return df.loc[~bad], counts


def finish(df, machine, on_invalid: str, path: str | Path, name: str | None, unix_start: int, lines: np.ndarray,
           header: dict | None = None, flags: list[Flag] | None = None):
    """Apply the invalid-job policy, sort into the canonical table, and attach the metadata attrs.

    ``flags`` are the reader's own invalid-job reasons (:class:`Flag`), checked before the usual ones and counted
    with them in the one warning and in ``attrs["invalid"]``.
    """
    from hpcgym import jobs

    df, dropped = _apply_policy(df, machine.nodes, on_invalid, path, lines, list(flags or []))
    out = jobs.finalize(df)
    out.attrs.update(name=name or Path(path).name.split(".")[0], machine=machine, header=header or {},
                     unix_start_time=int(unix_start), invalid=dropped, source=str(path))
    return out
