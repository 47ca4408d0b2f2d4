"""The end of an episode: the objective of the agent's schedule, the reward, and the result object.

Every step but the last gives 0. The last gives a function of the window's mean objective (``bsld``, ``wait``,
``turnaround``: lower is better; ``util``: higher is better), chosen by ``reward`` and ``baseline``:

| reward | no baseline | with a baseline heuristic ``b`` on the same window |
|---|---|---|
| ``"objective"`` | ``-mean`` (``+util``) | ``(b - agent) / b`` (util: ``(agent - b) / b``) |
| ``"log"`` | ``-log(mean)`` (``+log util``) | ``log(b) - log(agent)`` (util: the reverse) |

Mean bounded slowdowns of 256-job windows range from 1 to several hundred on the same trace, so the plain
objective swings by two orders of magnitude between windows; the log and the baseline take that scale out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpcgym import metrics
from hpcgym.sim import PriorityPolicy, run_batch

OBJECTIVES = ("bsld", "wait", "turnaround", "util")
REWARDS = ("objective", "log")
#: Floors that keep logs and ratios finite (a window of jobs that never wait has mean wait 0).
_LOG_FLOOR, _RATIO_FLOOR = 1.0, 1e-9


@dataclass(frozen=True)
class EpisodeResult:
    """What an episode's end reports.

    Attributes:
        value: the window's mean objective under the agent's schedule.
        reward: the final reward (see the module docstring).
        baseline: the baseline heuristic's value on the same window, or None.
        compare: the value of each ``compare_with`` heuristic on the same window.
        records: per-job record columns (:func:`hpcgym.metrics.record_columns`).
        metrics: :func:`hpcgym.metrics.summarize` of the records.
    """

    value: float
    reward: float
    baseline: float | None
    compare: dict[str, float]
    records: dict[str, np.ndarray] = field(repr=False)
    metrics: dict[str, float] = field(repr=False)


def objective(name: str, submit: np.ndarray, start: np.ndarray, hold: np.ndarray, nodes: np.ndarray,
              machine_nodes: int) -> float:
    """The mean of objective ``name`` over one schedule (utilization for ``util``)."""
    if name == "util":
        span = float((start + hold).max() - submit.min())
        return float(np.dot(nodes, hold)) / (machine_nodes * span) if span > 0 else float("nan")
    if name == "turnaround":
        return float((start + hold - submit).mean())
    if name == "wait":
        return float((start - submit).mean())
    return float(metrics.bounded_slowdown(start - submit, hold).mean())


def reward(value: float, baseline: float | None, objective_name: str, kind: str) -> float:
    """The final reward for an episode whose objective is ``value`` (see the module docstring's table)."""
    sign = 1.0 if objective_name == "util" else -1.0
    if kind == "log":
        value = math.log(max(value, _LOG_FLOOR if objective_name != "util" else _RATIO_FLOOR))
        if baseline is not None:
            baseline = math.log(max(baseline, _LOG_FLOOR if objective_name != "util" else _RATIO_FLOOR))
            return sign * (value - baseline)
        return sign * value
    if baseline is None:
        return sign * value
    return sign * (value - baseline) / max(abs(baseline), _RATIO_FLOOR)


def heuristic_value(policy: PriorityPolicy, keys: np.ndarray | None, submit: np.ndarray, wall: np.ndarray,
                    nodes: np.ndarray, hold: np.ndarray, machine_nodes: int, backfill: str,
                    objective_name: str, user: np.ndarray | None = None) -> float:
    """The objective of a heuristic's batch schedule of the same jobs.

    ``wall`` holds the walltimes, ``user`` the user ids its runtime predictor reads (if it has one).
    """
    start, _ = run_batch(submit, hold, wall, nodes, np.zeros(len(submit)) if keys is None else keys,
                         machine_nodes, policy, backfill, user)
    return objective(objective_name, submit, start, hold, nodes, machine_nodes)


def finish(sim: Any, job_id: np.ndarray, machine_nodes: int, objective_name: str, kind: str,
           baseline: PriorityPolicy | None, compare_with: Sequence[PriorityPolicy], backfill: str,
           keys: Any = None) -> EpisodeResult:
    """The result of a finished step-mode simulation ``sim`` (:class:`hpcgym.sim.Simulator`).

    ``keys(policy)`` gives a custom policy's static keys on this window (None for the compiled formulas).
    """
    submit, start, hold, wall, nodes = sim.submit, sim.start, sim.hold, sim.limit, sim.job_nodes
    value = objective(objective_name, submit, start, hold, nodes, machine_nodes)

    def of(policy: PriorityPolicy) -> float:
        k = keys(policy) if keys is not None else None
        return heuristic_value(policy, k, submit, wall, nodes, hold, machine_nodes, backfill, objective_name,
                               sim.user_ids)

    base = None if baseline is None else of(baseline)
    records = metrics.record_columns(job_id, submit.copy(), start.copy(), hold.copy(), wall.copy(), nodes.copy())
    return EpisodeResult(value=value, reward=reward(value, base, objective_name, kind), baseline=base,
                         compare={p.name: of(p) for p in compare_with}, records=records,
                         metrics=metrics.summarize(records, machine_nodes))
