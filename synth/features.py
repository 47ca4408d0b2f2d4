"""Job table <-> training table: the view of a trace that the synthesizers learn.

One row per job, in submit order: ``interarrival`` (seconds since the previous submit, 0 for the first), ``nodes``,
``run``, ``walltime``, ``user``, ``status``, ``hour`` (0-23) and ``dow`` (day of week, 0 = Monday) of the submit,
on the trace's clock (``attrs["unix_start_time"]``, UTC). :func:`to_jobs` inverts it: submit times are the running
sum of the inter-arrivals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable

COLUMNS = ("interarrival", "nodes", "run", "walltime", "user", "status", "hour", "dow")
NUMERIC = ("interarrival", "nodes", "run", "walltime")
CATEGORICAL = ("user", "status", "hour", "dow")


def to_training(jobs: pd.DataFrame) -> pd.DataFrame:
    """The training table of a canonical job table."""
    submit = jobs["submit"].to_numpy(np.int64)
    clock = submit + int(jobs.attrs.get("unix_start_time", 0) or 0)
    stamp = pd.to_datetime(clock, unit="s", utc=True)
    return pd.DataFrame({
        "interarrival": np.diff(submit, prepend=submit[:1]),
        "nodes": jobs["nodes"].to_numpy(np.int64),
        "run": jobs["run"].to_numpy(np.int64),
        "walltime": jobs["walltime"].to_numpy(np.int64),
        "user": jobs["user"].to_numpy(np.int64),
        "status": jobs["status"].astype(str).to_numpy(),
        "hour": stamp.hour.to_numpy(np.int64),
        "dow": stamp.dayofweek.to_numpy(np.int64),
    })


def to_jobs(table: pd.DataFrame, unix_start_time: int = 0, name: str = "synthetic",
            cores_per_node: int = 1) -> pd.DataFrame:
    """A canonical job table from training-table rows (whole numbers expected; see :mod:`synth.postprocess`).

    ``procs`` is derived as ``nodes * cores_per_node`` (Theta: ``cpu_num = 64 * node_num``).
    """
    n = len(table)
    submit = np.cumsum(np.maximum(table["interarrival"].to_numpy(np.int64), 0))
    submit = submit - (submit[0] if n else 0)
    status = table["status"].astype(str).where(table["status"].astype(str).isin(jobtable.STATUSES), "unknown")
    nodes = table["nodes"].to_numpy(np.int64)
    df = pd.DataFrame({
        "job_id": np.arange(1, n + 1), "submit": submit, "run": table["run"].to_numpy(np.int64),
        "walltime": table["walltime"].to_numpy(np.int64), "nodes": nodes, "procs": nodes * int(cores_per_node),
        "user": table["user"].to_numpy(np.int64) if "user" in table else -1, "group": -1, "queue": -1,
        "status": status.to_numpy(), "walltime_known": True,
    })
    out = jobtable.finalize(df)
    out.attrs.update(name=name, unix_start_time=int(unix_start_time), invalid={})
    return out
