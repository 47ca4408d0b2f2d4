"""Train an RL batch scheduler on real or synthetic job streams, then evaluate it on held-out real windows.

Examples::

    python -m experiments.train --workload synthetic            # the defaults: Theta, EASY, PPO, 2-3 minutes
    python -m experiments.train --workload synthetic --seeds 0 1 2 3 4 --workers 2  # five seeds and their table
    python -m experiments.train --workload real --trace sdsc-sp2 --backfill none
    python -m experiments.train --workload synthetic --synthesizer tvae --algo dqn
    python -m experiments.train --run-name my-run --resume       # continue a killed run from its last checkpoint

The flags are the fields of the training recipe (:mod:`experiments.recipe`: source, environment, network,
algorithm, warm start, selection, run); the script parses them into a :class:`~experiments.recipe.Recipe` and
ends with a verdict line: the network kept and why, and the agent against its start and the reference (the
strongest implementable row) with paired 95% CIs. The protocol: the real trace is split chronologically, 70% train
and 30% test. The last ``val_fraction`` of the train part is the *validation* part; training sees only the rest (its
windows, or samples of a synthesizer fitted on it). Every ``val_every`` steps the deterministic agent plays fixed
validation windows, and ``model.zip`` is the best of those checkpoints (``last.zip`` holds the final weights). The
evaluation runs the agent, its untrained network (``untrained.zip``: same seed, no training), its cloned start
(``cloned.zip``, when ``--clone``) and every heuristic on identical windows of the *test* split. Everything goes to
``runs/<run name>/``: ``args.json`` (the recipe), ``scales.json`` (the observation's resolved time scale),
TensorBoard logs (``tb/``: SB3's ``rollout/`` and ``train/`` keys, ``sched/bsld``, ``sched/fcfs`` and
``val/bsld``), checkpoints, ``learning_curve.csv`` and ``.png``, and ``eval/`` (the folder's layout:
:mod:`experiments.runs`; the verdict is ``eval/verdict.json`` and the first line of ``eval/summary.md``). With
``--seeds``, each seed gets its own run folder and ``runs/<name>-seeds/`` gets the table across seeds
(``experiments.seeds``).

The default recipe (EASY backfilling with the smallest-area-first scan order; a job scorer that also sees each
job's rank in its queue by walltime, nodes and area; a warm start cloned from smallest-area-first, kept only if it
beats the untrained network on validation; a log-ratio reward against that heuristic on the same window; 16
parallel windows; checkpoint selection on validation windows) was chosen on validation windows, by the sweep and
the clone studies in ``docs/results.md`` (``python -m experiments.recipe_sweep``).
"""

from __future__ import annotations

import dataclasses
import time

from experiments import arguments, runs
from experiments.training.flags import Args, check_args, recipe_of
from hpcgym import cli, jit

__all__ = ["Args", "check_args", "main", "parse_args", "parser", "recipe_of"]


def parser() -> cli.ArgumentParser:
    """The command line of :class:`Args` (one flag per field of the recipe's sections, with its help and default)."""
    return arguments.parser(Args, "python -m experiments.train", __doc__)


def parse_args(argv: list[str] | None = None) -> Args:
    """Parse the command line into :class:`Args` (with ``--resume``: the run's saved recipe), checked."""
    ap = parser()
    args, given = arguments.parse(Args, ap, argv)
    try:
        args = dataclasses.replace(args, recipe=runs.resumed(args.recipe, given))
        check_args(args)
    except cli.UsageError as exc:
        ap.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    """Train, then evaluate on the test windows."""
    from experiments.evaluation import format_summary
    from experiments.training import loop, many

    args = parse_args(argv)
    recipe, started = args.recipe, time.time()
    if not jit.compiled():  # a fresh clone: the compiler's ~1 GB stays in a child process, not in this one
        print("compiling the simulator's kernels in a separate process (once per version of them)", flush=True)
        jit.compile_apart()
    if args.seeds:
        from experiments import seeds

        dirs, table = many.run_seeds(recipe, args.seeds, args.jobs)
        if table is not None:
            print(seeds.format_table(table))
        print(f"done in {time.time() - started:.0f} s: {', '.join(map(str, dirs))}")
        return 0
    run_dir, table = loop.train_and_evaluate(recipe)
    if table is not None:
        print(format_summary(table, table.attrs.get("description", "")))
    print(f"done in {time.time() - started:.0f} s: {run_dir}")
    if table is not None:
        print(table.attrs["verdict"])
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
