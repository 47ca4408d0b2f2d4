"""Reader for the ALCF job CSVs (Theta, ThetaGPU, Mira) as restructured by the DIR-LAB group.

Columns: ``job,user,project,state,gpu_num,cpu_num,node_num,submit_time,wait_time,run_time,wall_time,node_hour,
new_status``. Rows come in job-id order, not submit order; the reader sorts them. ``wall_time`` is the requested
limit. Runtimes are rounded up to whole seconds. Status ``Pass`` -> completed, ``Failed`` -> failed,
``Killed`` -> killed (ended at its walltime).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import TraceFormatError
from hpcgym.machines import Machine, get
from hpcgym.traces._io import integral, read_bytes

REQUIRED = ("job", "user", "project", "cpu_num", "node_num", "submit_time", "wait_time", "run_time", "wall_time",
            "new_status")
STATUS = {"Pass": "completed", "Failed": "failed", "Killed": "killed"}


def _numeric(path: str | Path, raw: pd.DataFrame, col: str, whole: bool) -> np.ndarray:
    values = pd.to_numeric(raw[col], errors="coerce").to_numpy(np.float64)
    ok = integral(values) if whole else np.isfinite(values)
    if not ok.all():
        row = int(np.flatnonzero(~ok)[0])
        what = "a whole number" if whole else "a number"
        raise TraceFormatError(path, row + 2, col, f"{raw[col].iat[row]!r} is not {what}")
    return values


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
        TraceFormatError: a missing column, a malformed row or an unknown status, naming the line and field.
    """
    mach = get(machine)
    try:
        raw = pd.read_csv(io.BytesIO(read_bytes(path)), dtype=str, keep_default_na=False, engine="c")
    except pd.errors.ParserError as exc:
        raise TraceFormatError(path, None, None, f"not a well-formed CSV: {exc}") from None
    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise TraceFormatError(path, 1, ",".join(missing), "missing column(s) in the CSV header")
    submit = _numeric(path, raw, "submit_time", whole=True).astype(np.int64)
    run = np.ceil(_numeric(path, raw, "run_time", whole=False)).astype(np.int64)
    wall = np.ceil(_numeric(path, raw, "wall_time", whole=False)).astype(np.int64)
    status = raw["new_status"].map(STATUS)
    if status.isna().any():
        row = int(np.flatnonzero(status.isna().to_numpy())[0])
        raise TraceFormatError(path, row + 2, "new_status",
                               f"unknown status {raw['new_status'].iat[row]!r}; expected {sorted(STATUS)}")
    start = int(submit.min()) if len(submit) else 0
    df = pd.DataFrame({
        "job_id": _numeric(path, raw, "job", whole=True).astype(np.int64),
        "submit": submit - start,
        "run": run,
        "walltime": np.where(wall > 0, wall, run),
        "nodes": _numeric(path, raw, "node_num", whole=True).astype(np.int64),
        "procs": _numeric(path, raw, "cpu_num", whole=True).astype(np.int64),
        "user": _numeric(path, raw, "user", whole=True).astype(np.int64),
        "group": _numeric(path, raw, "project", whole=True).astype(np.int64),
        "queue": np.full(len(raw), -1, np.int64),
        "status": jobs.status_categorical(status.to_numpy()),
        "walltime_known": wall > 0,
        "wait": _numeric(path, raw, "wait_time", whole=True).astype(np.int64),
    })
    lines = np.arange(len(df), dtype=np.int64) + 2
    df, dropped = jobs.apply_invalid_policy(df, mach.nodes, on_invalid, path, lines)
    out = jobs.finalize(df)
    out.attrs.update(name=name or Path(path).name.split(".")[0], machine=mach, header={},
                     unix_start_time=start, invalid=dropped, source=str(path))
    return out
