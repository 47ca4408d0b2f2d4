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
from hpcgym.traces._io import CsvSource, Rounding, finish, seconds, submit_column

REQUIRED = ("user_ID", "group_ID", "submit_time", "start_time", "end_time", "wallclock_limit", "job_status",
            "node_count", "tasks_requested")
STATUS = {"COMPLETED": "completed", "CANCELLED": "cancelled", "TIMEOUT": "timeout", "FAILED": "failed",
          "NODE_FAIL": "failed", "OUT_OF_MEMORY": "failed", "PREEMPTED": "partial"}


def _seconds(src: CsvSource, col: str, optional: bool = False) -> np.ndarray:
    """Parse ISO timestamps to Unix seconds (NaN where empty and ``optional``)."""
    text = src.strings(col).str.strip()
    parsed = pd.to_datetime(text.where(text != ""), utc=True, format="ISO8601", errors="coerce")
    bad = parsed.isna().to_numpy() & ((text != "").to_numpy() | (not optional))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(src.path, src.line(row), col, f"{src.strings(col).iat[row]!r} is not an ISO timestamp")
    seconds = parsed.to_numpy("datetime64[s]").astype("float64")  # NaT -> NaN via the mask below
    seconds[parsed.isna().to_numpy()] = np.nan
    return seconds


def _status_name(text: str) -> str | None:
    # Slurm writes "CANCELLED by <uid>"; keep the first word.
    words = text.split()
    return STATUS.get(words[0]) if words else None


def read_mustang(
    path: str | Path,
    machine: str | Machine = "mustang",
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
    round: str | dict[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
    on_duplicate: jobs.OnDuplicate = "warn",
    compact: bool = False,
) -> pd.DataFrame:
    """Read a LANL Mustang CSV into the canonical job table (see the module docstring for the mapping).

    ``round``, ``on_duplicate`` (moot here: ids are row numbers) and ``compact`` are as in
    :func:`hpcgym.traces.read_alcf`.
    """
    mach = get(machine)
    src = CsvSource(path, REQUIRED, numeric=("node_count", "tasks_requested", "user_ID", "group_ID"),
                    text=("job_status",), strings=("submit_time", "start_time", "end_time", "wallclock_limit"))
    rounding = Rounding(round, path)
    submit = _seconds(src, "submit_time")
    start = _seconds(src, "start_time", optional=True)
    end = _seconds(src, "end_time", optional=True)
    codes, limits = pd.factorize(src.strings("wallclock_limit"))  # a log repeats its limits: parse each once
    limit = pd.to_timedelta(limits, errors="coerce").total_seconds().to_numpy()[codes]
    if np.isnan(limit).any():
        row = int(np.flatnonzero(np.isnan(limit))[0])
        raise TraceFormatError(path, src.line(row), "wallclock_limit",
                               f"{src.strings('wallclock_limit').iat[row]!r} is not a duration")
    limit_s = rounding.whole(limit, "walltime", "wallclock_limit", src.line, src.value_text("wallclock_limit"))
    wall, wall_flag = seconds(limit_s, "walltime", "wallclock_limit", src.value_text("wallclock_limit"))
    duration = rounding.whole(end - start, "run", "end_time", src.line, src.value_text("end_time"))
    run, run_flag = seconds(duration, "run", "end_time", src.value_text("end_time"))
    rel, t0, submit_flag = submit_column(rounding.whole(submit, "submit", "submit_time", src.line,
                                                        src.value_text("submit_time")),
                                         src.value_text("submit_time"), "submit_time", unix=True)
    cols = {
        "job_id": np.arange(1, src.rows + 1, dtype=np.int64),
        "submit": rel,
        "run": run,
        "walltime": np.where(wall > 0, wall, run),
        "nodes": src.ints("node_count", "nodes", rounding),
        "procs": src.ints("tasks_requested", "procs", rounding),
        "user": src.ints("user_ID"),
        "group": src.ints("group_ID"),
        "queue": np.full(src.rows, -1, np.int64),
        "status": src.status("job_status", _status_name, str(sorted(STATUS))),
        "walltime_known": wall > 0,
        "wait": np.where(np.isfinite(start), start - submit, -1).astype(np.int64),
    }
    return finish(cols, mach, on_invalid, path, name, t0, src.line, flags=[submit_flag, run_flag, wall_flag],
                  on_duplicate=on_duplicate, compact=compact, repaired=rounding.repaired)
