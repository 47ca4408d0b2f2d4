"""Rebuild the results tables of the README and the docs from the committed result summaries in ``results/``.

Examples::

    python -m experiments.report            # rewrite the tables (and the README's figure) from results/
    python -m experiments.report --check    # exit 1, listing the tables that differ, without writing

A number in the docs cannot drift from its run: each table sits between ``<!-- report:NAME -->`` and
``<!-- /report:NAME -->`` in its page, and this script builds it from the files below (a test fails when a page's
table differs from what the script builds).

- ``results/manifest.csv``: one row per evaluation (``file, trace, date, seeds, command``).
- ``results/<file>``: its per-window scores (``scheduler, kind, backfill, window, start, block, bsld``), as
  ``experiments.evaluate`` writes them in ``per_window.csv``. Add a run with ``--add EVAL_FOLDER``.
- ``results/seeds.csv``: medians across seeds from the journal (``trace, scheduler, kind, seeds, bsld,
  worst_seed, date, command``); they have no per-window scores, so no paired CI.
- ``results/benchmarks.csv``: benchmark figures (``benchmark, measure, value, unit, date, command``).
- ``results/bench/<name>/``: what ``python -m experiments.bench --out`` wrote (``pooled.csv``, ``per_log.csv``,
  ``logs.csv``, ``bench.json``): ``suite`` is the README's leaderboard, the traces page's catalog and the
  predictions page's suite table.

Rows come from the files: a new scheduler in a summary (a new predictor's row, say) appears in the tables without a
change here. The paired comparison is :func:`experiments.tables.paired` against each trace's reference, the
strongest implementable row.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments import pages
from experiments.pages import ROOT, add, differences, figure
from hpcgym import cli
from hpcgym import io as hpcgym_io


def __getattr__(name: str) -> Any:
    """The library's names, which lived here before :mod:`experiments.pages`."""
    return getattr(pages, name)


def main(argv: Sequence[str] | None = None) -> int:
    """Rebuild (or ``--check``) the docs' tables from ``results/``."""
    ap = cli.ArgumentParser(prog="python -m experiments.report", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page's tables differ")
    ap.add_argument("--add", type=Path, default=None, metavar="EVAL_FOLDER",
                    help="first copy this evaluation's per_window.csv into results/ (needs --trace, --date, --seeds, "
                         "--command)")
    ap.add_argument("--trace", default="", help="with --add: the trace the evaluation ran on")
    ap.add_argument("--date", default="", help="with --add: the day it ran (YYYY-MM-DD)")
    ap.add_argument("--seeds", default="0", help="with --add: the agents' seeds (default: 0)")
    ap.add_argument("--command", default="", help="with --add: the command that made it")
    ap.add_argument("--no-figure", action="store_true", help="do not redraw the figures (the README's forest plot, "
                    "the results page's per-window figure)")
    args = ap.parse_args(argv)
    if args.check:
        diffs = differences()
        for path in diffs:
            print(f"{path}: its tables differ from the committed summaries (run python -m experiments.report)")
        return 1 if diffs else 0
    if args.add is not None:
        if not (args.trace and args.date and args.command):
            raise cli.UsageError("--add needs --trace, --date and --command")
        print(f"added {add(args.add, args.trace, args.date, args.seeds, args.command)}")
    for path, text in pages.pages().items():
        hpcgym_io.write_text(path, text)
        print(f"wrote {path.relative_to(ROOT)}")
    if not args.no_figure:
        print(f"drew {figure().relative_to(ROOT)}")
        print(f"drew {pages.bench_figure().relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
