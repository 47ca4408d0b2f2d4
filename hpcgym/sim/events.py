"""The events: a job starts, jobs end, jobs arrive, and time jumps to the next of them.

:func:`next_event` is the only place that works out the next event time. At one timestamp it releases every job
that ends, then enqueues every job that arrives, and opens the timestamp's scheduling pass (the ``OPEN`` slot);
what the pass does is up to :func:`hpcgym.sim.loop.advance`.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from hpcgym.sim.policy import priority
from hpcgym.sim.predict import WALLTIME, predict, remember
from hpcgym.sim.queue import enqueue, heap_pop, heap_push, sorted_insert, sorted_remove
from hpcgym.sim.state import (
    ARRIVED,
    BLOCKED,
    ENDED,
    EXPIRED,
    FREE,
    HN,
    NEW_HEAD,
    NEXT,
    OPEN,
    PRED,
    QE,
    QS,
    RN,
    WAKE,
    T,
    borrowing,
)

NEVER = np.iinfo(np.int64).max


@nb.njit(cache=True, inline="always")
def start(j, t, sc, begin, heap, rs, hold, wall, nodes):  # pragma: no cover - compiled
    """Start job ``j`` at ``t``."""
    n = len(begin)
    begin[j] = t
    sc[FREE] -= nodes[j]
    sc[HN] = heap_push(heap, sc[HN], (t + hold[j]) * n + j)
    sc[RN] = sorted_insert(rs, sc[RN], (t + wall[j]) * n + j)
    expire_later(j, t, sc, heap, hold, wall, n)


@nb.njit(cache=True, inline="always")
def expire_later(j, t, sc, heap, hold, wall, n):  # pragma: no cover - compiled
    """With a predictor: if ``j`` (starting at ``t``) will outlive its estimate, push its expiry."""
    if sc[PRED] != WALLTIME and hold[j] > wall[j]:
        sc[HN] = heap_push(heap, sc[HN], (t + wall[j]) * n + j)


@nb.njit(cache=True, inline="always")
def release(t, sc, heap, rs, begin, ended, hold, wall, nodes, limit):  # pragma: no cover - compiled
    """Release every job that ends at ``t`` and correct every estimate that expires at ``t``.

    The released jobs go to ``ended[:k]`` (in the order they are released); the corrected ones to the end of
    ``ended``, last first (``ended[n - 1]``, ``ended[n - 2]``, ...). Returns (released, corrected).
    """
    n = len(begin)
    k = 0
    x = 0
    while sc[HN] > 0 and heap[0] // n == t:
        item, sc[HN] = heap_pop(heap, sc[HN])
        j = item % n
        if sc[PRED] != WALLTIME and t < begin[j] + hold[j]:  # an expiry: back to the walltime (hpcgym.sim.predict)
            if sc[RN] > 0:  # conservative keeps no estimated ends (its profile has them)
                sc[RN] = sorted_remove(rs, sc[RN], (begin[j] + wall[j]) * n + j)
                sc[RN] = sorted_insert(rs, sc[RN], (begin[j] + limit[j]) * n + j)
            wall[j] = limit[j]
            x += 1
            ended[n - x] = j
            continue
        sc[FREE] += nodes[j]
        if sc[RN] > 0:
            sc[RN] = sorted_remove(rs, sc[RN], (begin[j] + wall[j]) * n + j)
        ended[k] = j
        k += 1
    return k, x


@nb.njit(cache=True, inline="always")
def enqueue_arrivals(t, sc, q, key, submit):  # pragma: no cover - compiled
    """Enqueue every job whose submit is ``t`` (from ``NEXT`` on), noting whether one went to the queue's head."""
    n = len(submit)
    i = sc[NEXT]
    new_head = 0
    while i < n and submit[i] == t:
        if enqueue(sc, q, key, i) == 0:
            new_head = 1
        i += 1
    sc[NEXT] = i
    sc[NEW_HEAD] = new_head


# next_event has as few arguments as it can: each one costs at every event (about 2% of a whole-trace run per
# array). With a predictor, the run loop calls predict_arrivals after it for the history and the arrivals.
@borrowing  # called once per event: it must not pay a reference count per array (see hpcgym.sim.state)
def next_event(sc, q, heap, rs, begin, cand, submit, hold, wall, nodes, key, limit):  # pragma: no cover - compiled
    """Jump to the next event: release and correct (into ``cand``), enqueue, open the pass. False when all is done.

    With a predictor it leaves the arrivals to :func:`predict_arrivals`.
    """
    n = len(submit)
    i = sc[NEXT]
    if i >= n and sc[HN] == 0 and sc[WAKE] == 0:
        return False
    t = submit[i] if i < n else NEVER
    if sc[HN] > 0 and heap[0] // n < t:
        t = heap[0] // n
    if 0 < sc[WAKE] < t:  # conservative: a reservation falls due (a correction can move one off the events)
        t = sc[WAKE]
    sc[T] = t
    sc[ENDED], sc[EXPIRED] = release(t, sc, heap, rs, begin, cand, hold, wall, nodes, limit)
    sc[BLOCKED] = sc[QE] > sc[QS]
    sc[ARRIVED] = i
    if sc[PRED] == WALLTIME:
        enqueue_arrivals(t, sc, q, key, submit)
    sc[OPEN] = 1
    return True


@borrowing
def predict_arrivals(code, sc, q, cand, begin, submit, hold, wall, nodes, key, limit, user, hist, hcount,
                     model):  # pragma: no cover - compiled
    """With a predictor, after :func:`next_event`: the history, then the arrivals with their estimates.

    The jobs released now join their users' history; each arriving job gets its estimate (in ``wall``) and its
    key from it (``code`` is the ordering policy's; the key it held until then is the policy's custom key, if any),
    and is enqueued.
    """
    for k in range(sc[ENDED]):
        remember(cand[k], sc, hist, hcount, user)
    t = sc[T]
    i = sc[NEXT]
    while i < len(submit) and submit[i] == t:
        wall[i] = predict(i, t, sc, hist, hcount, user, hold, limit, nodes, begin, model)
        key[i] = priority(code, 0, submit[i], wall[i], nodes[i], key[i])
        i += 1
    enqueue_arrivals(t, sc, q, key, submit)
