"""The environment's observation: a fixed window of queue slots plus one row of machine features.

It is built in one compiled call (RLScheduler's environment spent about 95% of its step time here).
Row ``k < slots`` describes the ``k``-th waiting job in arrival order; the last row describes the machine. Every
feature lies in ``[0, 1]``; times are log-scaled against the workload's longest walltime.

Three versions: ``v0`` has the 8 columns of :data:`JOB_FEATURES` and :data:`CLUSTER_FEATURES`; ``v1`` adds the 4 of
:data:`JOB_FEATURES_V1` and :data:`CLUSTER_FEATURES_V1`, the information the history-based references use: each job's
runtime prediction and its user's recent accuracy, the reservation EASY holds and what may start around it, and
when the running jobs release their nodes (``docs/definitions.md`` defines each). ``v2`` needs the learned runtime
predictor (:mod:`hpcgym.sim.learned`), whose estimate is then v1's ``predicted`` column, and adds the 2 of
:data:`JOB_FEATURES_V2` and :data:`CLUSTER_FEATURES_V2`: how widely the job's user's recent runtimes spread, and
how often that user asked for this job's walltime (what tells a reliable prediction from a guess).

:class:`Scales` holds how times are scaled, and the clock of the time of day. :class:`Observer` makes the builder
the hook of step mode (:class:`hpcgym.sim.simulator.StepHook`): the compiled call that advances a simulation, or a
batch of them, also builds its observation.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from hpcgym.sim import actions, learned, loop
from hpcgym.sim.actions import HOLD_CHOICE
from hpcgym.sim.backfill import NONE, shadow
from hpcgym.sim.state import ACTION, EXTRA, FREE, LAST_HEAD, NEXT, NODES, PK, QE, QS, RN, SHADOW, T

#: Waits are scaled against this many times the time scale.
WAIT_SCALE = 10.0

JOB_FEATURES = (
    "present",  # 1 for a job, 0 for padding
    "wait",  # log1p(now - submit) / log1p(wait scale)
    "walltime",  # log1p(walltime) / log1p(time scale)
    "nodes",  # nodes / machine nodes
    "fits_now",  # 1 if the job fits in the free nodes now
    "area",  # log1p(walltime * nodes) / log1p(time scale * machine nodes)
    "wait_for_nodes",  # log1p(time until enough nodes are free, by estimates) / log1p(time scale)
    "position",  # arrival position in the queue / slots
)
CLUSTER_FEATURES = (
    "free_nodes",  # free nodes / machine nodes
    "queue_length",  # waiting jobs / slots, capped at 1 (1: some jobs are not visible)
    "next_end",  # log1p(time to the first estimated end of a running job) / log1p(time scale)
    "mean_end",  # log1p(mean time to the running jobs' estimated ends) / log1p(time scale)
    "last_end",  # log1p(time to the last estimated end) / log1p(time scale)
    "progress",  # jobs finished / jobs in the window
    "time_of_day",  # seconds since midnight (trace clock) / 86400
    "marker",  # always 1: tells the cluster row from job rows
)
JOB_FEATURES_V1 = JOB_FEATURES + (
    "predicted",  # log1p(the job's estimate: its runtime prediction, or the walltime) / log1p(time scale)
    "user_accuracy",  # mean of runtime / walltime over its user's jobs the predictor reads (1 with none)
    "user_history",  # how many of those jobs finished / the predictor's k (0 without a history predictor)
    "backfill_ok",  # 1 if it fits now and starting it would not delay the reservation (EASY's rule (a) or (b))
)
CLUSTER_FEATURES_V1 = CLUSTER_FEATURES + (
    "shadow",  # log1p(time to the reservation's shadow time) / log1p(time scale); 0 without one
    # (the reservation: EASY's, for the oldest waiting job that does not fit now)
    "extra_nodes",  # the reservation's extra nodes / machine nodes; 0 when none
    "half_free",  # log1p(time until half the machine is free, by estimates) / log1p(time scale)
    "next_release",  # nodes the next estimated end frees / machine nodes
)
JOB_FEATURES_V2 = JOB_FEATURES_V1 + (
    "user_spread",  # (log1p(longest) - log1p(shortest) runtime of the user's last K finished jobs) / log1p(time scale)
    "same_request",  # share of the user's last K finished jobs that asked for this job's walltime (0 with none)
)
CLUSTER_FEATURES_V2 = CLUSTER_FEATURES_V1 + (
    "learned_running",  # share of the running jobs whose estimate is still their learned prediction (not expired)
    "known_users",  # share of the visible jobs whose user has a finished job (0 with none visible)
)
N_FEATURES = len(JOB_FEATURES)
N_FEATURES_V1 = len(JOB_FEATURES_V1)
N_FEATURES_V2 = len(JOB_FEATURES_V2)
#: features per row, by observation version
WIDTH = {"v0": N_FEATURES, "v1": N_FEATURES_V1, "v2": N_FEATURES_V2}
#: the version numbers the compiled builders take
LEVEL = {"v0": 0, "v1": 1, "v2": 2}
PRESENT = JOB_FEATURES.index("present")  #: the column that tells a job row from padding (agents read it)
assert len(CLUSTER_FEATURES) == N_FEATURES and len(CLUSTER_FEATURES_V1) == N_FEATURES_V1
assert len(CLUSTER_FEATURES_V2) == N_FEATURES_V2


class Scales(NamedTuple):
    """How the observation scales times (an environment's :attr:`~hpcgym.env.SchedulingEnv.scales`).

    Times are ``log1p(x) * inv`` against ``time_scale`` seconds (a time of ``time_scale`` maps to 1), waits against
    :data:`WAIT_SCALE` times it, areas against ``time_scale`` x the machine's nodes. The time of day is read on the
    trace's clock, which is ``clock`` at the current window's time 0.

    Attributes:
        time_scale: seconds that the log-scaled time features map to 1.
        inv_wait: ``1 / log1p(WAIT_SCALE * time_scale)``.
        inv_time: ``1 / log1p(time_scale)``.
        inv_area: ``1 / log1p(time_scale * machine nodes)``.
        clock: the trace clock (Unix seconds) at the current window's time 0 (0 when the trace does not know it).
    """

    time_scale: float
    inv_wait: float
    inv_time: float
    inv_area: float
    clock: int = 0

    @classmethod
    def of(cls, time_scale: float, machine_nodes: int, clock: int = 0) -> Scales:
        """The scales of ``time_scale`` seconds on a machine of ``machine_nodes`` nodes."""
        if not (math.isfinite(time_scale) and time_scale > 0):
            raise ValueError(f"time_scale must be a positive number of seconds, not {time_scale!r}")
        return cls(float(time_scale), float(1.0 / np.log1p(WAIT_SCALE * time_scale)),
                   float(1.0 / np.log1p(time_scale)), float(1.0 / np.log1p(time_scale * machine_nodes)), int(clock))

    def at(self, clock: int) -> Scales:
        """The same scales for a window whose time 0 is ``clock`` on the trace's clock."""
        return self._replace(clock=int(clock))


@nb.njit(cache=True)
def _log_norm(x, inv_log_scale):  # pragma: no cover - compiled
    v = math.log1p(max(x, 0.0)) * inv_log_scale
    return 1.0 if v > 1.0 else v


@nb.njit(cache=True)
def build(obs, mask, queue, now, free, total, submit, wall, nodes, running, ends, finished, clock0,
          inv_wait, inv_time, inv_area):  # pragma: no cover - compiled
    """Fill ``obs`` (slots + 1, features) and ``mask`` (slots) in place."""
    slots = obs.shape[0] - 1
    obs[:] = 0.0
    mask[:] = False
    k_max = min(len(queue), slots)
    for k in range(k_max):
        j = queue[k]
        obs[k, 0] = 1.0
        obs[k, 1] = _log_norm(now - submit[j], inv_wait)
        obs[k, 2] = _log_norm(wall[j], inv_time)
        obs[k, 3] = nodes[j] / total
        obs[k, 4] = 1.0 if nodes[j] <= free else 0.0
        obs[k, 5] = _log_norm(wall[j] * nodes[j], inv_area)
        avail = free
        delay = 0
        if nodes[j] > free:
            for m in range(len(running)):
                avail += nodes[running[m]]
                if avail >= nodes[j]:
                    delay = max(ends[m] - now, 0)
                    break
        obs[k, 6] = _log_norm(delay, inv_time)
        obs[k, 7] = k / slots
        mask[k] = True
    c = slots
    obs[c, 0] = free / total
    obs[c, 1] = min(len(queue) / slots, 1.0)
    if len(ends) > 0:
        total_left = 0.0
        for m in range(len(ends)):
            total_left += max(ends[m] - now, 0)
        obs[c, 2] = _log_norm(ends[0] - now, inv_time)
        obs[c, 3] = _log_norm(total_left / len(ends), inv_time)
        obs[c, 4] = _log_norm(ends[len(ends) - 1] - now, inv_time)
    obs[c, 5] = finished / len(submit)
    obs[c, 6] = ((clock0 + now) % 86400) / 86400.0
    obs[c, 7] = 1.0


@nb.njit(cache=True)
def build_state(obs, mask, jobs, st, scales):  # pragma: no cover - compiled
    """:func:`build` from a step-mode simulation's structures (:mod:`hpcgym.sim.state`; plain tuples work too).

    ``scales`` is a :class:`Scales` as a plain tuple (numba types a named tuple slowly at each call from Python).
    """
    _, inv_wait, inv_time, inv_area, clock0 = scales
    submit, nodes, limit = jobs[0], jobs[3], jobs[5]  # the walltime columns show the request, not a prediction
    sc, begin, q, rs = st[0], st[1], st[4], st[7]
    n = len(begin)
    waiting = sc[QE] - sc[QS]
    live = rs[:sc[RN]]
    build(obs, mask, q[sc[QS]:sc[QE]], sc[T], sc[FREE], sc[NODES], submit, limit, nodes, live % n, live // n,
          sc[NEXT] - waiting - sc[RN], clock0, inv_wait, inv_time, inv_area)


@nb.njit(cache=True)
def _user_accuracy(j, hist, hcount, user, hold, limit, k):  # pragma: no cover - compiled
    """(mean runtime / walltime of ``j``'s user's last ``k`` finished jobs, or 1; their count / k, or 0)."""
    u = user[j]
    if k == 0 or u < 0 or hcount[u] == 0:
        return 1.0, 0.0
    m = min(hcount[u], k)
    total = 0.0
    for i in range(m):
        f = hist[u * k + i]
        total += hold[f] / limit[f]
    return total / m, m / k


@nb.njit(cache=True)
def _reservation(sc, begin, queue, rs, nodes, mode):  # pragma: no cover - compiled
    """(the reserved job or -1, its shadow time, its extra nodes) as the ``v1`` columns describe them.

    EASY's reservation for the oldest waiting job that does not fit now; in guarded mode, the one the engine holds
    for the head of the pass (the job every guarded choice protects).
    """
    now = sc[T]
    if mode == NONE:
        return -1, now, 0
    if sc[ACTION] == actions.GUARDED:
        h = sc[LAST_HEAD]
        if h >= 0 and begin[h] < 0:
            return h, sc[SHADOW], sc[EXTRA]
        return -1, now, 0
    for j in queue:
        if nodes[j] > sc[FREE]:
            when, extra = shadow(j, now, sc, rs, nodes, len(begin))
            return j, when, extra
    return -1, now, 0


@nb.njit(cache=True)
def build_v1(obs, mask, jobs, st, mode, inv_time):  # pragma: no cover - compiled
    """Fill the ``v1`` columns (after :func:`build_state` filled the ``v0`` ones)."""
    _, hold, wall, nodes, _, limit, user, _ = jobs
    sc, begin, _, _, q, _, _, rs, _, _, hist, hcount, _ = st
    slots = obs.shape[0] - 1
    n = len(begin)
    now, free, total = sc[T], sc[FREE], sc[NODES]
    queue = q[sc[QS]:sc[QE]]
    h, when, extra = _reservation(sc, begin, queue, rs, nodes, mode)
    held = h >= 0
    base = len(JOB_FEATURES)
    for k in range(min(len(queue), slots)):
        j = queue[k]
        obs[k, base] = _log_norm(wall[j], inv_time)
        obs[k, base + 1], obs[k, base + 2] = _user_accuracy(j, hist, hcount, user, hold, limit, sc[PK])
        fits = nodes[j] <= free
        if held:
            fits = fits and j != h and (now + wall[j] <= when or nodes[j] <= extra)
        obs[k, base + 3] = 1.0 if fits else 0.0
    c = slots
    if held:
        obs[c, base] = _log_norm(when - now, inv_time)
        obs[c, base + 1] = extra / total
    avail = free
    live = rs[:sc[RN]]
    for m in range(len(live)):
        if avail * 2 >= total:
            break
        avail += nodes[live[m] % n]
        if avail * 2 >= total:
            obs[c, base + 2] = _log_norm(live[m] // n - now, inv_time)
    if len(live) > 0:
        obs[c, base + 3] = nodes[live[0] % n] / total


@nb.njit(cache=True)
def build_v2(obs, jobs, st, inv_time):  # pragma: no cover - compiled
    """Fill the ``v2`` columns (after :func:`build_v1`); the history ring is the learned predictor's."""
    _, hold, wall, nodes, _, limit, user, _ = jobs
    sc, begin, _, _, q, _, _, rs, _, _, hist, hcount, _ = st
    slots = obs.shape[0] - 1
    queue = q[sc[QS]:sc[QE]]
    base = N_FEATURES_V1
    visible = min(len(queue), slots)
    known = 0
    for k in range(visible):
        _, m, _, longest, shortest, _, _, same_count = learned.ring_stats(queue[k], hist, hcount, user, hold, limit)
        if m > 0:
            known += 1
            obs[k, base] = min((math.log1p(longest) - math.log1p(shortest)) * inv_time, 1.0)
            obs[k, base + 1] = same_count / m
    n = len(begin)
    live = rs[:sc[RN]]
    kept = 0
    for i in range(len(live)):
        j = live[i] % n
        kept += wall[j] < limit[j]
    c = slots
    obs[c, base] = kept / len(live) if len(live) > 0 else 0.0
    obs[c, base + 1] = known / visible if visible > 0 else 0.0


@nb.njit(cache=True)
def action_mask(mask, jobs, st):  # pragma: no cover - compiled
    """Narrow ``mask`` (the slots that hold a job) to the choices the action mode allows (:mod:`hpcgym.sim.actions`).

    Guarded: the jobs that may start without delaying the reservation. Hold: the due jobs if one fits, else every
    job and the hold (the extra last entry of ``mask``).
    """
    sc, begin, q, held = st[0], st[1], st[4], st[12]
    wall, nodes = jobs[2], jobs[3]
    code = sc[ACTION]
    if code == actions.PICK:
        return
    queue = q[sc[QS]:sc[QE]]
    visible = min(len(queue), len(mask) - (1 if code == actions.HOLD else 0))
    if code == actions.GUARDED:
        for k in range(visible):
            mask[k] = actions.eligible(queue[k], sc[T], sc, begin, wall, nodes)
        return
    any_due = False
    for k in range(visible):
        any_due = any_due or actions.due(queue[k], sc, held, nodes)
    if any_due:
        for k in range(visible):
            mask[k] = actions.due(queue[k], sc, held, nodes)
    mask[len(mask) - 1] = not any_due


@nb.njit(cache=True)
def observe_step(jobs, st, code, mode, chosen, obs, mask, scales, level):  # pragma: no cover - compiled
    """Step mode with the observation as its hook: apply ``chosen``, run to the next decision, build the observation.

    One compiled call per decision (each crossing from Python costs the typing of its arguments): the
    :class:`Observer`'s ``step`` (:func:`hpcgym.sim.loop.advance` with ``external``). ``scales``: a :class:`Scales`
    as a plain tuple; ``level``: 1 also fills the ``v1`` columns, 2 the ``v2`` ones too. Returns the engine's status
    (:data:`hpcgym.sim.loop.DECIDE` or ``DONE``).
    """
    status = loop.advance(jobs, st, code, mode, chosen, True)
    build_state(obs, mask, jobs, st, scales)
    if status == loop.DECIDE:
        action_mask(mask, jobs, st)
    if level >= 1:
        build_v1(obs, mask, jobs, st, mode, scales[2])
    if level >= 2:
        build_v2(obs, jobs, st, scales[2])
    return status


@nb.njit(cache=True)
def observe_rows(slots, lengths, status, jobs, st, code, mode, obs, mask, scales, clocks,
                 level):  # pragma: no cover - compiled
    """:func:`observe_step` for each row ``i`` of a batch that is not ``DONE`` (the :class:`Observer`'s ``rows``).

    Row ``i`` chooses the job in slot ``slots[i]`` of its queue (the slot after the last: a hold) and runs on the
    first ``lengths[i]`` entries of its rows of ``jobs`` and ``st`` (the batch's 2-D arrays as plain tuples); its
    window's time 0 is ``clocks[i]`` on the trace's clock.
    """
    for i in range(len(slots)):
        if status[i] == loop.DONE:  # a pinned window that needed no decision: it ends now
            continue
        # Row i's first n jobs, written out (hpcgym.sim.state.row then prefix): a helper that took the batch's
        # tuples would cost numba a reference count per array at every row.
        n = lengths[i]
        submit, hold, wall, nodes, key, limit, user, model = jobs
        sc, start, first, res, q, cand, heap, rs, pt, pu, hist, hcount, held = st
        ji = (submit[i, :n], hold[i, :n], wall[i, :n], nodes[i, :n], key[i, :n], limit[i, :n], user[i, :n], model[i])
        si = (sc[i], start[i, :n], first[i, :n], res[i], q[i, :n + 1], cand[i, :n], heap[i, :2 * n], rs[i, :n], pt[i],
              pu[i], hist[i], hcount[i], held[i, :n])
        chosen = HOLD_CHOICE if slots[i] == obs.shape[1] - 1 else q[i, sc[i, QS] + slots[i]]
        row_scales = (scales[0], scales[1], scales[2], scales[3], clocks[i])
        status[i] = observe_step(ji, si, code, mode, chosen, obs[i], mask[i], row_scales, level)


class Observer:
    """The observation as the hook of step mode (:class:`hpcgym.sim.simulator.StepHook`).

    A simulation with this hook builds its observation in the compiled call that advances it, into ``obs`` and
    ``mask`` (filled in place).

    Args:
        obs: ``(slots + 1, width)`` float32 for one simulation, or ``(N, slots + 1, width)`` for a batch of N.
        mask: ``(actions,)`` or ``(N, actions)`` bool.
        scales: the :class:`Scales` (a batch reads its clock from ``clocks`` instead).
        features: ``"v0"``, ``"v1"`` or ``"v2"`` (:data:`WIDTH`).
        clocks: a batch only: each row's window clock (int64, N).
    """

    step = staticmethod(observe_step)
    rows = staticmethod(observe_rows)

    def __init__(self, obs: np.ndarray, mask: np.ndarray, scales: Scales, features: str = "v0",
                 clocks: np.ndarray | None = None):
        self.obs, self.mask, self.level, self.clocks = obs, mask, LEVEL[features], clocks
        self.scales = scales

    @property
    def scales(self) -> Scales:
        """The scales the observation is built with (set it for each window: its clock changes)."""
        return self._scales

    @scales.setter
    def scales(self, scales: Scales) -> None:
        self._scales = scales
        # The compiled calls' extra arguments, built once per window: plain tuples, not named ones.
        if self.clocks is None:
            self.args = (self.obs, self.mask, tuple(scales), self.level)
        else:
            self.args = (self.obs, self.mask, tuple(scales), self.clocks, self.level)
