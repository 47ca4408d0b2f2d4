"""Pooled paired ratios over many logs: per log, across the suite with two bootstrap CIs, and the noise floor.

One log is one task, as in RL benchmarks over many games (Agarwal et al., "Deep RL at the Edge of the Statistical
Precipice", NeurIPS 2021). On each log a row is paired with a reference on the same windows: the log's ratio is
``sum(row) / sum(reference)`` over its windows (the ratio of their mean bsld; :func:`hpcgym.metrics.paired_ratio_ci`
gives its one-log CI). Across logs the verdict is the geometric mean of the logs' ratios (:func:`pool`), with two
95% percentile-bootstrap CIs:

- *this suite*: each log's windows resampled within the log, the logs fixed. "Better on the suite" needs its upper
  end below 1.
- *logs like these*: the logs resampled too (a log drawn twice gets two independent resamples of its windows). A
  claim about logs in general needs this one.

Why not ``rliable``: its stratified bootstrap takes a rectangular array of runs x tasks, one score per cell; here
the logs hold 2 to 131 windows each, and each draw must resample the row's and the reference's windows together
(a paired ratio of sums), which its aggregate functions cannot see.

**The noise floor** (:func:`noise_floor`). Schedules are chaotic: a near-copy of the reference (each job's runtime
estimate multiplied by ``exp(0.05 N(0, 1))`` in its priority, :func:`experiments.noise_floor.jittered`) moves a log's
mean bsld by up to about 30% and "wins" on some logs by a one-log CI. The floor is the largest distance from 1,
over the near-copies, of their pooled ratio to the reference on the same windows; a row whose pooled ratio lies
within it is reported as noise, whatever its CI says (:func:`verdict`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
N_BOOT = 2000


@dataclass(frozen=True)
class Pooled:
    """A row's pooled ratio to a reference: the geometric mean of the logs' ratios and its two CIs."""

    ratio: float
    lo: float  #: *this suite*: windows resampled within each log
    hi: float
    lo_logs: float  #: *logs like these*: logs resampled too
    hi_logs: float
    logs: int
    windows: int


def log_ratio(values: np.ndarray, reference: np.ndarray) -> float:
    """One log's paired ratio: ``sum(values) / sum(reference)`` over the same windows."""
    return float(np.sum(values) / np.sum(reference))


def _resampled(values: np.ndarray, reference: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` log ratios of one log, each over its windows drawn with replacement (paired)."""
    idx = rng.integers(0, len(values), size=(draws, len(values)))
    return np.log(values[idx].sum(axis=1) / reference[idx].sum(axis=1))


def _checked(values: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    if len(values) != len(reference) or not len(values):
        raise ValueError(f"pooling needs the same logs on both sides, at least one: {len(values)} and "
                         f"{len(reference)}")
    pairs = [(np.asarray(v, np.float64), np.asarray(r, np.float64)) for v, r in zip(values, reference, strict=True)]
    for i, (v, r) in enumerate(pairs):
        if v.shape != r.shape or v.ndim != 1 or not v.size:
            raise ValueError(f"log {i}: a row and its reference need the same windows, at least one "
                             f"({v.shape} and {r.shape})")
        if not (np.all(v > 0) and np.all(r > 0)):
            raise ValueError(f"log {i}: scores must be positive to be paired as ratios")
    return pairs


def pool(values: Sequence[np.ndarray], reference: Sequence[np.ndarray], n_boot: int = N_BOOT,
         confidence: float = CONFIDENCE, seed: int = 0) -> Pooled:
    """The geometric mean over logs of ``values[l]``'s paired ratio to ``reference[l]``, with both CIs.

    ``values[l]`` and ``reference[l]`` are a row's and the reference's scores on log ``l``'s windows (the same
    windows, in the same order). Deterministic for a given ``seed``.
    """
    pairs = _checked(values, reference)
    rng = np.random.default_rng(seed)
    logs = len(pairs)
    suite = np.stack([_resampled(v, r, n_boot, rng) for v, r in pairs])  # (logs, n_boot)
    pick = rng.integers(0, logs, size=(n_boot, logs))
    general = np.empty((n_boot, logs))
    for i, (v, r) in enumerate(pairs):  # each slot that drew log i gets its own resample of its windows
        at = np.nonzero(pick == i)
        general[at] = _resampled(v, r, len(at[0]), rng)
    point = math.exp(np.mean([math.log(log_ratio(v, r)) for v, r in pairs]))
    alpha = (1 - confidence) / 2
    lo, hi = np.exp(np.quantile(suite.mean(axis=0), (alpha, 1 - alpha)))
    lo_logs, hi_logs = np.exp(np.quantile(general.mean(axis=1), (alpha, 1 - alpha)))
    return Pooled(point, float(lo), float(hi), float(lo_logs), float(hi_logs), logs,
                  int(sum(len(v) for v, _ in pairs)))


def noise_floor(copies: Sequence[Sequence[np.ndarray]], reference: Sequence[np.ndarray]) -> float:
    """The largest ``|ratio - 1|`` (in log terms, as a fraction) of the near-copies' pooled ratios to the reference.

    ``copies[j][l]`` is near-copy ``j``'s scores on log ``l``'s windows. Returns ``exp(max_j |log G_j|) - 1``, where
    ``G_j`` is copy ``j``'s geometric mean ratio over the logs; NaN without copies.
    """
    if not len(copies):
        return float("nan")
    worst = 0.0
    for copy in copies:
        pairs = _checked(copy, reference)
        worst = max(worst, abs(float(np.mean([math.log(log_ratio(v, r)) for v, r in pairs]))))
    return math.expm1(worst)


def inside(ratio: float, floor: float) -> bool:
    """Whether a ratio lies within the noise floor: ``|log ratio| <= log(1 + floor)`` (False for a NaN floor)."""
    return not math.isnan(floor) and abs(math.log(ratio)) <= math.log1p(floor)


def verdict(p: Pooled, floor: float) -> str:
    """What a pooled ratio shows, with the noise floor beside it (lower is better, as for bsld).

    >>> verdict(Pooled(0.80, 0.74, 0.86, 0.70, 0.92, 15, 437), 0.03)
    'better: 0.800 (0.740-0.860) on this suite; logs like these agree (0.700-0.920); noise floor ±3.0%'
    >>> verdict(Pooled(0.98, 0.96, 0.99, 0.90, 1.05, 15, 437), 0.03)
    'noise: 0.980 lies inside the noise floor (±3.0%), although its CI (0.960-0.990) excludes 1'
    >>> verdict(Pooled(1.01, 0.97, 1.06, 0.95, 1.08, 15, 437), 0.005)
    'a tie: 1.010 (0.970-1.060) on this suite contains 1; noise floor ±0.5%'
    """
    shown = f"{p.ratio:.3f} ({p.lo:.3f}-{p.hi:.3f})"
    floor_text = "noise floor not measured" if math.isnan(floor) else f"noise floor ±{floor:.1%}"
    if p.lo == p.hi == p.ratio == 1.0:
        return "the reference itself"
    if inside(p.ratio, floor):
        ci = f", although its CI ({p.lo:.3f}-{p.hi:.3f}) excludes 1" if p.hi < 1 or p.lo > 1 else ""
        return f"noise: {p.ratio:.3f} lies inside the noise floor (±{floor:.1%}){ci}"
    if p.hi < 1 or p.lo > 1:
        word, agree = ("better", p.hi_logs < 1) if p.hi < 1 else ("worse", p.lo_logs > 1)
        logs = f"logs like these {'agree' if agree else 'do not'} ({p.lo_logs:.3f}-{p.hi_logs:.3f})"
        return f"{word}: {shown} on this suite; {logs}; {floor_text}"
    return f"a tie: {shown} on this suite contains 1; {floor_text}"


def outcome(ratio: float, lo: float, hi: float, floor: float) -> str:
    """One log's outcome for a row: ``win`` (CI below 1 and outside the log's floor), ``loss``, or ``tie``.

    >>> outcome(0.8, 0.7, 0.9, 0.05), outcome(0.97, 0.95, 0.99, 0.05), outcome(1.3, 1.1, 1.5, float("nan"))
    ('win', 'tie', 'loss')
    """
    if inside(ratio, floor):
        return "tie"
    return "win" if hi < 1 else "loss" if lo > 1 else "tie"
