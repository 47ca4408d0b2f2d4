"""What an exact resume costs: replaying the training environments' history, and the size of a checkpoint's state.

Usage: ``python benchmarks/resume_replay.py [--trace theta] [--workload synthetic] [--timesteps 100000]``.

A resumed run plays every action its environments were given up to the checkpoint again (:mod:`agents.resume`).
This builds ``experiments.train``'s training environment with its defaults (16 copies, EASY with the SAF scan,
the log reward against SAF, FCFS alongside), plays ``--timesteps`` agent decisions with random valid actions
through :class:`agents.resume.RecordedVecEnv`, then replays that history on a freshly built environment, as a
resume of a run killed at the end of its training would, and checks that both end on the same observation. It
prints both passes' steps/s and the size of the history as a checkpoint stores it (pickled, gzipped).
"""

from __future__ import annotations

import argparse
import gzip
import pickle
import time
import warnings

import numpy as np


def main() -> None:
    """Record, replay, print."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default="theta")
    ap.add_argument("--workload", default="synthetic", choices=("real", "synthetic", "mixed"))
    ap.add_argument("--timesteps", type=int, default=100_000)
    ap.add_argument("--runs-dir", default="runs", help="where the fit cache is (runs/cache)")
    opts = ap.parse_args()
    warnings.simplefilter("ignore")
    from experiments.protocol import run_data
    from experiments.recipe import Recipe, resolve
    from experiments.training import parts

    recipe = Recipe.from_settings({"trace": opts.trace, "workload": opts.workload, "runs_dir": opts.runs_dir})
    data = run_data(recipe.source, recipe.selection)
    workload = parts.training_workload(recipe.source, recipe.run.seed, recipe.run.runs_dir, data)
    named = resolve(recipe)
    env = parts.training_env(recipe, named, data, workload)  # recorded and seeded, as a run's (no monitor file)
    rng = np.random.default_rng(0)
    obs = env.reset()
    started = time.perf_counter()
    for _ in range(opts.timesteps // env.num_envs):
        masks = np.stack(env.env_method("action_masks"))
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs = env.step(actions)[0]
    record_s = time.perf_counter() - started
    history = env.history()
    size = len(gzip.compress(pickle.dumps(history, protocol=pickle.HIGHEST_PROTOCOL), mtime=0))
    fresh = parts.training_env(recipe, named, data, workload)
    started = time.perf_counter()
    replayed = fresh.replay(history)
    replay_s = time.perf_counter() - started
    steps = len(history["actions"]) * env.num_envs
    print(f"{opts.trace}, {opts.workload}, {env.num_envs} copies, {steps:,} steps")
    print(f"recording pass (random valid actions, masks included): {record_s:.1f} s, {steps / record_s:,.0f} steps/s")
    print(f"replay: {replay_s:.1f} s, {steps / replay_s:,.0f} steps/s; same final observation: "
          f"{np.array_equal(replayed, obs)}")
    print(f"history in the state file: {size / 1e3:,.0f} kB")


if __name__ == "__main__":
    main()
