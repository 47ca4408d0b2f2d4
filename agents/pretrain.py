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


def demonstrations(env: Any, policy: PriorityPolicy, episodes: int, seed: int = 0):
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


def behaviour_clone(model: Any, env: Any, policy: PriorityPolicy, episodes: int = 40, epochs: int = 20,
                    batch_size: int = 256, lr: float = 1e-3, seed: int = 0) -> float:
    """Fit a MaskablePPO model's policy to a heuristic's choices; return the final training accuracy."""
    obs, masks, actions = demonstrations(env, policy, episodes, seed)
    x = torch.as_tensor(obs, dtype=torch.float32)
    y = torch.as_tensor(actions)
    optimizer = torch.optim.Adam(model.policy.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    model.policy.set_training_mode(True)
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=gen)
        for start in range(0, len(y), batch_size):
            idx = order[start:start + batch_size]
            dist = model.policy.get_distribution(x[idx], action_masks=masks[idx.numpy()])
            loss = -dist.log_prob(y[idx]).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.policy.set_training_mode(False)
    with torch.no_grad():
        dist = model.policy.get_distribution(x, action_masks=masks)
        return float((dist.distribution.probs.argmax(-1) == y).float().mean())
