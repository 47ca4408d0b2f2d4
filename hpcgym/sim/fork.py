"""Fork a simulation and finish it under a heuristic: the value ``V(s)`` of a state, and ``Q(s, a)`` of a choice.

A simulation's whole state is the 13 arrays of :class:`~hpcgym.sim.state.State` plus the two job columns the engine
writes, the estimates (``wall``: a runtime predictor sets them at each arrival and raises them on expiry) and the keys
(``key``: set at each arrival from the estimate). :func:`fork` copies those and shares the read-only columns, so a
copy of a 256-job window is about 27 KB. :func:`finish` runs a copy to its end on the batch path of a heuristic, and
:func:`value` returns the window's mean objective there: ``V(s)``, the outcome of the window if the heuristic took
over at ``s``. Three things make the copy finish exactly as the heuristic's own run would (the tests check each):

- the keys are the heuristic's: each arrived job is keyed from its current estimate, as the engine keys it on arrival,
  and the jobs still to come keep the heuristic's custom key (which the engine re-keys when they arrive);
- the batch path assumes its queue order, so the waiting jobs are re-sorted by ``(key, index)`` (a static order; a
  dynamic one keeps the queue in arrival order and sorts at each pass);
- the arrivals-only shortcut of :func:`hpcgym.sim.loop.batch_pass` is switched off for the open pass (the ``BLOCKED``
  flag cleared): it assumes the last pass was the heuristic's own.

A choice ``a`` at a decision is played on a copy in step mode until the next decision (:func:`play`), and only then
does the heuristic take over: ``Q(s, a) = V(play(s, a))``, which equals ``V`` of the state the real simulation reaches
with ``a``. With ``s_0`` the first decision of an episode, ``V(s_0)`` is the heuristic's own batch result on the window
(the environment's ``baseline``); ``V`` is constant along the heuristic's own trajectory; and the credits
``V(s_t) - V(s_{t+1})`` sum to ``V(s_0)`` minus the agent's result (:mod:`hpcgym.rewards`, ``"counterfactual"``).

The futures a copy plays are the window's real ones (actual runtimes, arrivals): the agent never sees them, only the
value of its choices. :func:`run_until` stops a batch run after the events up to a time, to fork along a heuristic's
own trajectory in any backfill mode (conservative included, which has no step mode).

>>> from hpcgym import traces
>>> from hpcgym.sim import Simulator, heuristics
>>> sim = Simulator(256, backfill="easy")
>>> _ = sim.reset(traces.window(traces.load("lublin-256"), 64, rng=0))
>>> v0 = value_of(sim, heuristics.FCFS)
>>> v0 >= 1.0  # a mean bounded slowdown
True
"""

from __future__ import annotations

import numba as nb
import numpy as np

from hpcgym.sim import conservative
from hpcgym.sim.actions import HOLD_CHOICE
from hpcgym.sim.backfill import BACKFILL_MODES, CONSERVATIVE
from hpcgym.sim.events import NEVER, next_event, predict_arrivals
from hpcgym.sim.loop import advance, batch_pass
from hpcgym.sim.policy import UNICEP, WFP3, PriorityPolicy, priority
from hpcgym.sim.predict import WALLTIME
from hpcgym.sim.state import APPEND, BLOCKED, HN, HOLD_AT, NEXT, OPEN, PRED, QE, QS, SCAN, WAKE, T

__all__ = ["OBJECTIVE_CODES", "custom_keys", "finish", "fork", "hand_over", "head", "objective", "play", "q_value",
           "row_choices", "row_credits", "run_until", "value", "value_of"]

#: The objectives :func:`objective` computes, by code (those of :mod:`hpcgym.rewards`).
OBJECTIVE_CODES = {"bsld": 0, "wait": 1, "turnaround": 2, "util": 3}
TAU = 10  # the bounded slowdown's floor on the runtime (hpcgym.metrics.TAU)
RATIO_FLOOR = 1e-9  # the floor of a relative reward's denominator (hpcgym.rewards)


@nb.njit(cache=True)
def fork(jobs, st):  # pragma: no cover - compiled
    """A copy of a simulation: the estimates, the keys and every state array copied; the other columns shared."""
    submit, hold, wall, nodes, key, limit, user, model = jobs
    sc, start, first, res, q, cand, heap, rs, pt, pu, hist, hcount, held = st
    return ((submit, hold, wall.copy(), nodes, key.copy(), limit, user, model),
            (sc.copy(), start.copy(), first.copy(), res.copy(), q.copy(), cand.copy(), heap.copy(), rs.copy(),
             pt.copy(), pu.copy(), hist.copy(), hcount.copy(), held.copy()))


@nb.njit(cache=True)
def hand_over(jobs, st, code, custom, scan):  # pragma: no cover - compiled
    """Make a copy the heuristic's (code ``code``, custom keys ``custom``, backfill scan ``scan``) from its next pass.

    Arrived jobs are keyed from their estimates as the engine keys arrivals; the others keep the custom key (a
    predictor re-keys them on arrival) or, without a predictor, get their static key. The queue is re-sorted by
    ``(key, index)`` for a static order, and the arrivals-only shortcut is off for the open pass.
    """
    submit, hold, wall, nodes, key, limit, user, model = jobs
    sc, q = st[0], st[4]
    for j in range(len(submit)):
        if j < sc[NEXT] or sc[PRED] == WALLTIME:
            key[j] = priority(code, 0, submit[j], wall[j], nodes[j], custom[j])
        else:
            key[j] = custom[j]
    dynamic = code == WFP3 or code == UNICEP
    waiting = np.sort(q[sc[QS]:sc[QE]])  # index order = arrival order
    if not dynamic:
        waiting = waiting[np.argsort(key[waiting], kind="mergesort")]  # stable: ties by index
    q[sc[QS]:sc[QE]] = waiting
    sc[APPEND] = 1 if dynamic else 0
    sc[BLOCKED] = 0
    sc[SCAN] = scan
    sc[HOLD_AT] = -1  # a heuristic never holds


@nb.njit(cache=True)
def finish(jobs, st, code, mode, custom, scan):  # pragma: no cover - compiled
    """Run a fork of the simulation to its end under a heuristic; return every job's start time."""
    jobs2, st2 = fork(jobs, st)
    hand_over(jobs2, st2, code, custom, scan)
    advance(jobs2, st2, code, mode, -1, False)
    return st2[1]


@nb.njit(cache=True)
def objective(kind, submit, start, hold, nodes, total):  # pragma: no cover - compiled
    """The mean objective of a schedule (:data:`OBJECTIVE_CODES`; util: the utilization), as :mod:`hpcgym.rewards`."""
    n = len(submit)
    if kind == 3:
        last, first, work = 0, submit[0], 0.0
        for j in range(n):
            last = max(last, start[j] + hold[j])
            first = min(first, submit[j])
            work += nodes[j] * hold[j]
        return work / (total * (last - first)) if last > first else np.nan
    acc = 0.0
    for j in range(n):
        wait = start[j] - submit[j]
        if kind == 0:
            acc += max((wait + hold[j]) / max(hold[j], TAU), 1.0)
        elif kind == 1:
            acc += wait
        else:
            acc += wait + hold[j]
    return acc / n


@nb.njit(cache=True)
def value(jobs, st, code, mode, custom, scan, kind, total):  # pragma: no cover - compiled
    """``V(s)``: the objective ``kind`` of the window finished from ``st`` under the heuristic (see :func:`finish`)."""
    start = finish(jobs, st, code, mode, custom, scan)
    return objective(kind, jobs[0], start, jobs[1], jobs[3], total)


@nb.njit(cache=True)
def play(jobs, st, order, mode, chosen):  # pragma: no cover - compiled
    """A fork on which choice ``chosen`` is played in step mode (scan order ``order``) up to the next decision."""
    jobs2, st2 = fork(jobs, st)
    advance(jobs2, st2, order, mode, chosen, True)
    return jobs2, st2


@nb.njit(cache=True)
def q_value(jobs, st, order, mode, chosen, code, custom, scan, kind, total):  # pragma: no cover - compiled
    """``Q(s, a)``: play ``chosen`` (:func:`play`), then finish under the heuristic (:func:`value`)."""
    jobs2, st2 = play(jobs, st, order, mode, chosen)
    return value(jobs2, st2, code, mode, custom, scan, kind, total)


@nb.njit(cache=True)
def head(jobs, st, code):  # pragma: no cover - compiled
    """The waiting job a heuristic of code ``code`` puts first now, on the simulation's own keys (-1: none waits).

    In step mode the keys are those of the simulation's order: this is that order's choice (ties: the lower index).
    """
    submit, hold, wall, nodes, key, limit, user, model = jobs
    sc, q = st[0], st[4]
    best, best_score = -1, np.inf
    for m in range(sc[QS], sc[QE]):
        j = q[m]
        score = priority(code, sc[T], submit[j], wall[j], nodes[j], 0.0) if code == WFP3 or code == UNICEP else key[j]
        if score < best_score or (score == best_score and j < best):
            best, best_score = j, score
    return best


@nb.njit(cache=True, inline="always")
def _row(jobs_b, st_b, i, n):  # pragma: no cover - compiled
    """Row ``i`` of a vector environment's batch, its first ``n`` jobs (views, as :func:`hpcgym.sim.state.prefix`)."""
    submit, hold, wall, nodes, key, limit, user, model = jobs_b
    sc, start, first, res, q, cand, heap, rs, pt, pu, hist, hcount, held = st_b
    return ((submit[i, :n], hold[i, :n], wall[i, :n], nodes[i, :n], key[i, :n], limit[i, :n], user[i, :n], model[i]),
            (sc[i], start[i, :n], first[i, :n], res[i, :n], q[i, :n + 1], cand[i, :n], heap[i, :2 * n], rs[i, :n],
             pt[i], pu[i], hist[i], hcount[i], held[i, :n]))


@nb.njit(cache=True)
def row_choices(pending, lengths, jobs_b, st_b, code, slots, actions, shortcut, chosen,
                heads):  # pragma: no cover - compiled
    """Before a vector step: each pending row's chosen job and the baseline's head, into ``chosen`` and ``heads``.

    ``actions`` are slots (slot ``slots`` is a hold); a head is -1 without the ``shortcut``.
    """
    for i in range(len(pending)):
        chosen[i], heads[i] = -1, -1
        if pending[i]:
            jobs, st = _row(jobs_b, st_b, i, lengths[i])
            chosen[i] = HOLD_CHOICE if actions[i] == slots else st[4][st[0][QS] + actions[i]]
            if shortcut:
                heads[i] = head(jobs, st, code)


@nb.njit(cache=True)
def row_credits(pending, done, lengths, jobs_b, st_b, chosen, heads, code, mode, custom_b, scan, kind, total, sign,
                credit_b, out):  # pragma: no cover - compiled
    """After a vector step: each pending row's counterfactual credit, into ``out``.

    As :meth:`hpcgym.rewards.Counterfactual.credit`, whose ``(v0, previous, forks)`` are the rows of ``credit_b``;
    ``done`` marks the rows whose episode ended.
    """
    for i in range(len(pending)):
        out[i] = 0.0
        v0, before = credit_b[i, 0], credit_b[i, 1]
        if not pending[i] or np.isnan(v0):  # no decision was made, or the episode needed none
            continue
        n = lengths[i]
        jobs, st = _row(jobs_b, st_b, i, n)
        if chosen[i] == heads[i] and chosen[i] >= 0:
            after = before
        elif done[i]:
            after = objective(kind, jobs[0], st[1], jobs[1], jobs[3], total)
        else:
            after = value(jobs, st, code, mode, custom_b[i, :n], scan, kind, total)
            credit_b[i, 2] += 1
        out[i] = sign * (after - before) / max(abs(v0), RATIO_FLOOR) + 0.0
        credit_b[i, 1] = after


@nb.njit(cache=True)
def _next_time(sc, heap, submit):  # pragma: no cover - compiled
    """The time of the next event (what :func:`hpcgym.sim.events.next_event` would jump to), NEVER if none."""
    n = len(submit)
    t = submit[sc[NEXT]] if sc[NEXT] < n else NEVER
    if sc[HN] > 0 and heap[0] // n < t:
        t = heap[0] // n
    if 0 < sc[WAKE] < t:
        t = sc[WAKE]
    return t


@nb.njit(cache=True)
def run_until(jobs, st, code, mode, until):  # pragma: no cover - compiled
    """Batch mode: run the events up to time ``until`` and their passes; return False once the run is done.

    The run stops before the first event after ``until`` (the state is then between two events), so that a batch
    run can be forked along its own trajectory: it is :func:`hpcgym.sim.loop.advance`'s batch path, stopped early.
    """
    submit, hold, wall, nodes, key, limit, user, model = jobs
    sc, begin, first, res, q, cand, heap, rs, pt, pu, hist, hcount, held = st
    while True:
        t = sc[T]
        if sc[OPEN]:
            if mode == CONSERVATIVE:
                conservative.run_pass(t, code, sc, q, first, res, pt, pu, cand, begin, heap, submit, hold, wall, nodes,
                                      key)
            else:
                batch_pass(t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes, key)
            sc[OPEN] = 0
        if _next_time(sc, heap, submit) > until:
            return _next_time(sc, heap, submit) != NEVER
        if not next_event(sc, q, heap, rs, begin, cand, submit, hold, wall, nodes, key, limit):
            return False
        if sc[PRED] != WALLTIME:
            predict_arrivals(code, sc, q, cand, begin, submit, hold, wall, nodes, key, limit, user, hist, hcount,
                             model)


def custom_keys(policy: PriorityPolicy, keys: np.ndarray | None, n: int) -> np.ndarray:
    """A heuristic's custom keys on a window as :func:`finish` takes them (zeros for the compiled formulas)."""
    return np.zeros(n) if keys is None else np.asarray(keys, np.float64)


def value_of(sim, policy: PriorityPolicy, keys: np.ndarray | None = None, objective_name: str = "bsld") -> float:
    """``V`` of a :class:`~hpcgym.sim.Simulator`'s current state under ``policy`` (its custom ``keys`` on the window).

    The simulator's runtime predictor must be the policy's: the copy keeps the estimates it made.
    """
    jobs, st = sim.arrays
    scan = -1 if policy.scan is None else policy.scan
    return float(value(jobs, st, policy.code, BACKFILL_MODES[sim.backfill], custom_keys(policy, keys, len(sim.start)),
                       scan, OBJECTIVE_CODES[objective_name], sim.nodes))

