"""The event-driven engine, compiled with numba: releases, arrivals, one scheduling pass per timestamp.

The semantics are those of ``docs/simulation.md``; :mod:`hpcgym.sim.reference` is the slow SimPy oracle that the
tests compare this engine with. Jobs are indices ``0..n-1`` in submit order. Times are integer seconds. To keep
every structure a flat int64 array, a job ``j`` ending at time ``e`` is stored as the *composite* ``e * n + j``:
sorting composites sorts by time, then by job index (which is submit order), so ties always break the same way.

Structures (all preallocated to ``n``):
- ``q[qs:qe]``: the queue. Static policies keep it sorted by ``(key, j)``; dynamic ones in arrival order.
- ``heap[:hn]``: a binary min-heap of actual-end composites (the next release).
- ``rs[:rn]``: a sorted array of estimated-end composites (for shadow times).
- ``sc``: the scalar state (free nodes, sizes, shadow time, ...), indexed by the ``_FREE``... constants, so that
  the small compiled steps below can update it in place.
"""

from __future__ import annotations

from typing import Literal, get_args

import numba as nb
import numpy as np

from hpcgym.sim.policy import FCFS, UNICEP, WFP3, score

NONE, EASY, CONSERVATIVE, RLSCHEDULER = range(4)
#: A backfilling mode's name (the one spelling of them; :data:`BACKFILL_MODES` maps each to its engine code).
Backfill = Literal["none", "easy", "conservative", "rlscheduler"]
BACKFILL_MODES: dict[str, int] = dict(zip(get_args(Backfill), (NONE, EASY, CONSERVATIVE, RLSCHEDULER), strict=True))
#: The modes step mode (agents) can run: conservative backfilling reserves every job on arrival (no head to choose).
STEP_MODES = ("none", "easy", "rlscheduler")
_BIG = np.iinfo(np.int64).max
# Slots of the scalar state array.
_FREE, _QS, _QE, _HN, _RN, _SHADOW, _EXTRA, _LAST_HEAD, _T, _NEXT, _OPEN = range(11)
N_STATE = 11


# ---- small array structures ---------------------------------------------------------------------------------
@nb.njit(cache=True)
def _heap_push(heap, hn, item):  # pragma: no cover - compiled
    k = hn
    heap[k] = item
    while k > 0:
        parent = (k - 1) >> 1
        if heap[parent] <= item:
            break
        heap[k] = heap[parent]
        k = parent
    heap[k] = item
    return hn + 1


@nb.njit(cache=True)
def _heap_pop(heap, hn):  # pragma: no cover - compiled
    top = heap[0]
    hn -= 1
    last = heap[hn]
    k = 0
    while True:
        child = 2 * k + 1
        if child >= hn:
            break
        if child + 1 < hn and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= last:
            break
        heap[k] = heap[child]
        k = child
    if hn > 0:
        heap[k] = last
    return top, hn


@nb.njit(cache=True)
def _sorted_insert(arr, n, value):  # pragma: no cover - compiled
    pos = np.searchsorted(arr[:n], value)
    for k in range(n, pos, -1):
        arr[k] = arr[k - 1]
    arr[pos] = value
    return n + 1


@nb.njit(cache=True)
def _sorted_remove(arr, n, value):  # pragma: no cover - compiled
    pos = np.searchsorted(arr[:n], value)
    for k in range(pos, n - 1):
        arr[k] = arr[k + 1]
    return n - 1


# ---- the queue ----------------------------------------------------------------------------------------------
@nb.njit(cache=True)
def _enqueue(q, qs, qe, key, j, dynamic):  # pragma: no cover - compiled
    """Insert job ``j``; return (new qe, its position from the head)."""
    if dynamic:
        q[qe] = j
        return qe + 1, qe - qs
    lo, hi = qs, qe
    kj = key[j]
    while lo < hi:  # first position whose (key, index) is greater than j's
        mid = (lo + hi) >> 1
        m = q[mid]
        if key[m] < kj or (key[m] == kj and m < j):
            lo = mid + 1
        else:
            hi = mid
    for k in range(qe, lo, -1):
        q[k] = q[k - 1]
    q[lo] = j
    return qe + 1, lo - qs


@nb.njit(cache=True)
def _ordered(q, qs, qe, code, t, submit, wall, nodes, key):  # pragma: no cover - compiled
    """The queue in priority order (a view for static policies, a sorted copy for dynamic ones)."""
    if code != WFP3 and code != UNICEP:
        return q[qs:qe]
    cur = q[qs:qe]
    scores = np.empty(qe - qs)
    for k in range(qe - qs):
        j = cur[k]
        scores[k] = score(code, t, submit[j], wall[j], nodes[j], key[j])
    return cur[np.argsort(scores, kind="mergesort")]  # stable: ties stay in arrival (submit, id) order


@nb.njit(cache=True)
def _compact(q, qs, qe, start):  # pragma: no cover - compiled
    """Drop started jobs from the queue, keeping its order; return the new qe."""
    w = qs
    for k in range(qs, qe):
        j = q[k]
        if start[j] < 0:
            q[w] = j
            w += 1
    return w


# ---- conservative backfilling: a profile of predicted node use over time ---------------------------------------
@nb.njit(cache=True)
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


@nb.njit(cache=True)
def _unpoint(pt, pu, m, k):  # pragma: no cover - compiled
    """Drop change point ``k`` if it changes nothing (keeps the profile as small as the live intervals)."""
    if k == 0 or k >= m or pu[k] != pu[k - 1]:
        return m
    for kk in range(k, m - 1):
        pt[kk] = pt[kk + 1]
        pu[kk] = pu[kk + 1]
    return m - 1


@nb.njit(cache=True)
def _use(pt, pu, m, a, b, amount):  # pragma: no cover - compiled
    """Add ``amount`` nodes in use over ``[a, b)``; return the new m."""
    lo, m = _point(pt, pu, m, a)
    hi, m = _point(pt, pu, m, b)
    for k in range(lo, hi):
        pu[k] += amount
    m = _unpoint(pt, pu, m, hi)
    return _unpoint(pt, pu, m, lo)


@nb.njit(cache=True)
def _earliest(pt, pu, m, need, length, total):  # pragma: no cover - compiled
    """Earliest change point u with ``need`` nodes free over ``[u, u + length)``."""
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


@nb.njit(cache=True)
def _advance(pt, pu, m, t):  # pragma: no cover - compiled
    """Forget the profile before ``t`` (so that ``pt[0] == t``); return the new m."""
    k0, m = _point(pt, pu, m, t)
    if k0 > 0:
        for k in range(k0, m):
            pt[k - k0] = pt[k]
            pu[k - k0] = pu[k]
        m -= k0
    return m


@nb.njit(cache=True)
def _reserve(order, res, pt, pu, m, wall, nodes, total, move):  # pragma: no cover - compiled
    """Give each job of ``order`` its earliest slot (``move``: first give up its current one)."""
    for j in order:
        if move:
            m = _use(pt, pu, m, res[j], res[j] + wall[j], -nodes[j])
        res[j] = _earliest(pt, pu, m, nodes[j], wall[j], total)
        m = _use(pt, pu, m, res[j], res[j] + wall[j], nodes[j])
    return m


@nb.njit(cache=True)
def _conservative(submit, hold, wall, nodes, key, total, code):  # pragma: no cover - compiled
    """Conservative backfilling with compression (docs/simulation.md)."""
    n = len(submit)
    start = np.full(n, -1, np.int64)
    res = np.full(n, -1, np.int64)
    first = np.full(n, -1, np.int64)
    q = np.empty(n + 1, np.int64)
    heap = np.empty(n, np.int64)
    pt = np.empty(2 * n + 4, np.int64)
    pu = np.zeros(2 * n + 4, np.int64)
    pt[0] = 0
    m = 1
    qs = qe = hn = 0
    i = 0
    dynamic = code == WFP3 or code == UNICEP
    while i < n or hn > 0:
        t = submit[i] if i < n else _BIG
        if hn > 0 and heap[0] // n < t:
            t = heap[0] // n
        m = _advance(pt, pu, m, t)
        early = False
        while hn > 0 and heap[0] // n == t:
            item, hn = _heap_pop(heap, hn)
            j = item % n
            if t < start[j] + wall[j]:  # ended before its estimate: hand back the rest of its interval
                m = _use(pt, pu, m, t, start[j] + wall[j], -nodes[j])
                early = True
        if early and qe > qs:
            # Compress in order of current reservation (ties: priority), so that a job never keeps a slot that
            # only existed because of a later-moved job's old reservation.
            order = _ordered(q, qs, qe, code, t, submit, wall, nodes, key)
            m = _reserve(order[np.argsort(res[order], kind="mergesort")], res, pt, pu, m, wall, nodes, total, True)
        i0 = i
        while i < n and submit[i] == t:
            qe, _ = _enqueue(q, qs, qe, key, i, dynamic)
            i += 1
        if i > i0:
            arrivals = _ordered(np.arange(i0, i), 0, i - i0, code, t, submit, wall, nodes, key)
            if not dynamic:
                arrivals = arrivals[np.argsort(key[arrivals], kind="mergesort")]
            m = _reserve(arrivals, res, pt, pu, m, wall, nodes, total, False)
            first[arrivals] = res[arrivals]
        started = False
        for k in range(qs, qe):
            j = q[k]
            if res[j] == t:
                start[j] = t
                hn = _heap_push(heap, hn, (t + hold[j]) * n + j)
                started = True
        if started:
            qe = _compact(q, qs, qe, start)
    return start, first


@nb.njit(cache=True)
def static_keys(code, submit, wall, nodes, key_in):  # pragma: no cover - compiled
    """Every job's score at time 0: the whole order for static policies (dynamic ones re-score at each pass)."""
    key = np.empty(len(submit))
    for j in range(len(submit)):
        key[j] = score(code, 0, submit[j], wall[j], nodes[j], key_in[j])
    return key


# ---- the pass -----------------------------------------------------------------------------------------------
@nb.njit(cache=True)
def _shadow(h, t, free, rs, rn, nodes, n):  # pragma: no cover - compiled
    """Shadow time and extra nodes for head ``h`` from the running jobs' estimated ends."""
    avail = free
    m = 0
    shadow = t
    while m < rn:
        avail += nodes[rs[m] % n]
        m += 1
        if avail >= nodes[h]:
            shadow = max(rs[m - 1] // n, t)
            break
    while m < rn and rs[m] // n <= shadow:  # every job estimated to end by the shadow time
        avail += nodes[rs[m] % n]
        m += 1
    return shadow, avail - nodes[h]


@nb.njit(cache=True)
def _start(j, t, sc, start, heap, rs, hold, wall, nodes):  # pragma: no cover - compiled
    """Start job ``j`` at ``t``."""
    n = len(start)
    start[j] = t
    sc[_FREE] -= nodes[j]
    sc[_HN] = _heap_push(heap, sc[_HN], (t + hold[j]) * n + j)
    sc[_RN] = _sorted_insert(rs, sc[_RN], (t + wall[j]) * n + j)


@nb.njit(cache=True)
def _release(t, sc, heap, rs, start, wall, nodes):  # pragma: no cover - compiled
    """Release every job that ends at ``t``; return whether any did."""
    n = len(start)
    ended = False
    while sc[_HN] > 0 and heap[0] // n == t:
        item, sc[_HN] = _heap_pop(heap, sc[_HN])
        j = item % n
        sc[_FREE] += nodes[j]
        sc[_RN] = _sorted_remove(rs, sc[_RN], (start[j] + wall[j]) * n + j)
        ended = True
    return ended


@nb.njit(cache=True)
def _backfill(cand, nc, t, mode, sc, start, heap, rs, hold, wall, nodes):  # pragma: no cover - compiled
    """Scan candidates once, in order, starting those the mode allows; return whether any started."""
    started = False
    for m in range(nc):
        if sc[_FREE] == 0:
            break
        j = cand[m]
        if nodes[j] > sc[_FREE]:
            continue
        ends_by_shadow = t + wall[j] < sc[_SHADOW] if mode == RLSCHEDULER else t + wall[j] <= sc[_SHADOW]
        if not ends_by_shadow:
            if mode == RLSCHEDULER or nodes[j] > sc[_EXTRA]:
                continue
            sc[_EXTRA] -= nodes[j]
        _start(j, t, sc, start, heap, rs, hold, wall, nodes)
        started = True
    return started


@nb.njit(cache=True)
def _arrivals_pass(i0, i1, t, code, mode, sc, q, cand, key, start, heap, rs, hold, wall, nodes):  # pragma: no cover
    """Pass when nothing was freed and the head is unchanged: only jobs ``i0..i1-1`` (new) can start."""
    if mode == NONE or i1 == i0:
        return
    nc = i1 - i0
    cand[:nc] = np.arange(i0, i1)
    if mode == EASY and code != FCFS:  # priority order (FCFS: already); rlscheduler scans in FCFS order
        cand[:nc] = cand[:nc][np.argsort(key[i0:i1], kind="mergesort")]
    if _backfill(cand, nc, t, mode, sc, start, heap, rs, hold, wall, nodes):
        sc[_QE] = _compact(q, sc[_QS], sc[_QE], start)


@nb.njit(cache=True)
def _full_pass(t, code, mode, sc, q, cand, submit, key, start, heap, rs, hold, wall, nodes):  # pragma: no cover
    """Start heads while they fit; then, with backfilling, reserve for the head and backfill around it."""
    n = len(start)
    order = _ordered(q, sc[_QS], sc[_QE], code, t, submit, wall, nodes, key)
    k = 0
    while k < len(order) and nodes[order[k]] <= sc[_FREE]:
        _start(order[k], t, sc, start, heap, rs, hold, wall, nodes)
        k += 1
    if k == len(order) or mode == NONE:
        if code == WFP3 or code == UNICEP:
            sc[_QE] = _compact(q, sc[_QS], sc[_QE], start)
        else:
            sc[_QS] += k  # the started heads are the queue's prefix
        return -1
    h = order[k]
    if mode != RLSCHEDULER or h != sc[_LAST_HEAD]:
        sc[_SHADOW], sc[_EXTRA] = _shadow(h, t, sc[_FREE], rs, sc[_RN], nodes, n)
        sc[_LAST_HEAD] = h
    nc = len(order) - k - 1
    cand[:nc] = order[k + 1:]
    if mode == RLSCHEDULER and code != FCFS:
        cand[:nc] = np.sort(cand[:nc])  # RLScheduler backfills in FCFS order
    _backfill(cand, nc, t, mode, sc, start, heap, rs, hold, wall, nodes)
    sc[_QE] = _compact(q, sc[_QS], sc[_QE], start)
    return h


@nb.njit(cache=True)
def simulate_kernel(submit, hold, wall, nodes, key_in, total, code, mode):  # pragma: no cover - compiled
    """Simulate a whole job stream; return (start times, first reservations).

    The first reservation of a job is, under EASY and rlscheduler, the shadow time it got the first time it was
    the blocked head; under conservative, the reservation it got on arrival; else -1. Tests check that a job
    never starts later than it (for FCFS under EASY, where the head changes only when it starts).

    Args:
        submit: int64 submit times, sorted.
        hold: int64 time each job keeps its nodes.
        wall: int64 walltimes (the estimates the scheduler sees).
        nodes: int64 nodes per job.
        key_in: float64 custom static keys (used when ``code == KEY``).
        total: machine nodes.
        code: priority formula code (:mod:`hpcgym.sim.policy`).
        mode: backfill mode (NONE, EASY, CONSERVATIVE, RLSCHEDULER).
    """
    n = len(submit)
    key = static_keys(code, submit, wall, nodes, key_in)
    if mode == CONSERVATIVE:
        return _conservative(submit, hold, wall, nodes, key, total, code)
    dynamic = code == WFP3 or code == UNICEP
    start = np.full(n, -1, np.int64)
    resv = np.full(n, -1, np.int64)
    q, cand = np.empty(n + 1, np.int64), np.empty(n, np.int64)
    heap, rs = np.empty(n, np.int64), np.empty(n, np.int64)
    sc = np.zeros(N_STATE, np.int64)
    sc[_FREE], sc[_LAST_HEAD] = total, -1
    i = 0
    while i < n or sc[_HN] > 0:
        t = submit[i] if i < n else _BIG
        if sc[_HN] > 0 and heap[0] // n < t:
            t = heap[0] // n
        ended = _release(t, sc, heap, rs, start, wall, nodes)
        blocked = sc[_QE] > sc[_QS]
        i0, new_head = i, False
        while i < n and submit[i] == t:
            sc[_QE], pos = _enqueue(q, sc[_QS], sc[_QE], key, i, dynamic)
            new_head = new_head or pos == 0
            i += 1
        if sc[_QE] == sc[_QS]:
            continue
        # Skip the full pass when it cannot differ from the last one: nothing freed, the same head, a static
        # order, and no running job past its estimate (whose "ends now" would move the shadow time with t).
        overdue = sc[_RN] > 0 and rs[0] // n < t
        if blocked and not (ended or new_head or dynamic or overdue):
            _arrivals_pass(i0, i, t, code, mode, sc, q, cand, key, start, heap, rs, hold, wall, nodes)
            continue
        h = _full_pass(t, code, mode, sc, q, cand, submit, key, start, heap, rs, hold, wall, nodes)
        if h >= 0 and resv[h] < 0:
            resv[h] = sc[_SHADOW]
    return start, resv


# ---- step mode: the same passes, with the head chosen from outside (agents) ------------------------------------
DONE, DECIDE = 0, 1


@nb.njit(cache=True)
def _any_fits(q, qs, qe, nodes, free):  # pragma: no cover - compiled
    for k in range(qs, qe):
        if nodes[q[k]] <= free:
            return True
    return False


@nb.njit(cache=True)
def _block(h, t, code, mode, sc, q, cand, submit, key, start, heap, rs, hold, wall, nodes):  # pragma: no cover
    """``h`` was chosen and does not fit: reserve for it and backfill the others in the order policy's order."""
    if mode == NONE:
        return
    if mode != RLSCHEDULER or h != sc[_LAST_HEAD]:
        sc[_SHADOW], sc[_EXTRA] = _shadow(h, t, sc[_FREE], rs, sc[_RN], nodes, len(start))
        sc[_LAST_HEAD] = h
    order = _ordered(q, sc[_QS], sc[_QE], code, t, submit, wall, nodes, key)
    nc = 0
    for j in order:
        if j != h:
            cand[nc] = j
            nc += 1
    if mode == RLSCHEDULER:
        cand[:nc] = np.sort(cand[:nc])
    elif code != FCFS and code != WFP3 and code != UNICEP:
        # Step mode keeps the queue in arrival order: sort a static order by (key, arrival), as batch mode does.
        cand[:nc] = cand[:nc][np.argsort(key[cand[:nc]], kind="mergesort")]
    _backfill(cand, nc, t, mode, sc, start, heap, rs, hold, wall, nodes)


@nb.njit(cache=True)
def _next_event(sc, q, submit, start, heap, rs, wall, nodes):  # pragma: no cover - compiled
    """Jump to the next event: release, enqueue (arrival order), open a pass. False when nothing is left."""
    n = len(start)
    i = sc[_NEXT]
    if i >= n and sc[_HN] == 0:
        return False
    t = submit[i] if i < n else _BIG
    if sc[_HN] > 0 and heap[0] // n < t:
        t = heap[0] // n
    sc[_T] = t
    _release(t, sc, heap, rs, start, wall, nodes)
    while i < n and submit[i] == t:
        q[sc[_QE]] = i
        sc[_QE] += 1
        i += 1
    sc[_NEXT] = i
    sc[_OPEN] = 1
    return True


@nb.njit(cache=True)
def step_kernel(chosen, code, mode, sc, q, cand, submit, key, start, heap, rs, hold, wall, nodes):  # pragma: no cover
    """Apply the chosen head (or -1), then run until the next real decision; return DECIDE or DONE.

    A pass needs a decision only when at least two jobs wait and at least one of them fits now (under
    ``rlscheduler``, whose remembered shadow time depends on the head, whenever two wait). Otherwise the choice
    cannot change what starts: a lone waiting job is chosen automatically, and a pass where nothing fits ends.
    """
    while True:
        t = sc[_T]
        if chosen >= 0:
            if nodes[chosen] <= sc[_FREE]:
                _start(chosen, t, sc, start, heap, rs, hold, wall, nodes)
            else:
                _block(chosen, t, code, mode, sc, q, cand, submit, key, start, heap, rs, hold, wall, nodes)
                sc[_OPEN] = 0
            sc[_QE] = _compact(q, sc[_QS], sc[_QE], start)
            chosen = -1
        if sc[_OPEN]:
            waiting = sc[_QE] - sc[_QS]
            if waiting == 0 or (mode != RLSCHEDULER and not _any_fits(q, sc[_QS], sc[_QE], nodes, sc[_FREE])):
                sc[_OPEN] = 0
            elif waiting == 1:
                chosen = q[sc[_QS]]
                continue
            else:
                return DECIDE
        if not _next_event(sc, q, submit, start, heap, rs, wall, nodes):
            return DONE
