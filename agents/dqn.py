"""A DQN that respects action masks, as a thin subclass of Stable-Baselines3's DQN.

SB3's DQN has no masks. Here the masks are read from the observation itself (column 0 of each job row says whether
the slot holds a job), which keeps the replay buffer unchanged:

- the Q-network sets the values of empty slots to a large negative number, so the greedy action, and the target's
  max over next actions, only ever consider valid slots;
- random actions (warm-up and epsilon-greedy exploration) are drawn uniformly from the valid slots.

The Q-network is either the shared job scorer (``policy_kwargs={"scorer": True}``, the default) or a plain MLP.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import DQN
from stable_baselines3.dqn.policies import DQNPolicy, QNetwork

from agents.policies import slots_and_features, valid_from_observation
from agents.scorer import SlotScorer
from hpcgym.observation import PRESENT

INVALID_Q = -1e9


class MaskedQNetwork(QNetwork):
    """Q-values per slot, with empty slots pushed to ``INVALID_Q``."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Discrete, scorer: bool = True,
                 hidden: tuple[int, ...] = (32, 16), ranks: tuple[int, ...] = (), **kwargs: Any):
        super().__init__(observation_space, action_space, **kwargs)
        self.slots, self.n_features = slots_and_features(observation_space)
        self.use_scorer, self.hidden, self.ranks = scorer, tuple(hidden), tuple(ranks)
        if scorer:
            self.scorer = SlotScorer(self.slots, self.n_features, self.hidden, self.ranks)
            self.q_net = torch.nn.Identity()  # unused: the scorer replaces it

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Masked Q-values ``(batch, slots)``."""
        if self.use_scorer:
            q = self.scorer(obs.reshape(obs.shape[0], -1).float())[0]
        else:
            q = super().forward(obs)
        present = obs.reshape(obs.shape[0], self.slots + 1, -1)[:, :self.slots, PRESENT] > 0.5
        return torch.where(present, q, torch.full_like(q, INVALID_Q))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(scorer=self.use_scorer, hidden=self.hidden, ranks=self.ranks)
        return data


class MaskedDQNPolicy(DQNPolicy):
    """DQN policy with :class:`MaskedQNetwork` Q-networks (``policy_kwargs``: ``scorer``, ``hidden``, ``ranks``)."""

    def __init__(self, *args: Any, scorer: bool = True, hidden: tuple[int, ...] = (32, 16),
                 ranks: tuple[int, ...] = (), **kwargs: Any):
        self.scorer, self.hidden, self.ranks = scorer, tuple(hidden), tuple(ranks)
        super().__init__(*args, **kwargs)

    def make_q_net(self) -> MaskedQNetwork:
        """Build a masked Q-network (SB3 calls this for the online and the target network)."""
        net_args = self._update_features_extractor(self.net_args, features_extractor=None)
        return MaskedQNetwork(scorer=self.scorer, hidden=self.hidden, ranks=self.ranks,
                              **net_args).to(self.device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(scorer=self.scorer, hidden=self.hidden, ranks=self.ranks)
        return data


class MaskedDQN(DQN):
    """SB3's DQN with exploration and greedy choices restricted to valid slots (see the module docstring)."""

    policy_aliases = {**DQN.policy_aliases, "MaskedDQNPolicy": MaskedDQNPolicy}

    def __init__(self, policy: Any = MaskedDQNPolicy, env: Any = None, **kwargs: Any):
        super().__init__(policy, env, **kwargs)
        self._explore = np.random.default_rng(self.seed)  # exploration draws: seeded, never the global numpy RNG

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_explore"]

    def _random_valid(self, obs: np.ndarray) -> np.ndarray:
        valid = valid_from_observation(obs, self.action_space.n)
        return np.array([self._explore.choice(np.flatnonzero(v)) if v.any() else 0 for v in valid])

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = False):
        """Greedy over valid slots; with probability epsilon, a uniformly random valid slot."""
        if not deterministic and self._explore.random() < self.exploration_rate:
            batch = np.asarray(observation).ndim == 3
            action = self._random_valid(observation)
            return (action if batch else action[0]), state
        return self.policy.predict(observation, state, episode_start, deterministic)

    def _sample_action(self, learning_starts: int, action_noise=None, n_envs: int = 1):
        if self.num_timesteps < learning_starts:
            action = self._random_valid(self._last_obs)
            return action, action
        return super()._sample_action(learning_starts, action_noise, n_envs)
