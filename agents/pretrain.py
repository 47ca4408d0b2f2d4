"""Behaviour cloning: a supervised warm start that teaches an agent a heuristic's choices before RL fine-tuning.

Sparse end-of-episode rewards make PPO start slowly from a random scorer. Cloning a good heuristic first (the
agent's masked policy is trained to put its probability on the heuristic's slot, by cross-entropy) starts the
search from that heuristic's schedule instead; PPO then has to find improvements on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hpcgym.env import heuristic_action
from hpcgym.sim.policy import PriorityPolicy


def demonstrations(env: Any, policy: PriorityPolicy, episodes: int,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Observations, masks and the heuristic's actions over ``episodes`` episodes of ``env``."""
    base = env.unwrapped
    obs_list, masks, actions = [], [], []
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        done = info.get("done", False)
        while not done:
            action = heuristic_action(env, policy)
            obs_list.append(obs)
            masks.append(base.action_masks())
            actions.append(action)
            obs, _, done, _, _ = env.step(action)
    return np.stack(obs_list), np.stack(masks), np.asarray(actions)


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


def fit_clone(model: Any, obs: np.ndarray, masks: np.ndarray, actions: np.ndarray, epochs: int = 100,
              batch_size: int = 256, lr: float = 1e-3, seed: int = 0) -> None:
    """Train a MaskablePPO or masked-DQN model to prefer ``actions`` (masked cross-entropy).

    For DQN the Q-values play the logits, so the greedy policy becomes the heuristic; the target network gets the
    same weights. The learning rate decays to 0 on a cosine over the epochs: the last epochs settle close calls
    between jobs whose scores differ little, which a constant rate keeps flipping.
    """
    x = torch.as_tensor(obs, dtype=torch.float32)
    y = torch.as_tensor(actions)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.policy.parameters(), lr=lr)
    batches_per_epoch = -(-len(y) // batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(epochs * batches_per_epoch, 1))
    model.policy.set_training_mode(True)
    for _ in range(epochs):
        for idx in length_batches(masks.sum(1), batch_size, gen):
            log_probs = choice_log_probs(model, x[idx], masks[idx.numpy()])
            loss = -log_probs.gather(1, y[idx].unsqueeze(1)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    model.policy.set_training_mode(False)
    if hasattr(model, "q_net_target"):
        model.q_net_target.load_state_dict(model.q_net.state_dict())


def accuracy(model: Any, obs: np.ndarray, masks: np.ndarray, actions: np.ndarray, chunk: int = 1024) -> float:
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
                    batch_size: int = 256, lr: float = 1e-3, seed: int = 0) -> float:
    """Fit a MaskablePPO or masked-DQN model to a heuristic's choices on ``env``; return the training accuracy."""
    demos = demonstrations(env, policy, episodes, seed)
    fit_clone(model, *demos, epochs, batch_size, lr, seed)
    return accuracy(model, *demos)
