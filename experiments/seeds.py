"""Results across seeds: for every scheduler, the median of the seeds' mean bsld, its spread and its worst seed.

Example::

    python -m experiments.seeds runs/theta-synthetic-ppo-s0 runs/theta-synthetic-ppo-s1 ... --out runs/theta-seeds

Each run folder holds ``eval/per_window.csv`` (written by ``experiments.train``); all must have been evaluated on
the same trace and windows, and have different seeds (both checked: two runs of one seed are refused, not counted
twice). One seed is one number per scheduler: its mean bounded slowdown over the test windows. The table gives,
per scheduler, the number of seeds, the median, the interquartile range, the worst and best seed, the mean with a
bootstrap CI over seeds, and for the networks (agent, untrained, cloned) how many seeds beat FCFS+EASY, their own
untrained network, their own cloned start, and the strongest reference (the heuristic with the lowest median; the
clairvoyant rows, which read the true runtimes, are not references). Heuristics do not depend on the seed: their
rows repeat one value, as a reference. ``python -m experiments.train --seeds ...`` trains the seeds and writes
the table in one go (:func:`experiments.training.many.run_seeds`).

**Paired against the strongest reference** (``paired.csv`` and the line under the table): per seed, each network's
ratio of mean bsld to the strongest implementable row on the same jobs with a 95% block-bootstrap CI, on the test
windows and on the whole test split as one stream (:func:`experiments.stream.paired_rows`); a seed *beats* the
reference where the CI's upper end is below 1.

**Validation against test** (:func:`experiments.seed_tables.agreement`, ``agreement.csv`` and the line under the
table): per seed, the validation score of the network RL started from and of the network kept
(``learning_curve.csv``), beside their test scores, so the table says how often "better on validation" was also
better on test, and how well the kept networks' validation scores rank the seeds' test scores (Spearman).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments import seed_tables
from experiments.seed_tables import format_table, write
from hpcgym import cli


def __getattr__(name: str) -> Any:
    """The library's names, which lived here before :mod:`experiments.seed_tables`."""
    return getattr(seed_tables, name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = cli.ArgumentParser(prog="python -m experiments.seeds", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", type=Path, nargs="+", help="training run folders, one per seed")
    ap.add_argument("--out", type=Path, required=True, help="folder for the table and the plot (required)")
    args = ap.parse_args(argv)
    tab = write(args.runs, args.out)  # a mistake is one error line (hpcgym.cli.run)
    print(format_table(tab))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
