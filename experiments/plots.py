"""Draw the paper-size figures of an evaluation's results folder (:mod:`experiments.figures`).

Reads a results folder as ``experiments.evaluate`` / ``experiments.train`` write it (``per_window.csv``,
``per_job.csv``, ``summary.csv``, ``summary.md``) and draws four figures into ``<results>/figures``:
``bsld_per_window.png`` (mean bounded slowdown of every test window for the rows that matter, with the mean and
its bootstrap CI), ``bsld_paired.png`` (the agent's and its start's bsld minus the reference's, window by window,
with the paired ratio and its block-bootstrap CI), ``bsld_survival.png`` (the tail ``P(bsld > x)`` of per-job
bounded slowdown) and ``wait_over_window.png`` (the mean wait over the course of a window).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

from experiments import figures, runs
from experiments.figures import all_figures, find_results, load, save


def __getattr__(name: str) -> Any:
    """The figures' names (``load``, ``figure_paired``, ...), which lived here before :mod:`.figures`."""
    return getattr(figures, name)


def main(argv: Sequence[str] | None = None) -> int:
    """Draw the figures of a results folder (given, ``HPCGYM_RESULTS`` or the newest ``runs/*/eval``)."""
    from hpcgym import cli

    ap = cli.ArgumentParser(prog="python -m experiments.plots", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, nargs="?", default=None,
                    help="a results folder (with per_window.csv: a run's eval/, or experiments.evaluate --out); "
                         "default: $HPCGYM_RESULTS, else the newest runs/*/eval, else a heuristics-only evaluation "
                         "of Theta made now")
    ap.add_argument("--out", type=Path, default=None, help="where the PNGs go (default: <results>/figures)")
    args = ap.parse_args(argv)
    matplotlib.use("Agg")
    if args.results is not None:
        folder, how = args.results.resolve(), "the command line"
        if not (folder / runs.PER_WINDOW).is_file():
            raise cli.UsageError(f"{args.results} holds no {runs.PER_WINDOW}: give a folder experiments.evaluate "
                                 "wrote")
    else:
        folder, how = find_results()
    paths = save(all_figures(load(folder)), args.out or folder / "figures")
    print(f"results: {folder} ({how})")
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    from hpcgym import cli

    raise SystemExit(cli.run(main))
