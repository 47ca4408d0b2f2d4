"""Invariants and argument checks of the SimPy reference model (hpcgym.sim.reference).

Its hand-worked cases run against every implementation in ``test_engine_cases.py``. Every case runs on the 4-node
toy machine; rows are (submit, run, walltime, nodes) and job ids count from 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_jobs
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcgym.sim.reference import BACKFILLS, POLICIES, simulate_reference

N = 4


def test_empty_table():
    assert simulate_reference(make_jobs([]), N).dtype == np.int64
    assert len(simulate_reference(make_jobs([]), N)) == 0


# --- argument checks -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    ({"policy": "lifo"}, "policy must be one of fcfs, sjf"),
    ({"backfill": "aggressive"}, "backfill must be one of none, easy, conservative, rlscheduler"),
    ({"backfill": "conservative", "kill_at_walltime": False}, "kill_at_walltime"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate_reference(make_jobs([(0, 1, 1, 1)]), N, **kwargs)


def test_job_wider_than_the_machine():
    with pytest.raises(ValueError, match="5 nodes but the machine has 4"):
        simulate_reference(make_jobs([(0, 1, 1, 5)]), N)


# --- invariants on random workloads --------------------------------------------------------------------------

job_rows = st.lists(
    st.tuples(st.integers(0, 60), st.integers(1, 40), st.integers(1, 40), st.integers(1, N)), min_size=1,
    max_size=20,
)


def _peak_use(jobs, start, kill):
    hold = np.minimum(jobs["run"], jobs["walltime"]) if kill else jobs["run"]
    events = sorted([(int(s + h), -n) for s, h, n in zip(start, hold, jobs["nodes"], strict=True)]
                    + [(int(s), n) for s, n in zip(start, jobs["nodes"], strict=True)])  # ends sort first
    use = peak = 0
    for _, delta in events:
        use += delta
        peak = max(peak, use)
    return peak


@settings(max_examples=150, deadline=None)
@given(rows=job_rows, policy=st.sampled_from(POLICIES), backfill=st.sampled_from(BACKFILLS), kill=st.booleans())
def test_invariants(rows, policy, backfill, kill):
    kill = kill or backfill == "conservative"
    jobs = make_jobs(rows)
    start = simulate_reference(jobs, N, policy, backfill, kill)
    assert start.dtype == np.int64
    assert (start >= jobs["submit"].to_numpy()).all()
    assert _peak_use(jobs, start, kill) <= N
    assert (simulate_reference(jobs, N, policy, backfill, kill) == start).all()
    shuffled = jobs.sample(frac=1.0, random_state=0)  # row order does not matter
    assert (simulate_reference(shuffled, N, policy, backfill, kill) == start[shuffled.index]).all()


@settings(max_examples=50, deadline=None)
@given(rows=job_rows, policy=st.sampled_from(POLICIES), backfill=st.sampled_from(["none", "easy", "rlscheduler"]))
def test_kill_is_moot_when_runs_fit_their_walltimes(rows, policy, backfill):
    jobs = make_jobs([(s, min(r, w), w, n) for s, r, w, n in rows])
    assert (simulate_reference(jobs, N, policy, backfill, True)
            == simulate_reference(jobs, N, policy, backfill, False)).all()


@settings(max_examples=50, deadline=None)
@given(rows=job_rows)
def test_fcfs_without_backfill_starts_in_submit_order(rows):
    start = simulate_reference(make_jobs(rows), N, "fcfs", "none")
    assert (np.diff(start) >= 0).all()


@settings(max_examples=50, deadline=None)
@given(rows=job_rows, policy=st.sampled_from(POLICIES))
def test_conservative_with_exact_estimates_starts_at_submits_or_ends(rows, policy):
    # With exact estimates nothing is compressed and every reservation is t or a predicted end, which is an end.
    jobs = make_jobs([(s, w, w, n) for s, _, w, n in rows])
    start = simulate_reference(jobs, N, policy, "conservative")
    ends = set((start + jobs["walltime"].to_numpy()).tolist()) | set(jobs["submit"].tolist())
    assert set(start.tolist()) <= ends
