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
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import runs, train
from experiments.recipe import Recipe
from experiments.runs import RunFolder
from experiments.training import many
from hpcgym import cli
from hpcgym import io as hpcgym_io

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


def _train(task: tuple[Recipe, int, int]) -> str:
    """Train one run; with check windows, also score its networks on them (``check.json`` in the run folder)."""
    from experiments.training import loop

    recipe, check_windows, check_seed = task
    run = loop.train(recipe)
    if check_windows:
        scores = check_scores(run, check_windows, check_seed)
        hpcgym_io.write_text(run / CHECK_JSON, json.dumps(scores, indent=2))
    return str(run)


#: The check windows' scores in a run folder (written by the sweep).
CHECK_JSON = "check.json"


def check_scores(run_dir: Path, count: int, seed: int) -> dict[str, float]:
    """Mean bsld of a run's start, kept and last networks, and of its references, on other validation windows.

    The windows are ``count`` windows of the validation part drawn with ``seed`` (the run selected its network on
    those of seed 0): a second look that tells a real gain from one that selection found in the noise of its own
    windows. The references are SAF and ``tuned`` (where the trace has a fit) with the run's backfilling, run as
    batch schedules (every waiting job in view).
    """
    from agents.rollout import play_windows
    from baselines.grid import simulate_grid
    from experiments import protocol
    from hpcgym import traces

    run = RunFolder(run_dir)
    settings = run.settings()
    recipe = Recipe.from_settings(settings)
    sel = recipe.selection
    data = protocol.run_data(recipe.source, sel)
    starts = protocol.validation_starts(data, sel.val_length, count, seed)
    env = dict(machine=data.machine, workload=data.validation, window=sel.val_length, split="all",
               time_scale=run.time_scale(), **protocol.agent_env(settings))
    chosen = json.loads(run.warm_start.read_text()).get("chosen")
    start = {"cloned": run.cloned, "untrained": run.untrained}.get(chosen)  # a taught residual's prior: no file
    out = {}
    for name, path in (("start", start), ("kept", run.model), ("last", run.last)):
        if path is None:
            continue
        model, _ = run.load_network(path)
        out[f"check_{name}"] = float(np.mean([i["metrics"]["bsld_mean"] for i in play_windows(model, starts, **env)]))
    windows = [traces.window(data.validation, sel.val_length, start=s) for s in starts]
    refs = [protocol.heuristic(name, settings) for name in ("saf", "tuned") if _has(name, settings)]
    for cell in simulate_grid(windows, data.machine, refs, [recipe.environment.backfill]):
        out[f"check_{cell.policy}"] = float(np.mean([rec["bsld"].mean() for rec in cell.records]))
    return out


def _has(name: str, settings: dict) -> bool:
    from baselines import tuned

    return name != tuned.TUNED or tuned.find(settings["trace"], settings["backfill"]) is not None


def _fit_once(recipes: list[Recipe]) -> None:
    """Fit (and cache) each seed's synthesizer before the runs start, so that parallel runs only read it."""
    from experiments import protocol

    done = set()
    for r in recipes:
        if r.source.workload != "real" and r.run.seed not in done:
            data = protocol.run_data(r.source, r.selection)
            runs.fit_cache(r.run.runs_dir).fitted(r.source.trace_label, r.source.synthesizer, data.fit, r.run.seed,
                                                  data.machine.nodes, announce=print)
            done.add(r.run.seed)


def references(recipe: Recipe) -> dict[str, float]:
    """Mean validation bsld of the heuristics on the same validation windows (the sweep's reference lines)."""
    from experiments import protocol

    sel = recipe.selection
    data = protocol.run_data(recipe.source, sel)
    starts = protocol.validation_starts(data, sel.val_length, sel.val_windows)
    return protocol.validation_references(data, sel.val_length, starts, recipe.environment.backfill)


def validation_scores(run: Path) -> dict[str, float]:
    """Validation bsld of the kept (best), the last and the first network of a run."""
    curve = pd.read_csv(RunFolder(run).curve)
    curve = curve[~curve["network"].str.contains("not kept")]
    return {"val_kept": float(curve["val_bsld"].min()), "val_last": float(curve["val_bsld"].iat[-1]),
            "val_start": float(curve["val_bsld"].iat[0]), "validations": len(curve)}


def checked(run: Path) -> dict[str, float]:
    """A run's check scores (:func:`check_scores`), if the sweep measured them."""
    path = run / CHECK_JSON
    return json.loads(path.read_text()) if path.exists() else {}


def summarize(scored: pd.DataFrame) -> pd.DataFrame:
    """Per variant: median, IQR and worst seed of the kept network's validation bsld; medians of the others.

    With check windows, also the medians of the check scores (``check_*``: the start, kept and last networks and
    the references on the second draw of validation windows).
    """
    rows = []
    checks = [c for c in scored.columns if c.startswith("check_")]
    for variant, g in scored.groupby("variant", sort=False):
        v = g["val_kept"].to_numpy()
        q25, q50, q75 = np.percentile(v, (25, 50, 75))
        rows.append({"variant": variant, "seeds": len(g), "median": q50, "iqr_low": q25, "iqr_high": q75,
                     "worst_seed": v.max(), "median_last": g["val_last"].median(),
                     "worst_last": g["val_last"].max(), "median_start": g["val_start"].median(),
                     **{c: g[c].median() for c in checks}})
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
    _fit_once(recipes)
    dirs = many.run_all([(r, args.check_windows, args.check_seed) for r in recipes], _train, jobs=args.workers)
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
