"""Every heuristic x backfill mode on the same job windows: the reference rows of every results table.

:func:`simulate_grid` is the one place that runs heuristics on windows: ``python -m baselines.run`` prints its
table, ``experiments.evaluate`` puts its rows next to the agents', and ``experiments.train`` draws its validation
references from it. A row's name is :func:`label`, e.g. ``fcfs+easy``.

>>> from hpcgym import machines, traces
>>> jobs = traces.load("lublin-256")
>>> windows = [traces.window(jobs, 64, start=s) for s in (0, 500)]
>>> cells = simulate_grid(windows, machines.get("lublin-256"), ["fcfs", "sjf"], ["none", "easy"])
>>> [c.label for c in cells]
['fcfs+none', 'fcfs+easy', 'sjf+none', 'sjf+easy']
>>> [len(c.records) for c in cells]
[2, 2, 2, 2]
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from tqdm.auto import tqdm

from baselines import priorities
from hpcgym.machines import Machine
from hpcgym.sim import PriorityPolicy, simulate


def label(policy: str, backfill: str) -> str:
    """A heuristic row's name in every table: ``<policy>+<backfill>``."""
    return f"{policy}+{backfill}"


@dataclass
class Cell:
    """One heuristic x backfill mode on every window."""

    policy: str
    backfill: str
    records: list[pd.DataFrame]  #: per-job records (:func:`hpcgym.sim.simulate`), one table per window
    cpu_s: float  #: the CPU seconds its simulations took

    @property
    def label(self) -> str:
        """The row's name (:func:`label`)."""
        return label(self.policy, self.backfill)


def simulate_grid(windows: Sequence[pd.DataFrame], machine: Machine, policies: Sequence[str | PriorityPolicy],
                  backfills: Sequence[str], kill_at_walltime: bool = True, progress: bool = False) -> list[Cell]:
    """Simulate every policy x backfill mode on every window.

    Args:
        windows: job tables (each a window, or a whole trace).
        machine: the machine.
        policies: heuristic names (:func:`baselines.priorities.get`) or policy objects.
        backfills: backfill modes (:data:`hpcgym.sim.BACKFILL_MODES`).
        kill_at_walltime: end jobs at their walltime.
        progress: a progress bar over the grid (shown when it has more than one cell).

    Returns:
        One :class:`Cell` per policy x backfill mode, policies outermost, in the order given.
    """
    cells = []
    grid = list(itertools.product(policies, backfills))
    for name, backfill in tqdm(grid, desc="policies", disable=not progress or len(grid) == 1):
        policy = priorities.get(name)
        started = time.process_time()
        records = [simulate(jobs, machine, policy, backfill, kill_at_walltime) for jobs in windows]
        cells.append(Cell(policy.name, backfill, records, time.process_time() - started))
    return cells
