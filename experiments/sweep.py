"""Run a grid of training runs (seeds x workloads x algorithms), locally or on Ray.

Examples::

    python -m experiments.sweep --seeds 0 1 2 --workloads real synthetic --algos ppo
    python -m experiments.sweep --backend ray --address auto --seeds 0 1 2 3   # an existing Ray cluster
    python -m experiments.sweep --backend ray                                  # a local Ray instance

Each grid point runs ``experiments.train`` with the shared flags that follow ``--`` (e.g.
``-- --trace sdsc-sp2 --timesteps 200000``); run folders are named ``<trace>-<workload>-<algo>-s<seed>``. With
``--backend ray`` every run is one Ray task (``num_cpus=1``); Ray does the scheduling, retries and placement.
A line on stderr reports each finished run; at the end, one table across seeds per workload x algorithm
(:mod:`experiments.seeds`: median, IQR, worst seed, CI, the untrained and cloned networks and the heuristics) is
printed and written to ``<runs dir>/<trace>-<workload>-<algo>-seeds/``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments import train
from hpcgym import cli


def grid(seeds: Sequence[int], workloads: Sequence[str], algos: Sequence[str],
         shared: Sequence[str]) -> list[list[str]]:
    """The command-line arguments of ``experiments.train`` for every grid point."""
    return [[*shared, "--seed", str(s), "--workload", w, "--algo", a]
            for s, w, a in itertools.product(seeds, workloads, algos)]


def run_one(argv: list[str]) -> str:
    """Train one grid point in this process; return its run folder."""
    return str(train.run(train.parse_args(argv))[0])


def _progress(done: int, total: int, run: str, started: float) -> None:
    sys.stderr.write(f"sweep: {done}/{total} runs done ({run}), {time.perf_counter() - started:,.0f} s\n")
    sys.stderr.flush()


def run_local(points: list[list[str]]) -> list[str]:
    """One run after the other, in this process (a line on stderr after each)."""
    started, out = time.perf_counter(), []
    for p in points:
        out.append(run_one(p))
        _progress(len(out), len(points), Path(out[-1]).name, started)
    return out


def run_ray(points: list[list[str]], address: str | None = None) -> list[str]:
    """Every grid point as a Ray task on a local instance or the cluster at ``address`` (a line as each ends)."""
    import ray

    ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1)(run_one)
        refs = [task.remote(p) for p in points]
        started, pending = time.perf_counter(), list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            _progress(len(points) - len(pending), len(points), Path(ray.get(ready[0])).name, started)
        return ray.get(refs)
    finally:
        ray.shutdown()


def summarize(run_dirs: Sequence[str], runs_dir: Path) -> list[pd.DataFrame]:
    """One across-seed table (:mod:`experiments.seeds`, heuristics included) per workload x algorithm."""
    from experiments import seeds

    groups: dict[str, list[Path]] = {}
    for run in map(Path, run_dirs):
        if (run / "eval" / "per_window.csv").exists():
            groups.setdefault(run.name.rsplit("-s", 1)[0], []).append(run)
    return [seeds.write(dirs, runs_dir / f"{name}-seeds") for name, dirs in groups.items()]


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
    runs_dir = Path(train.parse_args(points[0]).runs_dir)
    tables = summarize(runs, runs_dir)
    from experiments.seeds import format_table

    print("\n\n".join(format_table(t) for t in tables) if tables else "no evaluations")
    print(f"runs: {', '.join(runs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
