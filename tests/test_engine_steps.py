"""Step mode (agents) against batch mode: a heuristic choosing its own head reproduces the batch schedule."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from simcheck import POLICY_NAMES, heuristic_through_steps, workloads

from baselines import priorities
from hpcgym import traces
from hpcgym.sim import Simulator, start_times

STEP_MODES = [(b, kill) for b in ("none", "easy", "rlscheduler") for kill in (True, False)]


@settings(max_examples=150, deadline=None)
@given(df=workloads(max_jobs=30))
def test_heuristic_through_steps_equals_batch_random(df):
    for name in POLICY_NAMES:
        policy = priorities.get(name)
        for backfill, kill in STEP_MODES:
            sim = heuristic_through_steps(df, 8, policy, backfill, kill)
            assert sim.done
            batch = start_times(df, 8, policy, backfill, kill)
            assert np.array_equal(sim.start, batch), (name, backfill, kill, df[["submit", "run", "walltime", "nodes"]])


@pytest.mark.parametrize("trace", ["sdsc-sp2", "lublin-256"])
def test_heuristic_through_steps_equals_batch_real(trace):
    warnings.simplefilter("ignore")
    df = traces.window(traces.load(trace), 512, rng=11)
    nodes = 128 if trace == "sdsc-sp2" else 256
    for name in POLICY_NAMES:
        policy = priorities.get(name)
        for backfill in ("none", "easy", "rlscheduler"):
            sim = heuristic_through_steps(df, nodes, policy, backfill)
            np.testing.assert_array_equal(sim.start, start_times(df, nodes, policy, backfill))
            assert len(sim.records()) == len(df)


def test_decisions_skip_trivial_cases_and_errors_are_clear():
    df = traces.window(traces.load("lublin-256"), 128, rng=0)
    sim = Simulator(256, "easy")
    pending = sim.reset(df)
    while pending:
        q = sim.queue
        assert len(q) >= 2 and (sim.job_nodes[q] <= sim.free).any()  # a real choice
        with pytest.raises(ValueError, match="not waiting"):
            sim.choose(int(np.setdiff1d(np.arange(len(df)), q)[0]))
        pending = sim.choose(int(q[-1]))
    assert sim.done and (sim.start >= 0).all()
    with pytest.raises(ValueError, match="no decision is pending"):
        sim.choose(0)
    with pytest.raises(ValueError, match="conservative"):
        Simulator(256, "conservative")
