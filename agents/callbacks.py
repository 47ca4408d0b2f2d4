"""Training callbacks: scheduling metrics in TensorBoard, a progress bar, and the latest checkpoint for resumes."""

from __future__ import annotations

import re
from pathlib import Path

from stable_baselines3.common.callbacks import BaseCallback
from tqdm.auto import tqdm


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


class ProgressBarCallback(BaseCallback):
    """A tqdm bar over the timesteps still to train (SB3's own needs ``rich``)."""

    def __init__(self, total: int):
        super().__init__()
        self.total = total
        self.bar: tqdm | None = None

    def _on_training_start(self) -> None:
        self.bar = tqdm(total=self.total, desc="training", unit="step")

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.update(self.training_env.num_envs)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()


def latest_checkpoint(directory: str | Path) -> tuple[Path, int] | None:
    """The newest ``*_<steps>_steps.zip`` checkpoint in ``directory`` and its step count, or None."""
    found = []
    for path in Path(directory).glob("*_steps.zip"):
        m = re.search(r"_(\d+)_steps\.zip$", path.name)
        if m:
            found.append((int(m.group(1)), path))
    if not found:
        return None
    steps, path = max(found)
    return path, steps


def replay_buffer_for(checkpoint: Path) -> Path | None:
    """The replay buffer saved beside a DQN checkpoint, if any."""
    m = re.search(r"^(.*)_(\d+)_steps\.zip$", checkpoint.name)
    if not m:
        return None
    candidate = checkpoint.with_name(f"{m.group(1)}_replay_buffer_{m.group(2)}_steps.pkl")
    return candidate if candidate.exists() else None
