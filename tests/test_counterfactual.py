"""reward="counterfactual": per-decision credits that sum to the relative reward, in the single and the vector env.

The independent oracle of ``V(s_t)`` is a replay: a fresh environment plays the agent's first ``t`` actions, then the
baseline's own choices (:func:`hpcgym.env.heuristic_action`) to the end; with ``order`` the baseline, that finish is
the baseline's schedule from ``s_t`` (tests/test_engine_steps.py), and it never forks.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hpcgym.env import SchedulingEnv, heuristic_action
from hpcgym.sim import heuristics
from hpcgym.testing import toy_env
from hpcgym.vector import SchedulingVectorEnv


def play(env, seed: int, actions=None, rng_seed: int = 0):
    """An episode with the given actions, else random valid ones; returns (actions, rewards)."""
    env.reset(seed=seed)
    rng = np.random.default_rng(rng_seed)
    taken, rewards, done = [], [], False
    while not done:
        a = actions[len(taken)] if actions is not None else int(rng.choice(np.flatnonzero(env.action_masks())))
        _, r, done, _, _ = env.step(a)
        taken.append(a)
        rewards.append(r)
    return taken, rewards


def replay_value(make, seed: int, prefix, baseline) -> float:
    """The oracle's ``V`` after ``prefix``: those actions, then the baseline's choices to the end."""
    env = make(reward="objective")
    env.reset(seed=seed)
    done, k = False, 0
    while not done:
        a = prefix[k] if k < len(prefix) else heuristic_action(env, baseline)
        _, _, done, _, _ = env.step(a)
        k += 1
    return env.unwrapped.result.value


@pytest.mark.parametrize("baseline", ["fcfs", "sjf"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_credits_are_the_replayed_values_on_the_toy_machine(baseline, seed):
    """On the 4-node fixture: r_t = (V(s_t) - V(s_{t+1})) / V(s_0) with V from replays, and the sum identity."""
    def make(reward):
        return toy_env(backfill="easy", baseline=baseline, order=baseline, reward=reward, slots=16)  # all visible

    env = make("counterfactual")
    actions, credits = play(env, seed, rng_seed=seed)
    values = [replay_value(make, seed, actions[:t], heuristics.get(baseline)) for t in range(len(actions) + 1)]
    assert values[0] == env.result.baseline and values[-1] == env.result.value
    expected = -np.diff(values) / values[0]
    np.testing.assert_allclose(credits, expected, rtol=1e-12, atol=1e-15)
    assert sum(credits) == pytest.approx(env.result.reward, rel=1e-12, abs=1e-15)
    assert env.result.reward == pytest.approx((env.result.baseline - env.result.value) / env.result.baseline)


def test_a_hand_checked_episode():
    """FCFS baseline, toy jobs: the first decision at t=0 has jobs 0 and 1 (2 nodes each) waiting; either order
    starts both at 0, so no choice there can change the value and its credit is exactly 0."""
    env = toy_env(backfill="easy", baseline="fcfs", reward="counterfactual")
    env.reset(seed=0)
    assert list(env.unwrapped.sim.queue) == [0, 1] and env.unwrapped.sim.now == 0
    _, r, _, _, _ = env.step(1)
    assert r == 0.0


@pytest.mark.parametrize("backfill", ["easy", "none"])
def test_the_baseline_itself_earns_exactly_zero_and_never_forks(backfill):
    env = toy_env(backfill=backfill, baseline="sjf", order="sjf", reward="counterfactual", slots=16)
    for seed in range(3):
        env.reset(seed=seed)
        done, rewards = False, []
        while not done:
            _, r, done, _, _ = env.step(heuristic_action(env, heuristics.SJF))
            rewards.append(r)
        assert rewards == [0.0] * len(rewards) and env.result.reward == 0.0
        assert env._credit.forks == 1  # V(s_0) only


def lublin(pred: str, slots: int = 32, **kwargs):
    base = dataclasses.replace(heuristics.SJF, name="sjf-p", predictor=pred)
    return SchedulingEnv("lublin-256", "lublin-256", backfill="easy", window=96, slots=slots, baseline=base,
                         predictor=None if pred == "walltime" else pred, reward="counterfactual", **kwargs), base


@pytest.mark.parametrize("pred", ["walltime", "last2", "median5", "learned:lublin-256"])
def test_the_credits_sum_to_the_relative_reward_on_real_windows(pred):
    env, base = lublin(pred)
    for seed in range(2):
        _, credits = play(env, seed, rng_seed=seed)
        assert len(credits) > 5 and any(c != 0 for c in credits)
        assert sum(credits) == pytest.approx(env.result.reward, rel=1e-9, abs=1e-12)
        assert env._credit.v0 == pytest.approx(env.result.baseline, rel=1e-12)


def test_forks_agree_with_the_shortcut_along_the_baseline():
    """With the shortcut off every decision forks: V stays V(s_0), so each credit is 0 up to rounding."""
    base = dataclasses.replace(heuristics.SJF, name="sjf-p", predictor="last2")
    env, _ = lublin("last2", slots=96, order=base)  # every job visible: the baseline's head is always a choice
    env.reset(seed=3)
    env._credit.shortcut = False
    done, rewards = False, []
    while not done:
        _, r, done, _, _ = env.step(heuristic_action(env, base))
        rewards.append(r)
    assert env._credit.forks == len(rewards)  # V(s_0) and one per decision but the last
    np.testing.assert_allclose(rewards, 0.0, atol=1e-12)


@pytest.mark.parametrize("order", ["sjf", None])  # with the no-fork shortcut, and forking at every decision
def test_single_and_vector_envs_give_the_same_credits(order):
    kwargs = dict(machine="lublin-256", workload="lublin-256", backfill="easy", window=64, slots=32,
                  baseline="sjf", order=order, reward="counterfactual")
    n, seed = 3, 11
    venv = SchedulingVectorEnv(n, **kwargs)
    venv.reset(seed=seed)
    singles = [SchedulingEnv(**kwargs) for _ in range(n)]
    for i, env in enumerate(singles):
        env.reset(seed=seed + i)
    rngs = [np.random.default_rng(i) for i in range(n)]
    total = np.zeros(n)
    for _ in range(300):
        masks = venv.action_masks()
        acts = np.array([int(rngs[i].choice(np.flatnonzero(masks[i]))) for i in range(n)])
        _, vr, vdone, _, _ = venv.step(acts)
        for i, env in enumerate(singles):
            np.testing.assert_array_equal(masks[i], env.action_masks())
            _, r, done, _, _ = env.step(acts[i])
            assert r == vr[i] and done == vdone[i]
            if done:
                env.reset()
        total += vr
    assert np.any(total != 0)


def test_counterfactual_needs_a_baseline_on_the_environment_estimates():
    with pytest.raises(ValueError, match="baseline"):
        toy_env(backfill="easy", reward="counterfactual")
    with pytest.raises(ValueError, match="pass predictor='last2'"):  # a predictor given that is not the baseline's
        toy_env(backfill="easy", baseline="sjf-last2", reward="counterfactual", predictor="median5")
    env = toy_env(backfill="easy", baseline="sjf-last2", reward="counterfactual")  # none given: the baseline's
    assert env.predictor.name == "last2" and "baseline sjf-last2's" in env.predictor_source
    with pytest.raises(ValueError, match="predictor"):  # a clairvoyant baseline's predictor is never the env's
        toy_env(backfill="easy", baseline="saf@exact", reward="counterfactual")


def test_a_counterfactual_tuned_baseline_takes_its_predictor_on_the_predict_id():
    """Issue 55, item 4: ``tuned`` on SDSC-SP2 reads median5; the id's last2 gives way, and the env's str says so."""
    import hpcgym

    env = hpcgym.make("sdsc-sp2-v1", reward="counterfactual", baseline="tuned")
    assert env.unwrapped.predictor.name == "median5" == env.unwrapped.baseline.predictor
    assert "predictor=median5: the baseline tuned's" in str(env) and "the id's last2" in str(env)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (129, 12)
    assert hpcgym.make("sdsc-sp2-v1").unwrapped.predictor.name == "last2"  # without the reward, the id's predictor
    assert "predictor=" not in str(hpcgym.make("sdsc-sp2-v1"))
    with pytest.raises(ValueError, match="pass predictor='median5'"):  # given and different: refused
        hpcgym.make("sdsc-sp2-v1", reward="counterfactual", baseline="tuned", predictor="last2")


def test_without_a_critic_gae_lambda_0_makes_each_decision_its_own_credit():
    """ScorerPolicy(value=False), gamma 1, GAE lambda 0: PPO's advantages are the per-decision rewards, the values 0."""
    import torch
    from sb3_contrib import MaskablePPO

    from agents.policies import NoValue, ScorerPolicy

    env, _ = lublin("last2", order="sjf")
    model = MaskablePPO(ScorerPolicy, env, policy_kwargs={"value": False}, gamma=1.0, gae_lambda=0.0, n_steps=128,
                        batch_size=64, n_epochs=1, seed=0)
    assert isinstance(model.policy.value_net, NoValue)
    model.learn(128)
    buf = model.rollout_buffer
    assert np.count_nonzero(buf.rewards) > 0  # some decisions left the baseline and were credited
    np.testing.assert_array_equal(buf.values, 0.0)
    np.testing.assert_allclose(buf.advantages, buf.rewards, rtol=0, atol=1e-7)  # float32 buffers
    np.testing.assert_allclose(buf.returns, buf.rewards, rtol=0, atol=1e-7)
    with torch.no_grad():
        obs = torch.as_tensor(env.reset(seed=1)[0][None]).flatten(1)
        assert model.policy.predict_values(obs).item() == 0.0
    twin = MaskablePPO(ScorerPolicy, env, policy_kwargs={"value": True}, gamma=1.0, gae_lambda=0.0, n_steps=128,
                       seed=0)
    assert not isinstance(twin.policy.value_net, NoValue)


@pytest.mark.slow
@pytest.mark.parametrize("script, args, expect", [
    ("counterfactual_speed.py", ["--trace", "sdsc-sp2", "--timesteps", "256"], "PPO, counterfactual reward"),
    ("train_speed.py", ["--timesteps", "256"], "now, plain scorer"),
])
def test_the_training_speed_benchmarks_run(script, args, expect):
    """Both import the recipe's helpers; a move of one broke them once without any test noticing."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, f"benchmarks/{script}", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert expect in done.stdout


class _FirstColumn:
    """A stand-in regressor whose prediction is the first job column (``job0``), so the picks are set by hand."""

    def fit(self, x, y):
        return self

    def predict(self, x):
        return np.asarray(x)[:, 1]  # column 0 is the rank


def _skill_rows(rows):
    import pandas as pd

    return pd.DataFrame(rows, columns=["episode", "decision", "start", "rank", "advantage", "job0", "machine0"])


def test_the_skill_benchmarks_held_out_figures_by_hand():
    """Window 0 (start 0) is fitted on; window 1 (start 100, the cut) holds decisions 1 and 2. The stand-in model
    predicts ``job0``. Decision 1: candidate 2 has the highest prediction (0.4 > 0.3) and advantage -0.1, and
    deviates (0.4 > 0). Decision 2: candidate 1 (-0.2 > -0.5), advantage 0.05, does not deviate (-0.2 <= 0).
    So one pick in two is positive and one negative; the picks' mean (-0.1 + 0.05) / 2 = -0.025; the gated mean
    (-0.1 + 0) / 2 = -0.05, deviating once in two; the oracle (0.2 + 0.05) / 2 = 0.125."""
    from benchmarks.counterfactual_skill import skill

    df = _skill_rows([(0, 0, 0, 0, 0.0, 0.0, 0.0), (0, 0, 0, 1, 0.1, 0.1, 0.0),
                      (1, 1, 100, 0, 0.0, 5.0, 0.0), (1, 1, 100, 1, 0.2, 0.3, 0.0), (1, 1, 100, 2, -0.1, 0.4, 0.0),
                      (1, 2, 100, 0, 0.0, 0.0, 0.0), (1, 2, 100, 1, 0.05, -0.2, 0.0), (1, 2, 100, 2, 0.0, -0.5, 0.0)])
    got = skill(df, 1, _FirstColumn(), cut=100, window=10)
    assert got["pick_positive"] == 0.5 and got["pick_negative"] == 0.5 and got["gated_share"] == 0.5
    assert got["pick_mean"] == pytest.approx(-0.025) and got["gated_mean"] == pytest.approx(-0.05)
    assert got["oracle_mean"] == pytest.approx(0.125) and got["nonzero"] == 1.0 and got["held_out_decisions"] == 2


def test_the_skill_benchmark_says_when_too_few_windows_were_collected():
    """Every window starts before the cut: nothing is held out, and the error says what to do."""
    from benchmarks.counterfactual_skill import skill

    df = _skill_rows([(0, 0, 0, 0, 0.0, 0.0, 0.0), (0, 0, 0, 1, 0.1, 0.1, 0.0)])
    expected = r"of 1 collected windows, 1 end before row 100 \(fitted on\) and 0 start from it .*--decisions"
    with pytest.raises(ValueError, match=expected):
        skill(df, 1, _FirstColumn(), cut=100, window=10)
