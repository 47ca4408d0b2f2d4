"""The TSTR table: agents trained on real, on synthetic and on real+synthetic data, all tested on real windows.

Example::

    python -m experiments.compare runs/theta-real-ppo-s0 runs/theta-synthetic-ppo-s0 --out compare.md

Each run folder must hold ``args.json`` and ``eval/per_window.csv`` (written by ``experiments.train``). Runs
compared together must have been evaluated on the same windows: the script checks that the baseline heuristic
(FCFS+EASY) scored the same on every window of every run, and refuses otherwise. The table gives, per agent, the
mean bounded slowdown on the real test windows with a 95% bootstrap interval, the win rate against FCFS+EASY, and
the share of the real-trained agent's improvement over FCFS+EASY that it achieves (TSTR: train on synthetic, test
on real). A second table gives each agent's paired ratio to the strongest reference with its 95% block-bootstrap CI,
on the windows and on the whole test split. When a training source has several runs (seeds), a third table reports
it across seeds: the median of the seeds' mean bsld, the interquartile range, the worst seed, and the share of the
real-trained agents' improvement at the medians with a 95% bootstrap CI over seeds. Two runs of one training
source with the same seed are refused (one line, exit 2) rather than counted as two seeds or merged: nothing says
which of them is right.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import stream
from experiments.recipe import Source
from experiments.results import AGENT, Windows
from experiments.runs import BASELINE, RunFolder, check_distinct
from hpcgym import cli, metrics
from hpcgym import io as hpcgym_io


def label(source: Source) -> str:
    """Training data of a run (its recipe's source), e.g. ``real``, ``synthetic:arrivals``, ``mixed:tvae``."""
    return source.workload if source.workload == "real" else f"{source.workload}:{source.synthesizer}"


def load_runs(runs: Sequence[Path]) -> pd.DataFrame:
    """Per-window bsld of each run's agent, and of the baseline heuristic, indexed by window.

    Raises:
        hpcgym.cli.UsageError: a folder is not an evaluated run, or is given twice.
        ValueError: the runs were not evaluated on the same windows, or two share a training source and a seed.
    """
    folders = [RunFolder(run).check("evaluation") for run in runs]
    check_distinct(folders)
    rows, first, seeds = [], None, {}
    for run in folders:
        recipe = run.recipe()
        source, seed = recipe.source, recipe.run.seed
        twin = seeds.setdefault((label(source), seed), run)
        if twin is not run:
            raise ValueError(f"{twin.path} and {run.path} both trained on {label(source)} with seed {seed}: "
                             "the table counts each training source's runs as its seeds, so that seed would count "
                             "twice; give one run per source and seed")
        results = Windows.read(run.per_window)
        ref = results.bsld(BASELINE)
        key = (source.trace, results.fingerprint(BASELINE))
        first = first or (run, key)
        if key != first[1]:
            raise ValueError(f"{run} and {first[0]} were not evaluated on the same windows (trace "
                             f"{source.trace} vs {first[1][0]}, {len(key[1])} vs {len(first[1][1])} windows); "
                             "evaluate them together with experiments.evaluate first")
        for a in results.agents.itertuples():
            rows.append({"run": run.name, "trained_on": label(source), "algo": recipe.algorithm.algo,
                         "trace": source.trace, "window": a.window, "bsld": a.bsld, "reference_bsld": ref[a.window]})
    return pd.DataFrame(rows)


def tstr_table(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per run: mean bsld [CI], win rate vs FCFS+EASY, improvement over it, share of the real one's."""
    rows = []
    for run, g in windows.groupby("run", sort=False):
        mean, lo, hi = metrics.bootstrap_ci(g["bsld"].to_numpy())
        ref = g["reference_bsld"].mean()
        rows.append({"run": run, "trained_on": g["trained_on"].iat[0], "algo": g["algo"].iat[0], "bsld": mean,
                     "ci_low": lo, "ci_high": hi, f"{BASELINE}_bsld": ref,
                     "win_rate": float((g["bsld"] < g["reference_bsld"]).mean()), "improvement": ref - mean})
    table = pd.DataFrame(rows)
    real = table[table["trained_on"] == "real"]
    base = real["improvement"].iat[0] if len(real) else np.nan
    table["share_of_real_improvement"] = table["improvement"] / base if base and base > 0 else np.nan
    return table


def across_seeds(windows: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per training source: the median of its runs' mean bsld, IQR, worst run, share of real's gain."""
    per_run = windows.groupby(["trained_on", "run"], sort=False).agg(bsld=("bsld", "mean"),
                                                                     ref=("reference_bsld", "mean")).reset_index()
    ref = float(per_run["ref"].iat[0])
    real = per_run.loc[per_run["trained_on"] == "real", "bsld"].to_numpy()
    rng = np.random.default_rng(seed)
    rows = []
    for source, g in per_run.groupby("trained_on", sort=False):
        v = g["bsld"].to_numpy()
        q25, q50, q75 = np.percentile(v, (25, 50, 75))
        row = {"trained_on": source, "seeds": len(v), "median": q50, "iqr_low": q25, "iqr_high": q75,
               "worst_seed": v.max(), f"{BASELINE}_bsld": ref}
        if len(real) and ref > np.median(real):
            row["share_of_real_improvement"] = (ref - q50) / (ref - np.median(real))
            boot = [(ref - np.median(rng.choice(v, len(v)))) / max(ref - np.median(rng.choice(real, len(real))), 1e-9)
                    for _ in range(n_boot)]
            row["share_ci_low"], row["share_ci_high"] = np.percentile(boot, (2.5, 97.5))
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = cli.ArgumentParser(prog="python -m experiments.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", type=Path, nargs="+", help="training run folders")
    ap.add_argument("--out", type=cli.out_file, default=None, help="also write the table here (.md or .csv)")
    args = ap.parse_args(argv)
    windows = load_runs(args.runs)  # a mistake is one error line (hpcgym.cli.run)
    table = tstr_table(windows)
    recipes = [RunFolder(r).recipe() for r in args.runs]
    trace = recipes[0].source.trace
    backfills = sorted({r.environment.backfill for r in recipes})
    head = (f"{trace}, test split (last 30%), {windows['window'].nunique()} windows per run; agents' backfill "
            f"{'/'.join(backfills)}, baseline {BASELINE}; mean bounded slowdown over windows with a 95% bootstrap CI")
    text = head + "\n" + table.to_string(index=False, float_format=lambda v: f"{v:,.3f}")
    versus = pd.concat([stream.paired_rows(RunFolder(r).eval, (AGENT,)) for r in args.runs], ignore_index=True)
    text += ("\n\npaired against the strongest reference (ratio of mean bsld on the same jobs, 95% block-bootstrap "
             "CI; beats: the CI's upper end below 1, on the whole split where evaluated)\n")
    text += versus.drop(columns="kind").to_string(index=False, float_format=lambda v: f"{v:,.3f}")
    if windows.groupby("trained_on")["run"].nunique().max() > 1:
        text += "\n\nacross seeds (one value per run: its mean bsld over the windows)\n"
        text += across_seeds(windows).to_string(index=False, float_format=lambda v: f"{v:,.3f}")
    print(text)
    if args.out:
        body = table.to_csv(index=False) if args.out.suffix == ".csv" else "```\n" + text + "\n```\n"
        hpcgym_io.write_text(args.out, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
