"""The job-scoring network: one small MLP, shared by every queue slot, scores each job.

Like RLScheduler's kernel network it is permutation-equivariant (reordering the slots reorders the scores) and tiny
(a few hundred weights), so it generalizes across queue lengths and machines. Each slot sees its job row next to
the machine row. The critic pools the slot embeddings (mean over the slots that hold a job) with the machine row.
The observation layout is :mod:`hpcgym.observation`'s: ``slots`` job rows, then one machine row; column 0 of a job
row is 1 for a job and 0 for padding.

Two options keep that symmetry:

- *attention* (:class:`QueueAttention`): each slot's embedding also reads every other job's, through masked
  self-attention without positions, so a job's score can depend on what else waits;
- a *prior* (:class:`PriorScore`): a fixed heuristic's score, computed from the observation's own columns, is added
  to the learned scores. The network then learns a *residual*: with its output layer at zero it plays the heuristic
  exactly, with no cloning error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from hpcgym.observation import JOB_FEATURES, JOB_FEATURES_V1, PRESENT

#: A hold's learned offset from the best job's logit once :meth:`SlotScorer.zero_output` set it (about 5% of the
#: probability when one job stands out).
HOLD_START = -3.0
#: The observation columns a prior reads: the wait, the walltime, the nodes and (v1) the runtime estimate.
WAIT, WALLTIME, NODES, ESTIMATE = (JOB_FEATURES.index("wait"), JOB_FEATURES.index("walltime"),
                                   JOB_FEATURES.index("nodes"), JOB_FEATURES_V1.index("predicted"))


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


class PriorScore(nn.Module):
    """A heuristic's preference per slot, read from the observation: ``-score / ((a + b + c) * temperature)``.

    ``score = a log r + b log n + c log walltime - d w / 3600`` is :mod:`baselines.tuned`'s family (SJF, SAF and the
    tuned fits are points of it; lower runs first), with ``r`` the job's estimate (the ``predicted`` column of a
    ``v1`` observation; the walltime in ``v0``), ``n`` its nodes and ``w`` its wait in seconds. Each quantity is
    recovered from its log-scaled column (``hpcgym.env``: a time ``x`` is ``log1p(x) / log1p(time_scale)``), so the
    prior needs the run's ``time_scale``, the environment's wait scale and the machine's nodes. A value above its
    scale is clipped to 1 in the observation, and reads as the scale here.

    Dividing by ``a + b + c`` makes the temperature comparable across fits: at temperature ``t``, two jobs whose
    weighted size differs by a factor ``e**t`` differ by one logit. The arg-max is the heuristic's choice (ties:
    the earlier slot, as the heuristic's earlier arrival).

    Args:
        weights: ``(a, b, c, d)``.
        temperature: the softness of the preference (> 0).
        time_scale: seconds that the time columns map to 1.
        wait_scale: seconds that the wait column maps to 1.
        nodes: the machine's nodes.
        features: the observation's columns per row (8: ``v0``, 12: ``v1``).
    """

    def __init__(self, weights: Sequence[float], temperature: float, time_scale: float, wait_scale: float,
                 nodes: int, features: int):
        super().__init__()
        a, b, c, d = (float(w) for w in weights)
        if not (a + b + c > 0 and temperature > 0 and time_scale > 0 and wait_scale > 0 and nodes > 0):
            raise ValueError("a prior needs a + b + c > 0 and a positive temperature, scales and nodes")
        self.weights, self.temperature, self.nodes = (a, b, c, d), float(temperature), int(nodes)
        self.log_time, self.log_wait = math.log1p(time_scale), math.log1p(wait_scale)
        self.estimate = ESTIMATE if features > ESTIMATE else WALLTIME

    def forward(self, jobs: torch.Tensor) -> torch.Tensor:
        """Prior logits ``(batch, k)`` of job rows ``(batch, k, features)`` (padding rows give finite values)."""
        x = jobs.double()
        a, b, c, d = self.weights

        def log_time(col: int) -> torch.Tensor:
            return torch.log(torch.expm1(x[..., col] * self.log_time).clamp(min=1.0))

        score = a * log_time(self.estimate) + c * log_time(WALLTIME)
        score = score + b * torch.log((x[..., NODES] * self.nodes).clamp(min=1.0))
        score = score - d * torch.expm1(x[..., WAIT] * self.log_wait) / 3600.0
        return (-score / ((a + b + c) * self.temperature)).to(jobs.dtype)


class QueueAttention(nn.Module):
    """One residual layer of masked self-attention across the queue's slots (no positions: permutation-equivariant)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm = nn.LayerNorm(dim)

    def forward(self, emb: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """``emb`` ``(batch, k, d)`` with each job's embedding updated from the others' (padding is not attended)."""
        alone = ~present.any(1)  # a batch row with no job: let it attend to its padding (its scores are unused)
        ignore = ~present & ~alone.unsqueeze(1)
        out, _ = self.attention(emb, emb, emb, key_padding_mask=ignore, need_weights=False)
        return self.norm(emb + out)


class SlotScorer(nn.Module):
    """Scores every slot with one shared MLP over ``[job row, machine row]``; returns (scores, embeddings).

    Args:
        slots: queue slots.
        features: features per row.
        hidden: hidden layer sizes of the shared MLP.
        ranks: job columns whose rank within the queue (:func:`queue_ranks`) each slot also sees. A job's own
            row says nothing about the others; its rank does, in steps of ``1 / slots`` however close the values
            are (two walltimes a few percent apart differ by about 0.003 in their log-scaled column).
        attention: heads of a :class:`QueueAttention` layer between the embedding and the output (0: none).
        prior: :class:`PriorScore` arguments (``weights``, ``temperature``, ``time_scale``, ``wait_scale``,
            ``nodes``); its logits are added to the learned ones (None: no prior).
        hold: also score a *hold* (the environment's ``action="hold"``: one more action after the slots). Its logit
            is the best job's (held fixed) plus a learned offset from the pooled queue and the machine row, so it
            is invariant to the slots' order and on the jobs' scale, whatever that is.
    """

    def __init__(self, slots: int, features: int, hidden: Sequence[int] = (32, 16), ranks: Sequence[int] = (),
                 attention: int = 0, prior: dict | None = None, hold: bool = False):
        super().__init__()
        self.slots, self.features, self.ranks = slots, features, tuple(ranks)
        self.embed = mlp([2 * features + len(self.ranks), *hidden], nn.ReLU)
        self.attention = QueueAttention(hidden[-1], attention) if attention else None
        self.head = nn.Linear(hidden[-1], 1)
        self.prior = PriorScore(features=features, **prior) if prior else None
        self.hold = nn.Linear(hidden[-1] + features, 1) if hold else None
        self.embed_dim = hidden[-1]

    def zero_output(self) -> None:
        """Set the output layer to 0: the learned scores vanish, and with a prior the scorer plays the heuristic.

        A hold's offset becomes :data:`HOLD_START`: the arg-max never holds, and a sampled choice rarely does.
        """
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.bias.zero_()
            if self.hold is not None:
                self.hold.weight.zero_()
                self.hold.bias.fill_(HOLD_START)

    def correction(self, flat: torch.Tensor) -> torch.Tensor:
        """The learned scores alone, without the prior: ``(batch, k)`` over the slots up to the last job's (0: none)."""
        scores, _, jobs, _ = self._learned(flat)
        return torch.where(jobs[..., PRESENT] > 0.5, scores, 0.0)

    def _learned(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Learned scores and embeddings of the slots up to the last one holding a job; those job rows; the machine."""
        jobs, machine = split_observation(flat, self.slots, self.features)
        present = jobs[..., PRESENT] > 0.5
        held = torch.nonzero(present.any(0))
        k = int(held.max()) + 1 if len(held) else 1
        parts = [jobs[:, :k], machine.unsqueeze(1).expand(-1, k, -1)]
        if self.ranks:
            parts.append(queue_ranks(jobs[:, :k, list(self.ranks)], present[:, :k], self.slots))
        pair = torch.cat(parts, dim=-1)
        emb = torch.relu(self.embed(pair))
        if self.attention is not None:
            emb = self.attention(emb, present[:, :k])
        return self.head(emb).squeeze(-1), emb, jobs[:, :k], machine

    def forward(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return scores ``(batch, slots)``, embeddings ``(batch, slots, d)`` and the machine row.

        Padding slots (no job) score 0: the action mask ignores them anyway. Only the slots up to the last one
        that holds a job somewhere in the batch go through the MLP (queues are usually much shorter than the slot
        count); the embeddings of the slots after it are 0, which the critic's pooling ignores.
        """
        scores, emb, jobs, machine = self._learned(flat)
        k = jobs.shape[1]
        present = jobs[..., PRESENT] > 0.5
        if self.prior is not None:
            scores = scores + self.prior(jobs)
        scores = torch.where(present, scores, 0.0)
        if self.hold is not None:
            best = torch.where(present, scores, -torch.inf).amax(-1, keepdim=True).detach()
            pooled = pool(emb, present.unsqueeze(-1).to(emb.dtype))
            offset = self.hold(torch.cat([pooled, machine], dim=-1))
            hold = torch.where(torch.isfinite(best), best, 0.0) + offset
        if k < self.slots:
            scores = nn.functional.pad(scores, (0, self.slots - k))
            emb = nn.functional.pad(emb, (0, 0, 0, self.slots - k))
        if self.hold is not None:
            scores = torch.cat([scores, hold], dim=-1)
        return scores, emb, machine


def pool(emb: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """The mean of the embeddings ``(batch, k, d)`` over the slots that hold a job (``present``: ``(batch, k, 1)``)."""
    return (emb * present).sum(1) / present.sum(1).clamp(min=1.0)


class ScorerActorCritic(nn.Module):
    """SB3's ``mlp_extractor`` contract for the job scorer.

    ``latent_pi`` are the slot scores (the logits); ``latent_vf`` is a pooled summary of the queue and the machine
    for the critic.
    """

    def __init__(self, slots: int, features: int, hidden: Sequence[int] = (32, 16), critic: Sequence[int] = (64,),
                 ranks: Sequence[int] = (), attention: int = 0, prior: dict | None = None, hold: bool = False):
        super().__init__()
        self.scorer = SlotScorer(slots, features, hidden, ranks, attention, prior, hold)
        self.critic = mlp([self.scorer.embed_dim + features, *critic], nn.ReLU)
        self.latent_dim_pi = slots + hold
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
        return torch.relu(self.critic(torch.cat([pool(emb, present), machine], dim=-1)))
