"""The end of an episode: the objective of the agent's schedule, the reward, and the result object.

Every step but the last gives 0. The last gives a function of the window's mean objective (``bsld``, ``wait``,
``turnaround``: lower is better; ``util``: higher is better), chosen by ``reward`` and ``baseline``:

| reward | no baseline | with a baseline heuristic ``b`` on the same window |
|---|---|---|
| ``"objective"`` | ``-mean`` (``+util``) | ``(b - agent) / b`` (util: ``(agent - b) / b``) |
| ``"log"`` | ``-log(mean)`` (``+log util``) | ``log(b) - log(agent)`` (util: the reverse) |
| ``"counterfactual"`` | (needs a baseline) | per decision, summing to ``(b - agent) / b`` (below) |

Mean bounded slowdowns of 256-job windows range from 1 to several hundred on the same trace, so the plain
objective swings by two orders of magnitude between windows; the log and the baseline take that scale out.

``"counterfactual"`` (it needs a baseline) spreads that relative reward over the decisions that earned it. With
``V(s)`` the window's objective if the baseline took over at state ``s`` (a fork of the simulator,
:mod:`hpcgym.sim.fork`), decision ``t`` gets ``r_t = (V(s_t) - V(s_{t+1})) / V(s_0)`` (util: the reverse sign), where
``V(s_0)`` is the baseline's own result and ``V`` of the finished episode the agent's. The credits therefore sum to
the relative reward ``(b - agent) / b`` of ``"objective"``: a potential-based shaping, which leaves the optimal policy
unchanged. A decision on which the agent does what the baseline would gets 0 without a fork, and so does every
decision until the first deviation. :class:`Counterfactual` keeps the credits of one simulation.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpcgym import metrics
from hpcgym.sim import PriorityPolicy, fork, run_batch
from hpcgym.sim.backfill import BACKFILL_MODES

OBJECTIVES = ("bsld", "wait", "turnaround", "util")
REWARDS = ("objective", "log", "counterfactual")
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


class Counterfactual:
    """The per-decision credits of ``reward="counterfactual"`` for one simulation (see the module docstring).

    Its episode's ``V(s_0)``, last ``V`` and fork count are :attr:`state` (three floats), and the baseline's custom
    keys :attr:`custom`: a vector environment binds them to rows of its batch arrays (:meth:`bind`) and computes its
    copies' credits in one compiled call (:func:`hpcgym.sim.fork.row_credits`); a single environment calls
    :meth:`credit`. Both give the same numbers.

    Args:
        baseline: the heuristic whose finish is ``V``; its runtime predictor must be the simulation's.
        objective_name: the objective (:data:`OBJECTIVES`).
        backfill: the simulation's backfill mode.
        machine_nodes: the machine's nodes.
        shortcut: whether the simulation's own choice of the baseline's head is the baseline's step (the simulation's
            order is the baseline, with no scan order of its own, in the ``"pick"`` action mode): then such a choice
            gets 0 without a fork. Otherwise every decision forks.
    """

    def __init__(self, baseline: PriorityPolicy, objective_name: str, backfill: str, machine_nodes: int,
                 shortcut: bool):
        self.baseline, self.shortcut = baseline, shortcut
        self.sign = 1.0 if objective_name == "util" else -1.0
        self.code, self.mode = baseline.code, BACKFILL_MODES[backfill]
        self.scan = -1 if baseline.scan is None else baseline.scan
        self.kind, self.nodes = fork.OBJECTIVE_CODES[objective_name], int(machine_nodes)
        self.bind(np.zeros(3), np.zeros(0))

    def bind(self, state: np.ndarray, custom: np.ndarray) -> Counterfactual:
        """Keep ``(V(s_0), last V, forks)`` in ``state`` and the custom keys in ``custom`` (a batch's rows); reset."""
        self.state, self._custom = state, custom
        self.state[:] = (np.nan, np.nan, 0)
        self.custom = custom[:0]
        return self

    @property
    def v0(self) -> float:
        """``V(s_0)`` of the episode (NaN when it needed no decision)."""
        return float(self.state[0])

    @property
    def forks(self) -> int:
        """Forks this episode."""
        return int(self.state[2])

    def start(self, sim: Any, keys: np.ndarray | None, pending: bool) -> None:
        """A new episode of ``sim`` (at its first decision, if ``pending``), with the baseline's custom ``keys``."""
        n = len(sim.start)
        if len(self._custom) < n:
            self._custom = np.zeros(n)
        self.custom = self._custom[:n]
        self.custom[:] = fork.custom_keys(self.baseline, keys, n)
        self.state[2] = 0
        self.state[0] = self.state[1] = self.value(sim) if pending else np.nan

    def value(self, sim: Any) -> float:
        """``V`` of ``sim``'s current state: a fork finished under the baseline."""
        self.state[2] += 1
        jobs, st = sim.arrays
        return float(fork.value(jobs, st, self.code, self.mode, self.custom, self.scan, self.kind, self.nodes))

    def head(self, sim: Any) -> int:
        """The job the baseline would put first at the pending decision (-1 when the shortcut is off)."""
        if not self.shortcut:
            return -1
        jobs, st = sim.arrays
        return int(fork.head(jobs, st, self.code))

    def credit(self, sim: Any, chosen: int, head: int) -> float:
        """The credit of the decision just made: ``chosen`` (a job) where the baseline puts ``head`` first.

        When the decision ended the episode, ``V`` is the agent's own objective, computed as the forks compute it
        (so that an agent that played the baseline's choices gets exactly 0).
        """
        v0, before = self.state[0], self.state[1]
        if math.isnan(v0):  # an episode that needed no decision: the baseline's schedule, credit 0
            return 0.0
        if chosen == head and chosen >= 0:
            after = before  # the baseline's own step: V is unchanged (tests/test_fork.py)
        elif sim.done:
            after = fork.objective(self.kind, sim.submit, sim.start, sim.hold, sim.job_nodes, self.nodes)
        else:
            after = self.value(sim)
        self.state[1] = after
        return float(self.sign * (after - before) / max(abs(v0), _RATIO_FLOOR) + 0.0)  # never -0.0

    def copy(self) -> Counterfactual:
        """A fresh tracker with the same settings (one per simulation)."""
        return copy.copy(self).bind(np.zeros(3), np.zeros(0))


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
