"""The cost of ``reward="counterfactual"``: PPO decisions per second against today's relative reward, in one run.

Usage: ``python benchmarks/counterfactual_speed.py [--trace theta] [--timesteps 20000]``.

Both train sb3-contrib's MaskablePPO with the job-scoring policy (``experiments.train``'s vector schedule: 16 copies,
rollouts of 128 steps per copy, 4 epochs of minibatches of 512, its rank columns; one torch thread) on the trace's
train split, EASY, with ``tuned`` (the trace's fit) as the baseline, its runtime predictor and its order:

- *relative*: ``reward="objective"`` with the baseline: ``(b - agent) / b`` at each episode's end (today's);
- *counterfactual*: ``reward="counterfactual"``: each decision's credit, a fork of the simulator finished under
  ``tuned`` after every decision on which the agent does not pick ``tuned``'s head.

It prints steps/s of the whole loop (rollouts and updates) and their ratio (the issue's target: at most 1.5x the
cost), then the same for the environments alone (random valid actions), the forks per decision, and the cost of one
fork (``V``), and of the all-candidates variant (``Q`` of the ``K`` best candidates of the baseline, ``K`` forks per
decision). The two rewards alternate, twice each, and each figure is the better of its two runs (the machine is shared).
An untrained agent deviates from ``tuned`` at almost every decision, so this is the reward's worst case.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from experiments.recipe import Network


def env_kwargs(trace: str) -> dict:
    """The environment of both runs: ``tuned`` as the baseline, its predictor and its order."""
    from baselines import priorities

    base = priorities.resolve("tuned", trace, "easy")
    return {"workload": trace, "machine": trace, "backfill": "easy", "window": 256, "split": "train",
            "baseline": base, "order": base, "predictor": base.predictor,
            "features": "v1", "invalid_action": "raise"}


def ppo_rate(kwargs: dict, reward: str, timesteps: int, ranks: str) -> float:
    """Steps/s of MaskablePPO's ``learn(timesteps)`` after a warm-up."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.policies import ScorerPolicy
    from agents.vec import HpcgymVecEnv
    from experiments.recipe import rank_columns
    from hpcgym.vector import SchedulingVectorEnv

    venv = VecMonitor(HpcgymVecEnv(SchedulingVectorEnv(16, reward=reward, **kwargs)))
    model = MaskablePPO(ScorerPolicy, venv, n_steps=128, batch_size=512, n_epochs=4, seed=0, device="cpu",
                        policy_kwargs={"ranks": rank_columns(ranks)})
    model.learn(2048)
    t0 = time.perf_counter()
    model.learn(timesteps, reset_num_timesteps=False)
    return timesteps / (time.perf_counter() - t0)


def env_rate(kwargs: dict, reward: str, steps: int) -> tuple[float, float]:
    """Steps/s of the vector environment alone with random valid actions, and forks per decision."""
    from hpcgym.vector import SchedulingVectorEnv

    venv = SchedulingVectorEnv(16, reward=reward, **kwargs)
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    forks = 0
    t0 = time.perf_counter()
    for _ in range(steps // 16):
        masks = venv.action_masks()
        _, _, ended, _, _ = venv.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
        if reward == "counterfactual":  # a fork at each decision off the baseline's head, and one per new episode
            chosen, heads = venv._chosen, venv._heads
            forks += int((~ended & (chosen != -1) & ((chosen != heads) | (heads < 0))).sum() + ended.sum())
    return steps / (time.perf_counter() - t0), forks / steps


def fork_costs(kwargs: dict, k: int, decisions: int = 300) -> tuple[float, float]:
    """Microseconds of one ``V`` and of ``K`` ``Q`` forks (the baseline's ``K`` best candidates) at a decision."""
    from hpcgym.env import SchedulingEnv
    from hpcgym.sim import fork
    from hpcgym.sim.backfill import BACKFILL_MODES

    env = SchedulingEnv(reward="counterfactual", **kwargs)
    env.reset(seed=0)
    credit, sim = env._credit, env.sim
    mode, rng = BACKFILL_MODES["easy"], np.random.default_rng(0)
    code, scan, kind, total = credit.baseline.code, -1, 0, sim.nodes
    v_time = q_time = 0.0
    jobs, st = sim.arrays  # compile (or load) both kernels before timing them
    fork.value(jobs, st, code, mode, credit.custom, scan, kind, total)
    fork.q_value(jobs, st, sim.order.code, mode, int(sim.queue[0]), code, credit.custom, scan, kind, total)
    for _ in range(decisions):
        jobs, st = sim.arrays
        t0 = time.perf_counter()
        fork.value(jobs, st, code, mode, credit.custom, scan, kind, total)
        t1 = time.perf_counter()
        queue = sim.queue.copy()
        for j in queue[np.argsort(sim.key[queue], kind="stable")][:k]:
            fork.q_value(jobs, st, sim.order.code, mode, int(j), code, credit.custom, scan, kind, total)
        t2 = time.perf_counter()
        v_time, q_time = v_time + t1 - t0, q_time + t2 - t1
        _, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
        if done:
            env.reset()
    return 1e6 * v_time / decisions, 1e6 * q_time / decisions


def main() -> None:
    """Measure and print."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default="theta")
    ap.add_argument("--timesteps", type=int, default=20_000)
    ap.add_argument("--ranks", default=Network.ranks, help="the scorer's rank columns")
    ap.add_argument("--k", type=int, default=8, help="candidates of the all-candidates variant")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    kwargs = env_kwargs(args.trace)
    ppo = {"objective": [], "counterfactual": []}
    envs = {"objective": [], "counterfactual": []}
    for _ in range(2):
        for reward in ppo:
            ppo[reward].append(ppo_rate(kwargs, reward, args.timesteps, args.ranks))
            envs[reward].append(env_rate(kwargs, reward, 16 * 400))
    v_us, q_us = fork_costs(kwargs, args.k)
    base, cf = max(ppo["objective"]), max(ppo["counterfactual"])
    ebase, ecf = max(e[0] for e in envs["objective"]), max(e[0] for e in envs["counterfactual"])
    forks = envs["counterfactual"][0][1]
    print(f"{args.trace}, EASY, baseline tuned ({kwargs['predictor']}), vector env x16, {args.timesteps:,} steps each")
    print(f"PPO, relative reward        {base:8,.0f} steps/s")
    print(f"PPO, counterfactual reward  {cf:8,.0f} steps/s  cost {base / cf:4.2f}x")
    print(f"env alone, relative         {ebase:8,.0f} steps/s")
    print(f"env alone, counterfactual   {ecf:8,.0f} steps/s  cost {ebase / ecf:4.2f}x  "
          f"({forks:.2f} forks per decision)")
    print(f"one fork (V)                {v_us:8,.0f} us;  all-candidates (K={args.k} Q forks) {q_us:8,.0f} us "
          "per decision")


if __name__ == "__main__":
    main()
