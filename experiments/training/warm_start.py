"""The warm start: what RL starts from, as the recipe's :class:`experiments.recipe.WarmStart` section says.

Three files hold all of it: the section and its checks (``experiments/recipe.py``), this wiring, and the work
itself (``agents/pretrain.py``: behaviour cloning, a residual's teachers, keeping whichever start validates best).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from experiments import runs
from experiments.protocol import Data
from experiments.recipe import Recipe, Resolved
from hpcgym import io as hpcgym_io


def warm_start(recipe: Recipe, named: Resolved, model: Any, data: Data, workload: Any, run: runs.RunFolder,
               env: dict[str, Any], validate: Callable[[Any], float] | None) -> tuple[dict[str, float], str]:
    """Save the untrained network; with ``--clone``, behaviour-clone the heuristic and save that too.

    The demonstrations are the heuristic's choices on the training workload (synthetic samples for a synthetic
    run: a synthetic-trained agent never sees real jobs before its evaluation). ``env``: the run's environment
    settings (``experiments.training.parts.env_kwargs``). It reads the warm start's section, the residual's prior
    (``network.prior``), the validation windows (``selection``) and the seed; ``named``: the heuristics the recipe
    names (:func:`experiments.recipe.resolve`).

    With ``--start best`` and validation windows, RL then starts from whichever of the two scores better on them
    (``warm_start.json`` says which). Returns the validation scores measured and the network RL starts from.
    """
    from agents import pretrain
    from agents.callbacks import save_atomic
    from hpcgym.env import SchedulingEnv

    warm, prior, sel, seed = recipe.warm_start, recipe.network.prior, recipe.selection, recipe.run.seed
    save_atomic(model, run.untrained)
    if not (warm.clone or prior):
        return {}, "untrained"
    held_out = None
    if sel.val_windows > 0:  # the heuristic's choices on validation windows: how well the start reproduces them
        # (random windows of the validation table: with --val-periods one may span a held-out stretch's end and the
        # next one's start, a quiet spell between; it measures agreement with the heuristic, it selects nothing)
        held_out = (SchedulingEnv(workload=data.validation, window=sel.val_length, split="all", **env),
                    sel.val_windows)
    validate = validate if warm.start == "best" else None
    pol = named.clone if warm.clone else named.prior
    # a copy: the demonstrations must not move the training environments' workload (a mixed workload's turn),
    # or a resumed run, which skips them, would not find the workload where the uninterrupted run had it
    demo_env = SchedulingEnv(workload=copy.copy(workload), window=warm.clone_window, split="all",
                             **env) if warm.clone or warm.teach else None
    progress = not recipe.run.quiet
    if prior:
        teach = None
        if warm.clone:  # a teacher: fit the correction to its choices
            def teach() -> float:
                return pretrain.behaviour_clone(model, demo_env, pol, warm.clone_episodes, warm.clone_epochs,
                                                seed=seed, progress=progress)
        elif warm.teach:  # runtimes: fit the correction to the runtimes the prior's estimates miss
            def teach() -> float:
                return pretrain.teach_runtimes(model, demo_env, pol, warm.clone_episodes, warm.clone_epochs,
                                               seed=seed)
        done = pretrain.residual_start(model, pol, held_out, validate, on_start=lambda m: save_atomic(m, run.cloned),
                                       teach=teach)
        what = (f"residual on {prior}, taught by {warm.clone}: reproduces" if warm.clone else
                f"residual on {prior}, taught the runtimes:" if warm.teach else
                f"residual on {prior}: the prior alone reproduces")
    else:
        done = pretrain.warm_start(model, pol, demo_env, warm.clone_episodes, warm.clone_epochs, seed, held_out,
                                   validate, on_clone=lambda m: save_atomic(m, run.cloned), progress=progress)
        what = f"behaviour-cloned {warm.clone}:"
    _report(warm.teach, what, done, held_out is not None, run)
    return done.scores, done.chosen


def _report(teach: str, what: str, done: Any, held_out: bool, run: runs.RunFolder) -> None:
    """Say what the warm start did, and write ``warm_start.json``."""
    on_val = f" ({done.accuracy_held_out:.1%} on validation windows)" if held_out else ""
    did = (f"the log-runtime error {done.accuracy:.1%} lower on its demonstrations" if teach else
           f"{done.accuracy:.1%} of its choices{on_val}")
    print(f"{what} {did}; RL starts from the {done.chosen} network (validation "
          f"bsld: {json.dumps({k: round(v, 3) for k, v in done.scores.items()})})", flush=True)
    kept = {"runtime_error_removed": done.accuracy, "prior_choices_kept_validation": done.accuracy_held_out} \
        if teach else {"clone_accuracy": done.accuracy}
    hpcgym_io.write_text(run.warm_start, json.dumps({**kept,
                                                      "clone_accuracy_validation": done.accuracy_held_out if held_out
                                                      else None, "validation": done.scores, "chosen": done.chosen},
                                                     indent=2))
