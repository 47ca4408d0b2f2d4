"""The step mode's action modes (hpcgym.sim.actions): guarded backfill choices and bounded holds keep schedules valid.

Each property is checked against something computed here from the job table and the simulator's public view (the
running jobs, their estimated ends), not against the engine's own helpers.
"""

import warnings

import numpy as np
import pytest

from hpcgym import traces
from hpcgym.env import SchedulingEnv, heuristic_action
from hpcgym.sim import heuristics, start_times
from hpcgym.sim.state import LAST_HEAD
from hpcgym.testing import TOY, make_jobs, toy_env

warnings.filterwarnings("ignore", category=UserWarning)


def shadow_and_extra(sim, head):
    """EASY's shadow time and extra nodes for ``head``, from the running jobs' estimated ends (by hand)."""
    need = int(sim.job_nodes[head])
    ends = sorted(zip(sim.estimated_ends().tolist(), sim.job_nodes[sim.running].tolist(), strict=True))
    avail, when = sim.free, sim.now
    for end, nodes in ends:
        if avail >= need:
            break
        avail += nodes
        when = max(end, sim.now)
    return when, sim.free + sum(n for e, n in ends if e <= when) - need  # all that end by then free their nodes


def random_episode(env, rng, start=0):
    """Play one pinned window with uniformly random allowed actions; yield each action before it is taken."""
    _, info = env.reset(options={"window_start": start})
    done = info["done"]
    while not done:
        action = int(rng.choice(np.flatnonzero(env.action_masks())))
        yield action
        _, _, done, _, info = env.step(action)


def sdsc_env(window=256, **kw):
    test = traces.split(traces.load("sdsc-sp2"), "test")
    return SchedulingEnv("sdsc-sp2", test, window=window, split="all", backfill="easy", **kw)


@pytest.mark.parametrize("order", ["fcfs", "saf"])
def test_a_guarded_choice_never_moves_the_reservation(order):
    env = sdsc_env(1024, order=order, action="guarded", slots=64)
    rng, checked = np.random.default_rng(0), 0
    for start in (0, 3000, 6000, 9000):
        for action in random_episode(env, rng, start):
            sim = env.unwrapped.sim
            head = int(sim.state.sc[LAST_HEAD])  # the job the pass reserved for
            assert sim.start[head] < 0 and sim.job_nodes[head] > sim.free
            when, extra = shadow_and_extra(sim, head)
            job = int(sim.queue[action])
            nodes, estimate = int(sim.job_nodes[job]), int(sim.wall[job])
            assert nodes <= sim.free and job != head
            assert sim.now + estimate <= when or nodes <= extra  # EASY's rule (a) or (b), by hand
            checked += 1
    assert checked > 30


def test_guarded_fcfs_never_starts_a_job_after_its_first_reservation():
    # FCFS's head changes only when it starts: EASY's promise is that it starts by its first shadow time.
    env = sdsc_env(order="fcfs", action="guarded", slots=64)
    rng = np.random.default_rng(1)
    for _ in random_episode(env, rng, 1000):
        pass
    sim = env.unwrapped.sim
    first = sim.state.first
    reserved = first >= 0
    assert reserved.sum() > 20 and (sim.start[reserved] <= first[reserved]).all()


@pytest.mark.parametrize("policy", ["fcfs", "saf", "sjf"])
def test_guarded_mode_with_the_policys_own_choices_is_its_easy_schedule(policy):
    jobs = traces.window(traces.split(traces.load("sdsc-sp2"), "test"), 400, start=2000)
    env = SchedulingEnv("sdsc-sp2", jobs, window=400, split="all", backfill="easy", order=policy, action="guarded",
                        slots=1000)
    _, info = env.reset(options={"window_start": 0})
    done, decisions = info["done"], 0
    while not done:
        _, _, done, _, info = env.step(heuristic_action(env, heuristics.get(policy)))
        decisions += 1
    batch = start_times(jobs, 128, policy, "easy")
    assert decisions > 10
    np.testing.assert_array_equal(info["records"]["start"], batch)


def test_guarded_mode_needs_easy_and_masks_are_not_a_prefix():
    with pytest.raises(ValueError, match="needs backfill='easy'"):
        toy_env(backfill="none", action="guarded")
    env = sdsc_env(order="saf", action="guarded", slots=64)
    env.reset(options={"window_start": 0})
    rng = np.random.default_rng(2)
    gaps = 0
    for _ in range(200):
        mask = env.action_masks()
        waiting = min(len(env.unwrapped.sim.queue), 64)
        gaps += int(not mask[:waiting].all())
        forbidden = np.flatnonzero(~mask[:waiting])
        if len(forbidden):
            with pytest.raises(ValueError, match="not allowed now"):
                env.unwrapped.invalid_action = "raise"
                env.step(int(forbidden[0]))
        _, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if done:
            break
    assert gaps > 0  # some waiting jobs were not offered: they would have delayed the reservation


# ---- hold ----------------------------------------------------------------------------------------------------------
def hold_env(rows, limit, **kw):
    return SchedulingEnv(TOY, make_jobs(rows), window=len(rows), slots=8, split="all", action="hold",
                         hold_limit=limit, **kw)


def test_held_jobs_start_when_their_hold_budget_runs_out():
    # Two 2-node jobs wait on an empty 4-node machine; the agent holds whenever it may. A third job arrives at 1000.
    env = hold_env([(0, 50, 60, 2), (0, 50, 60, 2), (1000, 10, 10, 1)], limit=300)
    _, info = env.reset(options={"window_start": 0})
    assert env.action_space.n == 9 and env.action_masks()[8]  # slot 8 is the hold
    holds = 0
    while not info["done"]:
        mask = env.action_masks()
        if mask[8]:
            holds += 1
        _, _, _, _, info = env.step(8 if mask[8] else int(np.flatnonzero(mask)[0]))
    start = info["records"]["start"]
    assert holds == 1 and start.tolist() == [300, 300, 1000]  # held 300 s, then due: both start, no second hold


def replay_charges(log, jobs, limit):
    """Each job's hold charge, from a log of holds (time, free nodes, waiting jobs) and the jobs' own times."""
    charge = np.zeros(len(jobs), np.int64)
    for t0, free, waiting, running_ends, t_next_arrival in log:
        fitting = [j for j in waiting if jobs["nodes"].iat[j] <= free]
        wake = t0 + min(limit - charge[j] for j in fitting)
        t1 = min([wake, t_next_arrival, *[e for e in running_ends if e > t0]])
        for j in fitting:
            charge[j] += t1 - t0
    return charge


def test_hold_charges_match_a_replay_and_never_exceed_the_limit():
    jobs = traces.window(traces.split(traces.load("sdsc-sp2"), "test"), 300, start=500)
    limit = 900
    env = SchedulingEnv("sdsc-sp2", jobs, window=300, split="all", backfill="easy", order="saf", action="hold",
                        hold_limit=limit, slots=64)
    rng = np.random.default_rng(3)
    _, info = env.reset(options={"window_start": 0})
    sim, log, forced = env.unwrapped.sim, [], 0
    submit = jobs["submit"].to_numpy() - jobs["submit"].iat[0]
    while not info["done"]:
        mask = env.action_masks()
        if mask[64] and rng.random() < 0.5:
            ends = (sim.start[sim.running] + sim.hold[sim.running]).tolist()
            later = submit[submit > sim.now]
            log.append((sim.now, sim.free, sim.queue.copy().tolist(), ends, later[0] if len(later) else 1 << 62))
            action = 64
        else:
            forced += int(not mask[64])
            action = int(rng.choice(np.flatnonzero(mask[:64])))
        _, _, _, _, info = env.step(action)
    held = sim.state.held
    assert len(log) > 20 and forced > 0 and held.max() <= limit
    np.testing.assert_array_equal(held, replay_charges(log, jobs, limit))
    assert (held == limit).any()  # some jobs used their whole budget, and still started
    assert (info["records"]["start"] >= 0).all()


def test_hold_needs_a_limit_and_a_due_job_cannot_be_held():
    with pytest.raises(ValueError, match="positive hold_limit"):
        toy_env(action="hold", hold_limit=0)
    env = hold_env([(0, 50, 60, 2), (0, 50, 60, 2), (1000, 10, 10, 1)], limit=300)
    env.reset(options={"window_start": 0})
    env.step(8)  # the hold; at 300 both jobs are due
    assert not env.action_masks()[8]
    with pytest.raises(ValueError, match="hold"):
        env.unwrapped.sim.defer()
