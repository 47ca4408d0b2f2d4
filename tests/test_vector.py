"""The vector environment: the same episodes as N single environments, masks, errors, and SB3 training on it."""

import warnings

import gymnasium as gym
import numpy as np
import pytest

import hpcgym
from hpcgym import traces

warnings.filterwarnings("ignore", category=UserWarning)


def play_both(env_id, n, steps, seed=10, **kw):
    """Step a vector env and n single envs with the same random valid actions; check every output agrees."""
    venv = hpcgym.make_vec(env_id, num_envs=n, **kw)
    singles = [hpcgym.make(env_id, **kw) for _ in range(n)]
    obs, _ = venv.reset(seed=seed)
    for i, env in enumerate(singles):
        np.testing.assert_array_equal(obs[i], env.reset(seed=seed + i)[0])
    rng, episodes = np.random.default_rng(0), 0
    for _ in range(steps):
        masks = venv.action_masks()
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, reward, terminated, truncated, info = venv.step(actions)
        assert not truncated.any()
        for i, env in enumerate(singles):
            np.testing.assert_array_equal(masks[i], env.unwrapped.action_masks())
            o, r, done, _, single_info = env.step(int(actions[i]))
            assert (r, done) == (reward[i], terminated[i])
            if done:
                episodes += 1
                np.testing.assert_array_equal(o, info["final_obs"][i])
                assert info["final_info"]["metrics"]["bsld_mean"][i] == single_info["metrics"]["bsld_mean"]
                o, _ = env.reset()
            np.testing.assert_array_equal(o, obs[i])
    return episodes


@pytest.mark.parametrize("env_id,kw", [
    ("lublin256-v0", {"window": 64, "slots": 32}),
    ("sdsc-sp2-v0", {"backfill": "easy", "window": 128, "reward": "log", "baseline": "saf"}),
    ("trinity-v0", {"window": 64}),  # a sampled workload (the Lublin model)
    ("sdsc-sp2-v1", {"backfill": "easy", "window": 256, "order": "saf", "action": "guarded"}),
    ("sdsc-sp2-v0", {"backfill": "easy", "window": 128, "action": "hold", "hold_limit": 600}),
])
def test_vector_plays_the_episodes_of_single_envs(env_id, kw):
    assert play_both(env_id, 3, 400, **kw) >= 3  # several autoresets were compared too


def test_gymnasium_make_vec_uses_the_vector_entry_point():
    venv = gym.make_vec("hpcgym/lublin256-v0", num_envs=4, vectorization_mode="vector_entry_point", window=64)
    assert type(venv.unwrapped).__name__ == "SchedulingVectorEnv"
    obs, info = venv.reset(seed=0)
    assert obs.shape == (4, 129, 8) and venv.unwrapped.action_masks().shape == (4, 128)
    assert obs in venv.observation_space and info["waiting"].shape == (4,)


def test_invalid_actions_raise_or_wrap():
    venv = hpcgym.make_vec("lublin256-v0", num_envs=2, window=64, invalid_action="raise")
    venv.reset(seed=0)
    empty = venv.action_masks().sum(1)  # the first empty slot of each copy
    with pytest.raises(ValueError, match="invalid action"):
        venv.step(empty)
    wrapped = hpcgym.make_vec("lublin256-v0", num_envs=2, window=64)  # the default: wrap
    wrapped.reset(seed=0)
    reference = hpcgym.make_vec("lublin256-v0", num_envs=2, window=64)
    reference.reset(seed=0)
    a = wrapped.step(empty)[0]
    b = reference.step(np.zeros(2, np.int64))[0]  # v mod v = 0: the first slot
    np.testing.assert_array_equal(a, b)
    assert wrapped.unwrapped.invalid_actions == 2


def test_pinned_windows_per_copy():
    table = traces.split(traces.load("lublin-256"), "test")
    venv = hpcgym.make_vec("lublin256-v0", num_envs=2, window=128, split="test")
    venv.reset(seed=0, options={"window_start": [5, 900]})
    ids = [set(env.jobs["job_id"]) for env in venv.unwrapped.envs]
    assert ids == [set(table["job_id"][5:133]), set(table["job_id"][900:1028])]


def test_sb3_trains_both_algorithms_on_the_vector_env(tmp_path):
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.dqn import MaskedDQN
    from agents.policies import ScorerPolicy
    from agents.vec import HpcgymVecEnv

    env = VecMonitor(HpcgymVecEnv.make("lublin256-v0", 4, window=64, slots=32, compare_with=("fcfs",),
                                       invalid_action="raise"))  # an invalid action would raise inside learn()
    ppo = MaskablePPO(ScorerPolicy, env, n_steps=64, batch_size=64, n_epochs=2, seed=0)
    ppo.learn(512)
    assert ppo.num_timesteps == 512 and ppo.ep_info_buffer  # episodes ended and were logged
    dqn = MaskedDQN(env=env, learning_starts=100, buffer_size=2000, seed=0)
    dqn.learn(600)
    assert dqn.num_timesteps >= 600
    masks = np.stack(env.env_method("action_masks"))
    obs = env.reset()
    assert masks.shape == (4, 32) and obs.shape == (4, 33, 8)


def test_a_step_limit_is_refused_not_ignored():
    """``max_episode_steps`` was dropped without a word: episodes ran to their end while ``hpcgym.make`` truncated."""
    with pytest.raises(ValueError, match="max_episode_steps=3: the vector environment does not truncate"):
        hpcgym.make_vec("lublin256-v0", num_envs=2, max_episode_steps=3)
    assert hpcgym.make_vec("lublin256-v0", num_envs=2).num_envs == 2  # the spec's None still passes
