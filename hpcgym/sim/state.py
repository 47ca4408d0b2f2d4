"""The engine's data: two structures, the jobs it schedules and the state it changes.

Both are named tuples of numpy arrays, so that compiled code takes them as two arguments and reads fields by name,
and so that a vector environment can keep N of them as rows of 2-D arrays (:func:`allocate` with ``copies``).
Jobs are indices ``0..n-1`` in submit order; times are integer seconds. A job ``j`` ending at time ``e`` is stored
as the *composite* ``e * n + j``: sorting composites sorts by time, then by job index (submit order), so ties always
break the same way.

:class:`State` holds the scalars in one int64 array ``sc``, indexed by the slot constants below (compiled code
updates them in place); from Python, read them through its properties (:attr:`State.now`, :attr:`State.free`,
:attr:`State.queue`, ...).
"""

from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

# Slots of State.sc.
T = 0  #: the current time
FREE = 1  #: free nodes
QS, QE = 2, 3  #: the queue is q[QS:QE]
HN = 4  #: heap[:HN] holds the running jobs' ends and expiries (a min-heap: the next one first)
RN = 5  #: rs[:RN] holds the running jobs' estimated-end composites, sorted (for shadow times)
NEXT = 6  #: the next job to arrive
OPEN = 7  #: 1 while the current timestamp's scheduling pass is open
SHADOW, EXTRA = 8, 9  #: EASY: the blocked head's shadow time and the extra nodes left for backfilling
LAST_HEAD = 10  #: the last blocked head (rlscheduler keeps its shadow time while the head stays)
ARRIVED = 11  #: the first job that arrived at the current timestamp (jobs ARRIVED..NEXT-1 are new)
ENDED = 12  #: how many jobs ended at the current timestamp (their indices are cand[:ENDED])
NEW_HEAD = 13  #: 1 if an arrival went to the head of the queue at the current timestamp
BLOCKED = 14  #: 1 if jobs were waiting before the current timestamp's arrivals
APPEND = 15  #: 1: the queue is in arrival order; 0: it is kept sorted by (key, index)
PM = 16  #: conservative: pt[:PM], pu[:PM] is the profile of predicted node use
NODES = 17  #: the machine's nodes
PRED, PK = 18, 19  #: the runtime predictor's code and its k (hpcgym.sim.predict); PRED 0: the walltime, no history
ACTION = 20  #: step mode: what a choice means (hpcgym.sim.actions: pick, guarded, hold)
EXPIRED = 21  #: how many estimates expired at the current timestamp (their jobs end cand, last first)
SCAN = 22  #: batch mode: the code of EASY's backfill scan order when it is not the queue's, else -1
WAKE = 23  #: a pass is due then (0: none): conservative's earliest reservation, or the end of a hold
VISIBLE = 24  #: step mode: how many waiting jobs (in arrival order) the caller sees; 0: all
HOLD_LIMIT = 25  #: hold mode: the seconds of holds a job may be charged
HOLD_AT, HOLD_FREE = 26, 27  #: hold mode: when the current hold began (-1: none) and the free nodes then
N_SLOTS = 28
#: int64 slots per user after the history rings in ``State.hist``: the learned predictor's last estimate for the
#: user and what it depended on (:func:`hpcgym.sim.learned.estimate`).
MEMO = 5

#: Compile a hot helper that takes its arrays *borrowed*. Otherwise numba's runtime (NRT) increments and decrements
#: an atomic reference count of every array argument at each call, inlined or not: that was 40% of conservative
#: backfilling's time. Such a helper must not allocate, nor call a function that does (numba compiles the callees
#: with the caller's flags). numba compiles its own mergesort this way (numba/misc/mergesort.py).
borrowing = nb.njit(cache=True, _nrt=False)

_JOB_FIELDS = ("submit", "hold", "wall", "nodes", "key", "limit", "user", "model")
_STATE_FIELDS = ("sc", "start", "first", "res", "q", "cand", "heap", "rs", "pt", "pu", "hist", "hcount", "held")


class Jobs(namedtuple("Jobs", _JOB_FIELDS)):
    """The jobs of one simulation (read-only for the engine).

    Attributes:
        submit: int64 submit times, sorted.
        hold: int64 time each job keeps its nodes (``min(run, walltime)`` when killed at its walltime).
        wall: int64 estimates the scheduler sees: the walltimes, unless a runtime predictor replaces a job's at its
            arrival (and raises it back to the walltime when the job outlives it; :mod:`hpcgym.sim.predict`).
        nodes: int64 nodes per job.
        key: float64 static priority keys of the ordering policy (lower first; see
            :func:`hpcgym.sim.policy.static_keys`); a predictor re-keys a job at its arrival.
        limit: int64 walltimes as requested (the cap of predictions and the estimate after a correction).
        user: int64 user index ``0 .. users - 1`` of each job, -1 when unknown (the history predictors read).
        model: float64 ``(rows, 6)``: the learned predictor's packed trees (:mod:`hpcgym.sim.learned`); one row of
            zeros for the other predictors. Not indexed by job.
    """

    __slots__ = ()

    @property
    def n(self) -> int:
        """How many jobs."""
        return len(self.submit)


class State(namedtuple("State", _STATE_FIELDS)):
    """What the engine changes while it runs.

    Attributes:
        sc: int64 scalars, indexed by the slot constants of this module.
        start: each job's start time (-1 until it starts).
        first: each job's first reservation: the shadow time it got the first time it was the blocked head
            (EASY, rlscheduler) or its reservation on arrival (conservative); -1 where it had none.
        res: conservative: each job's current reservation.
        q: the queue (``q[QS:QE]``), one longer than the jobs.
        cand: scratch: backfill candidates, and the jobs that ended at the current timestamp.
        heap: actual-end composites of the running jobs, and the expiries of their estimates where a predictor
            under-estimated them (a binary min-heap; :mod:`hpcgym.sim.events`).
        rs: estimated-end composites of the running jobs (sorted).
        pt, pu: conservative: the profile's change points and the nodes in use from each.
        hist: with a history predictor: each user's last ``k`` finished jobs (a ring of ``k`` entries per user), then
            :data:`MEMO` slots per user (the learned predictor's memo).
        hcount: with a history predictor: how many jobs of each user have finished.
        held: hold mode: the seconds of holds each job has been charged (:mod:`hpcgym.sim.actions`).
    """

    __slots__ = ()

    @property
    def now(self) -> int:
        """The current time."""
        return int(self.sc[T])

    @property
    def free(self) -> int:
        """Free nodes now."""
        return int(self.sc[FREE])

    @property
    def waiting(self) -> int:
        """How many jobs wait."""
        return int(self.sc[QE] - self.sc[QS])

    @property
    def queue(self) -> np.ndarray:
        """The waiting jobs, in queue order (a view: copy it to keep it)."""
        return self.q[self.sc[QS]:self.sc[QE]]

    @property
    def running(self) -> np.ndarray:
        """The running jobs, by estimated end."""
        return self.rs[:self.sc[RN]] % len(self.start)

    @property
    def estimated_ends(self) -> np.ndarray:
        """Estimated end times of :attr:`running` (same order)."""
        return self.rs[:self.sc[RN]] // len(self.start)

    @property
    def finished(self) -> int:
        """How many jobs have finished: arrived, minus waiting, minus running."""
        return int(self.sc[NEXT] - self.waiting - self.sc[RN])


def allocate(capacity: int, copies: tuple[int, ...] = (), conservative: bool = False,
             history: int = 0, model_rows: int = 1) -> tuple[Jobs, State]:
    """Zeroed structures for ``capacity`` jobs, with leading dimensions ``copies`` (``(N,)`` for N rows).

    The conservative profile (``res``, ``pt``, ``pu``) gets room only when ``conservative`` is set, and the users'
    history (``hist``, ``hcount``) only for a history predictor of ``history`` entries per user (one user per job
    at most), and ``model_rows`` rows for a learned predictor's packed model.
    """
    c = max(int(capacity), 1)
    p = c if conservative else 1
    h = max(int(history), 1)
    u = c if history else 1

    def ints(size: int) -> np.ndarray:
        return np.zeros((*copies, size), np.int64)

    jobs = Jobs(ints(c), ints(c), ints(c), ints(c), np.zeros((*copies, c)), ints(c), ints(c),
                np.zeros((*copies, max(int(model_rows), 1), 6)))
    state = State(ints(N_SLOTS), ints(c), ints(c), ints(p), ints(c + 1), ints(c), ints(2 * c), ints(c),
                  ints(2 * p + 4), ints(2 * p + 4), ints(u * (h + MEMO)), ints(u), ints(c))
    return jobs, state


def row(structure: Jobs | State, i: int) -> Jobs | State:
    """Row ``i`` of a batch (views, not copies)."""
    return type(structure)(*(a[i] for a in structure))


def prefix(structure: Jobs | State, n: int) -> Jobs | State:
    """The first ``n`` jobs (views). ``q`` keeps ``n + 1`` entries, the scalars and the profile stay whole."""
    if isinstance(structure, Jobs):
        return Jobs(*(a[:n] for a in structure[:-1]), structure.model)
    s = structure
    return State(s.sc, s.start[:n], s.first[:n], s.res[:n], s.q[:n + 1], s.cand[:n], s.heap[:2 * n], s.rs[:n], s.pt,
                 s.pu, s.hist, s.hcount, s.held[:n])


def reset(state: State, total: int, append: bool, predictor: int = 0, k: int = 0, scan: int = -1) -> None:
    """An empty machine of ``total`` nodes at time 0, no job arrived yet (``append``: the queue in arrival order).

    ``predictor`` and ``k`` are the runtime predictor's code and its history length (:mod:`hpcgym.sim.predict`),
    ``scan`` the code of a backfill scan order of its own (batch mode; -1: the queue's).
    """
    clear(state.sc, state.start, state.first, state.res, state.pt, state.pu, state.hist, state.hcount, state.held,
          total, append, predictor, k, scan)


@nb.njit(cache=True)
def clear(sc, start, first, res, pt, pu, hist, hcount, held, total, append, predictor, k,
          scan):  # pragma: no cover - compiled
    """Reset the arrays of a :class:`State` in place (:func:`reset` and :func:`fresh` share it)."""
    sc[:] = 0
    sc[FREE], sc[NODES], sc[LAST_HEAD], sc[APPEND], sc[PM], sc[HOLD_AT] = total, total, -1, append, 1, -1
    sc[PRED], sc[PK], sc[SCAN] = predictor, k, scan
    start[:] = -1
    first[:] = -1
    res[:] = -1
    hcount[:] = 0
    hist[len(hist) - len(hcount) * MEMO:] = 0  # the memo (a ring entry is read only once its user's count covers it)
    held[:] = 0
    pt[0], pu[0] = 0, 0


@nb.njit(cache=True)
def fresh(n, total, append, conservative, predictor, k, users, scan):  # pragma: no cover - compiled
    """A new, reset :class:`State` for ``n`` jobs (compiled: batch runs allocate one per call).

    ``users`` and ``k`` size the history of a history predictor (1 each without one).
    """
    p = n if conservative else 1
    h = max(users, 1) * (max(k, 1) + MEMO)

    def ints(size):
        return np.empty(size, np.int64)

    st = State(ints(N_SLOTS), ints(n), ints(n), ints(p), ints(n + 1), ints(n), ints(2 * n), ints(n), ints(2 * p + 4),
               ints(2 * p + 4), ints(h), ints(max(users, 1)), ints(1))
    clear(st.sc, st.start, st.first, st.res, st.pt, st.pu, st.hist, st.hcount, st.held, total, append, predictor, k,
          scan)
    return st
