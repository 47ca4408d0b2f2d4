"""The job-scoring network: one small MLP, shared by every queue slot, scores each job.

Like RLScheduler's kernel network it is permutation-equivariant (reordering the slots reorders the scores) and tiny
(a few hundred weights), so it generalizes across queue lengths and machines. Each slot sees its job row next to
the machine row. The critic pools the slot embeddings (mean over the slots that hold a job) with the machine row.
The observation layout is :mod:`hpcgym.observation`'s: ``slots`` job rows, then one machine row; column 0 of a job
row is 1 for a job and 0 for padding.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from hpcgym.observation import PRESENT


def mlp(sizes: Sequence[int], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Linear layers of the given sizes with an activation between them (none after the last)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


def split_observation(flat: torch.Tensor, slots: int, features: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(batch, (slots + 1) * features)`` -> job rows ``(batch, slots, features)`` and machine row."""
    x = flat.reshape(flat.shape[0], slots + 1, features)
    return x[:, :slots], x[:, slots]


def queue_ranks(values: torch.Tensor, present: torch.Tensor, slots: int) -> torch.Tensor:
    """Each job's rank in its queue by each column of ``values`` (batch, k, columns), divided by ``slots``.

    The rank is a stable sort's position along the queue: 0 for the smallest value, and equal values rank in
    arrival order (the earlier slot first). Padding slots (``present`` false) sort after every job and rank 0.
    """
    keyed = torch.where(present.unsqueeze(-1), values, torch.inf)
    order = torch.sort(keyed, dim=1, stable=True).indices
    positions = torch.arange(values.shape[1], device=values.device).view(1, -1, 1).expand_as(order)
    ranks = torch.empty_like(order).scatter_(1, order, positions)
    return torch.where(present.unsqueeze(-1), ranks.to(values.dtype) / slots, 0.0)


class SlotScorer(nn.Module):
    """Scores every slot with one shared MLP over ``[job row, machine row]``; returns (scores, embeddings).

    Args:
        slots: queue slots.
        features: features per row.
        hidden: hidden layer sizes of the shared MLP.
        ranks: job columns whose rank within the queue (:func:`queue_ranks`) each slot also sees. A job's own
            row says nothing about the others; its rank does, in steps of ``1 / slots`` however close the values
            are (two walltimes a few percent apart differ by about 0.003 in their log-scaled column).
    """

    def __init__(self, slots: int, features: int, hidden: Sequence[int] = (32, 16), ranks: Sequence[int] = ()):
        super().__init__()
        self.slots, self.features, self.ranks = slots, features, tuple(ranks)
        self.embed = mlp([2 * features + len(self.ranks), *hidden], nn.ReLU)
        self.head = nn.Linear(hidden[-1], 1)
        self.embed_dim = hidden[-1]

    def forward(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return scores ``(batch, slots)``, embeddings ``(batch, slots, d)`` and the machine row.

        Padding slots (no job) score 0: the action mask ignores them anyway. Only the slots up to the last one
        that holds a job somewhere in the batch go through the MLP (queues are usually much shorter than the slot
        count); the embeddings of the slots after it are 0, which the critic's pooling ignores.
        """
        jobs, machine = split_observation(flat, self.slots, self.features)
        present = jobs[..., PRESENT] > 0.5
        held = torch.nonzero(present.any(0))
        k = int(held.max()) + 1 if len(held) else 1
        parts = [jobs[:, :k], machine.unsqueeze(1).expand(-1, k, -1)]
        if self.ranks:
            parts.append(queue_ranks(jobs[:, :k, list(self.ranks)], present[:, :k], self.slots))
        pair = torch.cat(parts, dim=-1)
        emb = torch.relu(self.embed(pair))
        scores = torch.where(present[:, :k], self.head(emb).squeeze(-1), 0.0)
        if k < self.slots:
            scores = nn.functional.pad(scores, (0, self.slots - k))
            emb = nn.functional.pad(emb, (0, 0, 0, self.slots - k))
        return scores, emb, machine


class ScorerActorCritic(nn.Module):
    """SB3's ``mlp_extractor`` contract for the job scorer.

    ``latent_pi`` are the slot scores (the logits); ``latent_vf`` is a pooled summary of the queue and the machine
    for the critic.
    """

    def __init__(self, slots: int, features: int, hidden: Sequence[int] = (32, 16), critic: Sequence[int] = (64,),
                 ranks: Sequence[int] = ()):
        super().__init__()
        self.scorer = SlotScorer(slots, features, hidden, ranks)
        self.critic = mlp([self.scorer.embed_dim + features, *critic], nn.ReLU)
        self.latent_dim_pi = slots
        self.latent_dim_vf = critic[-1]

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both latents, from one pass of the scorer."""
        scores, emb, machine = self.scorer(features)
        return scores, self._value_latent(features, emb, machine)

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        """Slot scores."""
        return self.scorer(features)[0]

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        """Masked mean of the slot embeddings, with the machine row."""
        _, emb, machine = self.scorer(features)
        return self._value_latent(features, emb, machine)

    def _value_latent(self, features: torch.Tensor, emb: torch.Tensor, machine: torch.Tensor) -> torch.Tensor:
        present = features.reshape(features.shape[0], self.scorer.slots + 1, -1)[:, :-1, PRESENT:PRESENT + 1]
        pooled = (emb * present).sum(1) / present.sum(1).clamp(min=1.0)
        return torch.relu(self.critic(torch.cat([pooled, machine], dim=-1)))
