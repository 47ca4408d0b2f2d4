"""hpcgym as code written against Gymnasium alone sees it: masks behind the standard wrappers, the vector env's infos
read the Gymnasium way, its time scale, and the CleanRL-style single-file example (``examples/cleanrl_ppo.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FlattenObservation, RecordEpisodeStatistics, TimeLimit
from gymnasium.wrappers.vector import RecordEpisodeStatistics as VectorRecordEpisodeStatistics

import hpcgym

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.filterwarnings("ignore:.*out of date")


def _valid(mask: np.ndarray, waiting: int) -> None:
    """A mask is the first min(waiting, slots) slots: checked against the queue length the info reports."""
    assert mask.dtype == bool and mask.sum() == min(waiting, mask.shape[-1])
    assert mask[:min(waiting, mask.shape[-1])].all()


def test_the_mask_reaches_code_behind_the_standard_wrappers():
    env = RecordEpisodeStatistics(FlattenObservation(TimeLimit(gym.make("hpcgym/lublin256-v0", window=64),
                                                               max_episode_steps=10_000)))
    with pytest.raises(AttributeError):
        env.action_masks()  # Gymnasium's wrappers do not pass it on: that is why the info key exists
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=3)
    steps, done = 0, False
    while not done:
        _valid(info["action_mask"], info["waiting"])
        assert np.array_equal(hpcgym.action_masks(env), info["action_mask"])
        assert np.array_equal(env.get_wrapper_attr("action_masks")(), info["action_mask"])
        obs, reward, done, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        steps += 1
    assert info["invalid_actions"] == 0 and info["episode"]["l"] == steps and info["episode"]["r"] == reward


def test_the_vector_env_behind_a_wrapper_replays_single_envs_read_the_gymnasium_way():
    """Copy i is a single env seeded seed + i: replaying its actions there gives the bsld that ``final_info`` (a
    dict of arrays under ``_final_info``) reports for it."""
    envs = VectorRecordEpisodeStatistics(gym.make_vec("hpcgym/lublin256-v0", num_envs=3, window=48,
                                                      vectorization_mode="vector_entry_point"))
    rng = np.random.default_rng(1)
    _, infos = envs.reset(seed=10)
    actions: list[list[int]] = [[] for _ in range(3)]
    finished: dict[int, float] = {}
    while len(finished) < 3:
        masks = infos["action_mask"]
        assert masks.shape == (3, 128) and np.array_equal(hpcgym.action_masks(envs), masks)
        for i in range(3):
            _valid(masks[i], infos["waiting"][i])
        step = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        _, _, terminated, _, infos = envs.step(step)
        for i in range(3):
            if i not in finished:
                actions[i].append(int(step[i]))
        for i in np.flatnonzero(terminated):
            assert infos["_final_info"][i] and infos["final_obs"][i] is not None
            finished.setdefault(int(i), float(infos["final_info"]["metrics"]["bsld_mean"][i]))
        ended = set(np.flatnonzero(terminated).tolist())
        assert all(infos["final_obs"][i] is None for i in range(3) if i not in ended) if ended else True
    for i in range(3):
        single = gym.make("hpcgym/lublin256-v0", window=48)
        _, info = single.reset(seed=10 + i)
        for a in actions[i]:
            _, _, done, _, info = single.step(a)
        assert done and info["metrics"]["bsld_mean"] == pytest.approx(finished[i], rel=1e-12)


def test_the_vector_env_has_the_time_scale_and_per_step_invalid_actions():
    envs = hpcgym.make_vec("lublin256-v0", num_envs=2, window=48)
    single = hpcgym.make("lublin256-v0", window=48)
    assert envs.unwrapped.time_scale == single.unwrapped.time_scale
    assert hpcgym.make_vec("lublin256-v0", num_envs=2, time_scale=3600.0).unwrapped.time_scale == 3600.0
    _, infos = envs.reset(seed=0)
    valid = infos["action_mask"].sum(axis=1)
    _, _, _, _, infos = envs.step(np.array([valid[0] + 1, 0]))  # copy 0: an empty slot of Discrete(128)
    assert infos["invalid_actions"].tolist() == [1, 0] and infos["_invalid_actions"].all()
    with pytest.raises(ValueError, match="outside the action space"):
        envs.step(np.array([200, 0]))  # not in Discrete(128): refused even in the default "wrap" mode
    with pytest.raises(ValueError, match="outside the action space"):
        single.reset(seed=0)
        single.step(200)


def test_sync_vectorization_reads_masks_the_same_way():
    """``vectorization_mode="sync"``: Gymnasium's loop of single envs (next-step autoreset); masks as infos."""
    envs = gym.make_vec("hpcgym/lublin256-v0", num_envs=2, window=48, vectorization_mode="sync")
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    _, infos = envs.reset(seed=0)
    assert np.array_equal(hpcgym.action_masks(envs), infos["action_mask"])
    _, _, _, _, infos = envs.step(np.zeros(2, np.int64))
    assert np.array_equal(hpcgym.action_masks(envs), infos["action_mask"])


@pytest.mark.slow
def test_the_single_file_example_trains_a_few_hundred_steps(tmp_path):
    """examples/cleanrl_ppo.py, as a user runs it, with a budget of a few hundred steps."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = ["--total-timesteps", "256", "--num-envs", "4", "--num-steps", "32", "--window", "32", "--seed", "1"]
    done = subprocess.run([sys.executable, str(REPO / "examples" / "cleanrl_ppo.py"), *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1].startswith("done: 256 steps") and any(line.startswith("episode") for line in lines), lines


def test_the_raise_mode_message_names_ways_that_work_through_wrappers():
    env = gym.make("hpcgym/lublin256-v0", invalid_action="raise")
    _, info = env.reset(seed=0)
    empty = int(np.flatnonzero(~info["action_mask"])[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"info\['action_mask'\], or hpcgym.action_masks\(env\)"):
            env.step(empty)


def test_a_plain_make_is_quiet_and_the_old_ids_still_work():
    """Versions count revisions; the ``-predict`` ids are siblings, and the ids of earlier releases are aliases."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        gym.make("hpcgym/theta-v0").close()
        gym.make("hpcgym/lublin256-v0").close()  # an old id
        hpcgym.make_vec("lublin256-v0", num_envs=2).close()
        assert gym.make("hpcgym/lublin256-v1").observation_space.shape[-1] == 12  # now lublin-256-predict-v0
    assert not [str(w.message) for w in got if "version" in str(w.message) or "out of date" in str(w.message)]
    with pytest.warns(UserWarning, match="latest versioned environment `hpcgym/lublin-256-v0`"):
        default = gym.make("hpcgym/lublin-256")  # Gymnasium says which version a name without one gives
    assert default.spec.id == "hpcgym/lublin-256-v0" and default.observation_space.shape[-1] == 8


@pytest.mark.parametrize("num_envs", [None, 3], ids=["single", "vector"])
def test_torchrl_wraps_the_env_and_plays_only_masked_actions(num_envs):
    """TorchRL (the ``torchrl`` extra): ``GymWrapper`` with the mask read from ``info`` and its ``ActionMask``
    transform. The vector env needs ``autoreset_mode`` and no ``done`` key in its infos (TorchRL reserves it)."""
    pytest.importorskip("torchrl", reason="TorchRL is not installed (pip install 'hpcgym[torchrl]')")
    import torch
    from torchrl.data import Binary, Unbounded
    from torchrl.envs import ActionMask, GymWrapper, TransformedEnv
    from torchrl.envs.libs.gym import default_info_dict_reader

    kwargs = dict(window=32, slots=8)
    env = hpcgym.make("lublin256-v0", **kwargs) if num_envs is None else \
        hpcgym.make_vec("lublin256-v0", num_envs=num_envs, **kwargs)
    batch = () if num_envs is None else (num_envs,)
    wrapped = GymWrapper(env)
    spec = {"action_mask": Binary(n=8, shape=(*batch, 8), dtype=torch.bool),
            "invalid_actions": Unbounded(shape=batch, dtype=torch.int64)}
    wrapped.set_info_dict_reader(default_info_dict_reader(list(spec), spec=spec))
    masked = TransformedEnv(wrapped, ActionMask())
    masked.set_seed(0)
    steps = masked.rollout(120, break_when_any_done=False)
    assert steps["next", "done"].any()  # episodes ended and were reset along the way
    assert steps["next", "invalid_actions"].max().item() == 0  # every sampled action was inside the mask
    chosen = steps["action"].reshape(-1, 8).argmax(-1) if steps["action"].shape[-1] == 8 else steps["action"].flatten()
    assert steps["action_mask"].reshape(-1, 8)[torch.arange(len(chosen)), chosen].all()


def _leaves(info: dict, prefix: str = ""):
    for key, value in info.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield prefix + key, value


def test_final_infos_hold_numpy_values_of_a_numeric_or_boolean_dtype():
    """A final info, single or batched, is numpy scalars and arrays with a dtype TorchRL can make a tensor of: the
    single env's ``baseline``, ``metrics`` and ``compare`` were Python floats, the vector env's ``done`` and
    ``window_done`` object arrays."""
    kwargs = dict(window=16, baseline="fcfs", compare_with=("fcfs", "sjf"))
    env = hpcgym.make("lublin-256-v0", **kwargs)
    env.reset(seed=0)
    terminated = False
    while not terminated:
        _, _, terminated, _, info = env.step(0)
    odd = [k for k, v in _leaves(info) if not isinstance(v, (np.generic, np.ndarray))]
    assert odd == [] and isinstance(info["baseline"], np.float64)
    envs = hpcgym.make_vec("lublin-256-v0", num_envs=3, **kwargs)
    envs.reset(seed=0)
    for _ in range(500):
        _, _, terminated, _, infos = envs.step(np.zeros(3, np.int64))
        if terminated.any():
            break
    final = dict(_leaves(infos["final_info"]))
    assert final["window_done"].dtype == final["done"].dtype == bool
    assert final["window_done"][infos["_final_info"]].all()
    assert [k for k, v in final.items() if v.dtype == object] == []


def test_the_guides_torchrl_block_runs_and_names_the_error_without_the_reader():
    """docs/extend.md's TorchRL block, run as written, masks every action; without its reader line, ActionMask fails
    with the bare error the guide quotes (so the guide names what to add)."""
    pytest.importorskip("torchrl", reason="TorchRL is not installed (pip install 'hpcgym[torchrl]')")
    text = (REPO / "docs" / "extend.md").read_text()
    block = text.split("TorchRL with the mask, in full", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(block, "docs/extend.md", "exec"), scope)  # noqa: S102 - the guide's own code
    steps = scope["steps"]
    chosen = steps["action"].argmax(-1)
    assert len(chosen) == 100 and steps["action_mask"][range(len(chosen)), chosen].all()
    quoted = "AttributeError: 'NoneType' object has no attribute 'to'"
    assert quoted in text
    without = "\n".join(line for line in block.splitlines() if "set_info_dict_reader" not in line)
    with pytest.raises(AttributeError) as exc:
        exec(compile(without, "docs/extend.md", "exec"), {})  # noqa: S102
    assert f"AttributeError: {exc.value}" == quoted
