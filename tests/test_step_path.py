"""The one step path (issue 24): the public scales, the hook, one rule of a valid job table, the renamed modules."""

from __future__ import annotations

import importlib
import sys
from math import log1p

import numpy as np
import pytest

from hpcgym import jobs as jobtable
from hpcgym.env import SchedulingEnv, heuristic_action
from hpcgym.observation import Observer, Scales
from hpcgym.sim import Simulator, heuristics, start_times
from hpcgym.sim.simulator import NoHook
from hpcgym.testing import TOY, make_jobs
from hpcgym.vector import SchedulingVectorEnv


def test_scales_are_the_documented_logs():
    s = Scales.of(1000.0, 4, clock=7)
    assert s == (1000.0, 1 / log1p(10 * 1000), 1 / log1p(1000), 1 / log1p(1000 * 4), 7)
    assert s.at(86400).clock == 86400 and s.at(86400).inv_time == s.inv_time
    with pytest.raises(ValueError, match="positive number of seconds"):
        Scales.of(0.0, 4)


def test_environments_expose_their_scales_and_no_private_copies():
    env = SchedulingEnv("lublin-256", "lublin-256", window=64, time_scale=500.0)
    assert env.scales[:4] == Scales.of(500.0, 256)[:4] and env.time_scale == 500.0
    assert not any(hasattr(env, name) for name in ("_clock0", "_inv_wait", "_inv_time", "_inv_area"))
    envs = SchedulingVectorEnv(2, machine="lublin-256", workload="lublin-256", window=64, time_scale=500.0)
    assert envs.scales[:4] == env.scales[:4] and envs.time_scale == 500.0
    envs.reset(seed=0)
    for e in envs.envs:  # each copy's clock is its own window's
        assert e.scales.clock == e._window.clock0


def test_the_observation_hook_leaves_the_schedule_as_a_bare_simulator_makes_it():
    """An env (the observer as its hook) and a hookless Simulator fed the same choices start every job alike."""
    env = SchedulingEnv("lublin-256", "lublin-256", window=128, backfill="easy", order="sjf", split="all")
    _, info = env.reset(options={"window_start": 300})
    assert isinstance(env.sim.hook, Observer)
    bare = Simulator(256, "easy", order=heuristics.get("sjf"))
    assert isinstance(bare.hook, NoHook)
    pending = bare.reset(env.jobs)
    done, steps = info["done"], 0
    while not done:
        slot = heuristic_action(env, heuristics.get("wfp3"))
        job = int(env.sim.queue[slot])
        assert pending and np.array_equal(bare.queue, env.sim.queue)
        _, _, done, _, info = env.step(slot)
        pending = bare.choose(job)
        steps += 1
    assert steps > 10 and not pending and bare.done
    assert info["decisions"] == bare.decisions == steps
    np.testing.assert_array_equal(bare.start, env.sim.start)


def test_one_rule_for_a_valid_job_table():
    rows = make_jobs([(0, 10, 10, 1), (5, 10, 10, 2), (9, 10, 10, 1)])
    assert jobtable.problems(rows, 4) == []
    bad = rows.assign(run=[10, 0, 10], nodes=[1, 9, 1], submit=[0, 9, 5])
    found = jobtable.problems(bad, 4, "toy")
    assert found == ["1 jobs with a missing or non-positive run", "jobs not sorted by submit time (pass them "
                     "through hpcgym.jobs.finalize)", "1 jobs need more than the 4 nodes of toy (the widest asks "
                     "for 9 nodes but the machine has 4)"]
    assert jobtable.problems(bad, 4, need_sorted=False)[-1].startswith("1 jobs need more than the 4 nodes")
    text = bad.astype({"walltime": object}).assign(walltime=["10", "x", None])  # before finalize: read as numbers
    assert "2 jobs with a missing or non-positive walltime" in jobtable.problems(text)
    # the simulator, the environment and jobs.validate say the same
    for call in (lambda: start_times(bad, 4, "fcfs"), lambda: jobtable.validate(bad, 4),
                 lambda: SchedulingEnv(TOY, bad, window=2, split="all")):
        with pytest.raises(ValueError, match="1 jobs with a missing or non-positive run"):
            call()


@pytest.mark.parametrize("old, new, names", [
    ("hpcgym.sim.core", "hpcgym.sim.loop", {"run": "advance", "schedule": "schedule", "DONE": "DONE"}),
    ("hpcgym.sim.engine", "hpcgym.sim.simulator", {"Simulator": "Simulator", "Buffers": "Buffers"}),
    ("hpcgym.render", "hpcgym.gantt", {"gantt_rgb": "gantt_rgb"}),
])
def test_old_module_names_still_import_with_a_warning(old, new, names):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} is renamed {new}"):
        alias = importlib.import_module(old)
    target = importlib.import_module(new)
    for name, renamed in names.items():
        assert getattr(alias, name) is getattr(target, renamed)


def test_policy_score_is_now_priority():
    from hpcgym.sim import policy

    with pytest.warns(DeprecationWarning, match="renamed priority"):
        assert policy.score is policy.priority
    with pytest.raises(AttributeError):
        policy.no_such_name  # noqa: B018

