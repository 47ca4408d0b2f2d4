"""The table across seeds: medians, worst seeds, paired ratios to the reference, validation against test.

The library of ``python -m experiments.seeds``, whose docstring defines every column.
"""


from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import runs, stream
from experiments.results import HEURISTIC, NETWORKS, Windows
from experiments.runs import BASELINE, RunFolder
from hpcgym import io as hpcgym_io
from hpcgym import metrics

AGREEMENT = "agreement.csv"  #: per seed: the start's and the kept network's validation and test scores
PAIRED = "paired.csv"  #: per seed: each network's paired ratio to the strongest reference (windows, whole split)


def load(run_dirs: Sequence[Path]) -> pd.DataFrame:
    """One row per run x scheduler: ``run, seed, scheduler, kind, backfill, bsld`` (mean over the test windows).

    Raises:
        hpcgym.cli.UsageError: a folder is not an evaluated run, or is given twice.
        ValueError: the runs were not evaluated on the same trace and windows, or two have the same seed.
    """
    folders = [RunFolder(run).check("evaluation") for run in run_dirs]
    runs.check_distinct(folders)
    rows, seen, seeds = [], {}, {}
    for run in folders:
        recipe = run.recipe()
        seed = recipe.run.seed
        twin = seeds.setdefault(seed, run)
        if twin is not run:
            raise ValueError(f"{twin.path} and {run.path} both have seed {seed}: one seed would count "
                             "twice; give one run per seed")
        results = Windows.read(run.per_window)
        ref = results.fingerprint(BASELINE)
        key = (recipe.source.trace, recipe.run.eval_windows, recipe.run.eval_length)
        seen.setdefault(key, (run, ref))
        if seen[key][1] != ref or len(seen) > 1:
            raise ValueError(f"{run.path} and {seen[next(iter(seen))][0].path} were not evaluated on the same windows "
                             f"(trace, windows, length: {list(seen)}); evaluate them together first")
        for (scheduler, kind), g in results.table.groupby(["scheduler", "kind"], sort=False):
            role = kind if kind in NETWORKS else scheduler
            backfill = g["backfill"].iat[0] if "backfill" in g else recipe.environment.backfill
            rows.append({"run": run.name, "seed": seed, "scheduler": role, "kind": kind,
                         "backfill": backfill, "bsld": g["bsld"].mean(), "windows": len(g)})
    return pd.DataFrame(rows)


def best_reference(per_seed: pd.DataFrame) -> str | None:
    """The strongest reference: the heuristic with the lowest median bsld over the seeds (None: no heuristic)."""
    heuristics = per_seed[per_seed["kind"] == HEURISTIC]
    if heuristics.empty:
        return None
    return str(heuristics.groupby("scheduler")["bsld"].median().sort_values(kind="stable").index[0])


def table(per_seed: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The across-seed table (see the module docstring); rows sorted by median bsld."""
    wide = per_seed.pivot_table(index="seed", columns="scheduler", values="bsld")
    best = best_reference(per_seed)
    rows = []
    for scheduler, g in per_seed.groupby("scheduler", sort=False):
        v = g["bsld"].to_numpy()
        mean, lo, hi = metrics.bootstrap_ci(v, confidence)
        q25, q50, q75 = np.percentile(v, (25, 50, 75))
        row = {"scheduler": scheduler, "kind": g["kind"].iat[0], "backfill": g["backfill"].iat[0],
               "seeds": len(v), "median": q50, "iqr_low": q25, "iqr_high": q75, "worst_seed": v.max(),
               "best_seed": v.min(), "mean": mean, "ci_low": lo, "ci_high": hi}
        if scheduler in NETWORKS:
            mine = wide[scheduler].dropna()
            row[f"seeds_beating_{BASELINE}"] = int((mine < wide.loc[mine.index, BASELINE]).sum())
            for other in ("untrained", "cloned"):
                if other in wide and scheduler != other:
                    row[f"seeds_beating_{other}"] = int((mine < wide.loc[mine.index, other]).sum())
            if best is not None:
                row["seeds_beating_best_reference"] = int((mine < wide.loc[mine.index, best]).sum())
        rows.append(row)
    return pd.DataFrame(rows).sort_values("median").reset_index(drop=True)


def agreement(run_dirs: Sequence[Path], per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per seed: the start RL took and the network kept, their validation and test scores (mean bsld).

    Columns ``seed, start, val_start, val_kept, test_start, test_kept``. The start is the first row of the run's
    learning curve not marked "not kept" (``untrained``, ``cloned`` or a taught residual's ``prior``); the kept
    network is the best validation score of the curve (what ``model.zip`` holds, the ``agent`` row of the test).
    A start with no test row of its own (``prior``) has the agent's test score when it was kept, else none. Runs
    without a learning curve (no validation windows) are left out.
    """
    rows = []
    for run in map(RunFolder, run_dirs):
        kept = run.learning_curve(kept=True)
        if kept.empty:
            continue
        seed = run.recipe().run.seed
        start = str(kept["network"].iat[0])
        mine = per_seed[per_seed["seed"] == seed].set_index("scheduler")["bsld"]
        val_start, val_kept = float(kept["val_bsld"].iat[0]), float(kept["val_bsld"].min())
        test_kept = float(mine.get("agent", np.nan))
        # a start kept to the end is the agent itself, whether or not it has a test row of its own
        test_start = float(mine.get(start, test_kept if val_kept >= val_start else np.nan))
        rows.append({"seed": seed, "start": start, "val_start": val_start, "val_kept": val_kept,
                     "test_start": test_start, "test_kept": test_kept})
    return pd.DataFrame(rows, columns=["seed", "start", "val_start", "val_kept", "test_start", "test_kept"])


def rl_counts(agree: pd.DataFrame) -> tuple[int, int, pd.DataFrame]:
    """Counts of RL against its start over rows of :func:`agreement`.

    Returns the rows whose kept network beat the start on validation, those that beat it on test, and the rows that
    have both test scores (the start's and the kept network's).
    """
    scored = agree.dropna(subset=["test_start", "test_kept"])
    return (int((agree["val_kept"] < agree["val_start"]).sum()),
            int((scored["test_kept"] < scored["test_start"]).sum()), scored)


def paired(run_dirs: Sequence[Path]) -> pd.DataFrame:
    """Per seed: each network's paired ratio to the strongest reference, on the windows and the whole test split.

    The columns of :data:`experiments.stream.PAIRED` after ``run`` and ``seed`` (:func:`.stream.paired_rows`).
    """
    frames = [stream.paired_rows(run.eval).assign(run=run.name, seed=run.recipe().run.seed)
              for run in map(RunFolder, run_dirs)]
    cols = ["run", "seed", *stream.PAIRED]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def describe_agreement(agree: pd.DataFrame) -> str:
    """One line: how often RL's kept network beat its start on validation and on test; the rank agreement."""
    from scipy.stats import spearmanr

    if agree.empty:
        return "Validation against test: no learning curves (no validation windows)."
    moved, _, _ = rl_counts(agree)
    # Only the seeds that moved on validation are counted on test (a kept start scores the same there), and the
    # "better" count and its total come from the same rows: a seed without a validation score is in neither.
    scored = agree[agree["val_kept"] < agree["val_start"]].dropna(subset=["test_start", "test_kept"])
    better = int((scored["test_kept"] < scored["test_start"]).sum())
    both = agree.dropna(subset=["test_kept"])
    rho = spearmanr(both["val_kept"], both["test_kept"])[0] if len(both) >= 3 else np.nan
    return (f"Validation against test: the network kept beat RL's start on validation on {moved} of "
            f"{len(agree)} seeds, and on test on {better} of the {len(scored)} of them whose start has a test "
            f"score; Spearman correlation of the kept networks' validation and test scores over {len(both)} "
            f"seeds: {rho:.2f} (agreement.csv).")


def describe(per_seed: pd.DataFrame, run_dirs: Sequence[Path], confidence: float = 0.95) -> str:
    """The line that says what the table measured."""
    recipe = RunFolder(run_dirs[0]).recipe()
    seeds = sorted(per_seed["seed"].unique().tolist())
    return (f"{recipe.source.trace}, test split (last 30%), {int(per_seed['windows'].max())} windows x "
            f"{recipe.run.eval_length} jobs; {len(seeds)} seeds {seeds}; one value per seed = mean bounded slowdown "
            f"over the windows; CI: {confidence:.0%} bootstrap over seeds; agents trained on "
            f"{recipe.source.workload} data with backfill={recipe.environment.backfill}; strongest reference: "
            f"{best_reference(per_seed)}")


def format_table(tab: pd.DataFrame) -> str:
    """The table as text, under its description; below it, validation against test when it was measured."""
    body = tab.to_string(index=False, float_format=lambda v: f"{v:,.2f}")
    below = f"\n\n{tab.attrs['agreement']}" if tab.attrs.get("agreement") else ""
    return f"{tab.attrs.get('description', '')}\n{body}{below}"


def write(run_dirs: Sequence[Path], out: Path) -> pd.DataFrame:
    """Write ``per_seed.csv``, ``summary.csv``, ``summary.md``, ``agreement.csv`` and ``learning_curves.png``."""
    from agents.curves import plot_learning_curves
    from hpcgym.io import write_table

    per_seed = load(run_dirs)
    tab = table(per_seed)
    tab.attrs["description"] = describe(per_seed, run_dirs)
    write_table(per_seed, out / runs.PER_SEED)
    write_table(tab, out / runs.SUMMARY)
    agree = agreement(run_dirs, per_seed)
    versus = paired(run_dirs)
    tab.attrs["agreement"] = "\n\n".join(filter(None, [stream.verdict(versus), describe_agreement(agree)]))
    write_table(agree, out / AGREEMENT)
    write_table(versus, out / PAIRED)
    hpcgym_io.write_text(out / runs.SUMMARY_MD, format_table(tab) + "\n")
    curves = {folder.name: folder.curve for folder in map(RunFolder, run_dirs)}
    plot_learning_curves(curves, out / runs.CURVES_PNG, title=f"{out.name}: validation bsld per seed")
    return tab
