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
>>> [len(c.records) for c in cells], [len(c.summaries) for c in cells]
([2, 2, 2, 2], [2, 2, 2, 2])

With ``keep_records=False`` a cell holds only each window's summary (:func:`hpcgym.metrics.summarize`), computed
from the record arrays: no per-job table is built, which keeps whole-trace runs of millions of jobs small.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from baselines import priorities
from hpcgym import metrics
from hpcgym.machines import Machine
from hpcgym.sim import PriorityPolicy, hold_times, start_times


def label(policy: str, backfill: str) -> str:
    """A heuristic row's name in every table: ``<policy>+<backfill>``."""
    return f"{policy}+{backfill}"


@dataclass
class Cell:
    """One heuristic x backfill mode on every window."""

    policy: str
    backfill: str
    records: list[pd.DataFrame]  #: per-job records (:func:`hpcgym.sim.simulate`), one table per window; or none
    cpu_s: float  #: the CPU seconds its simulations (and summaries) took
    summaries: list[dict[str, float]]  #: each window's :func:`hpcgym.metrics.summarize`

    @property
    def label(self) -> str:
        """The row's name (:func:`label`)."""
        return label(self.policy, self.backfill)


def window_records(jobs: pd.DataFrame, machine: Machine, policy: str | PriorityPolicy, backfill: str,
                   kill_at_walltime: bool = True) -> dict[str, np.ndarray]:
    """One heuristic's per-job records on one window as arrays (:func:`hpcgym.metrics.record_columns`)."""
    start = start_times(jobs, machine.nodes, priorities.get(policy), backfill, kill_at_walltime)
    return metrics.record_columns(jobs["job_id"].to_numpy(), jobs["submit"].to_numpy(np.int64), start,
                                  hold_times(jobs, kill_at_walltime), jobs["walltime"].to_numpy(np.int64),
                                  jobs["nodes"].to_numpy(np.int64))


def simulate_grid(windows: Sequence[pd.DataFrame], machine: Machine, policies: Sequence[str | PriorityPolicy],
                  backfills: Sequence[str], kill_at_walltime: bool = True, progress: bool = False,
                  keep_records: bool = True) -> list[Cell]:
    """Simulate every policy x backfill mode on every window.

    Args:
        windows: job tables (each a window, or a whole trace).
        machine: the machine.
        policies: heuristic names (:func:`baselines.priorities.get`) or policy objects.
        backfills: backfill modes (:data:`hpcgym.sim.BACKFILL_MODES`).
        kill_at_walltime: end jobs at their walltime.
        progress: a progress bar over the grid (shown when it has more than one cell).
        keep_records: keep each window's per-job records (else only its summary).

    Returns:
        One :class:`Cell` per policy x backfill mode, policies outermost, in the order given.
    """
    cells = []
    grid = list(itertools.product(policies, backfills))
    if progress and len(grid) > 1:
        from tqdm.auto import tqdm  # only for a progress bar: it imports asyncio (30 ms of a CLI's start-up)

        grid = tqdm(grid, desc="policies")
    for name, backfill in grid:
        started = time.process_time()
        records, summaries = [], []
        for jobs in windows:
            cols = window_records(jobs, machine, name, backfill, kill_at_walltime)
            summaries.append(metrics.summarize(cols, machine.nodes))
            if keep_records:
                records.append(pd.DataFrame(cols))
            del cols
        cells.append(Cell(priorities.get(name).name, backfill, records, time.process_time() - started, summaries))
    return cells
