"""Fixtures for tests and examples: a tiny environment (4 nodes, 16 jobs) and a writer of ``sacct`` logs.

Like Stable-Baselines3's ``IdentityEnv``, the toy environment lets a test drive the whole environment (masks,
backfilling, rewards, agents) in milliseconds. The 16 jobs include a blocking wide job and short backfill candidates.
:func:`write_sacct` turns any job table into the ``sacct --parsable2`` output a Slurm cluster would give for it, to
exercise the Slurm reader at scale (``benchmarks/read_speed.py``) and the CLIs on a Slurm log.

>>> env = toy_env(backfill="easy")
>>> obs, info = env.reset(seed=0)
>>> obs.shape, int(env.action_masks().sum()) >= 2
((9, 8), True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.machines import Machine

TOY = Machine("toy", nodes=4, cores_per_node=2, source="hpcgym.testing")
#: (submit, run, walltime, nodes) of the 16 toy jobs.
TOY_ROWS = [
    (0, 100, 120, 2), (0, 50, 60, 2), (10, 30, 40, 4), (12, 10, 20, 1), (15, 200, 200, 1),
    (20, 5, 10, 1), (25, 80, 90, 3), (30, 60, 100, 2), (31, 20, 20, 1), (40, 15, 30, 4),
    (45, 100, 150, 1), (50, 10, 10, 2), (60, 70, 70, 1), (61, 40, 50, 3), (62, 5, 5, 1), (70, 30, 60, 2),
]


def make_jobs(rows: list[tuple[int, int, int, int]], machine: Machine = TOY) -> pd.DataFrame:
    """A canonical job table from ``(submit, run, walltime, nodes)`` tuples; job ids count from 1."""
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    n = len(arr)
    df = pd.DataFrame({
        "job_id": np.arange(1, n + 1), "submit": arr[:, 0], "run": arr[:, 1], "walltime": arr[:, 2],
        "nodes": arr[:, 3], "procs": arr[:, 3] * machine.cores_per_node, "user": np.zeros(n, np.int64),
        "group": np.zeros(n, np.int64), "queue": np.full(n, -1), "status": ["completed"] * n,
        "walltime_known": np.ones(n, bool),
    })
    out = jobs.finalize(df)
    out.attrs.update(name=machine.name, machine=machine)
    return out


def toy_env(**kwargs: Any):
    """A :class:`~hpcgym.env.SchedulingEnv` on the toy machine: every episode is the 16 jobs, 8 visible slots."""
    from hpcgym.env import SchedulingEnv

    kwargs = {"window": 16, "slots": 8, "split": "all", **kwargs}
    return SchedulingEnv(TOY, make_jobs(TOY_ROWS), **kwargs)


#: Canonical status -> the Slurm state :func:`write_sacct` writes.
SLURM_STATE = {"completed": "COMPLETED", "failed": "FAILED", "cancelled": "CANCELLED by 0", "timeout": "TIMEOUT",
               "killed": "TIMEOUT", "partial": "PREEMPTED", "partial_completed": "PREEMPTED",
               "partial_failed": "PREEMPTED", "unknown": "COMPLETED"}


def _slurm_duration(seconds: np.ndarray) -> pd.Series:
    """Seconds -> ``[days-]HH:MM:SS`` as sacct prints durations."""
    s = pd.Series(np.asarray(seconds, np.int64))
    days, rest = s // 86400, s % 86400
    clock = ((rest // 3600).map("{:02d}".format) + ":" + (rest // 60 % 60).map("{:02d}".format) + ":"
             + (rest % 60).map("{:02d}".format))
    return (days.astype(str) + "-").where(days > 0, "") + clock


def write_sacct(df: pd.DataFrame, path: str | Path, start: str = "2024-01-01T00:00:00") -> None:
    """Write a job table as the ``sacct -X --parsable2`` output of a cluster that ran it.

    Fields: ``JobIDRaw|User|Group|Partition|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|State``. Submit times
    count from ``start`` (UTC); a job starts at ``submit + wait`` (``wait`` where the table has it and it is known,
    else 0). An unknown walltime is written ``UNLIMITED``, a missing ``procs`` as the nodes; users, groups and
    queues are named ``u<id>``, ``g<id>`` and ``q<id>`` (empty for -1). Statuses map by :data:`SLURM_STATE`.
    """
    n = len(df)
    origin = pd.Timestamp(start)
    wait = df["wait"].to_numpy() if "wait" in df.columns else np.zeros(n, np.int64)
    submit = df["submit"].to_numpy()
    begin = submit + np.maximum(wait, 0)
    stamp = lambda secs: (origin + pd.to_timedelta(secs, unit="s")).strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731

    def names(col: str, prefix: str) -> pd.Series:
        ids = pd.Series(df[col].to_numpy())
        return (prefix + ids.astype(str)).where(ids >= 0, "")

    known = df["walltime_known"].to_numpy()
    table = pd.DataFrame({
        "JobIDRaw": df["job_id"].to_numpy(), "User": names("user", "u"), "Group": names("group", "g"),
        "Partition": names("queue", "q"), "Submit": stamp(submit), "Start": stamp(begin),
        "End": stamp(begin + df["run"].to_numpy()), "Elapsed": _slurm_duration(df["run"].to_numpy()),
        "Timelimit": _slurm_duration(df["walltime"].to_numpy()).where(known, "UNLIMITED"),
        "NNodes": df["nodes"].to_numpy(), "NCPUS": np.where(df["procs"] > 0, df["procs"], df["nodes"]),
        "State": df["status"].astype(str).map(SLURM_STATE).to_numpy(),
    })
    table.to_csv(path, sep="|", index=False, lineterminator="\n")
