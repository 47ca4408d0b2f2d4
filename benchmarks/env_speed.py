"""Environment speed: steps per second with random valid actions, resets included.

Usage: ``python benchmarks/env_speed.py [--env lublin256-v0] [--seconds 10] [--backfill none]``.

Measures one environment on one core (``hpcgym.make``, so Gymnasium's default wrappers are included), hpcgym's
compiled vector environment (``hpcgym.make_vec``) at N = 1, 16, 64 and 256 copies (steps summed over the copies,
one core), then Gymnasium's ``SyncVectorEnv`` and Stable-Baselines3's ``SubprocVecEnv`` with 2 workers (the
latter only if SB3 is installed). Actions are drawn uniformly from the valid slots. Targets on ``lublin256-v0``
(128 slots, no backfilling): 25,000 steps/s for one env, 200,000 summed over N = 64; RLScheduler's environment does
about 2,500 on this machine class.
"""

from __future__ import annotations

import argparse
import time
import warnings

import gymnasium as gym
import numpy as np

import hpcgym


def single(env_id: str, seconds: float, **kwargs) -> tuple[float, int]:
    """Steps/s (wall) of one environment, and the episodes finished."""
    env = hpcgym.make(env_id, **kwargs)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    steps = episodes = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            valid = np.flatnonzero(env.unwrapped.action_masks())
            _, _, done, _, _ = env.step(int(valid[rng.integers(len(valid))]))
            steps += 1
            if done:
                episodes += 1
                env.reset()
    return steps / (time.perf_counter() - t0), episodes


def sync_vector(env_id: str, seconds: float, n: int, **kwargs) -> float:
    """Steps/s (environment steps, summed over the copies) of a Gymnasium SyncVectorEnv."""
    envs = gym.vector.SyncVectorEnv([lambda: hpcgym.make(env_id, **kwargs) for _ in range(n)])
    rng = np.random.default_rng(0)
    envs.reset(seed=0)
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        masks = envs.call("action_masks")
        # A finished copy shows an empty mask; its next action is ignored (Gymnasium resets it on that step).
        actions = [int(np.flatnonzero(m)[rng.integers(m.sum())]) if m.any() else 0 for m in masks]
        envs.step(np.asarray(actions))
        steps += n
    return steps / (time.perf_counter() - t0)


def vector(env_id: str, seconds: float, n: int, **kwargs) -> float:
    """Steps/s (summed over the copies) of hpcgym's compiled vector environment, resets included."""
    envs = hpcgym.make_vec(env_id, num_envs=n, **kwargs)
    rng = np.random.default_rng(0)
    envs.reset(seed=0)
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            valid = envs.action_masks().sum(axis=1)  # valid slots are 0 .. v - 1
            envs.step((rng.random(n) * valid).astype(np.int64))
            steps += n
    return steps / (time.perf_counter() - t0)


def _make(env_id: str, kwargs: dict):
    def thunk():
        return hpcgym.make(env_id, **kwargs)

    return thunk


def subproc_vector(env_id: str, seconds: float, n: int, **kwargs) -> float | None:
    """Steps/s of SB3's SubprocVecEnv (one process per copy), or None without SB3."""
    try:
        from stable_baselines3.common.vec_env import SubprocVecEnv
    except ImportError:
        return None
    envs = SubprocVecEnv([_make(env_id, kwargs) for _ in range(n)])
    rng = np.random.default_rng(0)
    envs.reset()
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        masks = envs.env_method("action_masks")
        actions = [int(np.flatnonzero(m)[rng.integers(m.sum())]) for m in masks]
        envs.step(np.asarray(actions))
        steps += n
    rate = steps / (time.perf_counter() - t0)
    envs.close()
    return rate


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--env", default="lublin256-v0")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--backfill", default="none")
    ap.add_argument("--slots", type=int, default=128)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    kw = {"backfill": args.backfill, "slots": args.slots}
    single(args.env, 1.0, **kw)  # warm-up: numba compilation, trace loading
    rate, episodes = single(args.env, args.seconds, **kw)
    print(f"{args.env} (slots {args.slots}, backfill {args.backfill}), random valid actions, resets included")
    print(f"single env (hpcgym.make, one core):  {rate:10,.0f} steps/s  ({episodes} episodes)")
    vector(args.env, 0.5, 4, **kw)  # warm-up of the vector kernel
    for n in (1, 16, 64, 256):
        print(f"hpcgym.make_vec N={n:<3} (one core):    {vector(args.env, args.seconds, n, **kw):10,.0f} steps/s")
    print(f"SyncVectorEnv x2:                    {sync_vector(args.env, args.seconds, 2, **kw):10,.0f} steps/s")
    sub = subproc_vector(args.env, args.seconds, 2, **kw)
    print(f"SB3 SubprocVecEnv x2:                {'n/a (no SB3)' if sub is None else f'{sub:10,.0f}'} steps/s")


if __name__ == "__main__":
    main()
