"""The reference model of the simulator: a slow, literal SimPy implementation of ``docs/simulation.md``.

This module is the test oracle. It is written for clarity, not speed: every job arrival is a SimPy process, every
job's hold is a SimPy timeout, and every pass rebuilds what it needs from scratch (the queue order, the shadow
time, the conservative profile). The differential tests hold the fast engine to its start times.

Event ordering inside one timestamp ``t`` is made explicit with SimPy event priorities (lower runs first):

1. ``_RELEASE`` (SimPy's ``URGENT``): job ends;
2. ``_ARRIVAL`` (SimPy's ``NORMAL``): job submits, and the conservative reservation wake-ups;
3. ``_PASS`` (after both): the one scheduling pass at ``t``.

Every release, arrival or wake-up at ``t`` asks for a pass; the first request at ``t`` schedules it with the
``_PASS`` priority, so it runs once, after every release and arrival at ``t``.

Conservative backfilling also wakes the scheduler at every reservation time: a reservation may start at a time
at which no job ends or arrives (a compression can move the reservation that held a later job back), and the doc
promises that no job starts later than its first reservation. A wake-up with nothing to start is harmless: the
pass then neither compresses (no job ended) nor places (no job arrived).

Readings of the doc where its words allow more than one:

- EASY's extra nodes ``X`` are the nodes free *at* the shadow time: every running job estimated to end by ``S``
  counts, not only those the walk visited before it covered the head.
- Conservative compression re-places only the jobs queued before ``t`` (those that hold a reservation), one at a
  time in priority order, the others keeping theirs; the jobs that arrived at ``t`` are placed afterwards.
- rlscheduler keeps the shadow time while the blocked head (step 3) is the same job as at the previous pass that
  reached step 3, even if another job started as the head in between.

Runtime predictors (``hpcgym.sim.predict`` documents them; this module implements them again, independently): a
job's *estimate* is fixed when it arrives, from the runtimes of its user's jobs released before then (at the same
timestamp: the releases come first); every rule that reads ``r`` or an estimated end reads the estimate. A job that
outlives its estimate wakes the scheduler at ``start + estimate``; the pass there raises the estimate to the
walltime before anything else, and under conservative backfilling compresses (a reservation may then move later).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import simpy
from simpy.events import NORMAL, URGENT

POLICIES = ("fcfs", "sjf", "ljf", "saf", "wfp3", "unicep", "f1")
BACKFILLS = ("none", "easy", "conservative", "rlscheduler")
PREDICTORS = ("walltime", "last2", "median5", "exact", "learned")
#: How many of a user's finished jobs the learned predictor's features read.
LEARNED_HISTORY = 8

_RELEASE = URGENT
_ARRIVAL = NORMAL
_PASS = NORMAL + 1


def _unicep(w: int, r: int, n: int, s: int) -> float:
    lg = math.log2(n) if n != 1 else 1.0
    return -w / (lg * r)


def _wfp3(w: int, r: int, n: int, s: int) -> float:
    x = w / r
    return -(x * x * x) * n


_SCORES: dict[str, Callable[[int, int, int, int], float]] = {
    "fcfs": lambda w, r, n, s: float(s),
    "sjf": lambda w, r, n, s: float(r),
    "ljf": lambda w, r, n, s: -float(r),
    "saf": lambda w, r, n, s: float(r * n),
    "wfp3": _wfp3,
    "unicep": _unicep,
    "f1": lambda w, r, n, s: math.log10(r) * n + 870 * math.log10(max(s, 1)),
}


def priority_score(policy: str, t: int, submit: int, walltime: int, nodes: int) -> float:
    """Score of one queued job at pass time ``t`` (lower runs first), per the doc's table.

    Args:
        policy: one of :data:`POLICIES`.
        t: the pass time.
        submit: the job's submit time ``s``; the wait is ``w = t - s``.
        walltime: the job's walltime ``r``.
        nodes: the job's nodes ``n``.

    Returns:
        The score as a Python float.
    """
    return _SCORES[policy](t - submit, walltime, nodes, submit)


@dataclass(eq=False)
class _Job:
    """One job of the stream and its scheduling state."""

    row: int
    job_id: int
    submit: int
    run: int
    walltime: int
    nodes: int
    user: int = -1
    start: int = -1
    end: int = -1
    reservation: int | None = None
    estimate: int = 0  # what the scheduler believes the runtime is (set on arrival)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def predict_runtime(predictor: str, job: _Job, hold: int, past: list[tuple[int, int, int]],
                    learned: Callable[[list[float]], float] | None = None, walltimes: list[int] | None = None) -> int:
    """The estimate of ``job`` on arrival, from ``past``: its user's finished jobs as ``(end, row, hold)``.

    ``learned`` (the learned predictor only) maps a feature row to the log runtime; ``walltimes[row]`` is each
    job's walltime. Written from the definitions in the docstrings of ``hpcgym/sim/predict.py`` and
    ``hpcgym/sim/learned.py``, not from their code.
    """
    if predictor == "exact":
        return hold
    if predictor == "learned":
        assert learned is not None and walltimes is not None
        raw = learned(learned_features(job, sorted(past) if job.user >= 0 else [], walltimes))
        value = math.exp(raw)
        return job.walltime if value >= job.walltime else max(1, math.ceil(value))
    if predictor == "walltime" or job.user < 0 or not past:
        return job.walltime
    if predictor == "last2":
        recent = [h for _, _, h in sorted(past)[-2:]]
        guess = _ceil_div(sum(recent), len(recent))
    else:  # median5
        recent = sorted(h for _, _, h in sorted(past)[-5:])
        m = len(recent)
        guess = recent[m // 2] if m % 2 else _ceil_div(recent[m // 2 - 1] + recent[m // 2], 2)
    return max(1, min(job.walltime, guess))


def learned_features(job: _Job, past: list[tuple[int, int, int]], walltimes: list[int]) -> list[float]:
    """The learned predictor's features of ``job`` at its arrival; ``past`` sorted by (end, row), oldest first."""
    nan = float("nan")
    w, count = job.walltime, len(past)
    if count == 0:
        return [w, job.nodes, 0, nan, nan, nan, nan, nan, nan, nan, nan, nan, 0, nan]
    recent = past[-LEARNED_HISTORY:]
    holds = [h for _, _, h in recent]
    walls = [walltimes[row] for _, row, _ in recent]
    last_end = recent[-1][0]
    five = sorted(holds[-5:])
    middle = ((five[(len(five) - 1) // 2] + five[len(five) // 2]) / 2.0)
    ratio_sum = 0.0
    for h, r in zip(holds, walls, strict=True):
        ratio_sum += h / r
    same = [h for h, r in zip(holds, walls, strict=True) if r == w]
    ratio = holds[-1] / walls[-1]
    return [w, job.nodes, count, holds[-1], sum(holds[-2:]) / len(holds[-2:]), middle, max(holds), min(holds), ratio,
            ratio_sum / len(holds), ratio * w, same[-1] if same else nan, len(same), job.submit - last_end]


class _LateEvent(simpy.events.Event):
    """An already-triggered event processed at ``now + delay`` with an explicit SimPy priority.

    It is :class:`simpy.events.Timeout` with a priority argument (SimPy's own ``Timeout`` is always ``NORMAL``).
    """

    def __init__(self, env: simpy.Environment, delay: int, priority: int):
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, priority, delay)


class _ReferenceSim:
    """The state of one reference simulation and its SimPy processes."""

    def __init__(self, jobs: list[_Job], nodes: int, policy: str, backfill: str, kill_at_walltime: bool,
                 predictor: str = "walltime", scan: str | None = None,
                 learned: Callable[[list[float]], float] | None = None):
        self.predictor = predictor
        self.learned = learned
        self.scan = scan
        self.finished: dict[int, list[tuple[int, int, int]]] = {}  # user -> (end, row, hold) of finished jobs
        self.corrected_at = -1  # the last time an estimate was raised to the walltime
        self.env = simpy.Environment()
        self.jobs = jobs
        self.walltimes = [job.walltime for job in jobs]  # by row
        self.nodes = nodes
        self.free = nodes
        self.policy = policy
        self.backfill = backfill
        self.kill = kill_at_walltime
        self.queue: list[_Job] = []
        self.running: list[_Job] = []
        self.pass_at = -1  # the time of the last pass requested
        self.early_end_at = -1  # the last time a job ended before its estimated end
        self.rls_shadow: tuple[_Job, int] | None = None  # rlscheduler: (blocked head, its kept shadow time)

    # --- SimPy processes -------------------------------------------------------------------------------------

    def run(self) -> np.ndarray:
        """Run the simulation to the end; return the start times, aligned with the input rows."""
        for job in self.jobs:
            self.env.process(self._arrive(job))
        self.env.run()
        starts = np.array([job.start for job in self.jobs], dtype=np.int64)
        if (starts < 0).any() or self.queue or self.running:
            raise RuntimeError("reference model: some jobs never started or never ended")
        return starts

    def _hold_time(self, job: _Job) -> int:
        return min(job.run, job.walltime) if self.kill else job.run

    def _arrive(self, job: _Job) -> Generator[simpy.events.Event, None, None]:
        yield _LateEvent(self.env, job.submit, _ARRIVAL)
        job.estimate = predict_runtime(self.predictor, job, self._hold_time(job), self.finished.get(job.user, []),
                                       self.learned, self.walltimes)
        self.queue.append(job)
        self._request_pass()

    def _hold(self, job: _Job) -> Generator[simpy.events.Event, None, None]:
        hold = self._hold_time(job)
        if self.predictor != "walltime" and hold > job.estimate:  # it will outlive its estimate: look then
            self.env.process(self._wake(job.estimate))
        yield _LateEvent(self.env, hold, _RELEASE)
        self.running.remove(job)
        self.free += job.nodes
        job.end = self.env.now
        self.finished.setdefault(job.user, []).append((job.end, job.row, hold))
        if self.env.now < job.start + job.estimate:
            self.early_end_at = self.env.now
        self._request_pass()

    def _wake(self, delay: int) -> Generator[simpy.events.Event, None, None]:
        yield _LateEvent(self.env, delay, _ARRIVAL)
        self._request_pass()

    def _request_pass(self) -> None:
        if self.pass_at != self.env.now:
            self.pass_at = self.env.now
            self.env.process(self._pass())

    def _pass(self) -> Generator[simpy.events.Event, None, None]:
        yield _LateEvent(self.env, 0, _PASS)
        self._correct(self.env.now)
        if self.backfill == "conservative":
            self._conservative_pass(self.env.now)
        else:
            self._list_pass(self.env.now)

    # --- shared helpers --------------------------------------------------------------------------------------

    def _correct(self, t: int) -> None:
        """Raise to the walltime the estimate of every running job that has outlived it."""
        for job in self.running:
            if job.start + job.estimate <= t and job.estimate < job.walltime:
                job.estimate = job.walltime
                self.corrected_at = t

    def _start(self, job: _Job, t: int) -> None:
        if job.nodes > self.free:
            raise RuntimeError(f"reference model: job {job.job_id} started on nodes that are not free")
        self.queue.remove(job)
        self.running.append(job)
        self.free -= job.nodes
        job.start = t
        self.env.process(self._hold(job))

    def _priority_order(self, jobs: list[_Job], t: int) -> list[_Job]:
        def key(job: _Job) -> tuple[float, int, int, int]:
            return priority_score(self.policy, t, job.submit, job.estimate, job.nodes), job.submit, job.job_id, job.row

        return sorted(jobs, key=key)

    @staticmethod
    def _estimated_end(job: _Job, t: int) -> int:
        """``start + estimate``, or ``t`` for a job that runs past its estimate."""
        return max(job.start + job.estimate, t)

    def _shadow(self, head: _Job, t: int) -> tuple[int, int]:
        """The shadow time ``S`` and extra nodes ``X`` of a blocked head (EASY's walk).

        ``X`` counts the nodes free *at* ``S``: every running job estimated to end by ``S`` gives its nodes back,
        including those that tie with the job that completed the walk.
        """
        total = self.free
        for job in sorted(self.running, key=lambda j: (self._estimated_end(j, t), j.job_id, j.row)):
            total += job.nodes
            if total >= head.nodes:
                shadow = self._estimated_end(job, t)
                at_shadow = self.free + sum(j.nodes for j in self.running if self._estimated_end(j, t) <= shadow)
                return shadow, at_shadow - head.nodes
        raise RuntimeError("reference model: the running jobs never free enough nodes for the head")

    # --- none, easy, rlscheduler -----------------------------------------------------------------------------

    def _list_pass(self, t: int) -> None:
        queue = self._priority_order(self.queue, t)
        while queue and queue[0].nodes <= self.free:
            self._start(queue.pop(0), t)
        if not queue or self.backfill == "none":
            return
        if self.backfill == "easy":
            self._easy(queue, t)
        else:
            self._rlscheduler(queue, t)

    def _easy(self, queue: list[_Job], t: int) -> None:
        shadow, extra = self._shadow(queue[0], t)
        candidates = queue[1:]
        if self.scan is not None:  # a scan order of its own; ties keep the queue's order (sorted is stable)
            candidates = sorted(candidates, key=lambda j: priority_score(self.scan, t, j.submit, j.estimate, j.nodes))
        for job in candidates:
            if job.nodes > self.free:
                continue
            if t + job.estimate <= shadow:
                self._start(job, t)
            elif job.nodes <= extra:
                extra -= job.nodes
                self._start(job, t)

    def _rlscheduler(self, queue: list[_Job], t: int) -> None:
        head = queue[0]
        if self.rls_shadow is None or self.rls_shadow[0] is not head:
            self.rls_shadow = (head, self._shadow(head, t)[0])
        shadow = self.rls_shadow[1]
        for job in sorted(queue[1:], key=lambda j: (j.submit, j.job_id, j.row)):
            if job.nodes <= self.free and t + job.estimate < shadow:
                self._start(job, t)

    # --- conservative ----------------------------------------------------------------------------------------

    def _conservative_pass(self, t: int) -> None:
        if any(job.reservation is not None and job.reservation < t for job in self.queue):
            raise RuntimeError("reference model: a reservation passed without a scheduling pass")
        if self.early_end_at == t or self.corrected_at == t:
            for job in self._compression_order(t):
                old, job.reservation = job.reservation, None
                job.reservation = self._earliest_slot(job, t)
                if job.reservation > old and self.corrected_at != t:
                    raise RuntimeError("reference model: compression moved a reservation later")
                self._wake_at(job.reservation, t)
        for job in self._priority_order([j for j in self.queue if j.reservation is None], t):
            job.reservation = self._earliest_slot(job, t)
            self._wake_at(job.reservation, t)
        for job in [j for j in self.queue if j.reservation == t]:
            self._start(job, t)

    def _compression_order(self, t: int) -> list[_Job]:
        """The jobs that hold a reservation (those queued before ``t``), by current reservation, ties by priority."""
        held = self._priority_order([j for j in self.queue if j.reservation is not None], t)
        return sorted(held, key=lambda job: job.reservation)  # stable: ties keep priority order

    def _wake_at(self, when: int, t: int) -> None:
        if when > t:
            self.env.process(self._wake(when - t))

    def _profile(self, t: int) -> list[tuple[int, int, int]]:
        """Intervals ``(begin, end, nodes)`` of predicted use from ``t`` on: running jobs, then reservations."""
        busy = [(t, self._estimated_end(job, t), job.nodes) for job in self.running]
        busy += [(j.reservation, j.reservation + j.estimate, j.nodes) for j in self.queue if j.reservation is not None]
        return busy

    def _free_at(self, busy: list[tuple[int, int, int]], p: int) -> int:
        return self.nodes - sum(n for begin, end, n in busy if begin <= p < end)

    def _fits_at(self, busy: list[tuple[int, int, int]], u: int, job: _Job) -> bool:
        end = u + job.estimate
        points = [u] + [x for begin, stop, _ in busy for x in (begin, stop) if u < x < end]
        return all(self._free_at(busy, p) >= job.nodes for p in points)

    def _earliest_slot(self, job: _Job, t: int) -> int:
        """The smallest ``u >= t`` among ``t`` and the profile's change points at which ``job`` fits."""
        busy = self._profile(t)
        candidates = sorted({t} | {x for begin, end, _ in busy for x in (begin, end) if x > t})
        return next(u for u in candidates if self._fits_at(busy, u, job))


def _check(jobs: pd.DataFrame, nodes: int, policy: str, backfill: str, kill_at_walltime: bool, predictor: str,
           scan: str | None) -> None:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    if scan not in (None, *POLICIES):
        raise ValueError(f"scan must be None or one of {', '.join(POLICIES)}; got {scan!r}")
    if predictor not in PREDICTORS:
        raise ValueError(f"predictor must be one of {', '.join(PREDICTORS)}; got {predictor!r}")
    if predictor != "walltime" and not kill_at_walltime:
        raise ValueError("a runtime predictor needs kill_at_walltime=True")
    if backfill not in BACKFILLS:
        raise ValueError(f"backfill must be one of {', '.join(BACKFILLS)}; got {backfill!r}")
    if backfill == "conservative" and not kill_at_walltime:
        raise ValueError("conservative backfilling needs kill_at_walltime=True (reservations trust the estimates)")
    for col in ("submit", "run", "walltime", "nodes"):
        low = 0 if col == "submit" else 1
        if len(jobs) and int(jobs[col].min()) < low:
            raise ValueError(f"every job needs {col} >= {low}")
    if len(jobs) and int(jobs["nodes"].max()) > nodes:
        raise ValueError(f"a job asks for {int(jobs['nodes'].max())} nodes but the machine has {nodes}")


def simulate_reference(jobs: pd.DataFrame, nodes: int, policy: str = "fcfs", backfill: str = "none",
                       kill_at_walltime: bool = True, predictor: str = "walltime",
                       scan: str | None = None, learned: Callable[[list[float]], float] | None = None) -> np.ndarray:
    """Start time (int64) of every job, aligned with the rows of `jobs`.

    Args:
        jobs: a job table with the columns job_id, submit, run, walltime and nodes (integer seconds and nodes);
            the row order does not matter.
        nodes: the machine's node count.
        policy: the priority policy, one of :data:`POLICIES`.
        backfill: the backfill mode, one of :data:`BACKFILLS`.
        kill_at_walltime: end each job at ``start + min(run, walltime)`` instead of ``start + run``.
        predictor: the runtime predictor, one of :data:`PREDICTORS` (it reads the column ``user``).
        scan: under EASY, the order of the backfill scan when it is not the queue's (a policy name).
        learned: with ``predictor="learned"``, the model: a feature row (``hpcgym/sim/learned.py``) to the log
            runtime (e.g. a fitted scikit-learn regressor's ``predict`` on one row).

    Returns:
        An int64 array with the start time of every row of ``jobs``.

    Raises:
        ValueError: on an unknown policy or backfill mode, conservative without ``kill_at_walltime``, a job
            wider than the machine, or a job with a non-positive run, walltime or node count.
    """
    _check(jobs, nodes, policy, backfill, kill_at_walltime, predictor, scan)
    if (predictor == "learned") != (learned is not None):
        raise ValueError("the learned predictor needs its model (learned=), and only it takes one")
    return _ReferenceSim(job_rows(jobs), int(nodes), policy, backfill, kill_at_walltime, predictor, scan,
                         learned).run()


def job_rows(jobs: pd.DataFrame) -> list[_Job]:
    """The reference's jobs of a job table, one per row in row order (users -1 where it has no ``user`` column)."""
    cols = [jobs[c].to_numpy(np.int64).tolist() for c in ("job_id", "submit", "run", "walltime", "nodes")]
    users = jobs["user"].to_numpy(np.int64).tolist() if "user" in jobs else [-1] * len(jobs)
    return [_Job(row, *values, user=u) for row, (values, u) in enumerate(zip(zip(*cols, strict=True), users,
                                                                             strict=True))]
