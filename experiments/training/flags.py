"""The flags of ``python -m experiments.train``: :class:`Args`, one run's recipe and the command line's own seeds.

:class:`Args` holds a :class:`~experiments.recipe.Recipe`, whose sections' fields are the flags, flat
(:func:`experiments.arguments.parser`: each setting is declared once, in its section, with its help and its checks),
and the flags of several runs of it (``--seeds``, ``--workers``). :func:`check_args` refuses, before any work, what
the recipe names but cannot be found and run names that cannot be folders.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from experiments import runs
from experiments.arguments import check, flag
from experiments.recipe import Recipe, resolve
from hpcgym import cli


@dataclass(frozen=True)
class Args:
    """Every flag of a training run: the recipe (its sections' fields, flat), and several seeds of it."""

    recipe: Recipe = dataclasses.field(default_factory=Recipe)
    seeds: list[int] = flag([], "several seeds, one run each, and the table across them (overrides --seed)")
    jobs: int = flag(1, "seeds trained at once (processes) with --seeds", flag="--workers", aliases=("--jobs",),
                     at_least=1)

    def __post_init__(self) -> None:
        check(self)
        for seed in self.seeds:
            if not 0 <= seed <= cli.MAX_SEED:
                raise cli.UsageError(f"--seeds must be between 0 and {cli.MAX_SEED}, not {seed}")
        if len(set(self.seeds)) < len(self.seeds):
            raise cli.UsageError(f"--seeds repeats a seed ({' '.join(map(str, self.seeds))}): each seed is one run")


def recipe_of(args: Args) -> Recipe:
    """The recipe of the flags."""
    return args.recipe


def check_args(args: Args) -> Recipe:
    """Refuse flags that cannot run (names not found, run names no folder can have) before any work; the recipe."""
    recipe = args.recipe
    resolve(recipe)
    names = [runs.run_name(recipe.base, s) for s in args.seeds] + [runs.seeds_folder("", recipe.base).name]
    for name in names if args.seeds else [recipe.name]:
        runs.check_name(name)
    return recipe
