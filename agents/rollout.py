"""Play a trained (or untrained) agent on fixed windows, many at a time, through the vector environment.

Evaluation and validation both run an agent deterministically, with its action masks, on pinned windows. Doing
it in the vector environment scores every window's decision in one batched forward pass.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from hpcgym.vector import SchedulingVectorEnv


def act(model: Any, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """The model's deterministic actions for a batch of observations (masked where the model takes masks)."""
    if "action_masks" in inspect.signature(model.predict).parameters:
        return model.predict(obs, action_masks=masks, deterministic=True)[0]
    return model.predict(obs, deterministic=True)[0]


def play_windows(model: Any, starts: Sequence[int], batch: int = 16, **env_kwargs: Any) -> list[dict[str, Any]]:
    """The final info of one episode per pinned window (in the order of ``starts``).

    Args:
        model: anything with SB3's ``predict``.
        starts: window starts (rows of the environment's split).
        batch: windows played at once.
        **env_kwargs: the :class:`~hpcgym.env.SchedulingEnv` arguments (``machine``, ``workload``, ``window``...).
    """
    if not len(starts):
        return []
    venv = SchedulingVectorEnv(num_envs=min(batch, len(starts)), **env_kwargs)
    out: list[dict[str, Any]] = [{} for _ in starts]
    for lo in range(0, len(starts), venv.num_envs):
        chunk = [int(s) for s in starts[lo:lo + venv.num_envs]]
        live = set(range(len(chunk)))
        chunk += [chunk[-1]] * (venv.num_envs - len(chunk))  # pad the last batch; its extra copies are ignored
        obs, _ = venv.reset(seed=0, options={"window_start": chunk})
        while live:
            obs, _, terminated, _, _ = venv.step(act(model, obs, venv.action_masks()))
            for i in np.flatnonzero(terminated):
                if int(i) in live:  # a copy's first episode is its pinned window; later ones are redraws
                    out[lo + int(i)] = venv.final_infos[int(i)]
                    live.discard(int(i))
    return out
