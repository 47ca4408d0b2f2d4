"""One training run, start to end, from a :class:`experiments.recipe.Recipe`.

:func:`train` reads the trace, checks the windows, builds the training workload and environments, makes the run
folder, writes the recipe (``args.json``), starts the network (:mod:`experiments.training.warm_start`), trains with
checkpoints and validation, and keeps the best network (``model.zip``). :func:`train_and_evaluate` then plays it
on the test windows (:mod:`experiments.evaluate`) and writes its verdict
(:mod:`experiments.training.verdict`). A killed run resumes from its last checkpoint as the
uninterrupted run would have gone on (``--resume``; :mod:`agents.resume`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import shutil
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from experiments import runs
from experiments.protocol import Data, run_data, validation_references, validation_starts
from experiments.recipe import Recipe, Resolved, resolve
from experiments.training import parts
from hpcgym import cli
from hpcgym import io as hpcgym_io
from hpcgym.errors import NoDecisionError

TB_NAME = "run"  # SB3's tb_log_name: the TensorBoard curves are in <run>/tb/run_1


def check_inputs(recipe: Recipe, data: Data) -> None:
    """Refuse windows longer than the parts of the trace they come from (before the run folder is made)."""
    sel, run, env, warm = recipe.selection, recipe.run, recipe.environment, recipe.warm_start
    parts_ = [("--val-window", sel.val_length if sel.val_windows else 0, "validation part", data.shortest_validation),
              ("--eval-window", run.eval_length if run.eval_windows else 0, "test split", data.test_jobs)]
    if recipe.source.workload != "synthetic":  # real windows of the training part
        parts_ += [("--window", env.window, "training part", len(data.fit)),
                   ("--clone-window", warm.clone_window if warm.clone else 0, "training part", len(data.fit))]
    for flag_name, length, part, jobs in parts_:
        if length > jobs:
            raise cli.UsageError(f"{flag_name} {length} is longer than the trace's {part} ({jobs} jobs): lower it"
                                 + (" or raise --val-fraction" if part == "validation part" else "")
                                 + (" or lower --val-periods" if part == "validation part" and sel.val_periods > 1
                                    else ""))


def resolve_time_scale(given: float, env: Any, run: runs.RunFolder) -> float:
    """The run's observation time scale: ``given`` (``--time-scale``), else the training environment's.

    The environment's is saved in ``scales.json``. Validation, cloning and evaluation all use it, so every
    environment of a run maps times to features alike.
    """
    if given:
        return given
    scale = run.time_scale()  # a resumed run keeps the scale it started with
    if scale is None:
        scale = float(env.get_attr("time_scale", [0])[0])
        run.save_time_scale(scale)
    return scale


def train(recipe: Recipe, synthesizer: Any = None) -> Path:
    """Train (or resume) and save ``model.zip`` (best on validation) and ``last.zip``; return the run folder.

    ``synthesizer``: a fitted model for ``--workload synthetic|mixed`` (e.g. one fit shared by several seeds, as
    ``experiments.study`` does); default: fit the recipe's synthesizer on the training part, or load it from the
    cache. The run folder is made only once the folder, the trace, the windows and the workload are known to be
    good: a mistake leaves nothing behind.
    """
    import torch
    torch.set_num_threads(recipe.run.threads)
    folder = runs.RunFolder(recipe.folder)
    folder.check_usable(recipe.run.resume, recipe.run.overwrite)
    named = resolve(recipe)  # what the recipe names, found once (a bad name is refused before any work)
    data = run_data(recipe.source, recipe.selection)
    check_inputs(recipe, data)
    starts = validation_starts(data, recipe.selection.val_length, recipe.selection.val_windows)
    workload = parts.training_workload(recipe.source, recipe.run.seed, recipe.run.runs_dir, data, synthesizer)
    tuned = parts.tune_on_workload(recipe, data, workload)
    if tuned != recipe:  # --tuned workload: `tuned` is now the run's own fit
        recipe, named = tuned, resolve(tuned)
    env = recipe.environment
    try:
        venv = parts.training_env(recipe, named, data, workload)
        with folder.owned(recipe.run.resume, recipe.run.overwrite) as run:
            _train(recipe, named, run, data, workload, venv, starts)
    except NoDecisionError as exc:  # name the source and what to do (one line through cli.run)
        raise NoDecisionError(exc.windows, exc.window, exc.offered_load,
                              parts.source_label(recipe.source, env.window)) from None
    return run.path


def _resume_point(resume: bool, run: runs.RunFolder) -> tuple[Path | None, dict[str, Any] | None]:
    """The checkpoint to resume from (None: start afresh) and its state (None: a checkpoint without one)."""
    from agents import resume as resumes
    from agents.callbacks import latest_checkpoint

    found = latest_checkpoint(run.checkpoints) if resume else None
    if found is None:
        return None, None
    path = resumes.state_path(found[0])
    if not path.exists():
        warnings.warn(f"{found[0]} has no state file (it predates exact resumes): training goes on from fresh "
                      "environments and generators, so the run will differ from an uninterrupted one", stacklevel=2)
        return found[0], None
    state = resumes.load_state(path)
    resumes.cut_files(state, path)
    return found[0], state


def _model(recipe: Recipe, named: Resolved, env: Any, run: runs.RunFolder,
           data: Data) -> tuple[Recipe, Any, bool, dict | None]:
    """The recipe with its resolved time scale, the agent, whether it is new, and its checkpoint's state (or None).

    The agent is new, or the newest checkpoint's with ``--resume``.
    """
    checkpoint, state = _resume_point(recipe.run.resume, run)
    parts.attach_monitor(env, run, fresh=checkpoint is None)
    recipe = recipe.replace(time_scale=resolve_time_scale(recipe.environment.time_scale, env, run))
    net, algo, scale = recipe.network, recipe.algorithm, recipe.environment.time_scale
    policy: tuple[Any, dict | None] = (None, None)
    if algo.algo == "dqn":
        policy = parts.dqn_policy(net)
    elif checkpoint is None:
        policy = parts.network(net, named.prior, algo.kl_coef > 0, scale, data.machine.nodes)
    model = parts.make_model(algo, policy, recipe.run.seed, env, run, checkpoint, exact=state is not None)
    return recipe, model, checkpoint is None, state


def _train(recipe: Recipe, named: Resolved, run: runs.RunFolder, data: Data, workload: Any, env: Any,
           starts: list[int]) -> None:
    from agents import resume
    from agents.callbacks import (
        AtomicCheckpointCallback,
        HyperparametersCallback,
        ProgressBarCallback,
        SchedulingMetricsCallback,
        ValidationCallback,
        save_atomic,
    )

    hpcgym_io.write_text(run.args_json, json.dumps(recipe.settings(), indent=2))
    recipe, model, fresh, state = _model(recipe, named, env, run, data)
    sel, steps = recipe.selection, recipe.run.timesteps
    shared = parts.env_kwargs(recipe, named, data)
    val_env = dict(workload=data.validation, window=sel.val_length, split="all", **shared)
    validation = ValidationCallback(starts, sel.val_every, run.best, run.curve, val_env) if starts else None
    if fresh:
        run.curve.unlink(missing_ok=True)
        _start(recipe, named, model, data, workload, run, shared, validation)
    metrics = SchedulingMetricsCallback()
    carry = {"metrics": metrics, **({"validation": validation} if validation else {})}
    checkpoints = AtomicCheckpointCallback(recipe.run.checkpoint_every, str(run.checkpoints), runs.CHECKPOINT_PREFIX,
                                           save_replay_buffer=recipe.algorithm.algo == "dqn", carry=carry,
                                           appended=(run.monitor, run.curve))
    callbacks = [checkpoints, metrics, HyperparametersCallback(recipe.settings())]
    if state is not None:
        resume.restore(state, model, carry)
        checkpoints.pending_log = state.get("log", {})
    if not fresh:
        resume.hide_tensorboard_after(model.tensorboard_log, TB_NAME, model.num_timesteps)
    callbacks += [validation] if validation is not None else []
    if not recipe.run.quiet:
        callbacks.append(ProgressBarCallback(max(steps - model.num_timesteps, 0)))
    try:
        with _checkpoint_on_interrupt(checkpoints):
            model.learn(max(steps - model.num_timesteps, 0), callback=callbacks,
                        reset_num_timesteps=model.num_timesteps == 0, tb_log_name=TB_NAME)
    except KeyboardInterrupt:  # Ctrl-C: say how to go on
        raise KeyboardInterrupt(_resume_hint(run, checkpoints.last_saved)) from None
    save_atomic(model, run.last)
    _keep(recipe, run, data, starts)
    print(f"trained {recipe.algorithm.algo} for {model.num_timesteps} timesteps; saved {run.model}", flush=True)


def _start(recipe: Recipe, named: Resolved, model: Any, data: Data, workload: Any, run: runs.RunFolder,
           env: dict[str, Any], validation: Any) -> None:
    """The warm start of a fresh run, its scores on the validation curve, and the KL anchor."""
    from experiments.training.warm_start import warm_start

    scores, chosen = warm_start(recipe, named, model, data, workload, run, env,
                                validation.score if validation else None)
    if validation is not None:
        validation.initial, validation.start_label = scores.get(chosen), chosen
        validation.prior = {f"{k} (not kept)": v for k, v in scores.items() if k != chosen}
    if recipe.algorithm.kl_coef:
        model.policy.set_anchor()  # the network RL starts from


def _keep(recipe: Recipe, run: runs.RunFolder, data: Data, starts: list[int]) -> None:
    """``model.zip``: the best network on validation (the last without validation), and the learning curve."""
    from agents.curves import plot_learning_curves

    source = run.best if starts and run.best.exists() else run.last
    hpcgym_io.atomic_write(run.model, lambda tmp: shutil.copyfile(source, tmp))
    if starts:
        sel = recipe.selection
        plot_learning_curves({recipe.name: run.curve}, run.curve_png,
                             title=f"{recipe.name}: validation bsld ({sel.val_windows} windows of the train split)",
                             references=validation_references(data, sel.val_length, starts,
                                                              recipe.environment.backfill))


@contextlib.contextmanager
def _checkpoint_on_interrupt(checkpoints: Any) -> Iterator[None]:
    """The first Ctrl-C asks for a checkpoint at the next rollout's start and a stop there; a second stops now."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread (a worker's run keeps Python's default)
        return

    def stop(signum: int, frame: Any) -> None:
        if checkpoints.stop_requested:
            raise KeyboardInterrupt
        checkpoints.stop_requested = True
        sys.stderr.write("\nstopping after a checkpoint at the next rollout (Ctrl-C again to stop now, losing the "
                         "steps since the last checkpoint)\n")

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _resume_hint(run: runs.RunFolder, steps: int) -> str:
    saved = f"the newest checkpoint is at {steps:,} steps" if steps else "no checkpoint was saved yet"
    return (f"{saved}; continue with python -m experiments.train --runs-dir {run.path.parent} --run-name {run.name} "
            "--resume")


def train_and_evaluate(recipe: Recipe) -> tuple[Path, pd.DataFrame | None]:
    """Train, then (unless ``eval_windows`` is 0) evaluate and judge; return the run folder and the summary.

    The summary's ``attrs["verdict"]`` holds the verdict line (:func:`experiments.training.verdict.save`).
    """
    from experiments import evaluation as evaluate
    from experiments.training import verdict

    folder = runs.RunFolder(recipe.folder)
    fresh = not (folder.path.exists() and any(folder.path.iterdir()))
    try:
        run_dir = train(recipe)
    except NoDecisionError:
        if fresh:  # nothing was learned: no folder to refuse the corrected command as "not empty" (a study, which
            folder.discard_unfinished()  # calls train() and records the source as untrainable there, keeps it)
        raise
    run = recipe.run
    if run.eval_windows <= 0:
        return run_dir, None
    release_memory()  # training's objects are gone, but their pages stay with the process until trimmed
    folder = runs.RunFolder(run_dir)
    table = evaluate.evaluate_run(folder, recipe.source.trace, recipe.source.read_kwargs(), run.eval_windows,
                                  run.eval_length, progress=not run.quiet, whole=not run.no_whole_split)
    table.attrs["verdict"] = verdict.save(folder, table)  # eval/verdict.json, and the first line of summary.md
    return run_dir, table


def release_memory() -> None:
    """Collect garbage, then give the heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere a no-op).

    Training leaves many small objects freed in the heap between live ones; the process keeps those pages (the quick
    start's evaluation started about 100 MB higher without this).
    """
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def train_and_evaluate_folder(recipe: Recipe) -> str:
    """:func:`train_and_evaluate`, returning the run folder as text (a task of ``experiments.training.many``)."""
    return str(train_and_evaluate(recipe)[0])
