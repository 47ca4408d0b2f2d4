"""Training callbacks: scheduling metrics in TensorBoard, a progress bar, validation, and checkpoints for resumes.

A callback whose bookkeeping matters to the rest of a run has ``state()`` and ``load_state(state)``; a checkpoint
carries that state (:mod:`agents.resume`).
"""

from __future__ import annotations

import re
import sys
import time
import warnings
import zipfile
from pathlib import Path

from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback
from tqdm.auto import tqdm

from hpcgym.io import atomic_write


class SchedulingMetricsCallback(BaseCallback):
    """Log each finished episode's scheduling metrics under ``sched/``.

    They are the agent's mean bounded slowdown and wait, utilization, and the objective of every ``compare_with``
    heuristic on the same window (``sched/<name>``).
    """

    def __init__(self, verbose: int = 0):
        super().__init__(verbose)
        self.episodes = 0

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            if not info.get("done") or "metrics" not in info:
                continue
            self.episodes += 1
            m = info["metrics"]
            self.logger.record_mean("sched/bsld", m["bsld_mean"])
            self.logger.record_mean("sched/wait", m["wait_mean"])
            self.logger.record_mean("sched/utilization", m["utilization"])
            for name, value in info.get("compare", {}).items():
                self.logger.record_mean(f"sched/{name}", value)
        self.logger.record("sched/episodes", self.episodes)
        return True

    def state(self) -> dict:
        """The episode count (for a checkpoint)."""
        return {"episodes": self.episodes}

    def load_state(self, state: dict) -> None:
        """Continue from a checkpoint's :meth:`state`."""
        self.episodes = int(state["episodes"])


class HyperparametersCallback(BaseCallback):
    """Write a run's settings to TensorBoard's text tab once, as CleanRL does (``hyperparameters``)."""

    def __init__(self, settings: dict):
        super().__init__()
        rows = "\n".join(f"|{k}|{v}|" for k, v in settings.items())
        self.text = f"|param|value|\n|-|-|\n{rows}"

    def _on_training_start(self) -> None:
        self.logger.record("hyperparameters", self.text, exclude=("stdout", "log", "json", "csv"))

    def _on_step(self) -> bool:
        return True


class ProgressBarCallback(BaseCallback):
    """Progress over the timesteps still to train: a tqdm bar on a terminal, a line every 10% in a log file.

    SB3 collects whole rollouts, so a run may end a little past ``total``; the bar stops at ``total``.
    """

    def __init__(self, total: int):
        super().__init__()
        self.total = max(int(total), 1)
        self.bar: tqdm | None = None
        self.done = self.next_line = 0
        self.tty = sys.stderr.isatty()

    def _on_training_start(self) -> None:
        if self.tty:
            self.bar = tqdm(total=self.total, desc="training", unit="step")
        self.started = time.perf_counter()

    def _on_step(self) -> bool:
        step = min(self.training_env.num_envs, self.total - self.done)
        self.done += step
        if self.bar is not None:
            self.bar.update(step)
        elif self.done >= self.next_line:
            rate = self.done / max(time.perf_counter() - self.started, 1e-9)
            sys.stderr.write(f"training: {self.done:,}/{self.total:,} steps ({self.done / self.total:.0%}), "
                             f"{rate:,.0f} steps/s\n")
            sys.stderr.flush()
            self.next_line = self.done + max(self.total // 10, 1)  # 10% apart, not one line per step behind
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()


def latest_checkpoint(directory: str | Path) -> tuple[Path, int] | None:
    """The newest intact ``*_<steps>_steps.zip`` checkpoint in ``directory`` and its step count, or None.

    A checkpoint that is not a complete zip archive (damaged after its save: the saves are atomic) is skipped with
    a warning, so that a resume falls back to the one before.
    """
    found = []
    for path in Path(directory).glob("*_steps.zip"):
        m = re.search(r"_(\d+)_steps\.zip$", path.name)
        if m:
            found.append((int(m.group(1)), path))
    for steps, path in sorted(found, reverse=True):
        if intact(path):
            return path, steps
        warnings.warn(f"{path} is not a complete checkpoint (a save was interrupted?); using an older one",
                      stacklevel=2)
    return None


def intact(path: Path) -> bool:
    """Whether ``path`` is a complete SB3 model file (a zip archive whose members all pass their CRC check)."""
    try:
        with zipfile.ZipFile(path) as z:
            return "data" in z.namelist() and z.testzip() is None
    except (zipfile.BadZipFile, OSError):
        return False


def replay_buffer_for(checkpoint: Path) -> Path | None:
    """The replay buffer saved beside a DQN checkpoint, if any."""
    m = re.search(r"^(.*)_(\d+)_steps\.zip$", checkpoint.name)
    if not m:
        return None
    candidate = checkpoint.with_name(f"{m.group(1)}_replay_buffer_{m.group(2)}_steps.pkl")
    return candidate if candidate.exists() else None


class ValidationCallback(BaseCallback):
    """Score the deterministic agent on fixed validation windows; keep the best model; log the learning curve.

    It runs before the first step (the starting network: untrained, or cloned) and then every ``every``
    timesteps. Each score goes to TensorBoard (``val/bsld``) and to ``curve`` (a CSV of ``timesteps, val_bsld,
    network``, appended across resumes); a model better than every earlier one is saved to ``best`` (atomically).
    The curve starts with the warm start's candidates (:attr:`prior`: the untrained and the cloned network, the one
    RL did not start from marked "not kept"), so that it shows what training added. The windows come from the
    train split, never the test split.

    Args:
        starts: window starts in the validation table.
        every: timesteps between validations.
        best: path of the best model (``.zip``).
        curve: path of the learning-curve CSV.
        env_kwargs: the environment of the validation windows (:func:`agents.rollout.play_windows`).
    """

    def __init__(self, starts: list[int], every: int, best: Path, curve: Path, env_kwargs: dict):
        super().__init__()
        self.starts, self.every, self.best, self.curve, self.env_kwargs = starts, max(int(every), 1), best, curve, \
            env_kwargs
        self.best_value = float("inf")
        self.next_at, self.last_at = 0, -1
        self.initial: float | None = None  # the starting network's score, when the caller measured it already
        self.prior: dict[str, float] = {}  # network label -> score, written first (the warm start's candidates)
        self.start_label = "start"
        self.restored = False  # load_state was called: the bookkeeping came with the checkpoint

    def state(self) -> dict:
        """The bookkeeping a resumed run needs: the best score so far, when the next validation is due, ..."""
        return {name: getattr(self, name) for name in ("best_value", "next_at", "last_at", "initial", "prior",
                                                        "start_label")}

    def load_state(self, state: dict) -> None:
        """Continue from a checkpoint's :meth:`state`."""
        for name, value in state.items():
            setattr(self, name, value)
        self.restored = True

    def _on_training_start(self) -> None:
        if self.curve.exists() and not self.restored:  # an old checkpoint without a state: rebuild it from the curve
            import pandas as pd

            done = pd.read_csv(self.curve)
            kept = done[~done["network"].str.contains("not kept")]
            if len(kept):
                self.best_value = float(kept["val_bsld"].min())
                self.next_at = int(done["timesteps"].max()) + self.every
        if self.num_timesteps >= self.next_at:
            self.validate()

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next_at:
            self.validate()
        return True

    def _on_training_end(self) -> None:
        if self.num_timesteps > self.last_at:
            self.validate()

    def score(self, model) -> float:
        """Mean bsld of ``model`` (deterministic) over the validation windows."""
        from agents.rollout import play_windows

        infos = play_windows(model, self.starts, **self.env_kwargs)
        return float(sum(i["metrics"]["bsld_mean"] for i in infos) / len(infos))

    def validate(self) -> float:
        """Score the current model, record it, and save it if it is the best so far."""
        value = self.score(self.model) if self.initial is None else self.initial
        self.initial = None
        self.last_at = self.num_timesteps
        self.next_at = self.num_timesteps + self.every
        self.logger.record("val/bsld", value)
        rows = [] if self.curve.exists() else ["timesteps,val_bsld,network"]
        rows += [f"0,{v},{label}" for label, v in self.prior.items()]
        rows.append(f"{self.num_timesteps},{value},{self.start_label if self.num_timesteps == 0 else 'ppo'}")
        self.prior = {}
        with open(self.curve, "a") as f:
            f.write("\n".join(rows) + "\n")
        if value < self.best_value:
            self.best_value = value
            save_atomic(self.model, self.best)
        return value


def save_atomic(model, path: Path) -> None:
    """``model.save`` to a temporary file in the same folder, then rename it into place."""
    atomic_write(path, model.save)




#: Checkpoints a run keeps (the newest ones): more than one, in case the newest is damaged after its save.
KEEP_CHECKPOINTS = 3


class AtomicCheckpointCallback(CheckpointCallback):
    """Checkpoints from which a resumed run goes on exactly as the uninterrupted run (:mod:`agents.resume`).

    A checkpoint is taken when a rollout starts, once ``every`` timesteps have passed since the last one (or since
    the start): PPO's rollout buffer is empty then. It is SB3's ``<prefix>_<steps>_steps.zip``, the state file
    beside it (generators, the environments' history, the ``carry`` callbacks' state, the sizes of the
    ``appended`` files) and, with ``save_replay_buffer``, the replay buffer. Every file is written to a temporary
    name and renamed into place, the zip last: an intact zip means its companions are complete, and a kill during
    a save leaves the previous checkpoints as they were. Only the newest replay buffer is kept (a resume continues
    from the newest checkpoint): the masked DQN's 100,000-step buffer of 128-slot observations takes about 800 MB,
    and one per checkpoint (4 GB per run) filled the project machine's disk in three five-seed runs.

    Args:
        every: timesteps between checkpoints.
        save_path: the checkpoints' folder.
        name_prefix: the files' prefix.
        save_replay_buffer: also save the replay buffer (off-policy algorithms).
        carry: callbacks whose ``state()`` the checkpoints hold, by name.
        appended: files the run appends to (cut back to their size at the checkpoint on resume).
        keep: the newest checkpoints kept (older ones and their state files are removed).

    Setting :attr:`stop_requested` (``experiments.train`` does on Ctrl-C) takes a checkpoint when the next rollout
    starts and stops training there with ``KeyboardInterrupt``, as a kill right after a checkpoint would, so an
    interrupted run loses at most one rollout and resumes exactly.
    """

    def __init__(self, every: int, save_path: str, name_prefix: str = "model", save_replay_buffer: bool = False,
                 carry: dict | None = None, appended: tuple[Path, ...] = (), keep: int = KEEP_CHECKPOINTS):
        super().__init__(1, save_path, name_prefix, save_replay_buffer)
        self.every, self.carry, self.appended = max(int(every), 1), dict(carry or {}), tuple(appended)
        self.keep = max(int(keep), 1)
        self.last_saved = 0
        self.pending_log: dict = {}  # a resumed run: what the logger held at the checkpoint (agents.resume)
        self.stop_requested = False  #: set (by a Ctrl-C handler): checkpoint when the next rollout starts, then stop
        self.stopped = False  #: training stopped (``KeyboardInterrupt``) right after that checkpoint

    def _on_training_start(self) -> None:
        from agents.resume import put_log_back

        self.last_saved = self.num_timesteps  # a resumed run starts at its checkpoint
        put_log_back(self.logger, self.pending_log)  # learn() made a new logger: its first log is the killed run's
        self.pending_log = {}

    def _on_rollout_start(self) -> None:
        if self.stop_requested:
            if self.num_timesteps > self.last_saved:
                self.save()
            self.stopped = True
            # as a kill right after a checkpoint: no end-of-training work (a validation, a best.zip) that the
            # resumed run would not redo the same way
            raise KeyboardInterrupt("stopped after the checkpoint at the start of a rollout")
        if self.num_timesteps - self.last_saved >= self.every:
            self.save()

    def _on_step(self) -> bool:
        return True

    def save(self) -> Path:
        """Write a checkpoint now (see the class docstring); return its zip."""
        from agents.resume import save_state, state_path

        checkpoint = Path(self._checkpoint_path(extension="zip"))
        newest = None
        if self.save_replay_buffer and getattr(self.model, "replay_buffer", None) is not None:
            newest = Path(self._checkpoint_path("replay_buffer_", "pkl"))
            atomic_write(newest, self.model.save_replay_buffer)
        save_state(state_path(checkpoint), self.model, self.carry, self.appended)
        atomic_write(checkpoint, self.model.save)
        if newest is not None:
            for older in newest.parent.glob(f"{self.name_prefix}_replay_buffer_*_steps.pkl"):
                if older != newest:
                    older.unlink(missing_ok=True)
        self._prune()
        self.last_saved = self.num_timesteps
        return checkpoint

    def _prune(self) -> None:
        """Keep the newest :attr:`keep` checkpoints and their state files (a resume needs the newest intact one)."""
        from agents.resume import state_path

        name = re.compile(rf"{re.escape(self.name_prefix)}_(\d+)_steps\.zip")
        found = sorted((int(m.group(1)), path) for path in Path(self.save_path).glob(f"{self.name_prefix}_*_steps.zip")
                       if (m := name.fullmatch(path.name)))
        for _, path in found[:-self.keep]:
            state_path(path).unlink(missing_ok=True)
            path.unlink(missing_ok=True)
