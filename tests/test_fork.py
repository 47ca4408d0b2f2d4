"""Forking the simulator (hpcgym.sim.fork): the four equalities, checked against the heuristic's own batch run.

The oracle is :func:`hpcgym.sim.start_times` (the batch path from the start, which the differential tests hold
against the SimPy reference): a fork must give *the same start times*, not merely a close objective.

1. ``V(s_0)``: a fork at the first decision, finished by the heuristic, is the heuristic's batch schedule.
2. ``V`` is constant along the heuristic's own trajectory: a fork at every decision (step mode) or after every event
   (batch mode, conservative included) finishes as that schedule.
3. ``Q(s_t, a_t) = V(s_{t+1})``: a choice played on a fork, then finished, equals the real next state's finish.
4. The credits ``V(s_t) - V(s_{t+1})`` sum to ``V(s_0)`` minus the agent's result: the fork of a finished episode is the
   agent's schedule, so the telescoping sum ends at the agent's value.

Step mode runs EASY, no backfilling and rlscheduler; batch mode EASY and conservative (which has no step mode, so
1 and 2 only). Each of the fork's three hand-overs (the keys, the queue's re-sort, the cleared ``BLOCKED`` flag) and
the copy of the estimates was removed in turn while writing these tests: 20 to 36 of them failed each time.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from baselines import tuned
from hpcgym import rewards, traces
from hpcgym.machines import Machine
from hpcgym.sim import Simulator, fork, heuristics, predict, start_times
from hpcgym.sim.backfill import BACKFILL_MODES
from hpcgym.sim.policy import priority
from hpcgym.sim.simulator import engine_jobs
from hpcgym.sim.state import fresh
from hpcgym.sim.table import hold_times
from hpcgym.testing import make_jobs

PREDICTORS = ("walltime", "last2", "median5", "learned:lublin-256")
RANDOM = Machine("random16", nodes=16, cores_per_node=1, source="tests")


def random_window(seed: int, n: int = 60):
    """A busy random window on 16 nodes: bursts of arrivals, run times below and above the walltimes, 5 users."""
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.integers(0, 4000, n))
    wall = rng.choice([60, 300, 600, 1800, 3600], n)
    run = np.maximum(1, (wall * rng.uniform(0.05, 1.2, n)).astype(int))
    nodes = rng.choice([1, 1, 2, 4, 8, 16], n)
    jobs = make_jobs([(int(s), int(r), int(w), int(k)) for s, r, w, k in zip(submit, run, wall, nodes, strict=True)],
                     RANDOM)
    jobs["user"] = rng.integers(0, 5, n)
    return jobs


def real_window(seed: int):
    return traces.window(traces.load("lublin-256"), 128, rng=seed)


def policies(pred: str):
    """FCFS, SJF, WFP3 (a dynamic order) and a tuned key (custom, with log r), on predictor ``pred``."""
    key = tuned.policy((0.7, 0.3, 0.2, 0.01), pred)
    return [dataclasses.replace(p, predictor=pred) for p in (heuristics.FCFS, heuristics.SJF, heuristics.WFP3)] + [key]


def batch(jobs, nodes, pol, backfill):
    return start_times(jobs, nodes, pol, backfill, predictor=predict.get(pol.predictor))


def finish_starts(sim, pol):
    jobs, st = sim.arrays
    return fork.finish(jobs, st, pol.code, BACKFILL_MODES[sim.backfill], fork.custom_keys(pol, pol.keys(sim.jobs),
                       len(sim.start)), -1 if pol.scan is None else pol.scan)


def heuristic_choice(sim, pol) -> int:
    """The heuristic's head at the pending decision: its lowest score (ties: the lower index).

    The engine's keys of a static order are its scores already (set from the estimate at each arrival).
    """
    q = sim.queue.copy()
    if not pol.dynamic:
        return int(q[int(np.argmin(sim.key[q]))])
    scores = [priority(pol.code, sim.now, sim.submit[j], sim.wall[j], sim.job_nodes[j], 0.0) for j in q]
    return int(q[int(np.argmin(scores))])


CASES = [(kind, seed, backfill, pred) for kind, seed in (("random", 1), ("random", 2), ("real", 3))
         for backfill in ("easy", "none", "rlscheduler") for pred in PREDICTORS]


@pytest.mark.parametrize(("kind", "seed", "backfill", "pred"), CASES)
def test_value_is_the_heuristic_along_its_own_trajectory(kind, seed, backfill, pred):
    """1 and 2: every decision's fork, finished by the heuristic, gives the heuristic's batch schedule."""
    jobs = random_window(seed) if kind == "random" else real_window(seed)
    nodes = 16 if kind == "random" else 256
    for pol in policies(pred):
        expected = batch(jobs, nodes, pol, backfill)
        sim = Simulator(nodes, backfill, order=pol, predictor=predict.get(pol.predictor))
        pending, decisions = sim.reset(jobs), 0
        while pending:
            np.testing.assert_array_equal(finish_starts(sim, pol), expected, err_msg=f"{pol.name} at {decisions}")
            pending = sim.choose(heuristic_choice(sim, pol))
            decisions += 1
        assert decisions > 3, "the window needs decisions"
        np.testing.assert_array_equal(sim.start, expected)


@pytest.mark.parametrize(("kind", "seed", "backfill", "pred"), CASES)
def test_a_choice_played_on_a_fork_is_the_real_next_state(kind, seed, backfill, pred):
    """3 and 4: Q(s_t, a_t) = V(s_{t+1}) for a random agent, and the last fork is the agent's own schedule."""
    jobs = random_window(seed) if kind == "random" else real_window(seed)
    nodes = 16 if kind == "random" else 256
    rng = np.random.default_rng(seed)
    pol = policies(pred)[3]
    order = dataclasses.replace(heuristics.SJF, predictor=pol.predictor)  # an agent env's scan order, not the key's
    sim = Simulator(nodes, backfill, order=order, predictor=predict.get(pol.predictor))
    pending = sim.reset(jobs)
    mode, custom = BACKFILL_MODES[backfill], pol.keys(jobs)
    values = [fork.value_of(sim, pol, custom)]
    while pending:
        choice = int(rng.choice(sim.queue))
        jobs_now, st_now = sim.arrays
        j2, s2 = fork.play(jobs_now, st_now, order.code, mode, choice)
        q_starts = fork.finish(j2, s2, pol.code, mode, custom, -1)
        pending = sim.choose(choice)
        np.testing.assert_array_equal(q_starts, finish_starts(sim, pol))
        values.append(fork.value_of(sim, pol, custom))
    assert len(values) > 4, "the window needs decisions"
    hold = hold_times(jobs)
    submit, job_nodes = jobs["submit"].to_numpy(np.int64), jobs["nodes"].to_numpy(np.int64)
    np.testing.assert_array_equal(finish_starts(sim, pol), sim.start)  # a finished episode forks to itself
    agent = rewards.objective("bsld", submit, sim.start, hold, job_nodes, nodes)
    base = rewards.objective("bsld", submit, batch(jobs, nodes, pol, backfill), hold, job_nodes, nodes)
    credits = -np.diff(values)
    assert values[0] == pytest.approx(base, rel=1e-12) and values[-1] == pytest.approx(agent, rel=1e-12)
    assert credits.sum() == pytest.approx(base - agent, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("backfill", ["conservative", "easy"])
@pytest.mark.parametrize("pred", PREDICTORS)
def test_a_batch_run_forked_after_any_event_finishes_as_itself(backfill, pred):
    """2 in batch mode (conservative has no step mode): run to each event time, fork, finish; same schedule."""
    jobs = random_window(7, 50)
    hold, submit = hold_times(jobs), jobs["submit"].to_numpy(np.int64)
    for pol in policies(pred)[2:]:  # WFP3 (dynamic) and the tuned key
        expected = batch(jobs, 16, pol, backfill)
        p = predict.get(pol.predictor)
        ej, users = engine_jobs(submit, hold, jobs["walltime"].to_numpy(np.int64), jobs["nodes"].to_numpy(np.int64),
                                pol.keys(jobs), jobs["user"].to_numpy(np.int64), pol.code, p)
        mode = BACKFILL_MODES[backfill]
        st = fresh(len(jobs), 16, pol.dynamic, backfill == "conservative", p.code, p.k, users, -1)
        jt, stt = tuple(ej), tuple(st)
        times = np.unique(np.concatenate([submit, expected + hold]))
        for t in np.concatenate([[-1], times]):
            np.testing.assert_array_equal(fork.finish(jt, stt, pol.code, mode, pol.keys(jobs), -1), expected,
                                          err_msg=f"{pol.name} forked at t={t}")
            if not fork.run_until(jt, stt, pol.code, mode, int(t)):
                break
        np.testing.assert_array_equal(stt[1], expected)


def test_fork_leaves_the_original_untouched():
    jobs = real_window(5)
    pol = policies("last2")[3]
    sim = Simulator(256, "easy", order=pol, predictor=predict.get("last2"))
    sim.reset(jobs)
    before = [a.copy() for a in (*sim.arrays[0], *sim.arrays[1])]
    fork.value_of(sim, dataclasses.replace(heuristics.SJF, predictor="last2"))
    fork.value_of(sim, pol, pol.keys(jobs))
    for a, b in zip(before, (*sim.arrays[0], *sim.arrays[1]), strict=True):
        np.testing.assert_array_equal(a, b)


def test_objective_matches_the_rewards_module():
    jobs = random_window(4)
    start = batch(jobs, 16, heuristics.FCFS, "easy")
    hold, submit, nodes = hold_times(jobs), jobs["submit"].to_numpy(np.int64), jobs["nodes"].to_numpy(np.int64)
    for name, code in fork.OBJECTIVE_CODES.items():
        assert fork.objective(code, submit, start, hold, nodes, 16) == pytest.approx(
            rewards.objective(name, submit, start, hold, nodes, 16), rel=1e-12)
