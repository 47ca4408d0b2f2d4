"""Choose the training recipe: several variants x several seeds, judged on validation windows only.

Example::

    python -m experiments.recipe_sweep --seeds 0 1 2 3 4 --workers 16 --out runs/recipe -- --trace theta

Each variant is a set of ``experiments.train`` flags (:data:`VARIANTS`) on top of the shared flags after ``--``.
Every run trains with ``--eval-windows 0``: the test split is never touched. A run's score is the validation bsld
of the network it would keep (the best validation point, i.e. ``model.zip``), next to the validation bsld of its
last network and of its starting network. The table reports, per variant, the median, spread and worst seed of
those scores, and the heuristics' scores on the same windows as reference rows; the winner is the variant with
the lowest median whose worst seed is not an outlier. Writes ``runs.csv`` and ``summary.csv`` to ``--out``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import runs
from experiments.fanout import Executor
from experiments.runs import RunFolder
from hpcgym import cli

#: name -> flags. ``old`` is the recipe before the vector environment (one env, long rollouts, plain reward).
VARIANTS: dict[str, list[str]] = {
    "old": ["--envs", "1", "--n-steps", "2048", "--batch-size", "256", "--n-epochs", "10", "--reward", "objective",
            "--baseline", "", "--clone", "", "--order", "fcfs", "--ranks", ""],
    "vec": ["--reward", "objective", "--baseline", "", "--clone", "", "--order", "fcfs"],
    "vec-log": ["--reward", "log", "--baseline", "", "--clone", "", "--order", "fcfs"],
    "vec-rel": ["--reward", "log", "--baseline", "saf", "--clone", "", "--order", "fcfs"],
    "clone-rel": ["--reward", "log", "--baseline", "saf", "--clone", "saf", "--order", "fcfs"],
    "clone-rel-saforder": ["--reward", "log", "--baseline", "saf", "--clone", "saf", "--order", "saf"],
    "clone-rel-saforder-lr1e-4": ["--reward", "log", "--baseline", "saf", "--clone", "saf", "--order", "saf",
                                  "--learning-rate", "1e-4"],
    "clone-rel-saforder-200k": ["--reward", "log", "--baseline", "saf", "--clone", "saf", "--order", "saf",
                                "--timesteps", "200000"],
    "clone100-rel-saforder": ["--reward", "log", "--baseline", "saf", "--clone", "saf", "--order", "saf",
                              "--clone-episodes", "100", "--start", "clone"],
    "default": [],
    "plain-scorer": ["--ranks", ""],  # the default without the scorer's queue-rank inputs
    "dqn-rel-saforder": ["--algo", "dqn", "--reward", "log", "--baseline", "saf", "--order", "saf",
                         "--batch-size", "256"],
}


def _train(argv: list[str]) -> str:
    from experiments import train

    return str(train.train(train.parse_args(argv)))


def _fit_once(argvs: list[list[str]]) -> None:
    """Fit (and cache) each seed's synthesizer before the runs start, so that parallel runs only read it."""
    from experiments import protocol, train

    done = set()
    for argv in argvs:
        args = train.parse_args(argv)
        if args.workload != "real" and args.seed not in done:
            data = protocol.load_data(args, args.val_fraction)
            runs.fit_cache(args.runs_dir).fitted(args.trace_label, args.synthesizer, data.fit, args.seed,
                                                 data.machine.nodes, announce=print)
            done.add(args.seed)


def references(argv: list[str]) -> dict[str, float]:
    """Mean validation bsld of the heuristics on the same validation windows (the sweep's reference lines)."""
    from experiments import protocol, train

    args = train.parse_args(argv)
    data = protocol.load_data(args, args.val_fraction)
    starts = protocol.validation_starts(data, args.val_length, args.val_windows)
    return protocol.validation_references(data, args.val_length, starts, args.backfill)


def validation_scores(run: Path) -> dict[str, float]:
    """Validation bsld of the kept (best), the last and the first network of a run."""
    curve = pd.read_csv(RunFolder(run).curve)
    curve = curve[~curve["network"].str.contains("not kept")]
    return {"val_kept": float(curve["val_bsld"].min()), "val_last": float(curve["val_bsld"].iat[-1]),
            "val_start": float(curve["val_bsld"].iat[0]), "validations": len(curve)}


def summarize(scored: pd.DataFrame) -> pd.DataFrame:
    """Per variant: median, IQR and worst seed of the kept network's validation bsld; medians of the others."""
    rows = []
    for variant, g in scored.groupby("variant", sort=False):
        v = g["val_kept"].to_numpy()
        q25, q50, q75 = np.percentile(v, (25, 50, 75))
        rows.append({"variant": variant, "seeds": len(g), "median": q50, "iqr_low": q25, "iqr_high": q75,
                     "worst_seed": v.max(), "median_last": g["val_last"].median(),
                     "worst_last": g["val_last"].max(), "median_start": g["val_start"].median()})
    return pd.DataFrame(rows).sort_values("median").reset_index(drop=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = cli.ArgumentParser(prog="python -m experiments.recipe_sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4],
                    help="training seeds of every variant (default: 0 1 2 3 4)")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                    help="the recipe variants to train (default: all)")
    ap.add_argument("--workers", type=cli.positive_int, default=2,
                    help="runs at once (processes; default: 2) [formerly --jobs]")
    cli.alias(ap, "--jobs", "--workers")
    ap.add_argument("--out", type=Path, default=Path("runs/recipe"),
                    help="folder of the runs and the tables (default: runs/recipe)")
    ap.add_argument("shared", nargs=argparse.REMAINDER, help="after --: flags passed to every training run")
    args = ap.parse_args(argv)
    shared = [a for a in args.shared if a != "--"]
    points = [(v, s) for v in args.variants for s in args.seeds]
    argvs = [[*shared, *VARIANTS[v], "--seed", str(s), "--eval-windows", "0", "--runs-dir", str(args.out),
              "--run-name", runs.run_name(v, s)] for v, s in points]
    _fit_once(argvs)
    with Executor(_train, jobs=args.workers) as executor:
        dirs = executor.map(argvs)
    scored = pd.DataFrame([{"variant": v, "seed": s, **validation_scores(Path(d))}
                           for (v, s), d in zip(points, dirs, strict=True)])
    table = summarize(scored)
    refs = references(argvs[0])
    table = pd.concat([table, pd.DataFrame([{"variant": f"(heuristic) {k}", "median": v} for k, v in refs.items()])],
                      ignore_index=True)
    scored.to_csv(args.out / "runs.csv", index=False)
    table.to_csv(args.out / "summary.csv", index=False)
    from experiments import train

    probe = train.parse_args(argvs[0])
    print(f"{probe.trace}, validation part (last {probe.val_fraction:.0%} of the train split), {probe.val_windows} "
          f"windows x {probe.val_length} jobs, backfill {probe.backfill}; per variant, the seeds' validation bsld of "
          "the kept network (lower is better)")
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
