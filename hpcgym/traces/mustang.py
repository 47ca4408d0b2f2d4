"""Reader for the LANL Mustang CSV slices of the ATLAS release (Amvrosiadis et al., USENIX ATC 2018).

Columns: ``user_ID,group_ID,submit_time,start_time,end_time,wallclock_limit,job_status,node_count,
tasks_requested``. Times are ISO timestamps; ``wallclock_limit`` is a pandas timedelta string. A job cancelled
before it started has no start time: its runtime is unknown (-1), so it is an invalid job (``run <= 0``).
The file has no job ids: a job's id is its row number (1-based). ``tasks_requested`` is kept as ``procs``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import TraceFormatError
from hpcgym.machines import Machine, get
from hpcgym.traces._io import csv_columns, finish, numeric_column

REQUIRED = ("user_ID", "group_ID", "submit_time", "start_time", "end_time", "wallclock_limit", "job_status",
            "node_count", "tasks_requested")
STATUS = {"COMPLETED": "completed", "CANCELLED": "cancelled", "TIMEOUT": "timeout", "FAILED": "failed",
          "NODE_FAIL": "failed", "OUT_OF_MEMORY": "failed", "PREEMPTED": "partial"}


def _seconds(path: str | Path, raw: pd.DataFrame, col: str, optional: bool = False) -> np.ndarray:
    """Parse ISO timestamps to Unix seconds (NaN where empty and ``optional``)."""
    text = raw[col].str.strip()
    parsed = pd.to_datetime(text.where(text != ""), utc=True, format="ISO8601", errors="coerce")
    bad = parsed.isna().to_numpy() & ((text != "").to_numpy() | (not optional))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(path, row + 2, col, f"{raw[col].iat[row]!r} is not an ISO timestamp")
    seconds = parsed.to_numpy("datetime64[s]").astype("float64")  # NaT -> NaN via the mask below
    seconds[parsed.isna().to_numpy()] = np.nan
    return seconds


def _integers(path: str | Path, raw: pd.DataFrame, col: str) -> np.ndarray:
    return numeric_column(path, raw, col).astype(np.int64)


def _status(path: str | Path, raw: pd.DataFrame) -> np.ndarray:
    # Slurm writes "CANCELLED by <uid>"; keep the first word.
    words = raw["job_status"].str.split().str[0].fillna("")
    mapped = words.map(STATUS)
    if mapped.isna().any():
        row = int(np.flatnonzero(mapped.isna().to_numpy())[0])
        raise TraceFormatError(path, row + 2, "job_status",
                               f"unknown status {raw['job_status'].iat[row]!r}; expected {sorted(STATUS)}")
    return mapped.to_numpy()


def read_mustang(
    path: str | Path,
    machine: str | Machine = "mustang",
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
) -> pd.DataFrame:
    """Read a LANL Mustang CSV into the canonical job table (see the module docstring for the mapping)."""
    mach = get(machine)
    raw = csv_columns(path, REQUIRED)
    submit = _seconds(path, raw, "submit_time")
    start = _seconds(path, raw, "start_time", optional=True)
    end = _seconds(path, raw, "end_time", optional=True)
    limit = pd.to_timedelta(raw["wallclock_limit"], errors="coerce")
    if limit.isna().any():
        row = int(np.flatnonzero(limit.isna().to_numpy())[0])
        raise TraceFormatError(path, row + 2, "wallclock_limit",
                               f"{raw['wallclock_limit'].iat[row]!r} is not a duration")
    wall = np.ceil(limit.dt.total_seconds().to_numpy()).astype(np.int64)
    duration = end - start
    run = np.where(np.isfinite(duration), np.ceil(duration), -1).astype(np.int64)
    t0 = int(np.min(submit)) if len(submit) else 0
    df = pd.DataFrame({
        "job_id": np.arange(1, len(raw) + 1, dtype=np.int64),
        "submit": submit.astype(np.int64) - t0,
        "run": run,
        "walltime": np.where(wall > 0, wall, run),
        "nodes": _integers(path, raw, "node_count"),
        "procs": _integers(path, raw, "tasks_requested"),
        "user": _integers(path, raw, "user_ID"),
        "group": _integers(path, raw, "group_ID"),
        "queue": np.full(len(raw), -1, np.int64),
        "status": jobs.status_categorical(_status(path, raw)),
        "walltime_known": wall > 0,
        "wait": np.where(np.isfinite(start), start - submit, -1).astype(np.int64),
    })
    return finish(df, mach, on_invalid, path, name, t0, np.arange(len(df), dtype=np.int64) + 2)
