"""Conservative backfilling: every waiting job holds a reservation in a profile of predicted node use.

The profile is ``pt[:PM]`` (change points, increasing) and ``pu[:PM]`` (nodes in use from each point on) of a
:class:`~hpcgym.sim.state.State`. A job arriving gets the earliest slot where its nodes are free for its whole
walltime; it starts when the clock reaches its reservation. A job that ends before its estimate hands back the
rest of its interval, and the waiting jobs are then *compressed*: each, in order of its current reservation, moves
to its earliest slot (never later than it had). There is no head to choose, so step mode does not offer it.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from hpcgym.sim.events import expire_later
from hpcgym.sim.policy import FCFS
from hpcgym.sim.queue import compact, heap_push, ordered, sort_by_priority
from hpcgym.sim.state import ARRIVED, ENDED, EXPIRED, FREE, HN, NEXT, NODES, PM, QE, QS, WAKE, borrowing


# ---- the profile ----------------------------------------------------------------------------------------------
@borrowing
def _point(pt, pu, m, a):  # pragma: no cover - compiled
    """Make ``a`` a change point of the profile; return (its index, new m)."""
    pos = np.searchsorted(pt[:m], a)
    if pos < m and pt[pos] == a:
        return pos, m
    for k in range(m, pos, -1):
        pt[k] = pt[k - 1]
        pu[k] = pu[k - 1]
    pt[pos] = a
    pu[pos] = pu[pos - 1] if pos > 0 else 0
    return pos, m + 1


@borrowing
def _unpoint(pt, pu, m, k):  # pragma: no cover - compiled
    """Drop change point ``k`` if it changes nothing (keeps the profile as small as the live intervals)."""
    if k == 0 or k >= m or pu[k] != pu[k - 1]:
        return m
    for kk in range(k, m - 1):
        pt[kk] = pt[kk + 1]
        pu[kk] = pu[kk + 1]
    return m - 1


@borrowing
def use(sc, pt, pu, a, b, amount):  # pragma: no cover - compiled
    """Add ``amount`` nodes in use over ``[a, b)``."""
    lo, m = _point(pt, pu, sc[PM], a)
    hi, m = _point(pt, pu, m, b)
    for k in range(lo, hi):
        pu[k] += amount
    m = _unpoint(pt, pu, m, hi)
    sc[PM] = _unpoint(pt, pu, m, lo)


@borrowing
def earliest(sc, pt, pu, need, length):  # pragma: no cover - compiled
    """Earliest change point u with ``need`` nodes free over ``[u, u + length)``."""
    m, total = sc[PM], sc[NODES]
    for k in range(m):
        if total - pu[k] < need:
            continue
        u = pt[k]
        kk = k + 1
        ok = True
        while kk < m and pt[kk] < u + length:
            if total - pu[kk] < need:
                ok = False
                break
            kk += 1
        if ok:
            return u
    return pt[m - 1]


@borrowing
def advance(sc, pt, pu, t):  # pragma: no cover - compiled
    """Forget the profile before ``t`` (so that ``pt[0] == t``)."""
    k0, m = _point(pt, pu, sc[PM], t)
    if k0 > 0:
        for k in range(k0, m):
            pt[k - k0] = pt[k]
            pu[k - k0] = pu[k]
        m -= k0
    sc[PM] = m


@borrowing
def reserve(order, move, sc, res, pt, pu, wall, nodes):  # pragma: no cover - compiled
    """Give each job of ``order`` its earliest slot (``move``: first give up its current one)."""
    for j in order:
        if move:
            use(sc, pt, pu, res[j], res[j] + wall[j], -nodes[j])
        res[j] = earliest(sc, pt, pu, nodes[j], wall[j])
        use(sc, pt, pu, res[j], res[j] + wall[j], nodes[j])


@borrowing
def _launch(j, t, sc, begin, heap, hold, wall, nodes):  # pragma: no cover - compiled
    """Start ``j`` at ``t``. Unlike :func:`hpcgym.sim.events.start`, no estimated end: the profile holds them."""
    begin[j] = t
    sc[FREE] -= nodes[j]
    sc[HN] = heap_push(heap, sc[HN], (t + hold[j]) * len(begin) + j)
    expire_later(j, t, sc, heap, hold, wall, len(begin))


# ---- the pass -----------------------------------------------------------------------------------------------
# The pass is four steps, which hpcgym.sim.loop.advance calls in order: hand_back, then compress if a job ended early,
# then reserve the arrivals (reserve_arrivals for FCFS, else reserve_sorted), then start_due. The steps that run at
# every event borrow their arrays (hpcgym.sim.state.borrowing); the two that allocate run only when needed. The
# loop calls the steps itself: a pass function inlined into it would pay a reference count per array per event.
@borrowing
def hand_back(t, sc, pt, pu, cand, begin, wall, nodes):  # pragma: no cover - compiled
    """Forget the past, hand back the ends of early jobs' intervals, extend corrected ones'; True if any changed.

    A change (an early end, or an estimate raised to the walltime) makes the pass compress.
    """
    advance(sc, pt, pu, t)
    changed = False
    for k in range(sc[ENDED]):  # the jobs that ended now (events.release wrote them to cand)
        j = cand[k]
        if t < begin[j] + wall[j]:  # before its estimate: hand back the rest of its interval
            use(sc, pt, pu, t, begin[j] + wall[j], -nodes[j])
            changed = True
    n = len(begin)
    for k in range(sc[EXPIRED]):  # the estimates corrected now (at the end of cand; wall is now the walltime)
        j = cand[n - 1 - k]
        use(sc, pt, pu, t, begin[j] + wall[j], nodes[j])
        changed = True
    return changed


@nb.njit(cache=True)
def compress(t, code, sc, q, res, pt, pu, submit, wall, nodes, key):  # pragma: no cover - compiled
    """Move every job that waited before now to its earliest slot, in order of current reservation.

    Ties go by priority, so that a job never keeps a slot that only existed because of a later-moved job's old
    reservation. It allocates (the orders), so it is called only after an early end.
    """
    order = ordered(sc, q, code, t, submit, wall, nodes, key)
    old = order[order < sc[ARRIVED]]
    reserve(old[np.argsort(res[old], kind="mergesort")], True, sc, res, pt, pu, wall, nodes)


@borrowing
def reserve_arrivals(sc, first, res, pt, pu, wall, nodes):  # pragma: no cover - compiled
    """Reserve the arrivals in arrival order (FCFS's)."""
    for j in range(sc[ARRIVED], sc[NEXT]):
        res[j] = earliest(sc, pt, pu, nodes[j], wall[j])
        use(sc, pt, pu, res[j], res[j] + wall[j], nodes[j])
        first[j] = res[j]


@nb.njit(cache=True)
def reserve_sorted(t, code, sc, first, res, pt, pu, submit, wall, nodes, key):  # pragma: no cover - compiled
    """Reserve the arrivals in the policy's order (it allocates: the order)."""
    new = sort_by_priority(np.arange(sc[ARRIVED], sc[NEXT]), code, t, submit, wall, nodes, key)
    reserve(new, False, sc, res, pt, pu, wall, nodes)
    first[new] = res[new]


@borrowing
def start_due(t, sc, q, res, begin, heap, hold, wall, nodes):  # pragma: no cover - compiled
    """Start the jobs whose reservation is now, and note when the next reservation falls due (``WAKE``)."""
    started = False
    wake = 0
    for k in range(sc[QS], sc[QE]):
        j = q[k]
        if res[j] == t:
            _launch(j, t, sc, begin, heap, hold, wall, nodes)
            started = True
        elif wake == 0 or res[j] < wake:
            wake = res[j]
    sc[WAKE] = wake
    if started:
        compact(sc, q, begin)


@nb.njit(cache=True, inline="always")
def run_pass(t, code, sc, q, first, res, pt, pu, cand, begin, heap, submit, hold, wall, nodes,
             key):  # pragma: no cover - compiled
    """The steps of a conservative pass: hand back and compress, reserve the arrivals, start what is due."""
    if hand_back(t, sc, pt, pu, cand, begin, wall, nodes):  # an early end or a correction
        compress(t, code, sc, q, res, pt, pu, submit, wall, nodes, key)
    if sc[NEXT] > sc[ARRIVED]:
        if code == FCFS:
            reserve_arrivals(sc, first, res, pt, pu, wall, nodes)
        else:
            reserve_sorted(t, code, sc, first, res, pt, pu, submit, wall, nodes, key)
    start_due(t, sc, q, res, begin, heap, hold, wall, nodes)
