"""The final reward for every ``reward`` x ``objective`` x ``baseline`` combination, against hand-worked numbers.

The window is the four-job one of ``test_observation_columns.py`` (a, b, c, d on the 4-node toy machine, submits 0,
5, 10 and 30 after rebasing). Two schedules are worked out by hand:

- the agent picks c at both decisions (slot 0): starts a 0, b 5, c 105, d 300; held 300, 100, 200 and 40 s (d is
  killed at its walltime). Waits 0, 0, 95, 270; bounded slowdowns 1, 1, 295/200, 310/40; turnarounds 300, 100, 295,
  310; node-seconds 600 + 100 + 400 + 40 = 1140 over 4 nodes x 340 s.
- SAF without backfilling (the baseline): at 30 it starts d (area 40 before c's 800), so d waits 0 and ends at 70;
  c still starts at 105. Waits 0, 0, 95, 0; slowdowns 1, 1, 295/200, 1; turnarounds 300, 100, 295, 40; the last
  end is c's, 305.
"""

from __future__ import annotations

import warnings
from math import log

import numpy as np
import pandas as pd
import pytest

import hpcgym
from hpcgym import rewards
from hpcgym.env import SchedulingEnv
from hpcgym.sim import simulate
from hpcgym.testing import TOY, make_jobs

ROWS = [(0, 60, 60, 4), (50, 60, 60, 4), (7200, 300, 600, 2), (7205, 100, 100, 1), (7210, 200, 400, 2),
        (7230, 50, 40, 1), (7300, 10, 10, 1), (7400, 10, 10, 1)]

AGENT = {"bsld": (1 + 1 + 295 / 200 + 310 / 40) / 4, "wait": (95 + 270) / 4, "turnaround": (300 + 100 + 295 + 310) / 4,
         "util": 1140 / (4 * 340)}
SAF = {"bsld": (1 + 1 + 295 / 200 + 1) / 4, "wait": 95 / 4, "turnaround": (300 + 100 + 295 + 40) / 4,
       "util": 1140 / (4 * 305)}
# Each combination's reward, written out from the numbers above.
EXPECTED = {
    ("objective", "bsld", None): -2.80625,
    ("objective", "bsld", "saf"): (1.11875 - 2.80625) / 1.11875,
    ("log", "bsld", None): -log(2.80625),
    ("log", "bsld", "saf"): log(1.11875) - log(2.80625),
    ("objective", "wait", None): -91.25,
    ("objective", "wait", "saf"): (23.75 - 91.25) / 23.75,
    ("log", "wait", None): -log(91.25),
    ("log", "wait", "saf"): log(23.75) - log(91.25),
    ("objective", "turnaround", None): -251.25,
    ("objective", "turnaround", "saf"): (183.75 - 251.25) / 183.75,
    ("log", "turnaround", None): -log(251.25),
    ("log", "turnaround", "saf"): log(183.75) - log(251.25),
    ("objective", "util", None): 1140 / 1360,
    ("objective", "util", "saf"): (1140 / 1360 - 1140 / 1220) / (1140 / 1220),
    ("log", "util", None): log(1140 / 1360),
    ("log", "util", "saf"): log(1140 / 1360) - log(1140 / 1220),
}


def play(actions, **kw):
    table = make_jobs(ROWS)
    env = SchedulingEnv(TOY, table, window=4, slots=3, split="all", **kw)
    env.reset(seed=0, options={"window_start": 2})
    for a in actions:
        _, reward, done, _, info = env.step(a)
    assert done
    return reward, info


def test_the_hand_worked_schedules():
    _, info = play([0, 0])
    assert list(info["records"]["start"]) == [0, 5, 105, 300]
    _, info = play([1])  # d first: the agent plays SAF's schedule
    assert list(info["records"]["start"]) == [0, 5, 105, 30]


@pytest.mark.parametrize("kind, objective, baseline", list(EXPECTED), ids=["-".join(map(str, k)) for k in EXPECTED])
def test_reward_of_every_combination(kind, objective, baseline):
    reward, info = play([0, 0], reward=kind, objective=objective, baseline=baseline)
    assert reward == pytest.approx(EXPECTED[kind, objective, baseline], rel=1e-12)
    if baseline is None:
        assert "baseline" not in info  # only when set
    else:
        assert info["baseline"] == pytest.approx(SAF[objective], rel=1e-12)
    # the agent's own schedule being SAF's, every relative reward is 0 and every absolute one SAF's value
    same, _ = play([1], reward=kind, objective=objective, baseline=baseline)
    if baseline is not None:
        assert same == pytest.approx(0.0, abs=1e-12)
    else:
        sign = 1 if objective == "util" else -1
        value = SAF[objective]
        assert same == pytest.approx(sign * (log(value) if kind == "log" else value), rel=1e-12)


def test_objective_values_and_compared_heuristics_by_hand():
    _, info = play([0, 0], objective="turnaround", compare_with=("saf", "fcfs"))
    # FCFS without backfilling keeps d behind the blocked c: the agent's schedule
    assert info["compare"] == pytest.approx({"saf": SAF["turnaround"], "fcfs": AGENT["turnaround"]}, rel=1e-12)
    assert info["metrics"]["bsld_mean"] == pytest.approx(AGENT["bsld"], rel=1e-12)
    assert info["metrics"]["wait_mean"] == pytest.approx(AGENT["wait"], rel=1e-12)
    assert info["metrics"]["utilization"] == pytest.approx(AGENT["util"], rel=1e-12)


def test_objective_function_by_hand():
    submit, start = np.array([0, 5, 10, 30]), np.array([0, 5, 105, 300])
    hold, nodes = np.array([300, 100, 200, 40]), np.array([2, 1, 2, 1])
    for name, value in AGENT.items():
        assert rewards.objective(name, submit, start, hold, nodes, 4) == pytest.approx(value, rel=1e-12)
    # tau = 10 s: a 2 s job that waited 8 s has slowdown (8 + 2) / 10 = 1, not 5
    assert rewards.objective("bsld", np.array([0]), np.array([8]), np.array([2]), np.array([1]), 4) == 1.0


def test_floors_keep_logs_and_ratios_finite():
    assert rewards.reward(0.0, None, "wait", "log") == 0.0  # mean wait 0: log of the floor, 1 s
    assert rewards.reward(0.0, 0.0, "wait", "log") == 0.0
    assert rewards.reward(4.0, 0.0, "wait", "log") == pytest.approx(-log(4.0))
    assert rewards.reward(0.5, 0.25, "util", "log") == pytest.approx(log(2.0))
    assert rewards.reward(3.0, 2.0, "bsld", "objective") == pytest.approx(-0.5)
    assert rewards.reward(0.5, 0.25, "util", "objective") == pytest.approx(1.0)


@pytest.mark.parametrize("objective, column", [("bsld", "bsld"), ("wait", "wait")])
def test_baseline_equals_an_independent_heuristic_run(objective, column):
    # The env's baseline and compare values against hpcgym.sim.simulate of the same heuristics on the same window
    warnings.simplefilter("ignore")
    env = hpcgym.make("sdsc-sp2-v0", backfill="easy", window=128, baseline="saf", compare_with=("fcfs", "wfp3"),
                      objective=objective, reward="log")
    env.reset(seed=7)
    rng, done = np.random.default_rng(0), False
    while not done:
        _, reward, done, _, info = env.step(int(rng.integers(env.unwrapped.action_masks().sum())))
    jobs = env.unwrapped.jobs
    independent = {name: simulate(jobs, "sdsc-sp2", name, backfill="easy")[column].mean()
                   for name in ("saf", "fcfs", "wfp3")}
    assert info["baseline"] == pytest.approx(independent["saf"], rel=1e-12)
    assert info["compare"] == pytest.approx({"fcfs": independent["fcfs"], "wfp3": independent["wfp3"]}, rel=1e-12)
    agent = pd.DataFrame(info["records"])[column].mean()
    floor = 1.0
    assert reward == pytest.approx(log(max(independent["saf"], floor)) - log(max(agent, floor)), rel=1e-9)
