"""The flags of ``python -m experiments.train``: the recipe's fields, flat (:data:`Args`), and their recipe.

:data:`Args` is built from the sections of :class:`experiments.recipe.Recipe` (each setting is defined once, in its
section, with its help), plus the command line's own :class:`Seeds`. :func:`recipe_of` turns flags into the
recipe; :func:`check_args` also checks the flags of several runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from experiments import arguments, runs
from experiments.arguments import flag
from experiments.recipe import SECTIONS, Recipe
from hpcgym import cli


@dataclass(frozen=True)
class Seeds:
    """The flags of several runs of one recipe (the command line's own: a run folder's recipe has one seed)."""

    seeds: list[int] = flag([], "several seeds, one run each, and the table across them (overrides --seed)")
    jobs: int = flag(1, "seeds trained at once (processes) with --seeds", flag="--workers", aliases=("--jobs",))


def _name(args: object) -> str:
    """The run folder's name: ``--run-name``, else ``<trace>-<workload>-<algo>-s<seed>``."""
    return args.run_name or runs.run_name(runs.default_base(args.trace_label, args.workload, args.algo), args.seed)


#: Every flag of a training run: the recipe's fields, flat, and :class:`Seeds`.
Args = arguments.flat("Args", __name__, [*SECTIONS.values(), Seeds], namespace={"name": property(_name)})


def recipe_of(args: Args) -> Recipe:
    """The recipe of the flags (validated: :class:`hpcgym.cli.UsageError` names a flag that cannot run)."""
    return Recipe.from_settings(dataclasses.asdict(args))


def check_args(args: Args) -> Recipe:
    """Refuse flags that cannot run, before anything is read; return their recipe."""
    for seed in args.seeds:
        if not 0 <= seed <= cli.MAX_SEED:
            raise cli.UsageError(f"--seeds must be between 0 and {cli.MAX_SEED}, not {seed}")
    if len(set(args.seeds)) < len(args.seeds):
        raise cli.UsageError(f"--seeds repeats a seed ({' '.join(map(str, args.seeds))}): each seed is one run")
    if args.jobs < 1:
        raise cli.UsageError(f"--workers must be at least 1, not {args.jobs}")
    recipe = recipe_of(args)
    names = [runs.run_name(recipe.base, s) for s in args.seeds] + [runs.seeds_folder("", recipe.base).name]
    for name in names if args.seeds else [recipe.name]:
        runs.check_name(name)
    return recipe
