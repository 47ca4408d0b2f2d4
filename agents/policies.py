"""Policies that plug the job scorer into Stable-Baselines3 and sb3-contrib through ``policy``/``policy_kwargs``.

- :class:`ScorerPolicy` for ``MaskablePPO``: the actor's logits are the per-slot scores (no output layer on top,
  so the policy stays permutation-equivariant); masks come from ``env.action_masks()`` as usual.
- ``"MlpPolicy"`` stays available for comparison.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn

from agents.scorer import ScorerActorCritic
from hpcgym.observation import PRESENT


def slots_and_features(space: spaces.Box) -> tuple[int, int]:
    """Slots and features of an hpcgym observation space ``(slots + 1, features)``."""
    if len(space.shape) != 2:
        raise ValueError(f"the job scorer needs an observation of shape (slots + 1, features), not {space.shape}")
    return space.shape[0] - 1, space.shape[1]


class ScorerPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy with the shared job scorer (``policy_kwargs``: ``hidden``, ``critic``, ``ranks``)."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Discrete, lr_schedule: Any,
                 hidden: tuple[int, ...] = (32, 16), critic: tuple[int, ...] = (64,), ranks: tuple[int, ...] = (),
                 **kwargs: Any):
        self.hidden, self.critic, self.ranks = tuple(hidden), tuple(critic), tuple(ranks)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_mlp_extractor(self) -> None:
        slots, features = slots_and_features(self.observation_space)
        self.mlp_extractor = ScorerActorCritic(slots, features, self.hidden, self.critic, self.ranks)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the scores are the logits
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(hidden=self.hidden, critic=self.critic, ranks=self.ranks)
        return data


def valid_from_observation(obs: np.ndarray, slots: int) -> np.ndarray:
    """Valid-slot masks read from observations: the ``present`` flag of the job rows."""
    obs = np.asarray(obs)
    batch = obs.reshape(-1, slots + 1, obs.shape[-1]) if obs.ndim >= 2 else obs
    return batch[:, :slots, PRESENT] > 0.5
