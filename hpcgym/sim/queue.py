"""The waiting queue, and the two small ordered arrays the engine keeps (a heap of ends, a sorted array).

The queue is ``q[QS:QE]`` of a :class:`~hpcgym.sim.state.State`. It is kept in one of two orders, set once per
simulation by the ``APPEND`` slot:

- sorted by ``(key, index)`` (batch mode with a static policy): the policy's order itself, so the heads are its
  prefix and starting them moves ``QS``;
- arrival order (step mode, where agents see the queue as it arrived, and dynamic policies, whose order changes
  with time): :func:`ordered` sorts a copy when a pass needs the policy's order.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from hpcgym.sim.policy import FCFS, UNICEP, WFP3, priority
from hpcgym.sim.state import APPEND, FREE, QE, QS


# ---- a binary min-heap and a sorted array of int64 ----------------------------------------------------------
@nb.njit(cache=True, inline="always")
def heap_push(heap, hn, item):  # pragma: no cover - compiled
    """Push ``item`` on ``heap[:hn]``; return the new size."""
    k = hn
    while k > 0:
        parent = (k - 1) >> 1
        if heap[parent] <= item:
            break
        heap[k] = heap[parent]
        k = parent
    heap[k] = item
    return hn + 1


@nb.njit(cache=True, inline="always")
def heap_pop(heap, hn):  # pragma: no cover - compiled
    """Pop the smallest item of ``heap[:hn]``; return (it, the new size)."""
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


@nb.njit(cache=True, inline="always")
def sorted_insert(arr, n, value):  # pragma: no cover - compiled
    """Insert ``value`` into the sorted ``arr[:n]``; return the new size."""
    pos = np.searchsorted(arr[:n], value)
    for k in range(n, pos, -1):
        arr[k] = arr[k - 1]
    arr[pos] = value
    return n + 1


@nb.njit(cache=True, inline="always")
def sorted_remove(arr, n, value):  # pragma: no cover - compiled
    """Remove ``value`` from the sorted ``arr[:n]``; return the new size."""
    pos = np.searchsorted(arr[:n], value)
    for k in range(pos, n - 1):
        arr[k] = arr[k + 1]
    return n - 1


# ---- the queue ----------------------------------------------------------------------------------------------
# The compiled helpers take arrays, not the named tuples of :mod:`hpcgym.sim.state`: numba reloads a tuple's arrays
# at every access in a loop, which measured twice as slow. :func:`hpcgym.sim.loop.advance` unpacks the tuples once.
@nb.njit(cache=True, inline="always")
def enqueue(sc, q, key, j):  # pragma: no cover - compiled
    """Add job ``j`` to the queue; return its position from the head."""
    qs, qe = sc[QS], sc[QE]
    sc[QE] = qe + 1
    if sc[APPEND]:
        q[qe] = j
        return qe - qs
    lo, hi = qs, qe
    kj = key[j]
    while lo < hi:  # the first position whose (key, index) is greater than j's
        mid = (lo + hi) >> 1
        m = q[mid]
        if key[m] < kj or (key[m] == kj and m < j):
            lo = mid + 1
        else:
            hi = mid
    for k in range(qe, lo, -1):
        q[k] = q[k - 1]
    q[lo] = j
    return lo - qs


@nb.njit(cache=True, inline="always")
def sort_by_priority(cand, code, t, submit, wall, nodes, key):  # pragma: no cover - compiled
    """``cand`` (jobs in arrival order) in the policy's order at time ``t``: a new array, or ``cand`` for FCFS."""
    if code == FCFS:
        return cand
    if code == WFP3 or code == UNICEP:
        scores = np.empty(len(cand))
        for k in range(len(cand)):
            j = cand[k]
            scores[k] = priority(code, t, submit[j], wall[j], nodes[j], key[j])
        return cand[np.argsort(scores, kind="mergesort")]  # stable: ties stay in (submit, index) order
    return cand[np.argsort(key[cand], kind="mergesort")]


@nb.njit(cache=True, inline="always")
def by_scan_order(cand, nc, scan, submit, wall, nodes):  # pragma: no cover - compiled
    """Sort ``cand[:nc]`` in place by the scan order ``scan`` (a static formula), stably: ties keep their order."""
    scores = np.empty(nc)
    for k in range(nc):
        j = cand[k]
        scores[k] = priority(scan, 0, submit[j], wall[j], nodes[j], 0.0)
    cand[:nc] = cand[:nc][np.argsort(scores, kind="mergesort")]


@nb.njit(cache=True, inline="always")
def ordered(sc, q, code, t, submit, wall, nodes, key):  # pragma: no cover - compiled
    """The queue in the policy's order at time ``t`` (a view when the queue is kept in it, else a sorted copy)."""
    cur = q[sc[QS]:sc[QE]]
    if not sc[APPEND]:
        return cur
    return sort_by_priority(cur, code, t, submit, wall, nodes, key)


@nb.njit(cache=True, inline="always")
def compact(sc, q, start):  # pragma: no cover - compiled
    """Drop started jobs from the queue, keeping its order."""
    w = sc[QS]
    for k in range(sc[QS], sc[QE]):
        j = q[k]
        if start[j] < 0:
            q[w] = j
            w += 1
    sc[QE] = w


@nb.njit(cache=True, inline="always")
def any_fits(sc, q, nodes):  # pragma: no cover - compiled
    """Whether some waiting job fits in the free nodes."""
    for k in range(sc[QS], sc[QE]):
        if nodes[q[k]] <= sc[FREE]:
            return True
    return False
