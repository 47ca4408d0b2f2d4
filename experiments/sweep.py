"""Run a grid of training runs (seeds x workloads x algorithms), locally or on Ray.

Examples::

    python -m experiments.sweep --seeds 0 1 2 --workloads real synthetic --algos ppo
    python -m experiments.sweep --backend ray --address auto --seeds 0 1 2 3   # an existing Ray cluster
    python -m experiments.sweep --backend ray                                  # a local Ray instance

Each grid point runs ``experiments.train`` with the shared flags that follow ``--`` (e.g.
``-- --trace sdsc-sp2 --timesteps 200000``); run folders are named ``<trace>-<workload>-<algo>-s<seed>``. With
``--backend ray`` every run is one Ray task (``num_cpus=1``); Ray does the scheduling, retries and placement.
A table of the finished runs' evaluation summaries is printed at the end.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from hpcgym import cli


def grid(seeds: Sequence[int], workloads: Sequence[str], algos: Sequence[str],
         shared: Sequence[str]) -> list[list[str]]:
    """The command-line arguments of ``experiments.train`` for every grid point."""
    return [[*shared, "--seed", str(s), "--workload", w, "--algo", a]
            for s, w, a in itertools.product(seeds, workloads, algos)]


def run_one(argv: list[str]) -> str:
    """Train one grid point in this process; return its run folder."""
    from experiments import train

    return str(train.run(train.parse_args(argv))[0])


def run_local(points: list[list[str]]) -> list[str]:
    """One run after the other, in this process."""
    return [run_one(p) for p in points]


def run_ray(points: list[list[str]], address: str | None = None) -> list[str]:
    """Every grid point as a Ray task on a local instance or the cluster at ``address``."""
    import ray

    ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1)(run_one)
        return ray.get([task.remote(p) for p in points])
    finally:
        ray.shutdown()


def summarize(run_dirs: Sequence[str]) -> pd.DataFrame:
    """The agents' rows of each run's ``eval/summary.csv``."""
    rows = []
    for run in map(Path, run_dirs):
        summary = run / "eval" / "summary.csv"
        if summary.exists():
            table = pd.read_csv(summary)
            rows.append(table[table["kind"] == "agent"].assign(run=run.name))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = cli.ArgumentParser(prog="python -m experiments.sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--workloads", nargs="+", default=["real", "synthetic"], choices=["real", "synthetic", "mixed"])
    ap.add_argument("--algos", nargs="+", default=["ppo"], choices=["ppo", "dqn"])
    ap.add_argument("--backend", default="local", choices=["local", "ray"])
    ap.add_argument("--address", default=None, help="Ray cluster address (default: start a local instance)")
    ap.add_argument("shared", nargs=argparse.REMAINDER, help="after --: flags passed to every experiments.train run")
    args = ap.parse_args(argv)
    shared = [a for a in args.shared if a != "--"]
    points = grid(args.seeds, args.workloads, args.algos, shared)
    runs = run_ray(points, args.address) if args.backend == "ray" else run_local(points)
    table = summarize(runs)
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.2f}") if len(table) else "no evaluations")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
