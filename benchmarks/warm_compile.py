"""Compile (and cache) the engine's and the environments' numba kernels once, e.g. before many processes start.

Usage: ``python benchmarks/warm_compile.py``.
"""

import numpy as np

import hpcgym
from hpcgym import traces
from hpcgym.sim import simulate
from hpcgym.sim.policy import PriorityPolicy

if __name__ == "__main__":
    for backfill in ("none", "easy"):
        envs = hpcgym.make_vec("lublin256-v0", num_envs=2, backfill=backfill)
        envs.reset(seed=0)
        envs.step(np.zeros(2, np.int64))
        simulate(traces.window(traces.load("lublin-256"), 64, rng=0), "lublin-256",
                 PriorityPolicy("fcfs", 0), backfill=backfill)
    print("compiled")
