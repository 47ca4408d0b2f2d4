"""The calibrations run at fit time, each by sampling the model: ``phi``, the request mix and the slow share.

- ``phi`` (:func:`calibrate_phi`): the fast AR(1) coefficient, bisected so that generated log gaps have the data's
  lag-1 autocorrelation (the hour classes absorb part of the dependence, so the normal-score coefficient alone falls
  short).
- The request mix (:func:`calibrate_mix`): session starts follow longer gaps than jobs do, so drawing them from the
  jobs' conditional mix and repeating them shifts the sampled *jobs*' mix; :data:`MIX_ROUNDS` rounds reweight each
  request by its training share over its sampled share.
- The slow share (:func:`calibrate_slow`): for each candidate of :data:`SLOW_SHARES`, samples at the training jobs'
  own load are replayed under FCFS + EASY, and the share whose waits are closest to the data's wins.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from hpcgym.machines import Machine
from synth import features
from synth.arrivals.context import MIN_POOL, lag1
from synth.arrivals.governor import Governor
from synth.arrivals.process import ArrivalProcess
from synth.arrivals.requests import N_CLASSES, RequestMix
from synth.distances import ks_statistic
from synth.replay import replay

#: draws ``n`` jobs' requests (menu indices) with the model as fitted so far, ungoverned and unscaled
SampleRequests = Callable[[int, np.random.Generator], np.ndarray]
#: draws ``n`` raw jobs (the training table's columns) with the model as fitted so far, under a governor
SampleJobs = Callable[[int, np.random.Generator, Governor], pd.DataFrame]

MIX_ROUNDS = 3  # rounds of the request-mix calibration
MIX_JOBS = 100_000  # jobs sampled per round, at least (more when the training table is longer)
MIX_CLIP = 5.0  # a round changes a request's weight by at most this factor
SLOW_SHARES = (0.0, 0.1, 0.2)  # the slow component's candidate shares of the normal scores' variance
PHI_GAPS = 16_000  # gaps per sample in the AR(1) coefficient's bisection
PHI_STEPS = 9  # bisection steps: the coefficient to within 0.002
CAL_SAMPLES = 16  # samples per candidate share in the slow component's calibration
CAL_JOBS = 16_384  # jobs per calibration sample, at most (the training table's length when it is shorter)


def calibrate_phi(process: ArrivalProcess, target: float, clock0: int, governor: Governor | None = None) -> float:
    """Bisect the AR(1) coefficient so that generated gaps have the data's lag-1 autocorrelation of log gaps.

    :data:`PHI_GAPS` gaps and :data:`PHI_STEPS` steps, every step on the same random numbers (seeded by the process's
    ``phi_seed``, so every slow share gets the same). Revision 6 raised them from 4,000 gaps: the lag-1
    autocorrelation of 4,000 gaps of one seed is off by about 0.015.

    Args:
        process: the arrival process (its ``phi`` is moved during the bisection; set it to the result).
        target: the data's lag-1 autocorrelation of log gaps.
        clock0: the Unix time of the first submit.
        governor: scales the gaps (None: unscaled).

    Returns:
        The coefficient.
    """
    lo, hi = 0.0, 0.99
    seed = int(np.random.default_rng(process.phi_seed).integers(2**31))
    for _ in range(PHI_STEPS):
        process.phi = (lo + hi) / 2
        gaps, _, _ = process.gaps(PHI_GAPS, np.random.default_rng(seed), clock0, governor)
        if lag1(np.log1p(gaps[1:].astype(np.float64))) < target:
            lo = process.phi
        else:
            hi = process.phi
    return (lo + hi) / 2


def _ratio(target: np.ndarray, got: np.ndarray) -> np.ndarray:
    """``target / got`` where something was drawn, else 1 (nothing to correct)."""
    return np.where(got > 0, target / np.maximum(got, 1e-12), 1.0)


def calibrate_mix(mix: RequestMix, request: np.ndarray, sample: SampleRequests, rng: np.random.Generator) -> None:
    """Reweight the new-session request draw until the sampled jobs' request mix matches the training jobs'.

    Each round samples :data:`MIX_JOBS` (or as many as the training table) request sequences and multiplies each
    request's probability, in every context, by its training share over its sampled share: per request where it has
    :data:`~synth.arrivals.context.MIN_POOL` training jobs or more, else per request class, clipped to
    [1/:data:`MIX_CLIP`, :data:`MIX_CLIP`]. (Classes alone leave the mix inside a class free: on Mustang they cut the
    mean requested area to 0.88 of the data's.) Sets the mix's ``request_cdf`` and ``mix_tv``.

    Args:
        mix: the request mix to calibrate.
        request: each training job's request (menu index).
        sample: draws requests with the model (its arrival process, sessions and ``mix``) as fitted so far.
        rng: the fit's random numbers (one seed is drawn).
    """
    count = np.bincount(request, minlength=len(mix)).astype(np.float64)
    share = count / count.sum()
    own = count >= MIN_POOL
    probs = np.diff(mix.request_cdf, axis=1, prepend=0.0)
    seed = int(rng.integers(2**31))
    for _ in range(MIX_ROUNDS):
        sampled = sample(max(MIX_JOBS, len(request)), np.random.default_rng(seed))
        got = np.bincount(sampled, minlength=len(mix)) / len(sampled)
        by_class = _ratio(np.bincount(mix.menu_class, share, N_CLASSES), np.bincount(mix.menu_class, got, N_CLASSES))
        weight = np.clip(np.where(own, _ratio(share, got), by_class[mix.menu_class]), 1 / MIX_CLIP, MIX_CLIP)
        probs = probs * weight[None, :]
        probs /= probs.sum(axis=1, keepdims=True)
        mix.request_cdf = np.cumsum(probs, axis=1)
    mix.mix_tv = float(0.5 * np.abs(got - share).sum())  # the last round's, before reweighting


def calibrate_slow(process: ArrivalProcess, governor: Governor, slow: float | None, jobs: pd.DataFrame,
                   target: float, sample: SampleJobs, rng: np.random.Generator) -> None:
    """The slow component's share: ``slow`` when given, else the candidate whose samples queue most like the data.

    Each candidate of :data:`SLOW_SHARES` (with ``phi`` calibrated again for it) draws :data:`CAL_SAMPLES` samples of
    the training table's length (at most :data:`CAL_JOBS`) at the training jobs' own load, the same seeds for every
    candidate; each is replayed under FCFS + EASY on the machine, and the share whose mean whole-trace wait KS
    against the training jobs' own replay is lowest wins (ties: the smaller share). Sets the process's
    ``slow_share``, ``phi`` and (when calibrated) ``slow_scores``.

    Args:
        process: the arrival process (its ``phi`` calibrated without the slow component).
        governor: the load governor.
        slow: the share asked for (None: calibrate it).
        jobs: the training jobs.
        target: the data's lag-1 autocorrelation of log gaps (``phi``'s target).
        sample: draws raw jobs with the model as fitted (everything but the slow share is).
        rng: the fit's random numbers (the samples' seeds are drawn).
    """
    clock0 = int(jobs.attrs.get("unix_start_time", 0) or 0)  # the clock's start, as Synthesizer.fit reads it
    phi0 = process.phi  # calibrated without the slow component
    if slow is not None or governor.own_load is None:  # given, or no load to replay the samples at
        process.slow_share = float(slow or 0.0)
        process.phi = calibrate_phi(process, target, clock0, governor) if process.slow_share > 0 else phi0
        return
    machine = Machine("arrivals-calibration", governor.nodes)
    data_wait = replay(jobs, machine)["records"]["wait"].to_numpy()
    seeds = rng.integers(2**31, size=CAL_SAMPLES)
    n = min(len(jobs), CAL_JOBS)
    own = governor.at_own_load()  # the data's own load, as its replay has
    scores = {}
    for share in SLOW_SHARES:
        process.slow_share = share
        process.phi = phi = calibrate_phi(process, target, clock0, own) if share > 0 else phi0
        waits = [replay(features.to_jobs(sample(n, np.random.default_rng(int(s)), own)), machine)
                 ["records"]["wait"].to_numpy() for s in seeds]
        scores[share] = (float(np.mean([ks_statistic(w, data_wait) for w in waits])), phi)
    process.slow_share = min(scores, key=lambda a: (scores[a][0], a))
    process.phi = scores[process.slow_share][1]
    process.slow_scores = {a: v[0] for a, v in scores.items()}
