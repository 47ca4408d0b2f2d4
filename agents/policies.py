"""Policies that plug the job scorer into Stable-Baselines3 and sb3-contrib through ``policy``/``policy_kwargs``.

- :class:`ScorerPolicy` for ``MaskablePPO``: the actor's logits are the per-slot scores (no output layer on top,
  so the policy stays permutation-equivariant); masks come from ``env.action_masks()`` as usual.
- ``"MlpPolicy"`` stays available for comparison.

**The KL anchor.** With ``anchor=True`` the policy keeps a frozen copy of its scorer (:meth:`ScorerPolicy.set_anchor`:
the network RL starts from, e.g. a clone or a residual at zero) and reports, where PPO asks for the entropy of its
action distribution, ``-KL(pi || anchor)`` instead. PPO's loss adds ``ent_coef * -mean(entropy)``, so the entropy
bonus becomes a penalty ``ent_coef * mean KL(pi || anchor)``: the policy may move where the reward pays for it, and
is pulled back to its warm start elsewhere (SB3 logs the mean KL as ``train/entropy_loss``). This plugs into
MaskablePPO through ``policy_kwargs``, without a copy of its training loop.

**No critic.** With ``value=False`` the value head is a constant zero (:class:`NoValue`): PPO's generalized advantage
estimate with ``gae_lambda=0`` is then the step's own reward, ``A_t = r_t``, a loss linear in each decision's
credit. It is meant for the per-decision ``reward="counterfactual"``, whose credits are already advantages against
the baseline heuristic; with a window-end reward it leaves PPO no baseline at all.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn

from agents import NETWORKS
from agents.scorer import ScorerActorCritic
from hpcgym.observation import PRESENT


def slots_and_features(space: spaces.Box) -> tuple[int, int]:
    """Slots and features of an hpcgym observation space ``(slots + 1, features)``."""
    if len(space.shape) != 2:
        raise ValueError(f"the job scorer needs an observation of shape (slots + 1, features), not {space.shape}")
    return space.shape[0] - 1, space.shape[1]


class ScorerPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy with the shared job scorer.

    ``policy_kwargs``: ``hidden``, ``critic``, ``ranks``, ``attention`` and ``prior`` (the scorer's:
    :class:`agents.scorer.SlotScorer`), ``anchor`` (the KL anchor of the module docstring) and ``value`` (False: no
    critic, the module docstring).
    """

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Discrete, lr_schedule: Any,
                 hidden: tuple[int, ...] = (32, 16), critic: tuple[int, ...] = (64,), ranks: tuple[int, ...] = (),
                 attention: int = 0, prior: dict | None = None, anchor: bool = False, value: bool = True,
                 **kwargs: Any):
        self.hidden, self.critic, self.ranks = tuple(hidden), tuple(critic), tuple(ranks)
        self.attention, self.prior, self.anchored, self.valued = int(attention), prior, bool(anchor), bool(value)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_mlp_extractor(self) -> None:
        slots, features = slots_and_features(self.observation_space)
        hold = self.action_space.n == slots + 1  # the environment's action="hold": one more action, the hold
        self.mlp_extractor = ScorerActorCritic(slots, features, self.hidden, self.critic, self.ranks, self.attention,
                                               self.prior, hold)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the scores are the logits
        if not self.valued:
            self.value_net = NoValue()
        self.anchor = None
        if self.anchored:  # built here so that a saved policy's anchor weights have a home when it is loaded
            self.anchor = copy.deepcopy(self.mlp_extractor.scorer).requires_grad_(False)
        self.optimizer = self.optimizer_class([p for p in self.parameters() if p.requires_grad], lr=lr_schedule(1),
                                              **self.optimizer_kwargs)

    def set_anchor(self) -> None:
        """Freeze a copy of the current scorer as the anchor (call it once the warm start is in place)."""
        if self.anchor is None:
            raise ValueError("this policy has no KL anchor: build it with policy_kwargs={'anchor': True}")
        self.anchor.load_state_dict(self.mlp_extractor.scorer.state_dict())

    def evaluate_actions(self, obs: torch.Tensor, actions: torch.Tensor,
                         action_masks: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Values, log-probabilities and the entropy term: ``-KL(pi || anchor)`` with an anchor, else the entropy."""
        features = self.extract_features(obs)
        latent_pi, latent_vf = self.mlp_extractor(features)
        distribution = self._get_action_dist_from_latent(latent_pi)
        if action_masks is not None:
            distribution.apply_masking(action_masks)
        values = self.value_net(latent_vf)
        log_prob = distribution.log_prob(actions)
        if self.anchor is None:
            return values, log_prob, distribution.entropy()
        with torch.no_grad():
            anchor_logits = self.anchor(features)[0]
        dist = distribution.distribution
        valid = dist.masks if dist.masks is not None else torch.ones_like(dist.logits, dtype=torch.bool)
        return values, log_prob, -kl_from(dist.logits, anchor_logits, valid)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(hidden=self.hidden, critic=self.critic, ranks=self.ranks, attention=self.attention,
                    prior=self.prior, anchor=self.anchored, value=self.valued)
        return data


class NoValue(nn.Module):
    """A value head that says 0 for every state (``ScorerPolicy(value=False)``); it has no parameters."""

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        """Zeros of shape ``(batch, 1)``, outside the autograd graph."""
        return latent.new_zeros(latent.shape[0], 1)


def kl_from(log_p: torch.Tensor, anchor_logits: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``KL(p || q)`` per row, ``p`` given by its (masked, normalized) log-probabilities and ``q`` by logits.

    Both are distributions over the ``valid`` slots only; invalid slots contribute nothing (their logits are made
    very negative, not infinite: an infinity in the branch ``torch.where`` drops still poisons its gradient).
    """
    log_q = torch.log_softmax(torch.where(valid, anchor_logits, -1e8), dim=-1)
    terms = torch.where(valid, log_p.exp() * (log_p - log_q), 0.0)
    return terms.sum(-1)


def valid_from_observation(obs: np.ndarray, slots: int) -> np.ndarray:
    """Valid-slot masks read from observations: the ``present`` flag of the job rows."""
    obs = np.asarray(obs)
    batch = obs.reshape(-1, slots + 1, obs.shape[-1]) if obs.ndim >= 2 else obs
    return batch[:, :slots, PRESENT] > 0.5


def resolve(spec: str) -> type | str:
    """The PPO policy a ``--network`` spec names.

    ``scorer`` (:class:`ScorerPolicy`), ``mlp`` (SB3's ``"MlpPolicy"``) or ``MODULE:CLASS`` (your own
    ``MaskableActorCriticPolicy``, imported).

    Raises:
        UnknownNameError: an unknown name, or a ``MODULE:CLASS`` that does not import.
    """
    import importlib

    from hpcgym.errors import UnknownNameError

    if spec == "scorer":
        return ScorerPolicy
    if spec == "mlp":
        return "MlpPolicy"
    module, colon, name = spec.partition(":")
    try:
        if colon:
            return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UnknownNameError("network", spec, NETWORKS, hint=f"{type(exc).__name__}: {exc}") from None
    raise UnknownNameError("network", spec, NETWORKS, hint="Or give MODULE:CLASS (a MaskableActorCriticPolicy).")

