"""Exact resume: a checkpoint carries what the rest of a run depends on, and kill -9 then --resume changes nothing.

The fast tests check the pieces of :mod:`agents.resume` (the environments' recorded history, the files cut back).
The slow ones kill small training runs (at a checkpoint boundary, and in the middle of a rollout) and compare what
the resumed run ends with to an uninterrupted run with the same seed: the networks' parameters, bit for bit, the
evaluation table, the learning curve and the monitor's episodes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]


# ---- the environments' history ---------------------------------------------------------------------------------
class _Windows:
    """A stand-in generator: windows of the bundled Lublin trace (a pure function of the seed)."""

    def __init__(self):
        from hpcgym import traces

        self.table = traces.load("lublin-256")

    def sample(self, n_jobs, seed):
        from hpcgym import traces

        return traces.window(self.table, n_jobs, rng=seed)


def _stack(tmp_path, name, part="train"):
    """The training stack of experiments.train (recorder, monitor, SB3 adapter, vector env) on a mixed workload."""
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.resume import RecordedVecEnv
    from agents.vec import HpcgymVecEnv
    from hpcgym import traces
    from hpcgym.vector import SchedulingVectorEnv
    from hpcgym.workload import MixedWorkload

    workload = MixedWorkload(traces.split(traces.load("lublin-256"), part), _Windows())
    venv = SchedulingVectorEnv(3, machine="lublin-256", workload=workload, window=32, slots=8, split="all",
                               backfill="easy", reward="log", baseline="saf", compare_with=("fcfs",))
    env = RecordedVecEnv(VecMonitor(HpcgymVecEnv(venv), str(tmp_path / name)))
    env.seed(0)
    return env, workload


def _play(env, rng, steps):
    """``steps`` batches of random valid actions; the observations, rewards and dones seen."""
    seen = []
    for _ in range(steps):
        masks = np.stack(env.env_method("action_masks"))
        obs, reward, done, _ = env.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
        seen.append((obs, reward, done))
    return seen


def _monitor_rows(path):
    return pd.read_csv(path, skiprows=1)


def test_a_replayed_history_puts_the_environments_back(tmp_path):
    env, workload = _stack(tmp_path, "a")
    env.reset()
    rng = np.random.default_rng(1)
    last = _play(env, rng, 120)[-1][0]
    history = env.history()
    assert history["actions"].dtype == np.uint8 and history["actions"].shape == (120, 3)
    episodes = len(_monitor_rows(tmp_path / "a.monitor.csv"))
    assert episodes > 3 and workload.calls > 3  # several episodes, from both halves of the mixed workload

    again, again_workload = _stack(tmp_path, "b")
    assert np.array_equal(again.replay(history), last)
    assert again_workload.calls == workload.calls  # the mixed workload's turn came back too
    monitor, replayed = env.venv, again.venv
    assert replayed.episode_count == monitor.episode_count == episodes
    assert np.array_equal(replayed.episode_lengths, monitor.episode_lengths)
    assert len(_monitor_rows(tmp_path / "b.monitor.csv")) == 0  # the replay wrote no episode twice

    future = np.random.default_rng(2)
    ahead, behind = _play(env, future, 60), _play(again, np.random.default_rng(2), 60)
    for (o1, r1, d1), (o2, r2, d2) in zip(ahead, behind, strict=True):
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2) and np.array_equal(d1, d2)
    assert _monitor_rows(tmp_path / "b.monitor.csv")[["r", "l"]].equals(
        _monitor_rows(tmp_path / "a.monitor.csv")[["r", "l"]].iloc[episodes:].reset_index(drop=True))


def test_a_history_that_does_not_reach_the_saved_observation_is_refused(tmp_path):
    from agents.resume import restore

    env, _ = _stack(tmp_path, "a")
    env.reset()
    _play(env, np.random.default_rng(1), 40)
    other, _ = _stack(tmp_path, "b", part="test")  # other real windows: the trace changed since
    state = {"env": env.history(), "timesteps": 120, "model": {}, "callbacks": {}, "rng": {}}
    model = SimpleNamespace(get_env=lambda: other, _last_obs=env.venv.venv.venv._obs.copy())
    with pytest.raises(ValueError, match="do not give the observation the checkpoint saved"):
        restore(state, model, {})


def test_files_are_cut_back_to_their_size_at_the_checkpoint(tmp_path):
    from agents.resume import cut_files

    (tmp_path / "monitor.csv").write_text("header\nrow 1\nrow 2 (after the checkpoint)\n")
    (tmp_path / "curve.csv").write_text("written after the checkpoint\n")
    state = {"files": {"../monitor.csv": len("header\nrow 1\n"), "../curve.csv": None}}
    cut_files(state, tmp_path / "checkpoints" / "model_state_8_steps.pkl.gz")
    assert (tmp_path / "monitor.csv").read_text() == "header\nrow 1\n" and not (tmp_path / "curve.csv").exists()


def test_a_state_file_sits_beside_its_checkpoint():
    from agents.resume import state_path

    assert state_path(Path("c/model_1024_steps.zip")) == Path("c/model_state_1024_steps.pkl.gz")


# ---- kill -9 and --resume --------------------------------------------------------------------------------------
#: a training run that kills itself (SIGKILL): ``at K step`` once K timesteps are done, ``at K save`` right after
#: writing the checkpoint of K timesteps or more
KILLER = """
import os, signal, sys
from agents import callbacks
at, where = int(sys.argv[1]), sys.argv[2]
if where == "step":
    on_step = callbacks.SchedulingMetricsCallback._on_step
    def killing(self):
        if self.num_timesteps >= at:
            os.kill(os.getpid(), signal.SIGKILL)
        return on_step(self)
    callbacks.SchedulingMetricsCallback._on_step = killing
else:
    save = callbacks.AtomicCheckpointCallback.save
    def killing(self):
        out = save(self)
        if self.num_timesteps >= at:
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    callbacks.AtomicCheckpointCallback.save = killing
from experiments import train
sys.exit(train.main(sys.argv[3:]))
"""
#: rollouts of 128 steps (2 copies x 64), a validation every 160 steps
SMALL = ["--trace", "lublin-256", "--envs", "2", "--n-steps", "64", "--batch-size", "64", "--window", "64",
         "--slots", "16", "--eval-windows", "2", "--eval-window", "128", "--val-windows", "2", "--val-window", "128",
         "--val-every", "160", "--clone-episodes", "2", "--clone-window", "128", "--clone-epochs", "5",
         "--run-name", "r", "--quiet", "--no-whole-split"]


def _train(runs_dir, *flags, kill=None):
    head = [sys.executable, "-c", KILLER, *kill] if kill else [sys.executable, "-m", "experiments.train"]
    return subprocess.Popen([*head, *SMALL, "--runs-dir", str(runs_dir), *flags], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _done(proc, killed=False):
    out, err = proc.communicate(timeout=300)
    if killed:
        assert proc.returncode == -signal.SIGKILL, f"not killed: exit {proc.returncode}; {err[-2000:]}"
    else:
        assert proc.returncode == 0, err[-3000:]


def _same_run(a, b, algorithm):
    """The two run folders hold the same networks, evaluation, learning curve and monitored episodes."""
    import torch

    for name in ("last.zip", "model.zip"):
        left, right = (algorithm.load(d / name, device="cpu").policy.state_dict() for d in (a, b))
        assert left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left), name
    for name in ("eval/summary.csv", "eval/per_window.csv", "learning_curve.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(a / name), pd.read_csv(b / name), obj=name)
    columns = ["r", "l", "compare_json"]
    pd.testing.assert_frame_equal(_monitor_rows(a / "monitor.csv")[columns], _monitor_rows(b / "monitor.csv")[columns])


@pytest.mark.slow
def test_ppo_killed_at_a_checkpoint_and_in_a_rollout_resumes_exactly(tmp_path):
    from sb3_contrib import MaskablePPO

    flags = ["--workload", "real", "--timesteps", "640", "--checkpoint-every", "128"]
    whole = _train(tmp_path / "whole", *flags)
    _done(_train(tmp_path / "killed", *flags, kill=("256", "save")), killed=True)  # right after a checkpoint
    checkpoints = tmp_path / "killed" / "r" / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("*_steps.zip")) == ["model_128_steps.zip", "model_256_steps.zip"]
    _done(_train(tmp_path / "killed", "--resume", kill=("500", "step")), killed=True)  # rollout 384-512, after
    assert (checkpoints / "model_384_steps.zip").exists() and not (checkpoints / "model_512_steps.zip").exists()
    _done(_train(tmp_path / "killed", "--resume"))  # from 384: replays the validation at 480 too
    _done(whole)
    _same_run(tmp_path / "whole" / "r", tmp_path / "killed" / "r", MaskablePPO)


@pytest.mark.slow
def test_dqn_on_a_mixed_workload_killed_in_the_middle_resumes_exactly(tmp_path):
    from agents.dqn import MaskedDQN

    flags = ["--workload", "mixed", "--algo", "dqn", "--timesteps", "1280", "--checkpoint-every", "512"]
    whole = _train(tmp_path / "whole", *flags)
    _done(_train(tmp_path / "killed", *flags, kill=("1150", "step")), killed=True)  # learning starts at 1,000
    assert (tmp_path / "killed" / "r" / "checkpoints" / "model_replay_buffer_1024_steps.pkl").exists()
    _done(_train(tmp_path / "killed", "--resume"))
    _done(whole)
    _same_run(tmp_path / "whole" / "r", tmp_path / "killed" / "r", MaskedDQN)


def _scalars(run_dir):
    """TensorBoard's view of a run's curves: tag -> [(step, value)], as TensorBoard itself loads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb" / "run_1"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@pytest.mark.slow
def test_tensorboard_shows_a_resumed_run_once(tmp_path):
    """Killed in the rollout after a logged step past its checkpoint (logged at 384, checkpoint at 256): the resumed
    run logs 384 again, with the update's values the checkpoint carried, and TensorBoard shows the uninterrupted
    run's curves, each step once (all but the frames per second, a measurement of the machine)."""
    flags = ["--workload", "real", "--timesteps", "640", "--checkpoint-every", "256"]
    whole = _train(tmp_path / "whole", *flags)
    _done(_train(tmp_path / "killed", *flags, kill=("450", "step")), killed=True)
    assert sorted(p.name for p in (tmp_path / "killed" / "r" / "checkpoints").glob("*_steps.zip")) == \
        ["model_256_steps.zip"]
    before = _scalars(tmp_path / "killed" / "r")["train/loss"]  # logged at each rollout's end from the second on
    assert [step for step, _ in before] == [256, 384]  # 384: logged after the checkpoint, before the kill
    _done(_train(tmp_path / "killed", "--resume"))
    _done(whole)
    resumed, uninterrupted = _scalars(tmp_path / "killed" / "r"), _scalars(tmp_path / "whole" / "r")
    assert [step for step, _ in uninterrupted["train/loss"]] == [256, 384, 512, 640]
    assert resumed.keys() == uninterrupted.keys()
    for tag in uninterrupted:
        if tag != "time/fps":
            assert resumed[tag] == uninterrupted[tag], tag
