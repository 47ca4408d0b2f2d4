"""The events: a job starts, jobs end, jobs arrive, and time jumps to the next of them.

:func:`next_event` is the only place that works out the next event time. At one timestamp it releases every job
that ends, then enqueues every job that arrives, and opens the timestamp's scheduling pass (the ``OPEN`` slot);
what the pass does is up to :func:`hpcgym.sim.core.run`.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from hpcgym.sim.queue import enqueue, heap_pop, heap_push, sorted_insert, sorted_remove
from hpcgym.sim.state import ARRIVED, BLOCKED, ENDED, FREE, HN, NEW_HEAD, NEXT, OPEN, QE, QS, RN, T, borrowing

NEVER = np.iinfo(np.int64).max


@nb.njit(cache=True, inline="always")
def start(j, t, sc, begin, heap, rs, hold, wall, nodes):  # pragma: no cover - compiled
    """Start job ``j`` at ``t``."""
    n = len(begin)
    begin[j] = t
    sc[FREE] -= nodes[j]
    sc[HN] = heap_push(heap, sc[HN], (t + hold[j]) * n + j)
    sc[RN] = sorted_insert(rs, sc[RN], (t + wall[j]) * n + j)


@nb.njit(cache=True, inline="always")
def release(t, sc, heap, rs, begin, ended, wall, nodes):  # pragma: no cover - compiled
    """Release every job that ends at ``t``; write them to ``ended`` and return how many."""
    n = len(begin)
    k = 0
    while sc[HN] > 0 and heap[0] // n == t:
        item, sc[HN] = heap_pop(heap, sc[HN])
        j = item % n
        sc[FREE] += nodes[j]
        if sc[RN] > 0:  # conservative keeps no estimated ends (its profile has them)
            sc[RN] = sorted_remove(rs, sc[RN], (begin[j] + wall[j]) * n + j)
        ended[k] = j
        k += 1
    return k


@borrowing  # called once per event: it must not pay a reference count per array (see hpcgym.sim.state)
def next_event(sc, q, heap, rs, begin, cand, submit, wall, nodes, key):  # pragma: no cover - compiled
    """Jump to the next event: release (into ``cand``), enqueue, open the pass. False when nothing is left."""
    n = len(submit)
    i = sc[NEXT]
    if i >= n and sc[HN] == 0:
        return False
    t = submit[i] if i < n else NEVER
    if sc[HN] > 0 and heap[0] // n < t:
        t = heap[0] // n
    sc[T] = t
    sc[ENDED] = release(t, sc, heap, rs, begin, cand, wall, nodes)
    sc[BLOCKED] = sc[QE] > sc[QS]
    sc[ARRIVED] = i
    new_head = 0
    while i < n and submit[i] == t:
        if enqueue(sc, q, key, i) == 0:
            new_head = 1
        i += 1
    sc[NEXT] = i
    sc[NEW_HEAD] = new_head
    sc[OPEN] = 1
    return True
