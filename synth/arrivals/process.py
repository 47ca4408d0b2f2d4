"""The arrival process: the gaps between submits, per hour class, with serial dependence and the data's outages.

The log gap ``x = log1p(gap)`` is modelled per *hour class* (hour of day x weekday/weekend: 48 classes) of the submit
the gap starts from, by its quantile function in that class, interpolated between the sorted training values and
smoothed by a Gaussian kernel (sd :data:`GAP_JITTER`). The normal scores ``z = Phi^-1(F_class(x))`` are
``sqrt(1 - a) fast + sqrt(a) slow``: ``fast`` an AR(1) with coefficient ``phi``, ``slow`` an AR(1) that remembers
``slow_jobs`` jobs, both of unit variance (``a = slow_share``; ``phi`` and ``a`` are calibrated at fit time,
:mod:`synth.arrivals.calibration`). Outages (gaps over :data:`~synth.replay.OUTAGE`) are left out of the quantiles
and placed apart: every sample carries the data's outage time per gap, stratified (:meth:`ArrivalProcess.outages`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.signal import lfilter
from scipy.special import ndtr

from synth.arrivals.context import MIN_POOL, calendar, hour_class
from synth.arrivals.governor import (
    CLOSE_ROUNDS,
    CLOSE_TOLERANCE,
    GOVERNOR_JOBS,
    GOVERNOR_LIMIT,
    GOVERNOR_SHARE,
    Clock,
    Governor,
    rescaled,
)
from synth.replay import OUTAGE  # the longest a gap counts in the governor's debt

GAP_JITTER = 0.1  # sd of the Gaussian kernel on log1p(gap)
CHUNK = 1 << 16  # the arrival clock works out every hour class's gap for this many jobs at a time
SLOW_MEMORY = 86_400.0  # the slow component remembers this long of the data's arrivals (seconds between outages)
SLOW_MAX_JOBS = GOVERNOR_JOBS // 8  # the slow component's memory, in jobs, at most (the governor must outlast it)

Draws = tuple[np.ndarray, np.ndarray, np.ndarray]  # (uniform scores, kernel noise, outages) of a sample's gaps


@dataclass
class ArrivalProcess:
    """The fitted arrival process (see the module docstring).

    Attributes:
        quantiles: hour class (0-47) -> the sorted training log gaps of that class (the whole pool where sparse).
        outage_excess: the data's outage lengths past :data:`~synth.replay.OUTAGE`, sorted.
        outage_per_gap: the data's outage time (past :data:`~synth.replay.OUTAGE`) per gap.
        horizon_jobs: the load governor's horizon, in jobs.
        slow_jobs: the slow component's memory, in jobs.
        phi: the fast AR(1) coefficient.
        phi_seed: the seed of every calibration of ``phi``.
        slow_share: the slow component's share of the normal scores' variance.
        slow_scores: candidate share -> its calibration score (None where the share was given, not calibrated).
    """

    quantiles: dict[int, np.ndarray]
    outage_excess: np.ndarray
    outage_per_gap: float
    horizon_jobs: int
    slow_jobs: float
    phi: float = 0.0
    phi_seed: int = 0
    slow_share: float = 0.0
    slow_scores: dict[float, float] | None = field(default=None)

    @classmethod
    def fit(cls, table: pd.DataFrame) -> ArrivalProcess:
        """The gap quantiles per hour class, the outages and the memories (``phi`` and the share come later).

        Args:
            table: the training table (:func:`synth.features.to_training`).

        Raises:
            ValueError: every gap is an outage (nothing to learn the gaps from).
        """
        raw = table["interarrival"].to_numpy(np.int64)
        x = np.log1p(raw.astype(np.float64))
        # a gap belongs to the hour class where it *starts* (the previous submit), as the generator draws it
        hc = hour_class(table["hour"].to_numpy(), table["dow"].to_numpy())[:-1]
        busy = raw[1:] <= OUTAGE  # outages are placed apart (outages())
        if not busy.any():  # nothing to learn the gaps from (every quantile pool would be empty)
            raise ValueError(f"arrivals: every gap between the {len(table)} training jobs' submits is over "
                             f"{OUTAGE:,} s ({OUTAGE / 3600:g} h), which the model counts as an outage; it needs jobs "
                             f"submitted less than {OUTAGE / 3600:g} h apart to learn the arrival process from")
        quantiles = {}
        for c in range(48):
            pool = x[1:][(hc == c) & busy]
            quantiles[c] = np.sort(pool if pool.size >= MIN_POOL else x[1:][busy])  # sparse: borrow the whole
        excess = np.sort(raw[1:][raw[1:] > OUTAGE] - OUTAGE).astype(np.float64)
        busy_gaps = raw[1:][busy].astype(np.float64)
        # the governor's horizon in jobs: a tiny log cannot tell how its load varies over stretches near its length
        horizon = int(max(min(GOVERNOR_JOBS, len(table) // GOVERNOR_SHARE), 1))
        # the slow component remembers a day of the data's jobs (at most an eighth of the horizon)
        day = SLOW_MEMORY / max(busy_gaps.mean(), 1.0) if busy_gaps.size else 1.0
        slow_jobs = float(max(min(day, SLOW_MAX_JOBS * horizon / GOVERNOR_JOBS), 1.0))
        return cls(quantiles, excess, float(excess.sum() / max(len(raw) - 1, 1)), horizon, slow_jobs)

    def draws(self, n: int, rng: np.random.Generator, scale: float = 1.0) -> Draws:
        """The arrival process's randomness: uniform scores (AR(1) plus the slow component), kernel noise, outages.

        The slow draws come last, so that every share sees the same fast scores, kernel noise and outages.

        Args:
            n: jobs.
            rng: the random numbers.
            scale: the gaps' scale (the outages' budget follows it).
        """
        eps = rng.standard_normal(n) * np.sqrt(1.0 - self.phi**2)
        z = lfilter([1.0], [1.0, -self.phi], eps)
        noise = rng.normal(0.0, GAP_JITTER, n)  # kernel smoothing of the log gaps
        outages = self.outages(n, rng, scale)
        slow = rng.standard_normal(n)
        if self.slow_share > 0.0:
            rho = 1.0 - 1.0 / self.slow_jobs
            slow[1:] *= np.sqrt(1.0 - rho**2)  # the first score has unit variance: stationary from the start
            z = np.sqrt(1.0 - self.slow_share) * z + np.sqrt(self.slow_share) * lfilter([1.0], [1.0, -rho], slow)
        return ndtr(z), noise, outages

    def outages(self, n: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
        """Each job's gap where an outage precedes it, else 0: the data's outage time per gap, stratified.

        The budget is the training data's time past :data:`~synth.replay.OUTAGE` per gap, times the sample's gaps
        (and ``scale``). It buys ``k = round(budget / mean length)`` outages, whose lengths are the data's at ``k``
        systematic quantiles (a random start, then every ``1/k``), scaled to spend the budget exactly, in a random
        order, one at a random job of each of ``k`` equal strata of the sample. A budget below half a mean length (a
        short sample) buys one outage of a length drawn from the data's with probability ``budget / mean``, so that
        short samples have the data's share of outages in expectation.
        """
        out = np.zeros(n, np.int64)
        lengths = self.outage_excess
        if not lengths.size or n < 2:
            return out
        budget = self.outage_per_gap * (n - 1) * scale
        mean = float(lengths.mean())
        k = int(round(budget / mean))
        if k == 0:
            if rng.random() >= budget / mean:
                return out
            excess = lengths[[int(rng.random() * len(lengths))]]
        else:
            q = (np.arange(k) + rng.random()) / k
            excess = lengths[np.minimum((q * len(lengths)).astype(np.int64), len(lengths) - 1)]
            excess = rng.permutation(excess * (budget / excess.sum()))
        k = len(excess)
        where = 1 + ((np.arange(k) + rng.random(k)) * (n - 1) / k).astype(np.int64)
        out[np.minimum(where, n - 1)] = np.round(OUTAGE + excess).astype(np.int64)
        return out

    def gaps(self, n: int, rng: np.random.Generator, clock0: int, governor: Governor | None = None) -> Clock:
        """``n`` ungoverned gaps, scaled by the governor's ``gap_scale`` if any (the calibration of ``phi``)."""
        return self.clock(*self.draws(n, rng, 1.0 if governor is None else governor.gap_scale), clock0, governor)

    def clock(self, u: np.ndarray, noise: np.ndarray, outage: np.ndarray, clock0: int,
              governor: Governor | None = None, work: np.ndarray | None = None, target: float | None = None,
              stretch: float = 1.0, cache: dict | None = None) -> Clock:
        """Run the arrival clock: each gap from the hour class the clock is in; with ``work``, governed.

        Every gap is worked out for all 48 hour classes at once (:data:`CHUNK` jobs at a time), and the loop only
        picks the class of the clock. Every gap is scaled by the governor's ``gap_scale`` (1 unless a ``load`` was
        asked for). With ``work`` (each job's node-seconds) and a governor with a target, the governor stretches each
        gap by ``exp(debt / horizon)`` (:mod:`synth.arrivals.governor`).

        Args:
            u: the uniform scores (:meth:`draws`).
            noise: the kernel noise of the log gaps.
            outage: each job's outage gap, or 0.
            clock0: the Unix time of the first submit.
            governor: the load governor (None: unscaled, ungoverned).
            work: each job's node-seconds (None: ungoverned).
            target: replaces the governor's ``target_load`` (:meth:`governed_clock`).
            stretch: multiplies every gap but the outages before the governor sees it.
            cache: keeps each chunk's gaps per hour class for the next pass over the same random numbers.

        Returns:
            ``(gaps, hours, dows)``: the gaps (the first is 0) and the hour and weekday of each submit.
        """
        n = len(u)
        gaps, clocks = np.zeros(n, np.int64), np.empty(n, np.int64)
        grid = {c: (np.arange(len(q)) + 0.5) / len(q) for c, q in self.quantiles.items()}
        governed = work is not None and governor is not None and governor.target_load is not None
        per_work, horizon, limit = 0.0, 1.0, float(np.log(GOVERNOR_LIMIT))
        scale = 1.0 if governor is None else governor.gap_scale
        if governed:
            per_work = 1.0 / ((target or governor.target_load) * governor.nodes)
            horizon = self.horizon_jobs * governor.mean_gap * scale
        factor = scale * stretch  # every gap's multiplier but the governor's
        work = work.tolist() if governed else [0.0] * n
        outage = outage.tolist()
        clock, debt = int(clock0), 0.0
        for lo in range(0, n, CHUNK):
            part = slice(lo, min(n, lo + CHUNK))
            rows = None if cache is None else cache.get(lo)
            if rows is None:
                rows = [np.expm1(np.maximum(np.interp(u[part], grid[c], self.quantiles[c]) + noise[part], 0.0))
                        .tolist() for c in range(48)]  # plain lists: the loop below reads one value at a time
                if cache is not None:
                    cache[lo] = rows
            for t in range(part.start, part.stop):
                if t:
                    c = (clock // 3600) % 24 + 24 * (((clock // 86400) + 3) % 7 >= 5)  # 1970-01-01 was a Thursday
                    gap = rows[c][t - lo] * factor
                    if governed:
                        gap *= math.exp(min(max(debt / horizon, -limit), limit))
                    # an outage's length is fixed: neither scaled nor governed; no other gap becomes one (the debt
                    # counts a gap at most OUTAGE, so a longer one would be time the governor cannot see)
                    gap = outage[t] or min(round(gap), OUTAGE)
                    gaps[t] = gap
                    clock += gap
                    debt -= min(gap, OUTAGE)
                debt += work[t] * per_work
                clocks[t] = clock
        return (gaps, *calendar(clocks))

    def governed_clock(self, governor: Governor, draws: Draws, work: np.ndarray, clock0: int,
                       cache: dict | None = None) -> Clock:
        """The governed arrival clock; a sample longer than the governor's horizon offers the target load exactly.

        The governor leaves a debt at the end of a sample, so a sample's load between outages varies about the
        target (Theta, 7,016 jobs: sd 0.033 about 0.805), and a burst it cannot stretch enough (at most
        :data:`~synth.arrivals.governor.GOVERNOR_LIMIT`) stays (Mustang: a sample at 0.872 for 0.711). Past the
        horizon (``horizon_jobs``), the clock runs again (at most :data:`~synth.arrivals.governor.CLOSE_ROUNDS`
        passes, the same random numbers) with the governor's target moved by the square root of the ratio of the
        target to the load obtained and every gap stretched by the square root of its inverse (the stretch still works
        where the governor is at its limit), until they agree within :data:`~synth.arrivals.governor.CLOSE_TOLERANCE`.
        The gaps are stretched inside the clock, so the hour classes follow it. Where the passes do not get there,
        the closest is scaled at once (:func:`~synth.arrivals.governor.rescaled`).

        Args:
            governor: the governor (its ``target_load`` set).
            draws: the arrival process's randomness (:meth:`draws`).
            work: each job's node-seconds.
            clock0: the Unix time of the first submit.
            cache: each chunk's gaps per hour class, from the first pass over the same random numbers.
        """
        def run(target: float | None = None, stretch: float = 1.0) -> Clock:
            return self.clock(*draws, clock0, governor, work=work, target=target, stretch=stretch, cache=cache)

        out = run()
        if len(work) <= self.horizon_jobs:  # a short sample (a training episode) keeps its burstiness
            return out
        # the load of the jobs handed back: Synthesizer.sample draws n + 1 and keeps the first n (on a 148-job sample
        # the last job's work alone moved the load by up to 5%)
        need = float(work[:-1].sum()) / (governor.nodes * governor.target_load)  # the span the target asks for
        if len(work) < 3 or need <= 0:
            return out  # no span to hold
        target, stretch, best = governor.target_load, 1.0, (np.inf, out)
        for k in range(CLOSE_ROUNDS):
            ratio = float(np.minimum(out[0][1:-1], OUTAGE).sum()) / need  # < 1: too much load
            best = min(best, (abs(ratio - 1.0), out), key=lambda b: b[0])
            if abs(ratio - 1.0) <= CLOSE_TOLERANCE or k == CLOSE_ROUNDS - 1 or ratio <= 0:
                break
            target, stretch = target * ratio**0.5, stretch / ratio**0.5  # half each: together, one ratio
            out = run(target, stretch)
        return rescaled(best[1], need, clock0) if best[0] > CLOSE_TOLERANCE else best[1]
