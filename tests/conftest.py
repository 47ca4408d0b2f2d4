"""Shared fixtures: a toy machine and a toy trace small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpcgym import jobs
from hpcgym.machines import Machine

TOY = Machine("toy", nodes=4, cores_per_node=2, source="tests")


def make_jobs(rows: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    """A canonical job table from (submit, run, walltime, nodes) tuples; job ids count from 1."""
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    n = len(arr)
    df = pd.DataFrame({
        "job_id": np.arange(1, n + 1), "submit": arr[:, 0], "run": arr[:, 1], "walltime": arr[:, 2],
        "nodes": arr[:, 3], "procs": arr[:, 3] * TOY.cores_per_node, "user": np.zeros(n, np.int64),
        "group": np.zeros(n, np.int64), "queue": np.full(n, -1), "status": ["completed"] * n,
        "walltime_known": np.ones(n, bool),
    })
    out = jobs.finalize(df)
    out.attrs.update(name="toy", machine=TOY)
    return out


@pytest.fixture
def toy_machine() -> Machine:
    return TOY


@pytest.fixture
def toy_jobs() -> pd.DataFrame:
    """16 jobs on the 4-node toy machine, with a blocking wide job and short backfill candidates."""
    return make_jobs([
        (0, 100, 120, 2), (0, 50, 60, 2), (10, 30, 40, 4), (12, 10, 20, 1), (15, 200, 200, 1),
        (20, 5, 10, 1), (25, 80, 90, 3), (30, 60, 100, 2), (31, 20, 20, 1), (40, 15, 30, 4),
        (45, 100, 150, 1), (50, 10, 10, 2), (60, 70, 70, 1), (61, 40, 50, 3), (62, 5, 5, 1), (70, 30, 60, 2),
    ])
