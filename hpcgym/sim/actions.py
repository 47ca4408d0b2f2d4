"""The step mode's action modes: what an agent's choice means, and when the engine asks for one.

Step mode (:func:`hpcgym.sim.loop.advance` with ``external``) asks the caller to choose at a scheduling pass. The
``ACTION`` slot of the state picks the meaning of a choice (``docs/simulation.md``, "Action modes"):

- :data:`PICK` (the default): the caller picks the head of the pass among the waiting jobs. A job that fits starts;
  one that does not becomes the blocked head (its reservation and the backfill scan follow, and the pass ends).
  Asked when two or more jobs wait and one fits.
- :data:`GUARDED`: the engine starts the ``order`` policy's heads while they fit and reserves for the first that
  does not, as EASY does; the caller then picks, one start at a time, which *backfill* candidate starts: only jobs
  that fit now and cannot delay the reservation (EASY's rule (a) or (b)) are offered, so EASY's promise to the
  head holds whatever the choice. Asked when two or more such jobs are among the first ``VISIBLE`` waiting jobs;
  otherwise the first eligible one in the policy's order starts.
- :data:`HOLD`: :data:`PICK`, plus a *hold* (the choice :data:`HOLD_CHOICE`): start nothing now and wait for the
  next event. Holds are bounded per job: every job that waits and fits when a hold begins is charged the hold's
  length, and a job charged ``HOLD_LIMIT`` seconds in all is *due*: while a due job fits, no hold is offered and
  only due jobs may be picked. A hold ends at the next event or when the first fitting job falls due, whichever is
  first, so no job is kept from starting by holds for more than ``HOLD_LIMIT`` seconds.
"""

from __future__ import annotations

import numba as nb

from hpcgym.sim.backfill import shadow
from hpcgym.sim.events import start
from hpcgym.sim.queue import compact, ordered
from hpcgym.sim.state import (
    EXTRA,
    FREE,
    HOLD_AT,
    HOLD_FREE,
    HOLD_LIMIT,
    LAST_HEAD,
    OPEN,
    QE,
    QS,
    SHADOW,
    VISIBLE,
    WAKE,
)

PICK, GUARDED, HOLD = range(3)
#: name -> code of the action modes (the ``ACTION`` slot).
ACTION_MODES = {"pick": PICK, "guarded": GUARDED, "hold": HOLD}
#: The choice that holds (hold mode); a job's row index otherwise.
HOLD_CHOICE = -3
#: What a chooser returns when the caller must choose (:data:`hpcgym.sim.loop.ASK` is the same value).
ASK = -2


@nb.njit(cache=True, inline="always")
def visible_limit(sc, q):  # pragma: no cover - compiled
    """The last job index the caller sees: the queue is in arrival (= index) order, and it sees ``VISIBLE`` of it."""
    waiting = sc[QE] - sc[QS]
    if sc[VISIBLE] <= 0 or waiting <= sc[VISIBLE]:
        return 1 << 62
    return q[sc[QS] + sc[VISIBLE] - 1]


# ---- guarded -----------------------------------------------------------------------------------------------------
@nb.njit(cache=True, inline="always")
def eligible(j, t, sc, begin, wall, nodes):  # pragma: no cover - compiled
    """Whether waiting job ``j`` may start now without delaying the reservation (guarded mode, EASY's rules)."""
    if begin[j] >= 0 or j == sc[LAST_HEAD] or nodes[j] > sc[FREE]:
        return False
    return t + wall[j] <= sc[SHADOW] or nodes[j] <= sc[EXTRA]


@nb.njit(cache=True, inline="always")
def guarded_start(j, t, sc, q, begin, heap, rs, hold, wall, nodes):  # pragma: no cover - compiled
    """Start backfill candidate ``j`` (eligible), using up extra nodes if it ends after the shadow time."""
    if t + wall[j] > sc[SHADOW]:
        sc[EXTRA] -= nodes[j]
    start(j, t, sc, begin, heap, rs, hold, wall, nodes)
    compact(sc, q, begin)


@nb.njit(cache=True, inline="always")
def guarded_choice(t, code, sc, q, cand, first, begin, heap, rs, submit, hold, wall, nodes,
                   key):  # pragma: no cover - compiled
    """Guarded mode's pass step: start the heads, reserve, then :data:`ASK`, or the backfill to start, or -1 (done).

    The reservation is recomputed at every step of the pass; it does not move while the pass starts eligible jobs
    (they end by the shadow time, or use extra nodes, which the recomputation no longer counts).
    """
    order = ordered(sc, q, code, t, submit, wall, nodes, key)
    k = 0
    while k < len(order) and nodes[order[k]] <= sc[FREE]:
        start(order[k], t, sc, begin, heap, rs, hold, wall, nodes)
        k += 1
    if k == len(order):
        compact(sc, q, begin)
        sc[OPEN] = 0
        return -1
    h = order[k]
    nc = len(order) - k - 1
    cand[:nc] = order[k + 1:]  # a copy: the order may be a view of the queue, which compact moves
    compact(sc, q, begin)
    sc[SHADOW], sc[EXTRA] = shadow(h, t, sc, rs, nodes, len(begin))
    sc[LAST_HEAD] = h
    if first[h] < 0:
        first[h] = sc[SHADOW]
    limit = visible_limit(sc, q)
    found, seen = -1, 0
    for m in range(nc):
        j = cand[m]
        if eligible(j, t, sc, begin, wall, nodes):
            if found < 0:
                found = j
            if j <= limit:
                seen += 1
    if found < 0:
        sc[OPEN] = 0
        return -1
    return ASK if seen >= 2 else found


# ---- hold --------------------------------------------------------------------------------------------------------
@nb.njit(cache=True, inline="always")
def due(j, sc, held, nodes):  # pragma: no cover - compiled
    """Whether waiting job ``j`` fits now and has used up its hold budget (it must not be held again)."""
    return nodes[j] <= sc[FREE] and held[j] >= sc[HOLD_LIMIT]


@nb.njit(cache=True, inline="always")
def hold_choice(sc, q, held, nodes):  # pragma: no cover - compiled
    """Hold mode's pass step: :data:`ASK`, or a due job to start (when the caller could not pick one), or -1."""
    waiting = sc[QE] - sc[QS]
    fits, found, seen = False, -1, 0
    limit = visible_limit(sc, q)
    for m in range(sc[QS], sc[QE]):
        j = q[m]
        if nodes[j] <= sc[FREE]:
            fits = True
            if due(j, sc, held, nodes):
                if found < 0:
                    found = j
                if j <= limit:
                    seen += 1
    if waiting == 0 or not fits:
        sc[OPEN] = 0
        return -1
    if waiting == 1:
        return q[sc[QS]]
    if found >= 0 and seen < 2:
        return found
    return ASK


@nb.njit(cache=True, inline="always")
def begin_hold(t, sc, q, held, nodes):  # pragma: no cover - compiled
    """Hold: end the pass, note who is held, and wake up when the first of them falls due."""
    wake = 1 << 62
    for m in range(sc[QS], sc[QE]):
        j = q[m]
        if nodes[j] <= sc[FREE]:
            wake = min(wake, t + sc[HOLD_LIMIT] - held[j])
    sc[HOLD_AT], sc[HOLD_FREE], sc[WAKE] = t, sc[FREE], wake
    sc[OPEN] = 0


@nb.njit(cache=True, inline="always")
def end_hold(t, sc, q, submit, held, nodes):  # pragma: no cover - compiled
    """At the first event after a hold: charge its length to every job that waited and fitted when it began."""
    t0 = sc[HOLD_AT]
    for m in range(sc[QS], sc[QE]):
        j = q[m]
        if submit[j] <= t0 and nodes[j] <= sc[HOLD_FREE]:
            held[j] += t - t0
    sc[HOLD_AT], sc[WAKE] = -1, 0
