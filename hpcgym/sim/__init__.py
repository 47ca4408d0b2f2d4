"""The simulator: schedule a job stream on a node-granular machine with a priority policy and backfilling.

>>> from hpcgym import traces
>>> from hpcgym.sim import simulate
>>> from hpcgym.sim.heuristics import FCFS
>>> rec = simulate(traces.load("lublin-256"), "lublin-256", FCFS, backfill="easy")
>>> int((rec["start"] >= rec["submit"]).all())
1

The semantics are in ``docs/simulation.md``. :func:`simulate` runs a whole stream in compiled code;
:class:`Simulator` runs the same passes one decision at a time, for agents; :mod:`hpcgym.sim.reference` holds the
slow SimPy oracle that the tests compare both with.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcgym import metrics
from hpcgym.machines import Machine, get
from hpcgym.sim import heuristics
from hpcgym.sim.core import BACKFILL_MODES, Backfill, simulate_kernel
from hpcgym.sim.policy import PriorityPolicy

__all__ = ["BACKFILL_MODES", "Backfill", "PriorityPolicy", "Simulator", "heuristics", "hold_times", "simulate",
           "start_times"]


def hold_times(jobs: pd.DataFrame, kill_at_walltime: bool = True) -> np.ndarray:
    """How long each job keeps its nodes: ``min(run, walltime)`` if killed at its walltime, else ``run``."""
    run = jobs["run"].to_numpy(np.int64)
    return np.minimum(run, jobs["walltime"].to_numpy(np.int64)) if kill_at_walltime else run


def _check(jobs: pd.DataFrame, nodes: int, backfill: Backfill, kill_at_walltime: bool) -> None:
    if backfill not in BACKFILL_MODES:
        raise ValueError(f"backfill must be one of {sorted(BACKFILL_MODES)}, not {backfill!r}")
    if backfill == "conservative" and not kill_at_walltime:
        raise ValueError("conservative backfilling needs kill_at_walltime=True: reservations assume estimates "
                         "are upper bounds")
    submit = jobs["submit"].to_numpy()
    if len(submit) and (np.any(np.diff(submit) < 0) or submit[0] < 0):
        raise ValueError("jobs must be sorted by submit time (>= 0); pass them through hpcgym.jobs.finalize")
    for col in ("run", "walltime", "nodes"):
        if len(jobs) and jobs[col].min() <= 0:
            raise ValueError(f"every job needs {col} > 0; drop invalid jobs first (hpcgym.jobs.apply_invalid_policy)")
    if len(jobs) and jobs["nodes"].max() > nodes:
        raise ValueError(f"a job asks for {jobs['nodes'].max()} nodes but the machine has {nodes}")


def start_times(jobs: pd.DataFrame, nodes: int, policy: PriorityPolicy | str, backfill: Backfill = "none",
                kill_at_walltime: bool = True, reservations: bool = False) -> np.ndarray | tuple[np.ndarray, ...]:
    """Start time of every job (aligned with the rows of ``jobs``) on a machine of ``nodes`` nodes.

    With ``reservations=True`` it also returns each job's first reservation (see
    :func:`hpcgym.sim.core.simulate_kernel`), -1 where it had none.
    """
    policy = heuristics.get(policy)
    _check(jobs, nodes, backfill, kill_at_walltime)
    if len(jobs) == 0:
        empty = np.empty(0, np.int64)
        return (empty, empty) if reservations else empty
    start, first = simulate_kernel(
        jobs["submit"].to_numpy(np.int64), hold_times(jobs, kill_at_walltime), jobs["walltime"].to_numpy(np.int64),
        jobs["nodes"].to_numpy(np.int64), policy.keys(jobs), int(nodes), policy.code, BACKFILL_MODES[backfill],
    )
    if (start < 0).any():  # a broken invariant, never a user error
        raise RuntimeError(f"{int((start < 0).sum())} jobs never started; please report this as a bug")
    return (start, first) if reservations else start


def simulate(jobs: pd.DataFrame, machine: str | Machine, policy: PriorityPolicy | str, backfill: Backfill = "none",
             kill_at_walltime: bool = True) -> pd.DataFrame:
    """Schedule ``jobs`` on ``machine``; return the per-job records (see :mod:`hpcgym.metrics`).

    Args:
        jobs: a canonical job table of valid jobs, sorted by submit time.
        machine: a :class:`~hpcgym.machines.Machine` or its catalog name.
        policy: the priority rule or its name, e.g. ``hpcgym.sim.heuristics.FCFS`` or ``"fcfs"``.
        backfill: ``"none"``, ``"easy"``, ``"conservative"`` or ``"rlscheduler"``.
        kill_at_walltime: end jobs at their walltime, as real schedulers do.
    """
    nodes = get(machine).nodes
    start = start_times(jobs, nodes, policy, backfill, kill_at_walltime)
    return metrics.records(jobs, start, hold_times(jobs, kill_at_walltime))


from hpcgym.sim.engine import Simulator  # noqa: E402  (it needs the helpers above)
