"""Run priority heuristics with and without backfilling on a trace, and print the metrics.

Examples::

    python -m baselines.run --trace sdsc-sp2 --policy sjf --backfill easy
    python -m baselines.run --trace sdsc-sp2 --policy all --window 1024 --windows 10 --seed 0 --out jobs.csv

Without ``--window`` each run covers the whole trace (split). With it, ``--windows`` windows of ``--window``
consecutive jobs are drawn once from ``--seed``, and every policy runs on the same ones; the table gives the mean
over windows with a 95% bootstrap interval for the mean bsld. ``--trace`` also takes any trace file, with
``--format``, ``--machine NAME|NODES[xCORES]`` and, for other CSV layouts, ``--columns``::

    python -m baselines.run --trace jobs.csv --machine 120x2 --columns interarrival=interval,run=run_time,nodes=node_num

Bad input (an unknown name, a malformed file, an empty trace, a bad flag value) exits 2 with one ``error:`` line.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from baselines import learned, priorities, references
from baselines.grid import Cell, simulate_grid
from hpcgym import cli, machines, metrics, traces
from hpcgym.errors import EmptyTraceError
from hpcgym.io import write_table
from hpcgym.sim import BACKFILL_MODES, PriorityPolicy

BACKFILLS = ["none", "easy", "conservative", "rlscheduler"]


def draw_windows(jobs: pd.DataFrame, length: int | None, count: int, seed: int) -> list[pd.DataFrame]:
    """The job windows every policy runs on: the whole table, or ``count`` random windows of ``length`` jobs."""
    if len(jobs) == 0:
        raise ValueError(f"no jobs to run in {jobs.attrs.get('name', 'the trace')} [{jobs.attrs.get('split', 'all')}]")
    if length is None:
        return [jobs]
    if length < 1 or count < 1:
        raise ValueError(f"--window and --windows must be at least 1, not {length} and {count}")
    if length > len(jobs):
        raise ValueError(f"--window {length} is longer than the trace ({len(jobs)} jobs)")
    return [traces.window(jobs, length, start=s) for s in traces.window_starts(len(jobs), length, count, seed)]


def summary_table(cells: Sequence[Cell]) -> pd.DataFrame:
    """One row per policy x backfill mode: the mean bsld over windows with its bootstrap CI, and the means."""
    rows = []
    for cell in cells:
        table = pd.DataFrame(cell.summaries)
        mean, lo, hi = metrics.bootstrap_ci(table["bsld_mean"]) if len(table) > 1 else (table["bsld_mean"].iat[0],) * 3
        rows.append({"policy": cell.policy, "backfill": cell.backfill, "bsld": mean, "bsld_ci_low": lo,
                     "bsld_ci_high": hi, "bsld_p95": table["bsld_p95"].mean(), "wait_mean": table["wait_mean"].mean(),
                     "wait_p95": table["wait_p95"].mean(), "utilization": table["utilization"].mean(),
                     "jobs_per_cpu_s": table["jobs"].sum() / max(cell.cpu_s, 1e-9)})
    return pd.DataFrame(rows)


def job_records(cells: Sequence[Cell], windows: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Every cell's per-job records, with ``policy``, ``backfill``, ``window`` and ``row`` columns.

    ``row`` is each job's row in the table the windows were drawn from, which tells apart jobs that share an id.
    """
    return pd.concat([rec.assign(row=np.arange(len(rec)) + int(windows[w].attrs.get("window_start", 0)),
                                 policy=c.policy, backfill=c.backfill, window=w)
                      for c in cells for w, rec in enumerate(c.records)], ignore_index=True)


def format_table(table: pd.DataFrame) -> str:
    """The summary as aligned text."""
    out = table.copy()
    out["bsld (95% CI)"] = [
        f"{m:,.2f}" if lo == hi else f"{m:,.2f} [{lo:,.2f}, {hi:,.2f}]"
        for m, lo, hi in zip(out["bsld"], out["bsld_ci_low"], out["bsld_ci_high"], strict=True)
    ]
    out = out[["policy", "backfill", "bsld (95% CI)", "bsld_p95", "wait_mean", "wait_p95", "utilization",
               "jobs_per_cpu_s"]]
    return out.to_string(index=False, float_format=lambda v: f"{v:,.2f}")


def grid_cells(args: argparse.Namespace, windows: Sequence[pd.DataFrame], machine: machines.Machine,
               policies: Sequence[str | PriorityPolicy], backfills: Sequence[str], trace: str) -> list[Cell]:
    """Every policy x backfill mode on the windows; the one ``--policy`` names is resolved per backfilling.

    With ``--policy NAME`` the name goes through :func:`hpcgym.sim.heuristics.resolve` for ``trace`` and each
    backfill mode, as in the environments and the evaluation (``tuned`` is one fit per backfilling).
    """
    keep = args.out is not None  # a records table per cell adds about 150 B/job
    if args.policy == "all":
        return simulate_grid(windows, machine, policies, backfills, not args.no_kill, not args.quiet, keep)
    return [cell for b in backfills for cell in simulate_grid(
        windows, machine, [priorities.resolve(args.policy, trace, b)], [b], not args.no_kill, False, keep)]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    ap = cli.ArgumentParser(prog="python -m baselines.run", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default="sdsc-sp2", help="bundled trace name or a trace file (default: sdsc-sp2)")
    cli.add_trace_args(ap)
    ap.add_argument("--policy", default="all", help=f"a heuristic, one of {priorities.names()} (with those of "
                    "installed packages: docs/extend.md), 'tuned' (the fit for the trace and backfilling), "
                    "tuned:FIT.json, NAME@PREDICTOR (saf@last2), or 'all' (default)")
    ap.add_argument("--backfill", default="all", help=f"one of {BACKFILLS} or 'all' (default)")
    ap.add_argument("--split", default="all", choices=["train", "test", "all"],
                    help="chronological 70/30 part of the trace to use (default: all)")
    ap.add_argument("--window", type=cli.positive_int, default=None, help="jobs per window (default: the whole trace)")
    ap.add_argument("--windows", type=cli.positive_int, default=10,
                    help="number of windows with --window (default: 10)")
    ap.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of the window draw (default: 0)")
    ap.add_argument("--no-kill", action="store_true", help="let jobs run past their walltime")
    ap.add_argument("--out", type=cli.out_file, default=None, help="write per-job records here (.csv or .parquet); "
                    "the row column is the job's row in the trace (its split), unique even where job ids repeat")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.backfill != "all" and args.backfill not in BACKFILL_MODES:
        ap.error(f"--backfill must be one of {BACKFILLS} or 'all'")
    if args.policy != "all":  # refused before the trace is read (a tuned fit is per backfilling)
        for backfill in BACKFILLS if args.backfill == "all" else [args.backfill]:
            priorities.resolve(args.policy, args.trace, backfill)
    if args.no_kill and args.backfill == "conservative":  # nothing would be left to run (it crashed on an empty table)
        ap.error("--backfill conservative needs walltime kills: drop --no-kill, or pick another --backfill")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI (wrapped by :func:`hpcgym.cli.run`: bad input exits 2 with one ``error:`` line)."""
    args = parse_args(argv)
    cli.load_jit()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jobs = traces.read(args.trace, compact=True, **cli.read_options(args))
    for w in caught:
        print(f"note: {w.message}")
    if len(jobs) == 0:
        raise EmptyTraceError(jobs.attrs.get("source", args.trace), jobs.attrs.get("invalid"), need="to run")
    machine = machines.get(jobs.attrs["machine"])
    total, full = len(jobs), jobs
    jobs = traces.split(jobs, args.split)
    if len(jobs) == 0:
        raise ValueError(f"the {args.split} split of {args.trace} has no jobs ({total} in all); use --split all")
    windows = draw_windows(jobs, args.window, args.windows, args.seed)
    policies: list = priorities.names() if args.policy == "all" else [args.policy]
    trace = str(full.attrs.get("name") or Path(args.trace).name)
    if args.policy == "all" and not args.no_kill:  # the heuristics on the trace's learned predictions too
        if learned.ensure_quietly(trace, full, machine.nodes, progress=not args.quiet):
            policies += references.learned_policies(trace)
    backfills = BACKFILLS if args.backfill == "all" else [args.backfill]
    no_cons = args.no_kill and "conservative" in backfills
    if no_cons:
        backfills = [b for b in backfills if b != "conservative"]
        print("note: conservative backfilling needs walltime kills; skipped with --no-kill")
    cells = grid_cells(args, windows, machine, policies, backfills, trace)
    table = summary_table(cells)
    scope = f"{len(windows)} windows of {args.window} jobs (seed {args.seed})" if args.window else "whole trace"
    print(f"{jobs.attrs.get('name', args.trace)} [{args.split}] on {machine.name} ({machine.nodes} nodes), {scope}")
    print(format_table(table))
    if args.out is not None:
        recs = job_records(cells, windows)
        write_table(recs, args.out)
        print(f"per-job records: {args.out} ({len(recs)} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
