"""EASY and rlscheduler backfilling: a reservation for the blocked head, and one scan of the others.

The head ``h`` that does not fit gets its *shadow time* (the earliest time enough nodes are free, from the running
jobs' estimated ends) and the *extra* nodes (those still free then after ``h`` starts). :func:`scan` then walks
the candidates once, in order, and starts each one that fits now and either ends by the shadow time or uses only
extra nodes (``docs/simulation.md``). ``rlscheduler`` reproduces RLScheduler's variant: candidates in FCFS order,
strict ``<`` at the shadow time, no extra-node rule, and the shadow time kept while the head stays the same.
"""

from __future__ import annotations

from typing import Literal, get_args

import numba as nb
import numpy as np

from hpcgym.sim.events import start
from hpcgym.sim.policy import FCFS
from hpcgym.sim.queue import by_scan_order, compact
from hpcgym.sim.state import ARRIVED, EXTRA, FREE, LAST_HEAD, NEXT, RN, SCAN, SHADOW

NONE, EASY, CONSERVATIVE, RLSCHEDULER = range(4)
#: A backfilling mode's name (the one spelling of them; :data:`BACKFILL_MODES` maps each to its engine code).
Backfill = Literal["none", "easy", "conservative", "rlscheduler"]
BACKFILL_MODES: dict[str, int] = dict(zip(get_args(Backfill), (NONE, EASY, CONSERVATIVE, RLSCHEDULER), strict=True))
#: The modes step mode (agents) can run: conservative backfilling reserves every job on arrival (no head to choose).
STEP_MODES = ("none", "easy", "rlscheduler")


@nb.njit(cache=True, inline="always")
def shadow(h, t, sc, rs, nodes, n):  # pragma: no cover - compiled
    """Shadow time and extra nodes for head ``h`` at ``t``, from the running jobs' estimated ends."""
    rn = sc[RN]
    avail = sc[FREE]
    m = 0
    when = t
    while m < rn:
        avail += nodes[rs[m] % n]
        m += 1
        if avail >= nodes[h]:
            when = max(rs[m - 1] // n, t)
            break
    while m < rn and rs[m] // n <= when:  # every job estimated to end by the shadow time
        avail += nodes[rs[m] % n]
        m += 1
    return when, avail - nodes[h]


@nb.njit(cache=True, inline="always")
def scan(nc, t, mode, sc, cand, begin, heap, rs, hold, wall, nodes):  # pragma: no cover - compiled
    """Scan ``cand[:nc]`` once, in order, starting those the mode allows; return whether any started."""
    started = False
    for m in range(nc):
        if sc[FREE] == 0:
            break
        j = cand[m]
        if nodes[j] > sc[FREE]:
            continue
        ends_by_shadow = t + wall[j] < sc[SHADOW] if mode == RLSCHEDULER else t + wall[j] <= sc[SHADOW]
        if not ends_by_shadow:
            if mode == RLSCHEDULER or nodes[j] > sc[EXTRA]:
                continue
            sc[EXTRA] -= nodes[j]
        start(j, t, sc, begin, heap, rs, hold, wall, nodes)
        started = True
    return started


@nb.njit(cache=True, inline="always")
def block(h, nc, t, code, mode, sc, first, cand, begin, heap, rs, hold, wall, nodes):  # pragma: no cover
    """Head ``h`` does not fit: reserve for it and scan the candidates ``cand[:nc]`` (in the policy's order)."""
    if mode == NONE:
        return
    if mode != RLSCHEDULER or h != sc[LAST_HEAD]:
        sc[SHADOW], sc[EXTRA] = shadow(h, t, sc, rs, nodes, len(begin))
        sc[LAST_HEAD] = h
    if first[h] < 0:
        first[h] = sc[SHADOW]
    if mode == RLSCHEDULER and code != FCFS:
        cand[:nc] = np.sort(cand[:nc])  # RLScheduler backfills in FCFS order
    scan(nc, t, mode, sc, cand, begin, heap, rs, hold, wall, nodes)


@nb.njit(cache=True, inline="always")
def arrivals(t, code, mode, sc, q, cand, begin, heap, rs, submit, hold, wall, nodes,
             key):  # pragma: no cover - compiled
    """The pass when nothing changed but arrivals (no release, same head, static order): scan only the new jobs."""
    i0, i1 = sc[ARRIVED], sc[NEXT]
    if mode == NONE or i1 == i0:
        return
    nc = i1 - i0
    cand[:nc] = np.arange(i0, i1)
    if mode == EASY and code != FCFS:  # in priority order; rlscheduler scans in FCFS order
        cand[:nc] = cand[:nc][np.argsort(key[i0:i1], kind="mergesort")]
    if mode == EASY and sc[SCAN] >= 0:  # a scan order of its own
        by_scan_order(cand, nc, sc[SCAN], submit, wall, nodes)
    if scan(nc, t, mode, sc, cand, begin, heap, rs, hold, wall, nodes):
        compact(sc, q, begin)
