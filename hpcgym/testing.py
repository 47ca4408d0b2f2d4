"""A tiny fixture environment for tests and examples: 4 nodes, 16 jobs, small enough to check by hand.

Like Stable-Baselines3's ``IdentityEnv``, it lets a test drive the whole environment (masks, backfilling, rewards,
agents) in milliseconds. The 16 jobs include a blocking wide job and short backfill candidates.

>>> env = toy_env(backfill="easy")
>>> obs, info = env.reset(seed=0)
>>> obs.shape, int(env.action_masks().sum()) >= 2
((9, 8), True)
"""

from __future__ import annotations

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
