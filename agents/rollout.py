"""Play a trained (or untrained) agent on fixed windows, many at a time, through the vector environment.

Evaluation and validation both run an agent deterministically, with its action masks, on pinned windows. Doing
it in the vector environment scores every window's decision in one batched forward pass. :func:`play_together`
plays several agents on one window (an evaluation's whole split) in one vector environment, a copy each.

An sb3-contrib masked policy is asked through its own ``_predict`` (what its ``predict`` calls), with eval mode set
once: ``predict``'s per-call work (the mode, its checks, a copy of the observation, autograd's bookkeeping) was a
third of a decision's inference (:func:`chooser`). The actions are the same.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

from hpcgym.vector import SchedulingVectorEnv


def act(model: Any, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """The model's deterministic actions for a batch of observations (masked where the model takes masks)."""
    return chooser(model)(obs, masks)


def chooser(model: Any) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``(observations, masks) -> actions``: the model's deterministic choices (masked where it takes masks).

    For sb3-contrib's ``MaskablePPO`` (its own ``predict``), the policy's ``_predict`` under ``torch.inference_mode``,
    eval mode set now: what ``predict`` computes, without its per-call overhead. Any other model: its ``predict``.
    """
    policy = getattr(model, "policy", None)
    if isinstance(policy, MaskableActorCriticPolicy) and type(model).predict is MaskablePPO.predict:
        policy.set_training_mode(False)
        shape = (-1, *policy.observation_space.shape)

        def masked(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
            with torch.inference_mode():  # predict's steps: the observation as a tensor of the policy's shape, _predict
                chosen = policy._predict(torch.as_tensor(np.asarray(obs).reshape(shape), device=policy.device),
                                         deterministic=True, action_masks=masks)
            return chosen.cpu().numpy()

        return masked
    if "action_masks" in inspect.signature(model.predict).parameters:
        return lambda obs, masks: model.predict(obs, action_masks=masks, deterministic=True)[0]
    return lambda obs, masks: model.predict(obs, deterministic=True)[0]


#: Windows :func:`play_windows` plays at once by default.
BATCH = 16


def play_windows(model: Any, starts: Sequence[int], batch: int = BATCH,
                 progress: Callable[[np.ndarray], None] | None = None, **env_kwargs: Any) -> list[dict[str, Any]]:
    """The final info of one episode per pinned window (in the order of ``starts``).

    Args:
        model: anything with SB3's ``predict``.
        starts: window starts (rows of the environment's split).
        batch: windows played at once.
        progress: called after each step, as :func:`play_together`'s.
        **env_kwargs: the :class:`~hpcgym.env.SchedulingEnv` arguments (``machine``, ``workload``, ``window``...).
    """
    if not len(starts):
        return []
    venv = SchedulingVectorEnv(num_envs=min(batch, len(starts)), **env_kwargs)
    choose = chooser(model)
    out: list[dict[str, Any]] = [{} for _ in starts]
    for lo in range(0, len(starts), venv.num_envs):
        chunk = [int(s) for s in starts[lo:lo + venv.num_envs]]
        out[lo:lo + len(chunk)] = _episodes(venv, chunk, choose, progress)
    return out


def play_together(models: Sequence[Any], start: int, progress: Callable[[np.ndarray], None] | None = None,
                  **env_kwargs: Any) -> list[dict[str, Any]]:
    """The final info of each model's episode on the one pinned window at ``start`` (in the order of ``models``).

    The models play in one vector environment, a copy each (a copy plays what one environment alone would), so that
    each step of the environment is one compiled call for all of them. ``progress``: called after each step with
    every copy's clock (``info["time"]``; infinite once its episode ended), e.g. to move a progress bar.
    ``env_kwargs``: as :func:`play_windows`.
    """
    if not len(models):
        return []
    venv = SchedulingVectorEnv(num_envs=len(models), **env_kwargs)
    choosers = [chooser(m) for m in models]

    def choose(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        return np.concatenate([np.asarray(c(obs[i:i + 1], masks[i:i + 1])).reshape(1) for i, c in enumerate(choosers)])

    return _episodes(venv, [int(start)] * len(models), choose, progress)


def _episodes(venv: SchedulingVectorEnv, starts: list[int], choose: Callable[[np.ndarray, np.ndarray], np.ndarray],
              progress: Callable[[np.ndarray], None] | None = None) -> list[dict[str, Any]]:
    """One episode per copy on its pinned window (``starts``: as many as there are copies, or fewer)."""
    live = set(range(len(starts)))
    padded = starts + [starts[-1]] * (venv.num_envs - len(starts))  # pad a last batch; its extra copies are ignored
    out: list[dict[str, Any]] = [{} for _ in starts]
    ended = np.zeros(venv.num_envs, bool)
    obs, _ = venv.reset(seed=0, options={"window_start": padded})
    while live:
        obs, _, terminated, _, info = venv.step(choose(obs, venv.action_masks()))
        for i in np.flatnonzero(terminated):
            if int(i) in live:  # a copy's first episode is its pinned window; later ones are redraws
                out[int(i)] = venv.final_infos[int(i)]
                live.discard(int(i))
                ended[i] = True
        if progress is not None:
            progress(np.where(ended, np.inf, info["time"]))  # an ended copy's clock is its next episode's
    return out
