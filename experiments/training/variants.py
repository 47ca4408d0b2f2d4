"""Recipe variants judged on validation windows only (``python -m experiments.recipe_sweep`` names the variants).

Each run trains with no test windows; its score is the validation bsld of the network it keeps, of its last and of
its starting network (:func:`validation_scores`), and optionally those networks' bsld on a second draw of
validation windows (:func:`check_scores`, ``check.json``). :func:`summarize` makes the table per variant;
:func:`references` puts the heuristics on the same windows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import runs
from experiments.recipe import Recipe, agent_env, naming_context, resolve
from experiments.runs import RunFolder
from hpcgym import io as hpcgym_io


def train_and_check(task: tuple[Recipe, int, int]) -> str:
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
    recipe = run.recipe()
    sel, backfill = recipe.selection, recipe.environment.backfill
    data = protocol.run_data(recipe.source, sel)
    starts = protocol.validation_starts(data, sel.val_length, count, seed)
    env = dict(machine=data.machine, workload=data.validation, window=sel.val_length, split="all",
               time_scale=run.time_scale(), **agent_env(recipe, resolve(recipe, playing=True)))
    # a taught residual's prior has no file
    start = {"cloned": run.cloned, "untrained": run.untrained}.get(run.chosen_start())
    out = {}
    for name, path in (("start", start), ("kept", run.model), ("last", run.last)):
        if path is None:
            continue
        model, _ = run.load_network(path)
        out[f"check_{name}"] = float(np.mean([i["metrics"]["bsld_mean"] for i in play_windows(model, starts, **env)]))
    windows = [traces.window(data.validation, sel.val_length, start=s) for s in starts]
    context = naming_context(recipe.source, backfill)
    refs = [protocol.resolve_heuristic(name, **context) for name in ("saf", "tuned") if _has(name, recipe)]
    for cell in simulate_grid(windows, data.machine, refs, [backfill]):
        out[f"check_{cell.policy}"] = float(np.mean([rec["bsld"].mean() for rec in cell.records]))
    return out


def _has(name: str, recipe: Recipe) -> bool:
    from baselines import tuned

    return name != tuned.TUNED or tuned.find(recipe.source.trace, recipe.environment.backfill) is not None


def fit_once(recipes: list[Recipe]) -> None:
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
    curve = RunFolder(run).learning_curve(kept=True)
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
