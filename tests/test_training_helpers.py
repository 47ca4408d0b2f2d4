"""The training helpers (:mod:`agents.callbacks`, :mod:`agents.rollout`) and a tiny task PPO must learn.

The callbacks run against a stand-in model (a logger, a step count, ``save`` and ``predict``), so each rule is
checked on its own; the rollout's scores are checked against :func:`hpcgym.sim.simulate` of the same heuristic.
"""

from __future__ import annotations

import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
import torch
from stable_baselines3.common.logger import Logger

from agents import callbacks
from agents.rollout import act, play_windows
from hpcgym import cli
from hpcgym.sim import simulate
from hpcgym.testing import TOY, make_jobs


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny networks: torch's thread pool only adds contention on a shared machine (10x slower measured here)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class Stub:
    """What the callbacks use of an SB3 model: a logger, a step count, an env, ``save`` and ``predict``."""

    def __init__(self, num_envs=1, slot="first"):
        self.logger = Logger(folder=None, output_formats=[])
        self.num_timesteps = 0
        self.num_envs, self.slot = num_envs, slot
        self.replay_buffer = object()
        self.saved: list[str] = []

    def get_env(self):
        return self

    def save(self, path):
        self.saved.append(str(path))
        with open(path, "wb") as f:
            f.write(b"model")

    def save_replay_buffer(self, path):
        with open(path, "wb") as f:
            f.write(b"buffer")

    def predict(self, obs, action_masks=None, deterministic=True):
        """Slot 0 (the oldest job: FCFS) or the last valid slot (the newest)."""
        if self.slot == "first":
            return np.zeros(len(obs), np.int64), None
        return action_masks.sum(1) - 1, None


def attach(cb, model):
    cb.init_callback(model)
    cb.on_training_start({}, {})
    return cb


# ---- the rollout ------------------------------------------------------------------------------------------------
#: 8 windows of 6 jobs that all arrive together and each take the whole toy machine: the order is the schedule.
WINDOW = 6
RUNS = np.random.default_rng(123).choice([10, 1000], size=8 * WINDOW)
TABLE = make_jobs([(100_000 * (i // WINDOW), int(r), int(r), 4) for i, r in enumerate(RUNS)])
STARTS = list(range(0, 8 * WINDOW, WINDOW))
ENV = {"machine": TOY, "workload": TABLE, "window": WINDOW, "slots": 8, "split": "all", "time_scale": 1000}


def heuristic_bsld(policy, start):
    return simulate(TABLE.iloc[start:start + WINDOW].assign(submit=0), TOY, policy)["bsld"].mean()


def test_play_windows_keeps_the_order_of_the_starts_across_batches():
    starts = STARTS[::-1] + [STARTS[2]]  # reversed, a repeat, and 9 windows in batches of 4 (the last one padded)
    infos = play_windows(Stub(), starts, batch=4, **ENV)
    assert [i["window_start"] for i in infos] == starts
    for start, info in zip(starts, infos, strict=True):
        assert info["metrics"]["bsld_mean"] == pytest.approx(heuristic_bsld("fcfs", start), rel=1e-12)
    assert play_windows(Stub(), [], **ENV) == []


def test_act_passes_masks_only_to_models_that_take_them():
    obs, masks = np.zeros((2, 3, 8)), np.array([[True, True], [True, False]])
    assert act(Stub(slot="last"), obs, masks).tolist() == [1, 0]

    class NoMasks:
        def predict(self, obs, deterministic=True):
            return np.full(len(obs), 7), None

    assert act(NoMasks(), obs, masks).tolist() == [7, 7]


# ---- callbacks ----------------------------------------------------------------------------------------------
def test_scheduling_metrics_are_means_over_finished_episodes():
    model = Stub()
    cb = attach(callbacks.SchedulingMetricsCallback(), model)
    m = {"bsld_mean": 2.0, "wait_mean": 10.0, "utilization": 0.5}
    cb.update_locals({"infos": [{"done": True, "metrics": m, "compare": {"fcfs": 3.0}}, {"done": False},
                                {"done": True, "metrics": {**m, "bsld_mean": 4.0}, "compare": {"fcfs": 5.0}}]})
    cb.on_step()
    values = model.logger.name_to_value
    assert (values["sched/bsld"], values["sched/wait"], values["sched/fcfs"]) == (3.0, 10.0, 4.0)
    assert values["sched/episodes"] == 2


def test_hyperparameters_go_to_the_text_tab_only():
    model = Stub()
    attach(callbacks.HyperparametersCallback({"lr": 0.001, "seed": 3}), model)
    assert model.logger.name_to_value["hyperparameters"] == "|param|value|\n|-|-|\n|lr|0.001|\n|seed|3|"
    assert set(model.logger.name_to_excluded["hyperparameters"]) == {"stdout", "log", "json", "csv"}


def test_progress_lines_in_a_log_stop_at_the_total(capsys):
    cb = callbacks.ProgressBarCallback(total=10)
    cb.tty = False  # as in a log file
    attach(cb, Stub(num_envs=4))
    for _ in range(4):
        cb.on_step()
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" steps")[0] for line in lines] == ["training: 4/10", "training: 8/10", "training: 10/10"]
    assert "(100%)" in lines[-1] and cb.done == 10


def zip_with_data(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data", "{}")


def test_latest_checkpoint_skips_broken_files(tmp_path):
    assert callbacks.latest_checkpoint(tmp_path) is None
    for steps in (50, 100, 200):
        zip_with_data(tmp_path / f"rl_model_{steps}_steps.zip")
    whole = (tmp_path / "rl_model_200_steps.zip").read_bytes()
    (tmp_path / "rl_model_200_steps.zip").write_bytes(whole[:len(whole) // 2])  # killed during its save
    with zipfile.ZipFile(tmp_path / "rl_model_300_steps.zip", "w") as z:
        z.writestr("policy.pth", "")  # a zip, but no model in it
    zip_with_data(tmp_path / "rl_model_x_steps.zip")  # not a step count
    zip_with_data(tmp_path / "best.zip")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = callbacks.latest_checkpoint(tmp_path)
    assert found == (tmp_path / "rl_model_100_steps.zip", 100)
    assert [str(w.message).split("/")[-1] for w in caught] == [
        f"rl_model_{s}_steps.zip is not a complete checkpoint (a save was interrupted?); using an older one"
        for s in (300, 200)]


def test_replay_buffer_beside_a_checkpoint(tmp_path):
    checkpoint = tmp_path / "rl_model_100_steps.zip"
    assert callbacks.replay_buffer_for(checkpoint) is None
    (tmp_path / "rl_model_replay_buffer_100_steps.pkl").write_bytes(b"x")
    (tmp_path / "rl_model_replay_buffer_50_steps.pkl").write_bytes(b"x")
    assert callbacks.replay_buffer_for(checkpoint) == tmp_path / "rl_model_replay_buffer_100_steps.pkl"
    assert callbacks.replay_buffer_for(tmp_path / "best.zip") is None


def test_checkpoints_are_atomic_and_keep_only_the_newest_replay_buffer(tmp_path, monkeypatch):
    import agents.resume

    # The state file needs a recorded env (tests/test_resume.py checks it); here only the files' life matters.
    monkeypatch.setattr(agents.resume, "save_state", lambda path, *rest: path.write_bytes(b"state"))
    model = Stub()
    cb = attach(callbacks.AtomicCheckpointCallback(20, str(tmp_path), "rl_model", save_replay_buffer=True), model)
    cb.on_training_start(locals(), globals())
    for steps in (10, 20, 30, 40):  # taken when a rollout starts, once 20 steps have passed since the last one
        model.num_timesteps = steps
        cb.on_step()  # SB3 updates the callback's count here; a rollout starts after the last step of the one before
        cb.on_rollout_start()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rl_model_20_steps.zip", "rl_model_40_steps.zip", "rl_model_replay_buffer_40_steps.pkl",
        "rl_model_state_20_steps.pkl.gz", "rl_model_state_40_steps.pkl.gz"]
    assert len(model.saved) == 2 and all(".tmp" in name for name in model.saved)  # a temporary name, then renamed


def test_validation_scores_saves_the_best_and_resumes(tmp_path):
    best, curve = tmp_path / "best.zip", tmp_path / "learning_curve.csv"
    expected = np.mean([heuristic_bsld("fcfs", s) for s in STARTS[:4]])
    model = Stub()
    cb = callbacks.ValidationCallback(STARTS[:4], every=10, best=best, curve=curve, env_kwargs=ENV)
    cb.prior = {"untrained (not kept)": 1e9}
    attach(cb, model)  # validates the starting network
    assert cb.best_value == pytest.approx(expected, rel=1e-12) and best.exists() and len(model.saved) == 1
    for steps in (5, 10, 12):
        model.num_timesteps = steps
        cb.on_step()  # due at 10 only
    model.slot = "last"  # a worse network from now on: scored, never kept
    cb.on_training_end()  # 12 > 10: the end is scored too
    rows = pd.read_csv(curve)
    assert rows["timesteps"].tolist() == [0, 0, 10, 12]
    assert rows["network"].tolist() == ["untrained (not kept)", "start", "ppo", "ppo"]
    assert rows["val_bsld"].iloc[1:3].tolist() == pytest.approx([expected, expected], rel=1e-12)
    assert rows["val_bsld"].iloc[3] > expected and len(model.saved) == 1
    assert model.logger.name_to_value["val/bsld"] == rows["val_bsld"].iloc[3]

    again = callbacks.ValidationCallback(STARTS[:4], every=10, best=best, curve=curve, env_kwargs=ENV)
    model.num_timesteps = 12
    attach(again, model)  # resumed: nothing due before 12 + 10, the best so far is the kept rows' best
    assert (again.best_value, again.next_at) == (pytest.approx(expected, rel=1e-12), 22)
    assert len(pd.read_csv(curve)) == 4


# ---- a task PPO must learn --------------------------------------------------------------------------------------
class WholeMachineJobs:
    """Every job arrives at 0 and takes the whole machine, and runs 10 s or 1000 s: shortest first is optimal."""

    def sample(self, n_jobs, seed):
        runs = np.random.default_rng(seed).choice([10, 1000], size=n_jobs)
        return make_jobs([(0, int(r), int(r), 4) for r in runs])


def test_ppo_beats_its_untrained_network_on_a_tiny_task():
    from sb3_contrib import MaskablePPO

    from agents.policies import ScorerPolicy
    from hpcgym.env import SchedulingEnv

    warnings.simplefilter("ignore")
    env = SchedulingEnv(TOY, WholeMachineJobs(), window=WINDOW, slots=8, reward="log", time_scale=1000)
    model = MaskablePPO(ScorerPolicy, env, n_steps=256, batch_size=64, n_epochs=4, learning_rate=3e-3, seed=0)

    def score():
        return np.mean([i["metrics"]["bsld_mean"] for i in play_windows(model, STARTS, reward="log", **ENV)])

    untrained = score()
    model.learn(512)
    trained = score()
    sjf = np.mean([heuristic_bsld("sjf", s) for s in STARTS])
    assert trained == pytest.approx(sjf, rel=1e-9) and untrained > 2 * sjf, (untrained, trained, sjf)


@pytest.mark.parametrize("extra, needle", [
    (["--gae-lambda", "2"], "--gae-lambda must be between 0 and 1, not 2.0"),
    (["--clip-range", "-1"], "--clip-range must be > 0"),
    (["--target-kl", "-1"], "--target-kl must be >= 0"),
    (["--ent-coef", "nan"], "--ent-coef must be >= 0, not nan"),
    (["--time-scale", "-5"], "--time-scale must be >= 0"),
    (["--objective", "nope"], "--objective must be one of"),
    (["--seeds", "0", "1", "0"], r"--seeds repeats a seed \(0 1 0\)"),
])
def test_settings_sb3_would_take_unchecked_are_refused_before_any_work(tmp_path, extra, needle):
    """These went to MaskablePPO as given (a negative target KL stops every update), or failed after a fit."""
    from experiments import train

    with pytest.raises(cli.UsageError, match=needle):
        train.parse_args(["--trace", "lublin-256", "--workload", "real", "--runs-dir", str(tmp_path), *extra])


def test_resume_and_overwrite_together_are_refused(tmp_path):
    import json

    from experiments import train

    base = ["--trace", "lublin-256", "--workload", "real", "--runs-dir", str(tmp_path), "--run-name", "mine"]
    recipe = train.parse_args(base).recipe
    (tmp_path / recipe.name).mkdir()
    (tmp_path / recipe.name / "args.json").write_text(json.dumps(recipe.settings()))
    assert train.parse_args([*base, "--resume"]).recipe.run.resume  # the control: the run exists and resumes
    with pytest.raises(cli.UsageError, match="--resume continues the run folder and --overwrite deletes it"):
        train.parse_args([*base, "--resume", "--overwrite"])
