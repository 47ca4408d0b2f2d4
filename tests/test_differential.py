"""The compiled engine against the SimPy oracle: identical start times for every job, policy and backfill mode."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from simcheck import BACKFILLS, POLICY_NAMES, workloads

from baselines import priorities
from hpcgym import machines, traces
from hpcgym.sim import start_times
from hpcgym.sim.reference import simulate_reference

MODES = [(b, kill) for b in BACKFILLS for kill in (True, False) if not (b == "conservative" and not kill)]


def assert_same(df, nodes, policy, backfill, kill):
    engine = start_times(df, nodes, priorities.get(policy), backfill, kill)
    oracle = simulate_reference(df, nodes, policy, backfill, kill)
    if not np.array_equal(engine, oracle):
        bad = int(np.flatnonzero(engine != oracle)[0])
        pytest.fail(f"{policy}/{backfill}/kill={kill}: job row {bad} starts at {engine[bad]} in the engine and "
                    f"{oracle[bad]} in the oracle ({int((engine != oracle).sum())} of {len(df)} differ)")


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(df=workloads(max_jobs=30, machine_nodes=8))
def test_engine_matches_oracle_on_random_workloads(df):
    for policy in POLICY_NAMES:
        for backfill, kill in MODES:
            assert_same(df, 8, policy, backfill, kill)


# (trace, windows, jobs per window): HPC2N's deep queues make the oracle slow, so it gets one smaller window.
REAL = [("sdsc-sp2", 2, 300), ("lublin-256", 2, 300), ("hpc2n", 1, 200), ("theta", 2, 300), ("mustang", 2, 300)]


@pytest.mark.slow
@pytest.mark.parametrize("trace, count, length", REAL)
def test_engine_matches_oracle_on_real_windows(trace, count, length):
    warnings.simplefilter("ignore")
    jobs = traces.load(trace)
    nodes = machines.get(jobs.attrs["machine"]).nodes
    rng = np.random.default_rng(7)
    for start in rng.integers(0, len(jobs) - length, size=count):
        window = traces.window(jobs, length, start=int(start))
        for policy in POLICY_NAMES:
            for backfill, kill in MODES:
                assert_same(window, nodes, policy, backfill, kill)
