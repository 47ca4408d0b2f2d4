"""PPO with action masks on an hpcgym environment, in one file of plain PyTorch (after CleanRL's ``ppo.py``).

Written against the Gymnasium API only: the environment is ``gymnasium.make_vec`` of an ``hpcgym/...`` id, the
valid actions come from ``infos["action_mask"]``, and finished episodes from Gymnasium's ``infos["final_info"]``
(a dict of arrays, valid where ``infos["_final_info"]`` is True). No Stable-Baselines3, no hpcgym internals.

    python examples/cleanrl_ppo.py                              # lublin256-v0, 8 windows at a time, 50,000 steps
    python examples/cleanrl_ppo.py --env-id hpcgym/theta-v0 --total-timesteps 200000 --backfill easy

The network scores each queue slot with one small MLP shared by all slots (the slot's job row next to the machine
row), so it does not care where a job sits in the queue; empty slots get no probability. The reward is 0 until an
episode's last step, which pays minus the window's mean bounded slowdown: hence ``gamma = 1``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import hpcgym  # noqa: F401 - registers the hpcgym/... ids


@dataclass
class Args:
    """Every knob (each is a ``--flag``)."""

    env_id: str = "hpcgym/lublin256-v0"  # the environment id
    window: int = 256  # jobs per episode (the environment's window=)
    backfill: str = "none"  # the environment's backfill=: none | easy
    total_timesteps: int = 50_000  # decisions, all copies together
    num_envs: int = 8  # copies of the environment stepped together
    num_steps: int = 128  # steps per copy per rollout
    learning_rate: float = 3e-4
    gamma: float = 1.0  # the only reward comes at the end of an episode
    gae_lambda: float = 0.97
    update_epochs: int = 4
    num_minibatches: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    seed: int = 0


def parse() -> Args:
    """``Args`` from the command line (``--total-timesteps 1000``)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(Args):
        ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default,
                        help=f"default: {f.default}")
    return Args(**vars(ap.parse_args()))


class Agent(nn.Module):
    """Per-slot scores (the policy's logits) and a value from the machine row and the mean job row."""

    def __init__(self, features: int, hidden: int = 32):
        super().__init__()
        self.score = nn.Sequential(nn.Linear(2 * features, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.critic = nn.Sequential(nn.Linear(2 * features, 64), nn.Tanh(), nn.Linear(64, 1))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """The critic's value of each observation of a batch."""
        jobs, machine = obs[:, :-1], obs[:, -1]
        present = jobs[:, :, :1]  # column 0: 1 for a waiting job, 0 for an empty slot
        mean = (jobs * present).sum(1) / present.sum(1).clamp(min=1)
        return self.critic(torch.cat([mean, machine], -1)).squeeze(-1)

    def act(self, obs: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None):
        """An action (sampled, or the one given), its log-probability, the entropy and the value."""
        jobs, machine = obs[:, :-1], obs[:, -1:]
        logits = self.score(torch.cat([jobs, machine.expand_as(jobs)], -1)).squeeze(-1)
        dist = torch.distributions.Categorical(logits=logits.masked_fill(~mask, -1e9))
        action = dist.sample() if action is None else action
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


def main() -> None:
    """Train, printing each finished episode's mean bounded slowdown."""
    args = parse()
    torch.manual_seed(args.seed)
    envs = gym.make_vec(args.env_id, num_envs=args.num_envs, vectorization_mode="vector_entry_point",
                        window=args.window, backfill=args.backfill)
    slots, features = envs.single_observation_space.shape
    agent = Agent(features)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    n, t = args.num_envs, args.num_steps
    obs_buf = torch.zeros((t, n, slots, features))
    mask_buf = torch.zeros((t, n, slots - 1), dtype=torch.bool)
    act_buf, logp_buf, rew_buf, done_buf, val_buf = (torch.zeros((t, n)) for _ in range(5))

    obs, infos = envs.reset(seed=args.seed)
    obs, mask, done = torch.as_tensor(obs), torch.as_tensor(infos["action_mask"]), torch.zeros(n)
    step, started = 0, time.time()
    while step < args.total_timesteps:
        for k in range(t):  # the rollout: copy i's episodes are those of a single env seeded seed + i
            obs_buf[k], mask_buf[k], done_buf[k] = obs, mask, done
            with torch.no_grad():
                action, logp, _, value = agent.act(obs, mask)
            act_buf[k], logp_buf[k], val_buf[k] = action, logp, value
            obs, reward, terminated, truncated, infos = envs.step(action.numpy())
            step += n
            rew_buf[k] = torch.as_tensor(reward, dtype=torch.float32)
            obs, mask = torch.as_tensor(obs), torch.as_tensor(infos["action_mask"])
            done = torch.as_tensor(terminated | truncated, dtype=torch.float32)
            for i in np.flatnonzero(infos.get("_final_info", ())):
                print(f"episode {step}: copy {i} mean bounded slowdown "
                      f"{infos['final_info']['metrics']['bsld_mean'][i]:.2f}")
        with torch.no_grad():  # generalized advantage estimates (same-step autoreset: done ends an episode)
            next_value, adv, last = agent.value(obs), torch.zeros((t, n)), torch.zeros(n)
            for k in reversed(range(t)):
                nonterminal = 1.0 - (done if k == t - 1 else done_buf[k + 1])
                following = next_value if k == t - 1 else val_buf[k + 1]
                delta = rew_buf[k] + args.gamma * following * nonterminal - val_buf[k]
                adv[k] = last = delta + args.gamma * args.gae_lambda * nonterminal * last
            ret = adv + val_buf
        b_obs, b_mask = obs_buf.reshape(-1, slots, features), mask_buf.reshape(-1, slots - 1)
        b_act, b_logp, b_adv, b_ret = act_buf.reshape(-1), logp_buf.reshape(-1), adv.reshape(-1), ret.reshape(-1)
        size = max(len(b_act) // args.num_minibatches, 1)
        for _ in range(args.update_epochs):  # the PPO update
            for idx in torch.randperm(len(b_act)).split(size):
                _, logp, entropy, value = agent.act(b_obs[idx], b_mask[idx], b_act[idx].long())
                ratio = (logp - b_logp[idx]).exp()
                a = b_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8) if len(a) > 1 else a
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                loss = pg - args.ent_coef * entropy.mean() + args.vf_coef * ((value - b_ret[idx]) ** 2).mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
    envs.close()
    print(f"done: {step} steps in {time.time() - started:.1f} s")


if __name__ == "__main__":
    main()
