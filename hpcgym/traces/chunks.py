"""SWF traces in chunks of jobs: a file of any size read in bounded memory.

:func:`read_swf_chunks` yields the canonical job tables (compact: int32 where the values fit) of consecutive runs
of about ``rows`` data lines, with the checks and messages of :func:`~hpcgym.traces.swf.read_swf`: a malformed line
names its file, line and field, and the invalid-job and duplicate-id policies hold across the whole file (a job that
repeats the id of a job in an earlier chunk is a duplicate). Memory holds one chunk, its block of text, and the ids
of the jobs read so far (to find repeats: 4 bytes a job, 8 for ids beyond int32; about 100 MB at 25 M jobs, where
the whole table takes 1.9 GB). What differs from the whole read:

- Each chunk is sorted by submit time, not the file: a file out of order across chunks yields chunks out of order.
- Unix submit times stay Unix times (the trace's first submit is known only at its end); a chunk's
  ``attrs["unix_start_time"]`` is the header's ``UnixStartTime``, or, for Unix times, the chunk's first submit
  (including those of jobs dropped as invalid, as the whole read counts it). Relative times are kept as read.
- The first chunk decides whether submit times are Unix times (the whole read asks the whole file; both by
  :func:`hpcgym.traces._io.unix_times`), and the header is parsed from the comment lines before the first chunk
  ends (SWF puts it at the top).
- One warning at the end counts every chunk's dropped jobs, repeated ids and non-standard status codes.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import warn
from hpcgym.machines import Machine
from hpcgym.traces._io import Rounding, finish
from hpcgym.traces.swf import (
    _field_name,
    _header_conflict,
    _odd_codes,
    _resolve_machine,
    _row_token,
    _scan_chunks,
    _status,
    _status_note,
    _table,
    _unix_start,
    parse_header,
)

#: Data lines per chunk by default: with its temporaries, about 200 MB (``traces info`` peaked at 515 MB on 25 M
#: jobs: 230 MB of imports, 95 MB of ids, the rest the chunk's).
ROWS = 1 << 20
#: The order of the invalid-job reasons in the whole read's counts (its own range checks first).
_REASONS = ("submit out of range", "run out of range", "walltime out of range", *jobs.INVALID_REASONS)


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values, by sorting.

    numpy 2.4's ``np.unique`` hashes: 1.9 s on CEA-Curie x 8's ids and users, where sorting takes 0.4 s.
    """
    out = np.sort(values)
    return out[np.concatenate(([True], out[1:] != out[:-1]))] if len(out) else out


def merge_counts(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    """Two chunks' invalid-job counts added up, in the order the whole read gives them."""
    out = {k: total.get(k, 0) + more.get(k, 0) for k in {*total, *more}}
    rank = {k: i for i, k in enumerate(_REASONS)}
    return dict(sorted(out.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


class _Ids:
    """The ids of the jobs kept so far, sorted, for the duplicate-id policy across chunks."""

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []
        self.top: int | None = None

    def earlier(self, ids: np.ndarray) -> np.ndarray | None:
        """The sorted ids before ``ids`` when one of ``ids`` could repeat them, else None (they all lie above)."""
        if self.top is None or not len(ids) or ids.min() > self.top:
            return None
        if len(self.parts) > 1:
            self.parts = [distinct(np.concatenate(self.parts))]
        return self.parts[0]

    def add(self, ids: np.ndarray) -> None:
        if len(ids):
            self.parts.append(distinct(ids))
            self.top = int(ids.max()) if self.top is None else max(self.top, int(ids.max()))


class _Totals:
    """What the end-of-file warning counts."""

    def __init__(self) -> None:
        self.rows = 0
        self.dropped: dict[str, int] = {}
        self.duplicates = 0
        self.codes: dict[int, int] = {}

    def add(self, df: pd.DataFrame, rows: int, codes: dict[int, int]) -> None:
        self.rows += rows
        self.dropped = merge_counts(self.dropped, df.attrs["invalid"])
        self.duplicates += df.attrs["duplicate_ids"]
        for code, n in codes.items():
            self.codes[code] = self.codes.get(code, 0) + n

    def warn(self, path: str | Path, expected: Mapping[str, int] | None = None) -> None:
        notes = []
        if self.dropped and self.dropped != (None if expected is None else dict(expected)):
            summary = ", ".join(f"{n} {r}" for r, n in self.dropped.items())
            notes.append(f"dropped {sum(self.dropped.values())} invalid jobs of {self.rows} ({summary}). "
                         'Pass on_invalid="error" to stop at the first one.')
        if self.duplicates:
            notes.append(f"{self.duplicates} jobs have an id an earlier job has. They are kept as they are. Pass "
                         'on_duplicate="error" to refuse such a trace.')
        if self.codes:
            codes = dict(sorted(self.codes.items(), key=lambda kv: (-kv[1], kv[0])))
            notes.append(_status_note(codes))
        if notes:
            warn(f"{path}: " + " ".join(notes))


def read_swf_chunks(path: str | Path, machine: str | Machine | None = None, on_invalid: jobs.OnInvalid = "drop",
                    name: str | None = None, round: str | dict[str, str] | None = None,  # noqa: A002
                    on_duplicate: jobs.OnDuplicate = "warn", rows: int = ROWS,
                    expected: Mapping[str, int] | None = None) -> Iterator[pd.DataFrame]:
    """Yield an SWF file's compact job tables, about ``rows`` data lines at a time (see the module docstring).

    The arguments are :func:`~hpcgym.traces.swf.read_swf`'s. Every chunk has the whole read's ``attrs``, for its
    own jobs (``invalid``, ``duplicate_ids``, ``repaired`` so far, ``status_codes``), plus ``first_row`` (the data
    lines before it) and ``rows`` (its data lines, dropped jobs included). ``expected``: the invalid-job counts the
    catalog states for the file (:mod:`hpcgym.traces.known`); the end-of-file warning leaves out drops of exactly these.

    Raises:
        TraceFormatError: as :func:`~hpcgym.traces.swf.read_swf`, naming the file, line and field.
        InvalidJobError: with ``on_invalid="error"``, at the first invalid job, naming its line.
        ValueError: ``rows`` below 1.
    """
    if rows < 1:
        raise ValueError(f"rows must be at least 1, not {rows}")
    rounding = Rounding(round, path)
    ids, totals = _Ids(), _Totals()
    mach = header = unix = None
    offset = 0
    for comments, cols in _scan_chunks(path, rounding, extra=False, rows=rows):
        if mach is None:
            header = parse_header(comments)
            mach = _resolve_machine(machine, header, path)
            conflict = _header_conflict(header, mach, path) if machine is not None else None
            if conflict:
                warn(conflict)
        n = cols.rows
        df, codes, unix = _chunk(path, cols, mach, header, unix, offset, ids, rounding,
                                 {"on_invalid": on_invalid, "name": name, "on_duplicate": on_duplicate})
        df.attrs.update(first_row=offset, rows=n)
        totals.add(df, n, codes)
        offset += n
        yield df
    totals.warn(path, expected)


def _chunk(path: str | Path, cols: Any, mach: Machine, header: dict[str, Any], unix: bool | None, offset: int,
           ids: _Ids, rounding: Rounding, options: dict[str, Any]) -> tuple[pd.DataFrame, dict[int, int], bool]:
    """One chunk's table, its non-standard status codes, and whether submit times are Unix times."""
    header_start = _unix_start(header)
    table, flags, start = _table(path, cols, mach, header_start, offset, unix)
    if not header_start:  # Unix times: back from the chunk's first to what the file says
        unix = bool(start) if unix is None else unix
        fine = (table["submit"] >= 0) & ~flags[0].mask
        table["submit"][fine] += start
    codes = table.pop("code")
    odd = _odd_codes(codes, table, mach, flags)
    table["status"] = _status(codes)
    earlier = ids.earlier(table["job_id"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # counted in the one warning at the end
        df = finish(table, mach, options["on_invalid"], path, options["name"], start,
                    lambda row: _row_token(path, offset + row, 0)[0], header, flags,
                    on_duplicate=options["on_duplicate"], compact=True, repaired=rounding.repaired,
                    id_field=_field_name(0), earlier_ids=earlier)
    df.attrs["status_codes"] = odd
    ids.add(df["job_id"].to_numpy())
    return df, odd, bool(unix)
