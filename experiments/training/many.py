"""Many runs as one list of recipes on one executor: the seeds of a setting, a sweep's grid, recipe variants.

:func:`seeds_of` and :func:`grid` expand a recipe into the recipes of its runs; :func:`run_all` runs a list of
recipes (:class:`experiments.fanout.Executor`: in this process, a pool of processes, or Ray tasks) with one task
function (default: train and evaluate, :func:`experiments.training.loop.train_and_evaluate_folder`) and returns
their run folders in order.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from experiments import runs
from experiments.fanout import Executor
from experiments.recipe import Recipe
from experiments.training.loop import train_and_evaluate_folder


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
    from experiments import seeds as across

    dirs = [Path(d) for d in run_all(seeds_of(recipe, seeds), jobs=jobs)]
    if recipe.run.eval_windows <= 0:
        return dirs, None
    return dirs, across.write(dirs, runs.seeds_folder(recipe.run.runs_dir, recipe.base))
