"""Behaviour cloning: a supervised warm start that teaches an agent a heuristic's choices before RL fine-tuning.

Sparse end-of-episode rewards make PPO start slowly from a random scorer. Cloning a good heuristic first (the
agent's masked policy is trained to put its probability on the heuristic's slot, by cross-entropy) starts the
search from that heuristic's schedule instead; PPO then has to find improvements on it. :func:`warm_start` keeps
the clone only where it scores better than the untrained network.

A residual scorer (one with a prior) starts at its prior (:func:`residual_start`), or from a correction fitted
first to what the agent cannot see: a *teacher*'s choices (a heuristic told the jobs' own runtimes) or the runtimes
themselves (:func:`teach_runtimes`: a learned runtime estimate in the prior's place). ``docs/results.md`` measures
both against a control, a fit to the prior's own choices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from agents.scorer import split_observation
from hpcgym.env import heuristic_action
from hpcgym.sim.policy import PriorityPolicy


def played(env: Any, policy: PriorityPolicy, episodes: int, seed: int = 0,
           progress: bool = False) -> Iterator[tuple[np.ndarray, int]]:
    """Each decision of ``episodes`` episodes of ``env`` played by ``policy``: its observation and the action.

    The environment is at that decision while the caller holds it (the step follows). ``progress``: a tqdm bar over
    the episodes.
    """
    for episode in tqdm(range(episodes), desc="demonstrations", unit="episode", disable=not progress):
        obs, info = env.reset(seed=seed + episode)
        done = info.get("done", False)
        while not done:
            action = heuristic_action(env, policy)
            yield obs, action
            obs, _, done, _, _ = env.step(action)


class Rows:
    """Rows of one width appended one at a time into one array that doubles when full (no array per row)."""

    def __init__(self, width: int, dtype: Any):
        self.data = np.empty((1024, width), dtype)
        self.used = 0

    def extend(self, rows: np.ndarray) -> int:
        """Append ``rows`` (n, width); return the index of the first."""
        need = self.used + len(rows)
        if need > len(self.data):
            grown = np.empty((max(need, 2 * len(self.data)), self.data.shape[1]), self.data.dtype)
            grown[:self.used] = self.data[:self.used]
            self.data = grown
        self.data[self.used:need] = rows
        first, self.used = self.used, need
        return first

    def array(self) -> np.ndarray:
        """The rows appended (a view)."""
        return self.data[:self.used]


class Observations:
    """Many decisions' observations ``(slots + 1, features)``, held compactly, read back whole by ``obs[idx]``.

    A decision keeps its job rows up to the last one that is not all zeros, and its machine row. The other job rows
    are padding, all zeros (:mod:`hpcgym.observation`), so reading puts back exactly the observation stored. The
    demonstrations of a warm start take about a tenth of their dense size (a median queue of 6 jobs in 128 slots),
    and no array per decision is left to fragment the heap.
    """

    def __init__(self, shape: tuple[int, int], dtype: Any = np.float32):
        self.row_shape = (int(shape[0]), int(shape[1]))
        self.rows = Rows(self.row_shape[1], dtype)
        self.bounds = Rows(2, np.int64)  #: per decision: its first row, its job rows

    def append(self, obs: np.ndarray) -> None:
        """Store one observation."""
        occupied = np.flatnonzero(obs[:-1].any(axis=1))
        jobs = int(occupied[-1]) + 1 if len(occupied) else 0
        first = self.rows.extend(obs[:jobs])
        self.rows.extend(obs[-1:])
        self.bounds.extend(np.array([[first, jobs]]))

    def __len__(self) -> int:
        return self.bounds.used

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(decisions, slots + 1, features)``, as the dense array's."""
        return (len(self), *self.row_shape)

    def __getitem__(self, idx: Any) -> np.ndarray:
        """The observations at ``idx`` (indices), dense ``(len(idx), slots + 1, features)``."""
        first, jobs = self.bounds.array()[np.asarray(idx, np.int64).reshape(-1)].T
        rows = self.rows.array()
        out = np.zeros((len(first), *self.row_shape), rows.dtype)
        which = np.repeat(np.arange(len(first)), jobs)
        within = np.arange(len(which)) - np.repeat(np.cumsum(jobs) - jobs, jobs)
        out[which, within] = rows[np.repeat(first, jobs) + within]
        out[:, -1] = rows[first + jobs]
        return out


def demonstrations(env: Any, policy: PriorityPolicy, episodes: int, seed: int = 0,
                   progress: bool = False) -> tuple[Observations, np.ndarray, np.ndarray]:
    """Observations, masks and the heuristic's actions over ``episodes`` episodes of ``env`` (``progress``: a bar).

    The observations are :class:`Observations` (compact; ``obs[idx]`` gives the dense ones).
    """
    base = env.unwrapped
    obs_store = Observations(base.observation_space.shape, base.observation_space.dtype)
    masks, actions = Rows(base.action_space.n, bool), []
    for obs, action in played(env, policy, episodes, seed, progress):
        obs_store.append(obs)
        masks.extend(base.action_masks()[None])
        actions.append(action)
    return obs_store, masks.array().copy(), np.asarray(actions)


def length_batches(queue: np.ndarray, batch_size: int, gen: torch.Generator) -> list[torch.Tensor]:
    """Minibatches of similar queue length, in a random order (each shuffled within its length band).

    The scorer only runs over the slots up to the longest queue in a batch; mixing a 60-job queue into every batch
    would make each pass run 60 slots instead of the median's 6.
    """
    jitter = torch.rand(len(queue), generator=gen, dtype=torch.float64)
    order = torch.as_tensor(np.lexsort((jitter.numpy(), queue)))
    batches = list(torch.split(order, batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=gen)]


def choice_log_probs(model: Any, obs: torch.Tensor, masks: np.ndarray) -> torch.Tensor:
    """Log-probabilities over the slots: MaskablePPO's masked policy, or a softmax over the masked DQN's Q-values."""
    if hasattr(model, "q_net"):
        return torch.log_softmax(model.q_net(obs), dim=-1)  # empty slots hold agents.dqn.INVALID_Q
    return model.policy.get_distribution(obs, action_masks=masks).distribution.logits  # normalized: log-probs


def minimize(model: Any, loss: Callable[[torch.Tensor], torch.Tensor], queue: np.ndarray, epochs: int,
             batch_size: int, lr: float, seed: int, progress: bool = False) -> None:
    """Adam on ``loss`` of minibatches (row indices) of similar ``queue`` length, ``epochs`` passes over the rows.

    The learning rate decays to 0 on a cosine over the epochs: the last epochs settle close calls between jobs
    whose scores differ little, which a constant rate keeps flipping. ``progress``: a tqdm bar over the epochs.
    """
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.policy.parameters(), lr=lr)
    batches_per_epoch = -(-len(queue) // batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(epochs * batches_per_epoch, 1))
    model.policy.set_training_mode(True)
    for _ in tqdm(range(epochs), desc="cloning", unit="epoch", disable=not progress):
        for idx in length_batches(queue, batch_size, gen):
            value = loss(idx)
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            schedule.step()
    model.policy.set_training_mode(False)


def fit_clone(model: Any, obs: np.ndarray | Observations, masks: np.ndarray, actions: np.ndarray, epochs: int = 100,
              batch_size: int = 256, lr: float = 1e-3, seed: int = 0, progress: bool = False) -> None:
    """Train a MaskablePPO or masked-DQN model to prefer ``actions`` (masked cross-entropy).

    For DQN the Q-values play the logits, so the greedy policy becomes the heuristic; the target network gets the
    same weights. The fit is :func:`minimize`'s.
    """
    y = torch.as_tensor(actions)

    def loss(idx: torch.Tensor) -> torch.Tensor:
        rows = idx.numpy()  # each minibatch made dense on its own (``obs`` may be compact: :class:`Observations`)
        log_probs = choice_log_probs(model, torch.as_tensor(obs[rows], dtype=torch.float32), masks[rows])
        return -log_probs.gather(1, y[idx].unsqueeze(1)).mean()

    minimize(model, loss, masks.sum(1), epochs, batch_size, lr, seed, progress)
    if hasattr(model, "q_net_target"):
        model.q_net_target.load_state_dict(model.q_net.state_dict())


def accuracy(model: Any, obs: np.ndarray | Observations, masks: np.ndarray, actions: np.ndarray,
             chunk: int = 1024) -> float:
    """Share of ``actions`` that the model's deterministic (arg-max, masked) choice reproduces.

    The decisions are scored ``chunk`` at a time, in order of queue length: in one pass, the scorer's activations
    for 100,000 decisions of long queues (SDSC-SP2 without backfilling) take several GB.
    """
    if not len(actions):
        return float("nan")
    hits = 0
    with torch.no_grad():
        for idx in np.array_split(np.argsort(masks.sum(1), kind="stable"), -(-len(actions) // chunk)):
            log_probs = choice_log_probs(model, torch.as_tensor(obs[idx], dtype=torch.float32), masks[idx])
            hits += int((log_probs.argmax(-1).numpy() == actions[idx]).sum())
    return hits / len(actions)


def behaviour_clone(model: Any, env: Any, policy: PriorityPolicy, episodes: int = 100, epochs: int = 40,
                    batch_size: int = 256, lr: float = 1e-3, seed: int = 0, progress: bool = False) -> float:
    """Fit a MaskablePPO or masked-DQN model to a heuristic's choices on ``env``; return the training accuracy.

    ``progress``: tqdm bars over the demonstration episodes and the epochs of the fit.
    """
    demos = demonstrations(env, policy, episodes, seed, progress)
    fit_clone(model, *demos, epochs, batch_size, lr, seed, progress)
    return accuracy(model, *demos)


def runtime_demonstrations(env: Any, policy: PriorityPolicy, episodes: int,
                           seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Observations over ``episodes`` episodes of ``env`` played by ``policy``, and each slot's job's own runtime.

    The runtimes are ``(decisions, slots)`` seconds, 0 for an empty slot: what the environment knows and the
    observation does not show.
    """
    base = env.unwrapped
    obs_list, runs = [], []
    for obs, _ in played(env, policy, episodes, seed):
        q = np.asarray(base.sim.queue[:base.slots])
        run = np.zeros(base.slots)
        run[:len(q)] = np.maximum(base.sim.hold[q], 1)
        obs_list.append(obs)
        runs.append(run)
    return np.stack(obs_list), np.stack(runs)


def runtime_targets(scorer: Any, obs: torch.Tensor, runs: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Each slot's ``log(runtime / estimate)`` with the estimate as ``scorer``'s prior reads it, and the job mask."""
    jobs = split_observation(obs, scorer.slots, scorer.features)[0]
    prior = scorer.prior
    estimate = torch.log(torch.expm1(jobs[..., prior.estimate].double() * prior.log_time).clamp(min=1.0))
    present = torch.as_tensor(runs > 0)
    target = torch.where(present, torch.log(torch.as_tensor(runs).clamp(min=1.0)) - estimate, 0.0)
    return target.float(), present


def runtime_scale(scorer: Any) -> float:
    """The logits a residual's prior gives one unit of ``log r``: ``-a / ((a + b + c) T)``."""
    a, b, c, _ = scorer.prior.weights
    return -a / ((a + b + c) * scorer.prior.temperature)


def fit_runtimes(model: Any, obs: np.ndarray, runs: np.ndarray, epochs: int = 40, batch_size: int = 256,
                 lr: float = 1e-3, seed: int = 0) -> None:
    """Fit a residual scorer's correction so that its scores are its prior's with a learned runtime estimate.

    The prior scores a job ``-(a log r + ...) / ((a + b + c) T)`` with ``r`` the observation's estimate; a
    correction of ``-a u / ((a + b + c) T)`` replaces ``log r`` by ``log r + u``. ``u`` is fitted to each visible
    job's ``log(runtime / r)`` by least squares over every slot of every decision, so ``log r + u`` is the
    conditional mean of the log runtime given what the agent sees (its user's accuracy and history, its request,
    the machine). The fit is :func:`minimize`'s.
    """
    scorer = model.policy.mlp_extractor.scorer
    scale = runtime_scale(scorer)
    x = torch.as_tensor(obs, dtype=torch.float32)
    target, present = runtime_targets(scorer, x, runs)

    def loss(idx: torch.Tensor) -> torch.Tensor:
        u = scorer.correction(x[idx]) / scale
        k = u.shape[1]
        err = torch.where(present[idx, :k], u - target[idx, :k], 0.0)
        return (err ** 2).sum() / present[idx].sum().clamp(min=1)

    minimize(model, loss, present.sum(1).numpy(), epochs, batch_size, lr, seed)


def runtime_error(model: Any, obs: np.ndarray, runs: np.ndarray, chunk: int = 1024) -> tuple[float, float]:
    """Mean absolute error of the log runtime: the observation's estimate, and the estimate with the learned ``u``."""
    scorer = model.policy.mlp_extractor.scorer
    scale = runtime_scale(scorer)
    before = after = count = 0.0
    with torch.no_grad():
        for idx in np.array_split(np.arange(len(obs)), max(-(-len(obs) // chunk), 1)):
            x = torch.as_tensor(obs[idx], dtype=torch.float32)
            target, present = runtime_targets(scorer, x, runs[idx])
            u = scorer.correction(x) / scale
            k = u.shape[1]
            before += float(target.abs()[present].sum())
            after += float((target[:, :k] - u).abs()[present[:, :k]].sum())
            count += int(present.sum())
    return before / max(count, 1), after / max(count, 1)


def teach_runtimes(model: Any, env: Any, policy: PriorityPolicy, episodes: int = 100, epochs: int = 40,
                   batch_size: int = 256, lr: float = 1e-3, seed: int = 0) -> float:
    """:func:`fit_runtimes` on ``policy``'s episodes of ``env``; return the share of the log-runtime error removed."""
    demos = runtime_demonstrations(env, policy, episodes, seed)
    fit_runtimes(model, *demos, epochs, batch_size, lr, seed)
    before, after = runtime_error(model, *demos)
    return 1 - after / before if before else float("nan")


@dataclass
class WarmStart:
    """What :func:`warm_start` did."""

    accuracy: float  #: share of the heuristic's choices the clone reproduces on its demonstrations (taught: the fit's)
    accuracy_held_out: float  #: the same on held-out episodes (NaN: none were given)
    scores: dict[str, float]  #: the validation score of each network measured (``untrained``, ``cloned``)
    chosen: str  #: the network the model holds now: ``cloned``, ``untrained`` or (a taught residual) ``prior``


def warm_start(model: Any, policy: PriorityPolicy, env: Any, episodes: int, epochs: int, seed: int = 0,
               held_out: tuple[Any, int] | None = None, validate: Callable[[Any], float] | None = None,
               on_clone: Callable[[Any], None] | None = None, progress: bool = False) -> WarmStart:
    """Behaviour-clone ``policy`` into ``model``, then keep whichever of its untrained and cloned networks is better.

    Args:
        model: a MaskablePPO or masked-DQN model, untrained.
        policy: the heuristic to clone.
        env: the environment of the demonstrations.
        episodes: demonstration episodes.
        epochs: passes over them.
        seed: seed of the demonstrations and of the fit.
        held_out: ``(env, episodes)`` whose demonstrations (seed 0) measure how well the clone generalizes.
        validate: scores a network (lower is better); without it the clone is kept.
        on_clone: called with the model once it holds the cloned network (e.g. to save it).
        progress: tqdm bars over the demonstrations and the fit.

    Returns:
        The accuracies, the scores and the network chosen (``model`` holds it).
    """
    def fit() -> float:
        return behaviour_clone(model, env, policy, episodes, epochs, seed=seed, progress=progress)

    return _start_from(model, fit, policy, held_out, validate, on_clone)


def residual_start(model: Any, policy: PriorityPolicy, held_out: tuple[Any, int] | None = None,
                   validate: Callable[[Any], float] | None = None,
                   on_start: Callable[[Any], None] | None = None,
                   teach: Callable[[], float] | None = None) -> WarmStart:
    """The warm start of a residual scorer (one with a prior): its correction set to 0, so that it plays its prior.

    ``model``'s scorer (:class:`agents.scorer.SlotScorer` with a prior) is untrained: its random correction moves
    the prior's choices. Setting its output layer to 0 leaves the prior alone, which is ``policy``'s preference: no
    cloning, no cloning error. The arguments are :func:`warm_start`'s; the accuracies say how many of ``policy``'s
    choices the prior reproduces (on the held-out episodes: the observation's rounding and clipping can flip a
    near-tie), and the started network is reported as ``cloned`` like a clone.

    ``teach``: fits the correction, from 0, and returns its measure of the fit: :func:`behaviour_clone` to a
    teacher's choices (``policy`` is then the teacher, e.g. one told the jobs' own runtimes) or
    :func:`teach_runtimes`. The taught network is ``cloned``, and the prior alone (``prior``) is a third candidate
    start.
    """
    return _start_from(model, teach or (lambda: float("nan")), policy, held_out, validate, on_start, zero=True,
                       prior_candidate=teach is not None)


def _start_from(model: Any, fit: Callable[[], float], policy: PriorityPolicy, held_out: tuple[Any, int] | None,
                validate: Callable[[Any], float] | None, on_start: Callable[[Any], None] | None,
                zero: bool = False, prior_candidate: bool = False) -> WarmStart:
    """Score the untrained network, make the start (``fit``; ``zero``: zero the scorer's output), keep the better.

    ``prior_candidate``: after zeroing, the prior alone is scored too (``prior``), before ``fit`` moves it.
    """
    scores = {"untrained": validate(model)} if validate else {}
    states = {"untrained": {k: v.clone() for k, v in model.policy.state_dict().items()}}
    if zero:
        model.policy.mlp_extractor.scorer.zero_output()
        if prior_candidate:
            states["prior"] = {k: v.clone() for k, v in model.policy.state_dict().items()}
            if validate:
                scores["prior"] = validate(model)
    trained = fit()
    held = accuracy(model, *demonstrations(held_out[0], policy, held_out[1], seed=0)) if held_out else float("nan")
    if on_start is not None:
        on_start(model)
    if validate:
        scores["cloned"] = validate(model)
    chosen = min(scores, key=scores.get) if scores else "cloned"
    if chosen != "cloned":
        model.policy.load_state_dict(states[chosen])
    return WarmStart(held if zero and not prior_candidate else trained, held, scores, chosen)
