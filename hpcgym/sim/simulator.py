"""Step-by-step simulation for agents: the event loop of :func:`hpcgym.sim.simulate`, with the head chosen outside.

At each decision the caller sees the waiting jobs (in arrival order) and picks one. If it fits, it starts and the
same pass continues; if not, it becomes the blocked head: with backfilling it gets a reservation and the other
jobs are scanned once in the order of ``order`` (a priority policy, FCFS by default), then time moves to the next
event. A heuristic that always picks its own head, with ``order`` set to itself, reproduces the batch schedule
exactly (the tests check this for every heuristic and every mode but conservative, which has no head).

>>> from hpcgym import traces
>>> sim = Simulator(256, backfill="easy")
>>> pending = sim.reset(traces.window(traces.load("lublin-256"), 64, rng=0))
>>> while pending:
...     pending = sim.choose(int(sim.queue[0]))  # always the oldest job: FCFS
>>> sim.done
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpcgym import metrics
from hpcgym.sim import actions, loop, predict
from hpcgym.sim.heuristics import FCFS as FCFS_ORDER
from hpcgym.sim.loop import Backfill
from hpcgym.sim.policy import PriorityPolicy, static_keys
from hpcgym.sim.predict import Predictor
from hpcgym.sim.state import ACTION, HOLD_LIMIT, VISIBLE, Jobs, State, allocate, prefix, reset, row
from hpcgym.sim.table import check, hold_times


def engine_jobs(submit: np.ndarray, hold: np.ndarray, walltime: np.ndarray, nodes: np.ndarray, keys: np.ndarray,
                user: np.ndarray | None, code: int, predictor: Predictor) -> tuple[Jobs, int]:
    """The engine's :class:`~hpcgym.sim.state.Jobs` of validated int64 columns, and how many users they have.

    Without a predictor the keys are the policy's static keys; with one, each job's key is computed at its
    arrival from its estimate, so the custom keys go in as they are. ``wall`` is a copy: a predictor writes to it.
    """
    if predictor.history and user is not None:
        users, n_users = predict.user_index(user)
    else:
        users, n_users = np.full(len(submit), -1, np.int64), 0
    walltime = np.asarray(walltime, np.int64)
    if predictor.code == predict.WALLTIME:
        key = static_keys(code, submit, walltime, nodes, keys)
    else:
        key = np.array(keys, np.float64)
    return Jobs(submit, hold, walltime.copy(), nodes, key, walltime, users), n_users


@dataclass
class Buffers:
    """The structures of one step-mode simulation, ``capacity`` jobs long.

    A :class:`Simulator` works on the first ``n`` jobs of them. Its own are allocated at :meth:`Simulator.load`;
    a vector environment passes rows of 2-D arrays instead (:meth:`row`), so that one compiled call can step
    every copy while each :class:`Simulator` still reads its own state.
    """

    jobs: Jobs
    state: State

    @classmethod
    def allocate(cls, capacity: int, copies: tuple[int, ...] = (), history: int = 0) -> Buffers:
        """Fresh arrays for ``capacity`` jobs, with leading dimensions ``copies`` (``(N,)`` for N copies).

        ``history``: the entries per user a history predictor keeps (0: none).
        """
        return cls(*allocate(capacity, copies, history=history))

    def row(self, i: int) -> Buffers:
        """Copy ``i`` of a batch (views, not copies)."""
        return Buffers(row(self.jobs, i), row(self.state, i))

    def prefix(self, n: int) -> Buffers:
        """The first ``n`` jobs (views)."""
        return Buffers(prefix(self.jobs, n), prefix(self.state, n))


class Simulator:
    """A machine of ``nodes`` nodes that an agent schedules one decision at a time.

    Args:
        nodes: machine nodes.
        backfill: ``"none"``, ``"easy"`` or ``"rlscheduler"`` (conservative has no head to choose).
        order: the priority order of the backfill scan (FCFS by default); in guarded mode also the order of the
            heads.
        kill_at_walltime: end jobs at their walltime.
        predictor: the runtime predictor whose estimates replace the walltimes in reservations, backfill checks
            and the scan order (:mod:`hpcgym.sim.predict`; default: the walltimes).
        action: what a choice means (:mod:`hpcgym.sim.actions`): ``"pick"`` (the head), ``"guarded"`` (a backfill
            that cannot delay the reservation; needs EASY) or ``"hold"`` (the head, or :meth:`defer`).
        visible: how many waiting jobs (in arrival order) the caller sees: guarded and hold mode decide alone when
            fewer than two allowed choices are among them; 0: all.
        hold_limit: hold mode: the seconds of holds a job may be charged (> 0).
    """

    def __init__(self, nodes: int, backfill: Backfill = "none", order: PriorityPolicy = FCFS_ORDER,
                 kill_at_walltime: bool = True, predictor: str | Predictor | None = None, action: str = "pick",
                 visible: int = 0, hold_limit: int = 0):
        if backfill not in loop.STEP_MODES:
            raise ValueError(f"step mode supports backfill {loop.STEP_MODES}, not {backfill!r} "
                             "(conservative reserves every job on arrival, so there is no head to choose)")
        if action not in actions.ACTION_MODES:
            raise ValueError(f"action must be one of {tuple(actions.ACTION_MODES)}, not {action!r}")
        if action == "guarded" and backfill != "easy":
            raise ValueError("action='guarded' chooses among EASY's backfill candidates: it needs backfill='easy'")
        if action == "hold" and not int(hold_limit) > 0:
            raise ValueError(f"action='hold' needs a positive hold_limit (seconds), not {hold_limit!r}")
        self.action, self.visible, self.hold_limit = action, int(visible), int(hold_limit)
        self.nodes = int(nodes)
        self.mode = loop.BACKFILL_MODES[backfill]
        self.backfill = backfill
        self.order = order
        self.kill_at_walltime = kill_at_walltime
        self.predictor = predict.get(predictor)
        self._status = loop.DONE

    def reset(self, jobs: pd.DataFrame) -> bool:
        """Load a job table (sorted, valid) and run to the first decision; return whether one is pending."""
        check(jobs, self.nodes, self.backfill, self.kill_at_walltime, self.predictor)
        pending = self.load(jobs["submit"].to_numpy(np.int64), jobs["walltime"].to_numpy(np.int64),
                            jobs["nodes"].to_numpy(np.int64), hold_times(jobs, self.kill_at_walltime),
                            self.order.keys(jobs), user=jobs["user"].to_numpy(np.int64))
        self.jobs = jobs
        return pending

    def load(self, submit: np.ndarray, walltime: np.ndarray, nodes: np.ndarray, hold: np.ndarray,
             keys: np.ndarray | None = None, buffers: Buffers | None = None, user: np.ndarray | None = None) -> bool:
        """Fast reset from validated int64 arrays (no checks; :meth:`reset` checks a job table first).

        ``buffers`` (at least ``len(submit)`` long) receives the state instead of fresh arrays; ``user`` holds the
        jobs' user ids (a history predictor reads them; -1 or ``None``: unknown).
        """
        n = len(submit)
        pred = self.predictor
        if buffers is None:
            buffers = Buffers.allocate(n, history=pred.k)
        elif len(buffers.jobs.submit) < n:
            raise ValueError(f"buffers hold {len(buffers.jobs.submit)} jobs, fewer than the {n} to load")
        b = self.buffers = buffers.prefix(n)
        self.jobs = None
        j, st = self._jobs, self._state = b.jobs, b.state
        if pred.history and len(st.hist) < n * pred.k:
            raise ValueError(f"buffers keep no history for the predictor {pred.name!r}: allocate them with "
                             f"history={pred.k}")
        self.arrays = tuple(j), tuple(st)  # plain tuples: numba types them faster than named ones at each call
        loaded, _ = engine_jobs(submit, hold, walltime, nodes, np.zeros(n) if keys is None else keys, user,
                                self.order.code, pred)
        for dst, src in zip(j, loaded, strict=True):
            dst[:] = src
        reset(st, self.nodes, append=True, predictor=pred.code, k=pred.k)
        st.sc[ACTION], st.sc[VISIBLE], st.sc[HOLD_LIMIT] = actions.ACTION_MODES[self.action], self.visible, \
            self.hold_limit
        self.submit, self.wall, self.job_nodes, self.hold, self.key, self.start = (
            j.submit, j.wall, j.nodes, j.hold, j.key, st.start)
        self.limit = j.limit
        self.user_ids = np.full(n, -1, np.int64) if user is None else np.asarray(user, np.int64)  # for baselines
        self.decisions = 0
        return self._run(-1)

    def _run(self, chosen: int) -> bool:
        self._status = loop.advance(*self.arrays, self.order.code, self.mode, chosen, True)
        return self._status == loop.DECIDE

    def sync(self, status: int, decisions: int) -> None:
        """Take the status and decision count after the buffers were stepped from outside (a vector env)."""
        self._status, self.decisions = status, decisions

    def choose(self, job: int) -> bool:
        """Pick waiting job ``job`` (a row index of the job table) as the head; return whether a decision is pending.

        Raises:
            ValueError: no decision is pending, or ``job`` is not waiting.
        """
        self.check_choice(job)
        self.decisions += 1
        return self._run(int(job))

    def defer(self) -> bool:
        """Hold mode: start nothing now (see :mod:`hpcgym.sim.actions`); return whether a decision is pending.

        Raises:
            ValueError: no decision is pending, the mode is not ``"hold"``, or a due job fits (it must start).
        """
        if self._status != loop.DECIDE or self.action != "hold":
            raise ValueError("defer() (a hold) needs a pending decision in action='hold' mode")
        if any(self.allowed(j) and self._state.held[j] >= self.hold_limit for j in self.queue):
            raise ValueError("a job that fits has used up its hold budget: it must start now (choose it)")
        self.decisions += 1
        return self._run(actions.HOLD_CHOICE)

    def allowed(self, job: int) -> bool:
        """Whether the pending decision may choose waiting job ``job`` under the action mode."""
        st, nodes = self._state, self.job_nodes
        if self.action == "guarded":
            return bool(actions.eligible(job, st.now, st.sc, st.start, self.wall, nodes))
        if self.action == "hold" and any(actions.due(j, st.sc, st.held, nodes) for j in self.queue):
            return bool(actions.due(job, st.sc, st.held, nodes))
        return True

    def check_choice(self, job: int) -> None:
        """Raise ``ValueError`` unless a decision is pending and ``job`` waits (what :meth:`choose` checks)."""
        if self._status != loop.DECIDE:
            raise ValueError("no decision is pending: the episode is done (call reset)")
        if not (0 <= job < len(self.start)) or self.start[job] >= 0 or self.submit[job] > self.now:
            raise ValueError(f"job {job} is not waiting; choose one of sim.queue ({len(self.queue)} jobs)")
        if not self.allowed(job):
            raise ValueError(f"job {job} is not a choice the {self.action!r} mode allows now "
                             "(guarded: it would delay the reservation; hold: a due job must start)")

    @property
    def state(self) -> State:
        """The engine's state (see :class:`hpcgym.sim.state.State` for its accessors)."""
        return self._state

    @property
    def now(self) -> int:
        """The current time."""
        return self._state.now

    @property
    def free(self) -> int:
        """Free nodes now."""
        return self._state.free

    @property
    def queue(self) -> np.ndarray:
        """Row indices of the waiting jobs, in arrival order (a view: copy it to keep it)."""
        return self._state.queue

    @property
    def running(self) -> np.ndarray:
        """Row indices of the running jobs, by estimated end."""
        return self._state.running

    def estimated_ends(self) -> np.ndarray:
        """Estimated end times of :attr:`running` (same order)."""
        return self._state.estimated_ends

    @property
    def finished(self) -> int:
        """How many jobs have finished: arrived, minus waiting, minus running."""
        return self._state.finished

    @property
    def done(self) -> bool:
        """Whether every job has started and finished."""
        return self._status == loop.DONE

    def records(self) -> pd.DataFrame:
        """Per-job records of the jobs started so far (all of them once :attr:`done`)."""
        started = self.start >= 0
        jobs = self.jobs
        if jobs is None:
            jobs = pd.DataFrame({"job_id": np.arange(1, len(self.start) + 1), "submit": self.submit,
                                 "walltime": self.limit, "nodes": self.job_nodes})
        return metrics.records(jobs.loc[started], self.start[started], self.hold[started])
