"""The event loop, compiled with numba: one loop for whole streams (batch mode) and for agents (step mode).

:func:`advance` alternates two things until nothing is left: it jumps to the next event
(:func:`hpcgym.sim.events.next_event`: release, enqueue, open a pass), then runs the open pass. Who picks the head
of the pass is the only difference between the modes:

- **batch mode** (``external=False``): a compiled head chooser (:func:`choose_heads`) starts the policy's heads while
  they fit and blocks the first that does not (reservation and backfill, :mod:`hpcgym.sim.backfill`); conservative
  backfilling has no head and runs its own pass (:mod:`hpcgym.sim.conservative`);
- **step mode** (``external=True``): the loop returns :data:`DECIDE` and the caller's pick comes back as
  ``chosen`` (:func:`apply_choice`: start it, or block it exactly as the chooser would).

A heuristic that picks its own head in step mode therefore reproduces its batch schedule (the tests check it).
:func:`schedule` runs a whole stream. The semantics are those of ``docs/simulation.md``; :mod:`hpcgym.sim.reference`
is the slow SimPy oracle the tests compare this engine with.
"""

from __future__ import annotations

import numba as nb

from hpcgym.sim import actions, backfill, conservative
from hpcgym.sim.backfill import BACKFILL_MODES, CONSERVATIVE, EASY, NONE, RLSCHEDULER, STEP_MODES, Backfill
from hpcgym.sim.events import next_event, predict_arrivals, start
from hpcgym.sim.policy import UNICEP, WFP3
from hpcgym.sim.predict import WALLTIME
from hpcgym.sim.queue import any_fits, by_scan_order, compact, ordered
from hpcgym.sim.state import (
    ACTION,
    APPEND,
    BLOCKED,
    ENDED,
    EXPIRED,
    FREE,
    HOLD_AT,
    NEW_HEAD,
    OPEN,
    PRED,
    QE,
    QS,
    RN,
    SCAN,
    T,
    fresh,
)

__all__ = ["BACKFILL_MODES", "Backfill", "CONSERVATIVE", "DECIDE", "DONE", "EASY", "NONE", "RLSCHEDULER",
           "STEP_MODES", "advance", "schedule"]

#: What :func:`advance` returns: the stream is done, or a decision is pending (step mode).
DONE, DECIDE = 0, 1


@nb.njit(cache=True, inline="always")
def choose_heads(t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes,
                 key):  # pragma: no cover - compiled
    """Batch mode's head chooser: start the policy's heads while they fit, then block the first that does not."""
    order = ordered(sc, q, code, t, submit, wall, nodes, key)
    k = 0
    while k < len(order) and nodes[order[k]] <= sc[FREE]:
        start(order[k], t, sc, begin, heap, rs, hold, wall, nodes)
        k += 1
    if k < len(order) and mode != NONE:
        nc = len(order) - k - 1
        cand[:nc] = order[k + 1:]
        if sc[SCAN] >= 0 and mode == EASY:  # a scan order of its own (e.g. shortest-job-backfilled-first)
            by_scan_order(cand, nc, sc[SCAN], submit, wall, nodes)
        backfill.block(order[k], nc, t, code, mode, sc, first, cand, begin, heap, rs, hold, wall, nodes)
        compact(sc, q, begin)
    elif sc[APPEND]:
        compact(sc, q, begin)
    else:
        sc[QS] += k  # a sorted queue: the started heads are its prefix


@nb.njit(cache=True, inline="always")
def batch_pass(t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes,
               key):  # pragma: no cover - compiled
    """The open pass of batch mode."""
    if sc[QE] == sc[QS]:
        return
    # Only the arrivals can start when nothing was freed, the head is the same, the order is static, no estimate was
    # corrected, and no running job is past its estimate (whose "ends now" would move the shadow time with t): skip
    # the full pass then.
    dynamic = code == WFP3 or code == UNICEP
    overdue = sc[RN] > 0 and rs[0] // len(begin) < t
    if sc[BLOCKED] and not (sc[ENDED] or sc[EXPIRED] or sc[NEW_HEAD] or dynamic or overdue):
        backfill.arrivals(t, code, mode, sc, q, cand, begin, heap, rs, submit, hold, wall, nodes, key)
    else:
        choose_heads(t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes, key)


@nb.njit(cache=True, inline="always")
def apply_choice(h, t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes,
                 key):  # pragma: no cover - compiled
    """Step mode: start the chosen head ``h``, or block it as :func:`choose_heads` would (which ends the pass)."""
    if nodes[h] <= sc[FREE]:
        start(h, t, sc, begin, heap, rs, hold, wall, nodes)
    else:
        nc = 0
        for j in ordered(sc, q, code, t, submit, wall, nodes, key):
            if j != h:
                cand[nc] = j
                nc += 1
        backfill.block(h, nc, t, code, mode, sc, first, cand, begin, heap, rs, hold, wall, nodes)
        sc[OPEN] = 0
    compact(sc, q, begin)


#: What :func:`_step_choice` returns when the caller must choose.
ASK = actions.ASK


@nb.njit(cache=True, inline="always")
def _step_choice(mode, sc, q, nodes):  # pragma: no cover - compiled
    """Step mode: :data:`ASK` the caller, or the one waiting job (the head), or -1 after closing the pass.

    A pass needs a decision only when at least two jobs wait and one of them fits now (under ``rlscheduler``,
    whose remembered shadow time depends on the head, whenever two wait): otherwise no choice changes what starts.
    """
    waiting = sc[QE] - sc[QS]
    if waiting == 0 or (mode != RLSCHEDULER and not any_fits(sc, q, nodes)):
        sc[OPEN] = 0
        return -1
    return q[sc[QS]] if waiting == 1 else ASK


@nb.njit(cache=True, inline="always")
def _apply(chosen, t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes, key,
           held):  # pragma: no cover - compiled
    """Step mode: carry out a choice (the caller's, or the one the mode made alone) under the action mode."""
    if chosen == actions.HOLD_CHOICE:
        actions.begin_hold(t, sc, q, held, nodes)
    elif sc[ACTION] == actions.GUARDED:
        actions.guarded_start(chosen, t, sc, q, begin, heap, rs, hold, wall, nodes)
    else:
        apply_choice(chosen, t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes, key)


@nb.njit(cache=True, inline="always")
def _choice(t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes, key,
            held):  # pragma: no cover - compiled
    """Step mode's open pass: :data:`ASK` the caller, a choice the mode makes alone, or -1 (the pass closed)."""
    if sc[ACTION] == actions.GUARDED and mode == EASY:
        return actions.guarded_choice(t, code, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes, key)
    if sc[ACTION] == actions.HOLD:
        return actions.hold_choice(sc, q, held, nodes)
    return _step_choice(mode, sc, q, nodes)


@nb.njit(cache=True)  # not inlined: each kernel that calls it would compile a copy (numba held ~0.9 GB doing so)
def advance(jobs, st, code, mode, chosen, external):  # pragma: no cover - compiled
    """The event loop. Apply ``chosen`` (step mode; -1: none), then run until a decision is due or all is done.

    ``jobs`` and ``st`` are a :class:`~hpcgym.sim.state.Jobs` and a :class:`~hpcgym.sim.state.State`, or plain
    tuples of the same arrays (cheaper to pass from Python: numba types a named tuple slowly at each call).
    Returns :data:`DECIDE` (only when ``external``) or :data:`DONE`.
    """
    # The named tuples are unpacked once, here: the helpers take arrays (see hpcgym.sim.queue).
    submit, hold, wall, nodes, key, limit, user, model = jobs
    sc, begin, first, res, q, cand, heap, rs, pt, pu, hist, hcount, held = st
    while True:
        t = sc[T]
        if chosen >= 0 or chosen == actions.HOLD_CHOICE:
            _apply(chosen, t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes, key, held)
            chosen = -1
        if sc[OPEN]:
            if mode == CONSERVATIVE:
                conservative.run_pass(t, code, sc, q, first, res, pt, pu, cand, begin, heap, submit, hold, wall, nodes,
                                      key)
                sc[OPEN] = 0
            elif not external:
                batch_pass(t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes, key)
                sc[OPEN] = 0
            else:
                chosen = _choice(t, code, mode, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes, key,
                                 held)
                if chosen == ASK:
                    return DECIDE
                continue  # apply the one waiting job, or (the pass closed) go on to the next event
        if not next_event(sc, q, heap, rs, begin, cand, submit, hold, wall, nodes, key, limit):
            return DONE
        if sc[PRED] != WALLTIME:  # the history and the arrivals, with their predictions (hpcgym.sim.events)
            predict_arrivals(code, sc, q, cand, begin, submit, hold, wall, nodes, key, limit, user, hist, hcount,
                             model)
        if sc[HOLD_AT] >= 0:  # the first event after a hold
            actions.end_hold(sc[T], sc, q, submit, held, nodes)


@nb.njit(cache=True)
def schedule(jobs, total, code, mode, predictor, k, users, scan):  # pragma: no cover - compiled
    """Schedule a whole job stream on ``total`` nodes; return (start times, first reservations).

    ``jobs.key`` holds the policy's static keys (:func:`hpcgym.sim.policy.static_keys`), or its custom keys when a
    runtime predictor (code ``predictor``, history ``k`` over ``users`` users; :mod:`hpcgym.sim.predict`) keys each
    job at its arrival; ``scan`` is the code of EASY's backfill scan order, or -1 for the queue's. The first
    reservation of a job is, under EASY and rlscheduler, the shadow time it got the first time it was the blocked
    head; under conservative, the reservation it got on arrival; else -1. Tests check that a job never starts later
    than it (for FCFS under EASY with the walltimes, where the head changes only when it starts).
    """
    st = fresh(len(jobs.submit), total, code == WFP3 or code == UNICEP, mode == CONSERVATIVE, predictor, k, users,
               scan)
    advance(jobs, st, code, mode, -1, False)
    return st.start, st.first
