"""Fixtures for tests and examples: a tiny environment (4 nodes, 16 jobs) and writers of Slurm and PBS logs.

Like Stable-Baselines3's ``IdentityEnv``, the toy environment lets a test drive the whole environment (masks,
backfilling, rewards, agents) in milliseconds. The 16 jobs include a blocking wide job and short backfill candidates.
:func:`write_sacct` and :func:`write_pbs` turn any job table into the ``sacct --parsable2`` output or the PBS
accounting log a cluster that ran it would give, to exercise those readers at scale (``benchmarks/read_speed.py``) and
the CLIs on such logs.

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


def _clock(seconds: np.ndarray, days: bool = True) -> pd.Series:
    """Seconds -> ``[days-]HH:MM:SS`` as sacct prints them (``days=False``: ``HH:MM:SS``, hours past 24, as PBS)."""
    s = pd.Series(np.asarray(seconds, np.int64))
    whole, rest = (s // 86400, s % 86400) if days else (s * 0, s)
    clock = ((rest // 3600).map("{:02d}".format) + ":" + (rest // 60 % 60).map("{:02d}".format) + ":"
             + (rest % 60).map("{:02d}".format))
    return (whole.astype(str) + "-").where(whole > 0, "") + clock


def _times(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Submit and start times: a job starts ``wait`` seconds after its submit (0 where unknown)."""
    wait = df["wait"].to_numpy() if "wait" in df.columns else np.zeros(len(df), np.int64)
    return df["submit"].to_numpy(), df["submit"].to_numpy() + np.maximum(wait, 0)


def write_sacct(df: pd.DataFrame, path: str | Path, start: str = "2024-01-01T00:00:00") -> None:
    """Write a job table as the ``sacct -X --parsable2`` output of a cluster that ran it.

    Fields: ``JobIDRaw|User|Group|Partition|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|State``. Submit times
    count from ``start`` (UTC); a job starts at ``submit + wait`` (``wait`` where the table has it and it is known,
    else 0). An unknown walltime is written ``UNLIMITED``, a missing ``procs`` as the nodes; users, groups and
    queues are named ``u<id>``, ``g<id>`` and ``q<id>`` (empty for -1). Statuses map by :data:`SLURM_STATE`.
    """
    origin = pd.Timestamp(start)
    submit, begin = _times(df)
    stamp = lambda secs: (origin + pd.to_timedelta(secs, unit="s")).strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731

    def names(col: str, prefix: str) -> pd.Series:
        ids = pd.Series(df[col].to_numpy())
        return (prefix + ids.astype(str)).where(ids >= 0, "")

    known = df["walltime_known"].to_numpy()
    table = pd.DataFrame({
        "JobIDRaw": df["job_id"].to_numpy(), "User": names("user", "u"), "Group": names("group", "g"),
        "Partition": names("queue", "q"), "Submit": stamp(submit), "Start": stamp(begin),
        "End": stamp(begin + df["run"].to_numpy()), "Elapsed": _clock(df["run"].to_numpy()),
        "Timelimit": _clock(df["walltime"].to_numpy()).where(known, "UNLIMITED"),
        "NNodes": df["nodes"].to_numpy(), "NCPUS": np.where(df["procs"] > 0, df["procs"], df["nodes"]),
        "State": df["status"].astype(str).map(SLURM_STATE).to_numpy(),
    })
    table.to_csv(path, sep="|", index=False, lineterminator="\n")


def write_pbs(df: pd.DataFrame, path: str | Path, start: int = 1704067200) -> None:
    """Write a job table as one PBS Pro accounting file: a ``Q`` and an ``E`` record per job, in time order.

    Times count from the Unix time ``start`` (default 2024-01-01 UTC); a job starts ``wait`` seconds after its submit
    (0 where unknown). An unknown walltime is left out; ``Exit_status`` is 0 for completed jobs, else 1. Users,
    groups and queues are named as by :func:`write_sacct`.
    """
    submit, begin = _times(df)
    submit, begin = submit + start, begin + start
    end = begin + df["run"].to_numpy()
    ids = df["job_id"].astype(str) + ".pbs01"

    def named(key: str, col: str, prefix: str) -> pd.Series:
        values = pd.Series(df[col].to_numpy())
        return (f" {key}={prefix}" + values.astype(str)).where(values >= 0, "")

    def stamp(secs: np.ndarray) -> pd.Series:
        return pd.Series(pd.to_datetime(secs, unit="s").strftime("%m/%d/%Y %H:%M:%S"))

    walltime = (" Resource_List.walltime=" + _clock(df["walltime"].to_numpy(), days=False)).where(
        df["walltime_known"].to_numpy(), "")
    procs = np.where(df["procs"] > 0, df["procs"], df["nodes"])
    ended = (stamp(end) + ";E;" + ids + ";" + named("user", "user", "u") + named("group", "group", "g")
             + named("queue", "queue", "q") + " ctime=" + pd.Series(submit).astype(str) + " start="
             + pd.Series(begin).astype(str) + " Resource_List.ncpus=" + pd.Series(procs).astype(str)
             + " Resource_List.nodect=" + df["nodes"].astype(str).to_numpy() + walltime + " end="
             + pd.Series(end).astype(str) + " Exit_status=" + np.where(df["status"] == "completed", "0", "1")
             + " resources_used.walltime=" + _clock(df["run"].to_numpy(), days=False))
    queued = stamp(submit) + ";Q;" + ids + ";queue=workq"
    records = pd.DataFrame({"t": np.concatenate([submit, end]), "line": np.concatenate([queued, ended])})
    records = records.sort_values("t", kind="stable")
    Path(path).write_text("\n".join(records["line"]) + "\n")
