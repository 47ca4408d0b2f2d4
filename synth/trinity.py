"""A parametric workload model of LANL Trinity, calibrated to the published statistics of the OpenTrinity trace.

``trinity-v0`` (9,408 nodes x 32 cores) has no public trace in this package, so its default workload is sampled
from this model. It is an *approximation*: it reproduces the handful of statistics that were published, and its
other choices are stated as assumptions below. ``docs/trinity.md`` tabulates each calibrated statistic next to
its published value, measured on a 25,237-job sample.

Sources:

- [ATC18] G. Amvrosiadis, J. W. Park, G. R. Ganger, G. A. Gibson, E. Baseman, N. DeBardeleben, "On the diversity
  of cluster workloads and its impact on research results", USENIX ATC 2018
  (https://www.usenix.org/conference/atc18/presentation/amvrosiadis).
- [FAQ] "LANL Trinity trace FAQ, version 1.0 beta", Parallel Data Lab, ATLAS repository
  (https://ftp.pdl.cmu.edu/pub/datasets/ATLAS/trinity/trinity_faq_v1.0beta.txt): 9,408 identical nodes
  (301,056 cores), three months of operation in OpenScience mode, 25,237 multi-node jobs from 88 users, collected
  by MOAB, each job with a time budget beyond which it is killed. (The FAQ dates the trace February to April
  2016; hpcgym's issue 11 says 2017.)

Published statistics the model is calibrated to ([ATC18], [FAQ]):

===================================  =========================================================================
statistic                            model
===================================  =========================================================================
9,408 nodes x 32 cores               :data:`NODES`, :data:`CORES_PER_NODE`
25,237 jobs in three months           the mean arrival rate, ``25,237 / (90 days x 24 h)`` = 11.7 jobs per hour
88 users                             88 synthetic users (``1..88``), Zipf-like activity (an assumption)
multi-node jobs                      every job has at least 2 nodes
90% of jobs use 1-16K cores          90% of jobs request at most 512 nodes (16,384 cores at 32 cores per node)
90% of jobs last up to 6 h           the walltime menu and the runtime/walltime ratio give P(run <= 6 h) = 0.90
the longest job ran 32 h             the walltime menu tops out at 32 h (killed jobs overrun it by seconds)
fewer than 40 submissions per hour   hourly counts are capped at 39; the excess spills into the next hours
diurnal cycle, larger and longer     more submissions by day; by night (19:00-07:00) a larger share of big
jobs at night                        jobs and of long walltime requests
===================================  =========================================================================

The model, step by step:

1. **Arrivals**: hourly counts are Poisson with a rate that follows the day (a cosine peaking at 14:00, amplitude
   :data:`DAY_AMPLITUDE`) and the week (weekends at :data:`WEEKEND`), scaled so the mean is the published rate;
   an hour over the cap passes its excess on to the next. Jobs are spread uniformly inside their hour.
2. **Sessions**: with probability :data:`P_REPEAT` the next job is its predecessor's user resubmitting the same
   request (nodes, walltime), which makes bursts; otherwise a user is drawn by activity.
3. **Size**: ``log2(nodes)`` is uniform on ``[1, 9]`` (2-512 nodes) with probability ``P_SMALL[period]``, else on
   ``[9.5, log2 9408]``; with probability :data:`POW2` the exponent is rounded (powers of two).
4. **Walltime** from a menu (30 min to 32 h) with day and night probabilities (:data:`MENU`, :data:`P_MENU`).
5. **Runtime**: a share :data:`P_KILLED` of jobs (an assumption: the share is not published) hits its walltime
   and is killed 1-60 s later (status ``timeout``, LANL's code for it); the rest run ``walltime x r`` with
   ``r ~ Beta(RATIO_A, RATIO_B)`` (status ``completed``).

Assumed (not published): the shapes of the daily and weekly cycle, the user activity profile, the session
probability, the killed share, the runtime/walltime ratio and the menu itself. The clock is LANL local time,
starting 2016-02-01 00:00 (``attrs["unix_start_time"]`` holds that instant as if it were UTC, so the hour
features of :mod:`synth.features` read local hours).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable
from hpcgym import machines
from hpcgym.machines import Machine
from synth.base import Synthesizer

NODES, CORES_PER_NODE = 9408, 32
JOBS, DAYS, USERS = 25_237, 90, 88  # [FAQ]: three months, 25,237 multi-node jobs, 88 users
RATE = JOBS / (DAYS * 24.0)  # mean submissions per hour
MAX_PER_HOUR = 39  # [ATC18]: fewer than 40 submissions in any hour
START = 1_454_284_800  # 2016-02-01 00:00 on the trace's (local) clock
DAY_AMPLITUDE, PEAK_HOUR, WEEKEND = 0.6, 14, 0.6
P_REPEAT = 0.5
P_SMALL = (0.93, 0.845)  # day, night: share of jobs with log2(nodes) in [1, 9], i.e. at most 512 nodes
POW2 = 0.8
LARGE_B = 2.5  # log2(nodes) of the big jobs: 9.5 + (log2 9408 - 9.5) x Beta(1, LARGE_B)
HOUR = 3600
MENU = np.array([0.5, 1, 2, 4, 6, 8, 12, 16, 24, 32]) * HOUR  # walltime requests, s; 32 h: the longest job
P_MENU = (np.array([0.12, 0.22, 0.18, 0.20, 0.13, 0.05, 0.04, 0.02, 0.025, 0.015]),  # day
          np.array([0.06, 0.13, 0.14, 0.19, 0.16, 0.10, 0.08, 0.05, 0.05, 0.04]))  # night
P_KILLED = 0.08
RATIO_A, RATIO_B = 0.8, 1.1


def _night(hour: np.ndarray) -> np.ndarray:
    return (hour >= 19) | (hour < 7)


class TrinityModel:
    """A Trinity job stream; ``sample(n_jobs, seed)`` gives a canonical job table (see the module docstring).

    Args:
        load: target offered load (node-seconds submitted per node-second); ``None`` keeps the published
            arrival rate (25,237 jobs in 90 days). A load rescales the arrival rate, and the hourly cap then
            scales with it.
    """

    nodes = NODES
    cores_per_node = CORES_PER_NODE

    def __init__(self, load: float | None = None):
        if load is not None and load <= 0:
            raise ValueError("load must be positive (or None for the published arrival rate)")
        self.load = load
        self.rate, self.cap = RATE, MAX_PER_HOUR
        if load is not None:
            scale = load / self.expected_load()
            self.rate, self.cap = RATE * scale, max(1, int(round(MAX_PER_HOUR * scale)))

    @property
    def machine(self) -> Machine:
        """The catalog's Trinity (9,408 nodes x 32 cores)."""
        return machines.get("trinity")

    def expected_load(self, n: int = 200_000) -> float:
        """The offered load at the published arrival rate (a fixed-seed Monte Carlo estimate)."""
        rng = np.random.default_rng(12345)
        h = np.arange(24)
        day = 1.0 + DAY_AMPLITUDE * np.cos(2 * np.pi * (h - PEAK_HOUR) / 24)
        night = rng.random(n) < day[_night(h)].sum() / day.sum()
        nodes, wall = self._sizes(night, rng), self._walltimes(night, rng)
        run, _ = self._runtimes(wall, rng)
        return float(np.mean(nodes * np.minimum(run, wall)) * RATE / (NODES * HOUR))

    # ---- pieces ----------------------------------------------------------------------------------------------
    def _hourly_counts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Submissions per clock hour until ``n`` jobs, capped at ``self.cap`` with the excess spilled over."""
        hours = int(n / self.rate * 1.3) + 48
        h = np.arange(hours)
        day = 1.0 + DAY_AMPLITUDE * np.cos(2 * np.pi * (h % 24 - PEAK_HOUR) / 24)
        week = np.where((h // 24) % 7 >= 5, WEEKEND, 1.0)  # day 0, 2016-02-01, was a Monday
        shape = day * week
        raw = rng.poisson(self.rate * shape / shape[: 24 * 7].mean())
        counts = np.empty(hours, np.int64)
        carry = 0
        for i in range(hours):
            counts[i] = min(raw[i] + carry, self.cap)
            carry = raw[i] + carry - counts[i]
        total = np.cumsum(counts)
        if total[-1] < n:  # a very unlucky draw: more hours
            return np.concatenate([counts, self._hourly_counts(n - int(total[-1]), rng)])
        last = int(np.searchsorted(total, n))
        counts = counts[: last + 1]
        counts[-1] -= int(total[last] - n)
        return counts

    def _sizes(self, night: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = len(night)
        small = rng.random(n) < np.where(night, P_SMALL[1], P_SMALL[0])
        large = 9.5 + (np.log2(NODES) - 9.5) * rng.beta(1.0, LARGE_B, n)  # big jobs: fewer as they grow
        expo = np.where(small, rng.uniform(1.0, 9.0, n), large)
        expo = np.where(rng.random(n) < POW2, np.round(expo), expo)
        return np.clip(np.ceil(2.0**expo - 1e-9), 2, NODES).astype(np.int64)

    def _walltimes(self, night: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(len(night))
        cdf_day, cdf_night = np.cumsum(P_MENU[0]), np.cumsum(P_MENU[1])
        idx = np.where(night, np.searchsorted(cdf_night / cdf_night[-1], u, side="right"),
                       np.searchsorted(cdf_day / cdf_day[-1], u, side="right"))
        return MENU[np.minimum(idx, len(MENU) - 1)].astype(np.int64)

    def _runtimes(self, wall: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n = len(wall)
        killed = rng.random(n) < P_KILLED
        run = np.maximum(np.round(wall * rng.beta(RATIO_A, RATIO_B, n)), 1).astype(np.int64)
        return np.where(killed, wall + rng.integers(1, 61, n), np.minimum(run, wall)), killed

    # ---- sampling --------------------------------------------------------------------------------------------
    def sample(self, n_jobs: int, seed: int | np.random.Generator | None = None) -> pd.DataFrame:
        """A canonical job table of ``n_jobs`` jobs on Trinity; the same seed gives the same table."""
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
            raise ValueError(f"n_jobs must be a whole number >= 1, not {n_jobs!r}")
        rng = np.random.default_rng(seed)
        counts = self._hourly_counts(int(n_jobs), rng)
        hour_of = np.repeat(np.arange(len(counts)), counts)
        submit = np.sort(hour_of * HOUR + rng.integers(0, HOUR, n_jobs))
        submit[0] = hour_of[0] * HOUR  # the first job opens its hour, so hourly buckets from it are clock hours
        night = _night((submit // HOUR) % 24)
        repeat = rng.random(n_jobs) < P_REPEAT
        repeat[0] = False
        session = np.cumsum(~repeat) - 1
        starts = np.flatnonzero(~repeat)
        nodes = self._sizes(night[starts], rng)[session]
        wall = self._walltimes(night[starts], rng)[session]
        weights = 1.0 / np.arange(1, USERS + 1)
        user = (rng.choice(USERS, size=len(starts), p=weights / weights.sum()) + 1)[session]
        run, killed = self._runtimes(wall, rng)
        df = pd.DataFrame({
            "job_id": np.arange(1, n_jobs + 1), "submit": submit - submit[0], "run": run, "walltime": wall,
            "nodes": nodes, "procs": nodes * CORES_PER_NODE, "user": user, "group": -1, "queue": -1,
            "status": np.where(killed, "timeout", "completed"), "walltime_known": True,
        })
        out = jobtable.finalize(df)
        out.attrs.update(name="trinity-synthetic", unix_start_time=START + int(submit[0]), invalid={},
                         machine=self.machine.name)
        return out


class TrinitySynthesizer(Synthesizer):
    """:class:`TrinityModel` behind the synthesizer interface; it needs no data (``fit`` ignores the table).

    It is usable right away (``sample`` without ``fit``); ``fit`` is accepted so that it plugs in wherever a
    synthesizer is fitted, and it keeps Trinity's machine (9,408 nodes x 32 cores) whatever the table.
    """

    name = "trinity"

    def __init__(self, max_nodes: int | None = None, load: float | None = None, **params: Any):
        super().__init__(max_nodes=NODES if max_nodes is None else max_nodes, load=load, **params)
        if self.max_nodes != NODES:
            raise ValueError(f"the Trinity model is for {NODES} nodes, not {self.max_nodes}")
        self.load = load
        self.model = TrinityModel(load)
        self.cores_per_node, self.unix_start_time, self.fitted = CORES_PER_NODE, START, True

    def _fit(self, table: pd.DataFrame, jobs: pd.DataFrame, rng: np.random.Generator) -> None:
        self.cores_per_node, self.unix_start_time = CORES_PER_NODE, START  # the data does not change the model

    def _sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        from synth import features

        return features.to_training(self.model.sample(n, seed=rng))
