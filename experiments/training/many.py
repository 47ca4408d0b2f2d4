"""Many runs as one list of recipes on one executor: the seeds of a setting, a sweep's grid, recipe variants.

:func:`seeds_of` and :func:`grid` expand a recipe into the recipes of its runs; :func:`run_all` runs a list of
recipes (:class:`experiments.fanout.Executor`: in this process, a pool of processes, or Ray tasks) with one task
function (default: train and evaluate, :func:`experiments.training.loop.train_and_evaluate_folder`) and returns
their run folders in order. :func:`run_state` says what a run folder holds already (trained, evaluated, or
trained with other settings or on another fit of its generator), so that a driver runs only what is missing;
:func:`do_run` trains or evaluates one run and records the stage in the folder (``study-run.json``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import runs
from experiments.fanout import Executor
from experiments.recipe import Recipe
from experiments.training.loop import train_and_evaluate_folder
from hpcgym import io as hpcgym_io


def seeds_of(recipe: Recipe, seeds: Sequence[int]) -> list[Recipe]:
    """One recipe per seed, named ``<base>-s<seed>`` (:func:`experiments.runs.run_name`)."""
    return [recipe.replace(seed=s, run_name=runs.run_name(recipe.base, s)) for s in seeds]


def grid(recipe: Recipe, seeds: Sequence[int], workloads: Sequence[str], algos: Sequence[str]) -> list[Recipe]:
    """Seeds x workloads x algorithms over ``recipe``, each run named ``<trace>-<workload>-<algo>-s<seed>``."""
    return [recipe.replace(seed=s, workload=w, algo=a)
            for s, w, a in itertools.product(seeds, workloads, algos)]


def run_all(recipes: Sequence[Recipe], task: Callable[[Any], Any] = train_and_evaluate_folder,
            backend: str = "local", jobs: int | None = 1, address: str = "", retries: int = 0,
            announce: str = "") -> list[Any]:
    """``task`` over every recipe (``jobs`` at a time; ``backend`` ``local`` or ``ray``); the results in order.

    ``task``: a module-level function of one recipe (or of a tuple holding it), run in this process or another.
    ``announce``: a prefix for a line on stderr as each run ends (empty: none).
    """
    started = time.perf_counter()
    finished = 0

    def progress(_: int, result: Any) -> None:
        nonlocal finished
        finished += 1
        sys.stderr.write(f"{announce}: {finished}/{len(recipes)} runs done ({Path(str(result)).name}), "
                         f"{time.perf_counter() - started:,.0f} s\n")
        sys.stderr.flush()

    with Executor(task, backend, jobs, address, retries=retries) as executor:
        return executor.map(list(recipes), progress if announce else None)


def run_seeds(recipe: Recipe, seeds: Sequence[int], jobs: int = 1) -> tuple[list[Path], Any]:
    """One run per seed (``jobs`` at a time), then the table across them, written to ``<base>-seeds/``.

    The table is ``experiments.seeds``'; None without test windows.
    """
    from experiments import seed_tables as across

    dirs = [Path(d) for d in run_all(seeds_of(recipe, seeds), jobs=jobs)]
    if recipe.run.eval_windows <= 0:
        return dirs, None
    return dirs, across.write(dirs, runs.seeds_folder(recipe.run.runs_dir, recipe.base))


# ---- reusing finished runs -------------------------------------------------------------------------------------
#: settings that may differ between a run folder's recipe and the one asked for without redoing the run
VOLATILE = {"version", "resume", "overwrite", "quiet", "threads", "runs_dir"}
#: a run folder's record of the stages done (``study-run.json``) says its samples made no decision
UNTRAINABLE = "untrainable"


def run_state(recipe: Recipe, fit: Path | None, overwrite: bool) -> str:
    """What the run folder of ``recipe`` holds: ``new``, ``overwrite``, ``resume``, ``trained``, ``done``, ...

    ... or :data:`UNTRAINABLE`.
    ``fit``: the fitted generator the run must sample (None: a real run). A folder trained with other settings, or
    on samples of another fit than ``fit``, is refused (:class:`hpcgym.cli.UsageError`), or with ``overwrite``
    redone (``overwrite``). ``trained``: a network, not evaluated yet; ``done``: evaluated too.
    """
    from hpcgym import cli

    run = runs.RunFolder(recipe.folder)
    if not run.args_json.exists():
        return "new" if not run.path.exists() or not any(run.path.iterdir()) else "overwrite"
    marker = json.loads(run.study_record.read_text()) if run.study_record.exists() else {}
    differ, stale = changed_settings(run.recipe(), recipe), stale_fit(recipe, fit, marker)
    if differ or stale:
        if not overwrite:
            why = f"with other settings ({', '.join(differ)})" if differ else stale
            raise cli.UsageError(f"{run.path} was trained {why}: use another --out, or --overwrite to redo such runs")
        return "overwrite"
    if UNTRAINABLE in marker:
        return UNTRAINABLE
    if "train_s" in marker and run.model.exists():
        return "done" if "evaluate_s" in marker and run.evaluated() else "trained"
    return "resume"


def changed_settings(saved: Recipe, recipe: Recipe) -> list[str]:
    """The settings of ``recipe`` that a run folder's recipe (:meth:`experiments.runs.RunFolder.recipe`) has otherwise.

    A ``--tuned workload`` run records its fit's file: it counts as ``workload``.
    """
    from experiments.protocol import tuned_flag
    from experiments.recipe import differences

    theirs, mine = (r.replace(tuned=tuned_flag(r.source.tuned)) for r in (saved, recipe))
    return [name for name in differences(theirs, mine) if name not in VOLATILE]


def stale_fit(recipe: Recipe, fit: Path | None, marker: dict[str, Any]) -> str:
    """Why a run trained on samples must be redone, or "": its generator's fit is not ``fit``.

    A new revision of a generator, or a refit, changes the cache key; the run's settings do not say which fit
    it sampled, its record does (``synthesizer_dir``). Compared by the fit's folder name (the cache key),
    so a cache moved to another folder still matches.
    """
    used = marker.get("synthesizer_dir")
    if recipe.source.workload == "real" or not fit or not used or Path(used).name == Path(fit).name:
        return ""
    return (f"on samples of another fit of {recipe.source.synthesizer} ({Path(used).name}; the cache now holds "
            f"{Path(fit).name})")


@dataclass
class RunTask:
    """Train (or resume) one run, or evaluate it."""

    stage: str  # "train" | "evaluate"
    recipe: Recipe
    synthesizer: str | None  # a fitted model's folder


def do_run(task: RunTask) -> dict[str, Any]:
    """Train or evaluate one run (its output to its log); record the stage's seconds in its ``study-run.json``.

    A source whose samples make no decision (:class:`hpcgym.errors.NoDecisionError`) is a result, recorded as
    :data:`UNTRAINABLE`, not a failure.
    """
    from experiments import evaluation as evaluate
    from experiments.training import loop, verdict
    from hpcgym.errors import NoDecisionError
    from synth.base import Synthesizer

    recipe, run = task.recipe, runs.RunFolder(task.recipe.folder)
    started = time.perf_counter()
    untrainable: NoDecisionError | None = None
    with log_to(run.log):
        if task.stage == "train":
            model = Synthesizer.load(task.synthesizer) if task.synthesizer else None
            try:
                loop.train(recipe, model)
            except NoDecisionError as exc:  # a result about the source, not a failure of the study
                untrainable = exc
        else:
            table = evaluate.evaluate_run(run, recipe.source.trace, recipe.source.read_kwargs(),
                                          recipe.run.eval_windows, recipe.run.eval_length,
                                          progress=not recipe.run.quiet, whole=not recipe.run.no_whole_split)
            verdict.save(run, table)  # as experiments.train's runs keep theirs
    seconds = time.perf_counter() - started
    _record(run, task, seconds, untrainable)
    return {"seconds": seconds, **({UNTRAINABLE: str(untrainable)} if untrainable else {})}


def _record(run: runs.RunFolder, task: RunTask, seconds: float, untrainable: Any) -> None:
    marker = run.study_record
    record = json.loads(marker.read_text()) if marker.exists() else {}
    record[f"{task.stage}_s"] = seconds
    if task.stage == "train":
        record.pop("evaluate_s", None)  # a new network needs a new evaluation
        record.pop(UNTRAINABLE, None)
        record["synthesizer_dir"] = task.synthesizer  # the shared fit (args.json names only the model)
        if untrainable is not None:
            record[UNTRAINABLE] = {"message": str(untrainable), "offered_load": untrainable.offered_load,
                                   "windows": untrainable.windows, "window": untrainable.window}
    hpcgym_io.write_text(marker, json.dumps(record, indent=2))


def log_to(path: Path) -> contextlib.ExitStack:
    """Send a task's prints (training notes, warnings) to a log file instead of the driver's output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a")  # closed by the ExitStack
    stack = contextlib.ExitStack()
    stack.enter_context(fh)
    stack.enter_context(contextlib.redirect_stdout(fh))
    stack.enter_context(contextlib.redirect_stderr(fh))
    return stack
