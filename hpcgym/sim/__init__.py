"""The simulator: schedule a job stream on a node-granular machine with a priority policy and backfilling.

>>> from hpcgym import traces
>>> from hpcgym.sim import simulate
>>> rec = simulate(traces.load("lublin-256"), "lublin-256", "fcfs", backfill="easy")
>>> int((rec["start"] >= rec["submit"]).all())
1

The semantics are in ``docs/simulation.md``. :func:`simulate` runs a whole stream in compiled code;
:class:`Simulator` runs the same event loop one decision at a time, for agents. Which file holds what:

- ``state.py``: the engine's data, two named tuples of arrays (:class:`~hpcgym.sim.state.Jobs`,
  :class:`~hpcgym.sim.state.State`) and the slots of the scalar state.
- ``queue.py``: the waiting queue and its orders; the heap of ends and the sorted array of estimated ends.
- ``events.py``: start, release, and :func:`~hpcgym.sim.events.next_event`, the one place that advances time.
- ``backfill.py``: EASY and rlscheduler backfilling (shadow time, extra nodes, the candidate scan).
- ``conservative.py``: conservative backfilling (the profile of reservations and its pass).
- ``loop.py``: the event loop (:func:`~hpcgym.sim.loop.advance`) with its two head choosers (compiled, or the
  caller's), and :func:`~hpcgym.sim.loop.schedule` for whole streams.
- ``policy.py``: the priority formulas and :class:`PriorityPolicy`; ``heuristics.py``: the named heuristics.
- ``actions.py``: the action modes of step mode (what an agent's choice means: pick, guarded, hold).
- ``predict.py``: runtime predictors (a job's estimate from its user's finished jobs) and their correction;
  ``learned.py``: the learned predictor's features and its tree ensemble as arrays the loop walks.
- ``table.py``: job tables in (the settings they can run with, hold times; their validity is
  :func:`hpcgym.jobs.check_valid`); ``simulator.py``: :class:`Simulator` and :class:`~hpcgym.sim.simulator.Batch`,
  the one Python path into the loop in step mode, with a hook that runs in the same compiled call.
- ``fork.py``: a copy of a simulation finished under a heuristic: the value ``V(s)`` of a decision's state and
  ``Q(s, a)`` of a choice (the counterfactual reward of :mod:`hpcgym.rewards` reads them).
- ``reference.py``: the same semantics as SimPy processes: slow, literal, the tests' oracle.
- ``core.py`` and ``engine.py``: deprecated aliases of ``loop.py`` and ``simulator.py`` (their old names), kept for
  old imports.

Editing these files: numba's on-disk cache keys each compiled function on its own file only, not on the files of
the functions it inlines or calls; ``import hpcgym`` therefore keeps the cache in a folder keyed on a hash of every
kernel's source (:mod:`hpcgym.jit`), so after an edit the kernels compile again and the edited code runs. A
``NUMBA_CACHE_DIR`` you set yourself is used as it is (clear it after an edit).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcgym import metrics
from hpcgym.machines import Machine, get
from hpcgym.sim import heuristics, predict
from hpcgym.sim.loop import BACKFILL_MODES, Backfill, schedule
from hpcgym.sim.policy import KEY, PriorityPolicy
from hpcgym.sim.predict import PREDICTORS, Predictor
from hpcgym.sim.simulator import Simulator, engine_jobs
from hpcgym.sim.table import check, hold_times

__all__ = ["BACKFILL_MODES", "KEY", "PREDICTORS", "Backfill", "Predictor", "PriorityPolicy", "Simulator", "heuristics",
           "hold_times", "predict", "run_batch", "simulate", "start_times"]


def run_batch(submit: np.ndarray, hold: np.ndarray, wall: np.ndarray, nodes: np.ndarray, keys: np.ndarray,
              total: int, policy: PriorityPolicy, backfill: Backfill, user: np.ndarray | None = None,
              predictor: str | Predictor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(start times, first reservations) of validated int64 columns on ``total`` nodes (no checks).

    ``predictor`` (default: the policy's) needs ``user`` (the jobs' user ids) if it reads history.
    """
    pred = predict.get(policy.predictor if predictor is None else predictor)
    jobs, n_users = engine_jobs(submit, hold, wall, nodes, keys, user, policy.code, pred)
    scan = -1 if policy.scan is None else policy.scan
    return schedule(jobs, total, policy.code, BACKFILL_MODES[backfill], pred.code, pred.k, n_users, scan)


def start_times(jobs: pd.DataFrame, nodes: int, policy: PriorityPolicy | str, backfill: Backfill = "none",
                kill_at_walltime: bool = True, reservations: bool = False,
                predictor: str | Predictor | None = None) -> np.ndarray | tuple[np.ndarray, ...]:
    """Start time of every job (aligned with the rows of ``jobs``) on a machine of ``nodes`` nodes.

    With ``reservations=True`` it also returns each job's first reservation (see
    :func:`hpcgym.sim.loop.schedule`), -1 where it had none. ``predictor`` overrides the policy's runtime
    predictor (:mod:`hpcgym.sim.predict`).
    """
    policy = heuristics.get(policy)
    pred = predict.get(policy.predictor if predictor is None else predictor, trace=jobs.attrs.get("name"))
    check(jobs, nodes, backfill, kill_at_walltime, pred)
    if len(jobs) == 0:
        empty = np.empty(0, np.int64)
        return (empty, empty) if reservations else empty
    start, first = run_batch(jobs["submit"].to_numpy(np.int64), hold_times(jobs, kill_at_walltime),
                             jobs["walltime"].to_numpy(np.int64), jobs["nodes"].to_numpy(np.int64),
                             policy.keys(jobs), int(nodes), policy, backfill, jobs["user"].to_numpy(np.int64),
                             pred)
    if (start < 0).any():  # a broken invariant, never a user error
        raise RuntimeError(f"{int((start < 0).sum())} jobs never started; please report this as a bug")
    return (start, first) if reservations else start


def simulate(jobs: pd.DataFrame, machine: str | Machine, policy: PriorityPolicy | str, backfill: Backfill = "none",
             kill_at_walltime: bool = True, predictor: str | Predictor | None = None) -> pd.DataFrame:
    """Schedule ``jobs`` on ``machine``; return the per-job records (see :mod:`hpcgym.metrics`).

    Args:
        jobs: a canonical job table of valid jobs, sorted by submit time.
        machine: a :class:`~hpcgym.machines.Machine` or its catalog name.
        policy: the priority rule or its name, e.g. ``hpcgym.sim.heuristics.FCFS`` or ``"fcfs"``.
        backfill: ``"none"``, ``"easy"``, ``"conservative"`` or ``"rlscheduler"``.
        kill_at_walltime: end jobs at their walltime, as real schedulers do.
        predictor: the runtime predictor whose estimates the scheduler uses instead of the walltimes (a name of
            :data:`PREDICTORS` or a :class:`Predictor`); default: the policy's own (the walltime for the classic
            heuristics).
    """
    nodes = get(machine).nodes
    start = start_times(jobs, nodes, policy, backfill, kill_at_walltime, predictor=predictor)
    return metrics.records(jobs, start, hold_times(jobs, kill_at_walltime))

