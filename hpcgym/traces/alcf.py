"""Reader for the ALCF job CSVs (Theta, ThetaGPU, Mira) as restructured by the DIR-LAB group.

Columns: ``job,user,project,state,gpu_num,cpu_num,node_num,submit_time,wait_time,run_time,wall_time,node_hour,
new_status``. Rows come in job-id order, not submit order; the reader sorts them. ``wall_time`` is the requested
limit. Runtimes are rounded up to whole seconds. Status ``Pass`` -> completed, ``Failed`` -> failed,
``Killed`` -> killed (ended at its walltime). A ``wall_time`` <= 0 is unknown (walltime = run, flagged).

Out-of-range values are never reinterpreted (see :mod:`hpcgym.traces._io`): a ``submit_time`` below 0 is unknown
(``"submit unknown"``); above 2**32, or before 1973 among Unix times, ``"submit out of range"``; a ``run_time`` or
``wall_time`` above 2**31 - 1 s, ``"run out of range"`` or ``"walltime out of range"``. Such jobs are dropped and
counted by reason, or raise with ``on_invalid="error"``, naming the line and column. Ids and counts beyond 2**53
raise :class:`~hpcgym.errors.TraceFormatError`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import TraceFormatError
from hpcgym.machines import Machine, get
from hpcgym.traces._io import csv_columns, duration_column, finish, numeric_column, submit_column

REQUIRED = ("job", "user", "project", "cpu_num", "node_num", "submit_time", "wait_time", "run_time", "wall_time",
            "new_status")
STATUS = {"Pass": "completed", "Failed": "failed", "Killed": "killed"}


def read_alcf(
    path: str | Path,
    machine: str | Machine = "theta",
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
) -> pd.DataFrame:
    """Read an ALCF job CSV into the canonical job table.

    Args:
        path: the CSV file, plain or gzipped.
        machine: the machine the log comes from (``"theta"``, ``"mira"``, ``"thetagpu"``).
        on_invalid: ``"drop"`` or ``"error"``, as in :func:`hpcgym.jobs.apply_invalid_policy`.
        name: the trace name for ``attrs["name"]``.

    Raises:
        TraceFormatError: an empty file, a missing column, a malformed row or an unknown status, naming the line
            and field.
        InvalidJobError: with ``on_invalid="error"``, the first invalid job (see the module docstring).
    """
    mach = get(machine)
    raw = csv_columns(path, REQUIRED)
    submit, start, submit_flag = submit_column(numeric_column(path, raw, "submit_time", whole=True, limit=None),
                                               raw["submit_time"].to_numpy(), "submit_time")
    run, run_flag = duration_column(path, raw, "run_time", "run out of range")
    wall, wall_flag = duration_column(path, raw, "wall_time", "walltime out of range")
    status = raw["new_status"].map(STATUS)
    if status.isna().any():
        row = int(np.flatnonzero(status.isna().to_numpy())[0])
        raise TraceFormatError(path, row + 2, "new_status",
                               f"unknown status {raw['new_status'].iat[row]!r}; expected {sorted(STATUS)}")
    df = pd.DataFrame({
        "job_id": numeric_column(path, raw, "job", whole=True).astype(np.int64),
        "submit": submit,
        "run": run,
        "walltime": np.where(wall > 0, wall, run),
        "nodes": numeric_column(path, raw, "node_num", whole=True).astype(np.int64),
        "procs": numeric_column(path, raw, "cpu_num", whole=True).astype(np.int64),
        "user": numeric_column(path, raw, "user", whole=True).astype(np.int64),
        "group": numeric_column(path, raw, "project", whole=True).astype(np.int64),
        "queue": np.full(len(raw), -1, np.int64),
        "status": jobs.status_categorical(status.to_numpy()),
        "walltime_known": wall > 0,
        "wait": numeric_column(path, raw, "wait_time", whole=True).astype(np.int64),
    })
    return finish(df, mach, on_invalid, path, name, start, np.arange(len(df), dtype=np.int64) + 2,
                  flags=[submit_flag, run_flag, wall_flag])
