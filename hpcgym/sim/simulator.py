"""Step-by-step simulation for agents: the event loop of :func:`hpcgym.sim.simulate`, with the head chosen outside.

At each decision the caller sees the waiting jobs (in arrival order) and picks one. If it fits, it starts and the
same pass continues; if not, it becomes the blocked head: with backfilling it gets a reservation and the other
jobs are scanned once in the order of ``order`` (a priority policy, FCFS by default), then time moves to the next
event. A heuristic that always picks its own head, with ``order`` set to itself, reproduces the batch schedule
exactly (the tests check this for every heuristic and every mode but conservative, which has no head).

This module is the one Python path into the compiled loop in step mode: :meth:`Simulator.advance` for one
simulation (:meth:`Simulator.choose` and :meth:`Simulator.defer` check a choice first), :meth:`Batch.choose` for the
rows of a batch. What else must happen when the loop stops (an environment builds its observation) is a
:class:`StepHook`, run inside the same compiled call.

>>> from hpcgym import traces
>>> sim = Simulator(256, backfill="easy")
>>> pending = sim.reset(traces.window(traces.load("lublin-256"), 64, rng=0))
>>> while pending:
...     pending = sim.choose(int(sim.queue[0]))  # always the oldest job: FCFS
>>> sim.done
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

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


class StepHook(Protocol):
    """What step mode runs when the loop stops, inside the compiled call that advanced it.

    ``step(jobs, st, code, mode, chosen, *args)`` applies the choice ``chosen`` to one simulation, runs it to its
    next decision (:func:`hpcgym.sim.loop.advance`), does the hook's work and returns the status
    (:data:`hpcgym.sim.loop.DECIDE` or ``DONE``). ``rows(slots, lengths, status, jobs, st, code, mode, *args)`` does
    the same for each row ``i`` of a batch that is not done, choosing the job in slot ``slots[i]`` of its queue
    (:class:`Batch`). Both are compiled: numba cannot cache a compiled function that takes another as an argument, so
    a hook brings its own calls of the loop. ``args`` are the hook's arguments, as plain tuples (numba types named
    ones slowly at each call). :class:`hpcgym.observation.Observer` is the environments' hook.
    """

    step: Callable[..., int]
    rows: Callable[..., None] | None
    args: tuple


class NoHook:
    """Step mode with nothing to do when the loop stops (one simulation only: no batch form)."""

    step = staticmethod(loop.advance)
    rows = None
    args = (True,)  # advance's ``external``: step mode


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
    return Jobs(submit, hold, walltime.copy(), nodes, key, walltime, users, predictor.arrays), n_users


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
    def allocate(cls, capacity: int, copies: tuple[int, ...] = (), history: int = 0,
                 model_rows: int = 1) -> Buffers:
        """Fresh arrays for ``capacity`` jobs, with leading dimensions ``copies`` (``(N,)`` for N copies).

        ``history``: the entries per user a history predictor keeps (0: none); ``model_rows``: the rows of a
        learned predictor's packed model.
        """
        return cls(*allocate(capacity, copies, history=history, model_rows=model_rows))

    @classmethod
    def for_predictor(cls, capacity: int, predictor: Predictor, copies: tuple[int, ...] = ()) -> Buffers:
        """Fresh arrays sized for ``predictor`` (its history and its model)."""
        return cls.allocate(capacity, copies, history=predictor.k, model_rows=len(predictor.arrays))

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
        hook: what runs, in the same compiled call, each time the loop stops (:class:`StepHook`; default: nothing).
    """

    def __init__(self, nodes: int, backfill: Backfill = "none", order: PriorityPolicy = FCFS_ORDER,
                 kill_at_walltime: bool = True, predictor: str | Predictor | None = None, action: str = "pick",
                 visible: int = 0, hold_limit: int = 0, hook: StepHook | None = None):
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
        self.hook: StepHook = NoHook() if hook is None else hook
        self.decisions = 0
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
            buffers = Buffers.for_predictor(n, pred)
        elif len(buffers.jobs.submit) < n:
            raise ValueError(f"buffers hold {len(buffers.jobs.submit)} jobs, fewer than the {n} to load")
        b = self.buffers = buffers.prefix(n)
        self.jobs = None
        j, st = self._jobs, self._state = b.jobs, b.state
        if pred.history and len(st.hist) < n * pred.k:
            raise ValueError(f"buffers keep no history for the predictor {pred.name!r}: allocate them with "
                             f"history={pred.k}")
        if j.model.shape != pred.arrays.shape:
            raise ValueError(f"buffers hold a model of shape {j.model.shape}, not the predictor {pred.name!r}'s "
                             f"{pred.arrays.shape}: allocate them with Buffers.for_predictor")
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
        """The compiled call, with the hook: apply ``chosen`` (-1: none) and run to the next decision."""
        hook = self.hook
        self._status = hook.step(*self.arrays, self.order.code, self.mode, chosen, *hook.args)
        return self._status == loop.DECIDE

    def advance(self, choice: int) -> bool:
        """Carry out ``choice`` unchecked, count the decision, run to the next one; return whether one is pending.

        ``choice``: a waiting job's row index, or :data:`hpcgym.sim.actions.HOLD_CHOICE` (hold mode). For callers
        that checked it already (an environment, against its action mask); others call :meth:`choose` or
        :meth:`defer`, which check it first.
        """
        self.decisions += 1
        return self._run(choice)

    def choose(self, job: int) -> bool:
        """Pick waiting job ``job`` (a row index of the job table) as the head; return whether a decision is pending.

        Raises:
            ValueError: no decision is pending, or ``job`` is not waiting.
        """
        self.check_choice(job)
        return self.advance(int(job))

    def defer(self) -> bool:
        """Hold mode: start nothing now (see :mod:`hpcgym.sim.actions`); return whether a decision is pending.

        Raises:
            ValueError: no decision is pending, the mode is not ``"hold"``, or a due job fits (it must start).
        """
        if self._status != loop.DECIDE or self.action != "hold":
            raise ValueError("defer() (a hold) needs a pending decision in action='hold' mode")
        if any(self.allowed(j) and self._state.held[j] >= self.hold_limit for j in self.queue):
            raise ValueError("a job that fits has used up its hold budget: it must start now (choose it)")
        return self.advance(actions.HOLD_CHOICE)

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


class Batch:
    """Simulators whose structures are the rows of one :class:`Buffers` batch, advanced in one compiled call.

    Each simulator loads its own windows (:meth:`Simulator.load` with its row as ``buffers``); :meth:`choose` then
    advances every row with a pending decision through the hook's ``rows``, and the simulators read their state from
    their rows as before.

    Args:
        sims: the simulators, row ``i`` for ``sims[i]`` (one order and backfill mode for all: the first's).
        buffers: the batch (:meth:`Buffers.allocate` with ``copies=(len(sims),)``).
        hook: the batch form of the simulators' hook (its ``rows`` and batch-shaped ``args``).
    """

    def __init__(self, sims: Sequence[Simulator], buffers: Buffers, hook: StepHook):
        self.sims, self.buffers, self.hook = list(sims), buffers, hook
        self.arrays = tuple(buffers.jobs), tuple(buffers.state)  # plain tuples: quicker to pass to numba
        self._args = (*self.arrays, self.sims[0].order.code, self.sims[0].mode)  # what every call passes first
        self.lengths = np.zeros(len(self.sims), np.int64)  #: jobs loaded in each row
        self.status = np.zeros(len(self.sims), np.int64)  #: each row's status (DECIDE or DONE)
        self.decisions = np.zeros(len(self.sims), np.int64)  #: each row's decisions this episode

    def loaded(self, i: int) -> None:
        """Take row ``i``'s new episode after its simulator loaded it."""
        sim = self.sims[i]
        self.lengths[i] = len(sim.submit)
        self.status[i] = loop.DONE if sim.done else loop.DECIDE
        self.decisions[i] = sim.decisions

    def choose(self, slots: np.ndarray) -> np.ndarray:
        """Carry out the choice in slot ``slots[i]`` of row ``i``'s queue (checked already) for every pending row.

        Slot ``slots`` (one after the visible ones) is a hold, in hold mode. Returns whether each row's episode is
        over: call :meth:`ended` for each row that ended before reading its simulator. A row whose episode was
        already over (a pinned window that needed no decision) ends now, whatever its slot.
        """
        status = self.status
        self.decisions += status != loop.DONE
        self.hook.rows(slots, self.lengths, status, *self._args, *self.hook.args)
        return status == loop.DONE

    def ended(self, i: int) -> Simulator:
        """Row ``i``'s simulator, told that its episode ended in the last :meth:`choose`."""
        sim = self.sims[i]
        sim._status, sim.decisions = loop.DONE, int(self.decisions[i])
        return sim
