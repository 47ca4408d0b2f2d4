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
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments import runs, train
from experiments.recipe import choices_of
from experiments.runs import RunFolder
from experiments.training import many
from hpcgym import cli


def summarize(run_dirs: Sequence[str], runs_dir: Path) -> list[pd.DataFrame]:
    """One across-seed table (:mod:`experiments.seeds`, heuristics included) per workload x algorithm."""
    from experiments import seed_tables as seeds

    groups: dict[str, list[Path]] = {}
    for run in map(RunFolder, run_dirs):
        if run.evaluated():
            groups.setdefault(runs.base_of(run.name), []).append(run.path)
    return [seeds.write(dirs, runs.seeds_folder(runs_dir, name)) for name, dirs in groups.items()]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = cli.ArgumentParser(prog="python -m experiments.sweep", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="training seeds (default: 0 1 2)")
    ap.add_argument("--workloads", nargs="+", default=["real", "synthetic"], choices=choices_of("workload"),
                    help="what the agents train on (experiments.train --workload; default: real synthetic)")
    ap.add_argument("--algos", nargs="+", default=["ppo"], choices=choices_of("algo"),
                    help="the algorithms (experiments.train --algo; default: ppo)")
    ap.add_argument("--backend", default="local", choices=["local", "ray"],
                    help="local: the runs one after another in this process; ray: as Ray tasks (default: local)")
    ap.add_argument("--address", default=None, help="Ray cluster address (default: start a local instance)")
    ap.add_argument("shared", nargs=argparse.REMAINDER, help="after --: flags passed to every experiments.train run")
    args = ap.parse_args(argv)
    base = train.recipe_of(train.parse_args([a for a in args.shared if a != "--"]))
    recipes = many.grid(base, args.seeds, args.workloads, args.algos)
    # with Ray: one task per run on the cluster (or a local instance of all CPUs); a task whose worker died runs
    # again up to 3 times (Ray's default)
    done = many.run_all(recipes, backend=args.backend, jobs=None if args.backend == "ray" else 1,
                        address=args.address or "", retries=3, announce="sweep")
    tables = summarize(done, Path(base.run.runs_dir))
    from experiments.seeds import format_table

    print("\n\n".join(format_table(t) for t in tables) if tables else "no evaluations")
    print(f"runs: {', '.join(done)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
