"""Parts of a job table (head, tail, halves) and workloads built on others (MixedWorkload, PooledSampler)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcgym import traces
from hpcgym.traces.split import halves, head, tail
from hpcgym.workload import MixedWorkload


def _table(n: int) -> pd.DataFrame:
    out = pd.DataFrame({"job_id": range(1, n + 1), "submit": [10 * i for i in range(n)]})
    out.attrs = {"name": "t", "invalid": {"run <= 0": 7, "nodes > machine": 2}}
    return out


def test_head_and_tail_keep_jobs_and_a_share_of_the_drop_counts():
    table = _table(10)
    first, last = head(table, 4), tail(table, 3)
    assert list(first["job_id"]) == [1, 2, 3, 4] and list(last["job_id"]) == [8, 9, 10]
    assert list(last["submit"]) == [70, 80, 90]  # submit times unchanged
    assert first.attrs["invalid"] == {"run <= 0": 3, "nodes > machine": 1}  # 7 * 0.4 = 2.8, 2 * 0.4 = 0.8
    assert last.attrs["invalid"] == {"run <= 0": 2, "nodes > machine": 1}  # 7 * 0.3 = 2.1, 2 * 0.3 = 0.6
    assert head(table, 10) is table and tail(table, 0) is table and tail(table, 50) is table
    assert table.attrs["invalid"] == {"run <= 0": 7, "nodes > machine": 2}  # the original is untouched


def test_halves_give_the_extra_job_to_the_first():
    a, b = halves(_table(5))
    assert list(a["job_id"]) == [1, 2, 3] and list(b["job_id"]) == [4, 5] and a.attrs["name"] == "t"


class _Sampler:
    def __init__(self):
        self.seeds = []

    def sample(self, n_jobs, seed):
        self.seeds.append(seed)
        return _table(n_jobs)


def test_mixed_workload_alternates_real_windows_and_samples():
    real = traces.load("lublin-256")
    model = _Sampler()
    mixed = MixedWorkload(real, model)
    draws = [mixed.sample(64, seed=s) for s in (5, 6, 7, 8)]
    assert model.seeds == [6, 8]  # the second and the fourth call
    pd.testing.assert_frame_equal(draws[0], traces.window(real, 64, rng=5))
    pd.testing.assert_frame_equal(draws[2], traces.window(real, 64, rng=7))


def test_a_mixed_real_window_is_at_most_the_whole_real_table():
    real = traces.load("lublin-256").head(277)  # a Mustang week's training part is 277 jobs
    first = MixedWorkload(real, _Sampler()).sample(1024, seed=0)  # the jobs an environment's time scale comes from
    assert len(first) == 277  # the whole table, its times counted from its first submit
    np.testing.assert_array_equal(first["submit"], real["submit"] - real["submit"].iloc[0])
    np.testing.assert_array_equal(first["run"], real["run"])
