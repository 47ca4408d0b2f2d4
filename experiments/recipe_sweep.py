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

import pandas as pd

from experiments import runs, train
from experiments.training import many
from experiments.training.variants import checked, fit_once, references, summarize, train_and_check, validation_scores
from hpcgym import cli

#: The environment of the variants against ``tuned``: its predictions, its scan order, the reward relative to it.
TUNED = ["--features", "v1", "--order", "tuned", "--baseline", "tuned"]
RESIDUAL = [*TUNED, "--prior", "tuned", "--clone", ""]
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
    # Against the trace's tuned priority (runtime predictions, v1 observation): its clone, or a residual on it.
    "tuned-clone": [*TUNED, "--clone", "tuned"],
    "tuned-residual": [*RESIDUAL],
    "tuned-residual-t003": [*RESIDUAL, "--prior-temperature", "0.03"],
    "tuned-residual-t03": [*RESIDUAL, "--prior-temperature", "0.3"],
    "tuned-residual-kl": [*RESIDUAL, "--kl-coef", "1"],
    "tuned-residual-attn": [*RESIDUAL, "--policy-kwargs", '{"attention": 2}'],  # formerly --attention 2
    "tuned-residual-lr1e-4": [*RESIDUAL, "--learning-rate", "1e-4"],
    "tuned-guarded": [*RESIDUAL, "--action", "guarded"],
    "tuned-hold": [*RESIDUAL, "--action", "hold"],
}


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
    ap.add_argument("--check-windows", type=int, default=0,
                    help="also score each run's start, kept and last networks on this many other validation windows "
                         "(default: 0, none)")
    ap.add_argument("--check-seed", type=int, default=1,
                    help="seed of the check windows' draw (runs select on seed 0's; default: 1)")
    ap.add_argument("shared", nargs=argparse.REMAINDER, help="after --: flags passed to every training run")
    args = ap.parse_args(argv)
    shared = [a for a in args.shared if a != "--"]
    points = [(v, s) for v in args.variants for s in args.seeds]
    argvs = [[*shared, *VARIANTS[v], "--seed", str(s), "--eval-windows", "0", "--runs-dir", str(args.out),
              "--run-name", runs.run_name(v, s)] for v, s in points]
    recipes = [train.recipe_of(train.parse_args(argv)) for argv in argvs]
    fit_once(recipes)
    dirs = many.run_all([(r, args.check_windows, args.check_seed) for r in recipes], train_and_check, jobs=args.workers)
    scored = pd.DataFrame([{"variant": v, "seed": s, **validation_scores(Path(d)), **checked(Path(d))}
                           for (v, s), d in zip(points, dirs, strict=True)])
    table = summarize(scored)
    refs = references(recipes[0])
    table = pd.concat([table, pd.DataFrame([{"variant": f"(heuristic) {k}", "median": v} for k, v in refs.items()])],
                      ignore_index=True)
    scored.to_csv(args.out / "runs.csv", index=False)
    table.to_csv(args.out / "summary.csv", index=False)
    probe = recipes[0]
    sel = probe.selection
    print(f"{probe.source.trace}, validation part (last {sel.val_fraction:.0%} of the train split), {sel.val_windows} "
          f"windows x {sel.val_length} jobs, backfill {probe.environment.backfill}; per variant, the seeds' "
          "validation bsld of the kept network (lower is better)")
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
