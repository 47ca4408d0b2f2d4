"""The Lublin-Feitelson workload model (JPDC 63(11), 2003), from its published parameters.

No training: job sizes, runtimes and arrivals come from the parameters of the original ``m_lublin99.c`` (one-class
defaults below; see ``../shared/NOTES.md`` for the table), scaled to any machine size.

- **Size**: serial with probability ``serial_prob``; otherwise ``log2(size)`` is uniform on ``[ulow, umed]`` with
  probability ``uprob``, else on ``[umed, uhi]``, with ``uhi = log2(machine nodes)`` and ``umed = uhi - 2.5``
  (inside the code's guidance ``[uhi - 3.5, uhi - 1.5]``); with probability ``pow2_prob`` the exponent is rounded
  (the emphasis on powers of two).
- **Runtime**: ``log(runtime)`` follows a hyper-gamma: ``Gamma(a1, b1)`` with probability ``p = pa * nodes + pb``
  (clipped to ``[0, 1]``), else ``Gamma(a2, b2)``; draws above ``exp(12)`` s are redrawn.
- **Arrivals**: inter-arrival gaps at rush hour are ``exp(Gamma(aarr * arar, barr))`` s (redrawn above ``exp(13)``),
  and the daily cycle stretches them: 48 half-hour buckets weighted by the ``Gamma(anum, bnum)`` CDF, the day
  rotated by 11 buckets, applied as a time warp (a non-homogeneous process with that intensity). For a target
  offered load the rush-hour gaps are scaled before the warp, so the cycle survives the calibration (the model's
  own load often exceeds 1).
- **Walltimes** (not in the model): a user-estimate model. A job's estimate is its runtime times a factor drawn
  log-uniformly from ``[1, max_overestimate]``, rounded up to the next value of a request menu (15 min to 48 h);
  a ``killed_prob`` share of jobs instead runs into its walltime and is killed there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable
from synth.base import Synthesizer

MENU = np.array([900, 1800, 3600, 7200, 10800, 14400, 21600, 28800, 43200, 86400, 172800], dtype=np.int64)


@dataclass(frozen=True)
class LublinParams:
    """One-class defaults of ``m_lublin99.c`` (machine size 128 in the original)."""

    serial_prob: float = 0.244
    pow2_prob: float = 0.576
    ulow: float = 0.8
    uprob: float = 0.86
    a1: float = 4.2
    b1: float = 0.94
    a2: float = 312.0
    b2: float = 0.03
    pa: float = -0.0054
    pb: float = 0.78
    aarr: float = 10.2303
    barr: float = 0.4871
    arar: float = 1.0225
    anum: float = 8.1737
    bnum: float = 3.9631


class LublinModel:
    """A job stream generator for a machine of ``nodes`` nodes; ``sample(n_jobs, seed)`` gives a job table.

    Args:
        nodes: machine size (the size distribution scales with it).
        load: target offered load (node-seconds submitted per node-second); ``None`` keeps the model's own.
        max_overestimate: the largest factor between a walltime request and the runtime.
        killed_prob: share of jobs that hit their walltime and are killed there.
        params: the model's parameters.
    """

    def __init__(self, nodes: int, load: float | None = 0.8, max_overestimate: float = 5.0,
                 killed_prob: float = 0.1, params: LublinParams | None = None):
        if nodes < 1:
            raise ValueError("nodes must be >= 1")
        if load is not None and load <= 0:
            raise ValueError("load must be positive (or None for the model's own)")
        self.nodes = int(nodes)
        self.load = load
        self.max_overestimate = max_overestimate
        self.killed_prob = killed_prob
        self.p = params or LublinParams()
        # Lambda (rush-hour seconds elapsed) at each half-hour mark of a day: the daily cycle as a time warp.
        self._marks = np.concatenate([[0.0], np.cumsum(self._day_intensity() * 1800.0)])

    def _sizes(self, rng: np.random.Generator, n: int) -> np.ndarray:
        p = self.p
        uhi = np.log2(self.nodes)
        umed = max(uhi - 2.5, p.ulow)
        low = rng.random(n) < p.uprob
        expo = np.where(low, rng.uniform(p.ulow, umed, n), rng.uniform(umed, max(uhi, umed), n))
        expo = np.where(rng.random(n) < p.pow2_prob, np.round(expo), expo)
        size = np.clip(np.round(2.0 ** expo), 1, self.nodes).astype(np.int64)
        return np.where(rng.random(n) < p.serial_prob, 1, size)

    def _runtimes(self, rng: np.random.Generator, nodes: np.ndarray) -> np.ndarray:
        p = self.p
        out = np.empty(len(nodes))
        todo = np.arange(len(nodes))
        while todo.size:
            first = rng.random(todo.size) < np.clip(p.pa * nodes[todo] + p.pb, 0.0, 1.0)
            x = np.where(first, rng.gamma(p.a1, p.b1, todo.size), rng.gamma(p.a2, p.b2, todo.size))
            ok = x <= 12.0
            out[todo[ok]] = np.exp(x[ok])
            todo = todo[~ok]
        return np.maximum(np.ceil(out), 1).astype(np.int64)

    def _day_intensity(self) -> np.ndarray:
        """Relative arrival intensity of the 48 half hours of a day (peak 1)."""
        p = self.p
        cdf = _gamma_cdf(np.arange(49, dtype=np.float64), p.anum, p.bnum)  # the bucket index is the variate
        weight = np.roll(np.diff(cdf), 11)
        return np.maximum(weight / weight.max(), 0.05)  # quiet hours still see some arrivals

    def _gaps(self, rng: np.random.Generator, n: int) -> np.ndarray:
        p = self.p
        gaps = np.empty(n)
        todo = np.arange(n)
        while todo.size:
            x = rng.gamma(p.aarr * p.arar, p.barr, todo.size)
            ok = x <= 13.0
            gaps[todo[ok]] = np.exp(x[ok])
            todo = todo[~ok]
        gaps[0] = 0.0
        return gaps

    def _warp(self, tau: np.ndarray) -> np.ndarray:
        """Map rush-hour time to clock time through the daily cycle: ``t = Lambda^-1(tau)``."""
        days = np.floor(tau / self._marks[-1])
        return days * 86400.0 + np.interp(tau - days * self._marks[-1], self._marks, np.arange(49) * 1800.0)

    def _intensity_time(self, t: float) -> float:
        """``Lambda(t)``: rush-hour seconds elapsed by clock time ``t``."""
        days = np.floor(t / 86400.0)
        return float(days * self._marks[-1] + np.interp(t - days * 86400.0, np.arange(49) * 1800.0, self._marks))

    def sample(self, n_jobs: int, seed: int | np.random.Generator | None = None) -> pd.DataFrame:
        """A canonical job table of ``n_jobs`` jobs; the same seed gives the same table."""
        if n_jobs < 1:
            raise ValueError("n_jobs must be >= 1")
        rng = np.random.default_rng(seed)
        nodes = self._sizes(rng, n_jobs)
        run = self._runtimes(rng, nodes)
        tau = np.cumsum(self._gaps(rng, n_jobs))
        factor = np.exp(rng.uniform(0.0, np.log(self.max_overestimate), n_jobs))
        idx = np.minimum(np.searchsorted(MENU, run * factor), len(MENU) - 1)
        wall = np.maximum(MENU[idx], 1)
        killed = rng.random(n_jobs) < self.killed_prob
        run = np.where(killed, wall + rng.integers(1, 60, n_jobs), np.minimum(run, wall))
        if self.load is not None and n_jobs > 1:  # rescale rush-hour time so the clock span gives the load
            span = float(np.dot(nodes, np.minimum(run, wall))) / (self.load * self.nodes)
            tau = tau * (self._intensity_time(span) / max(tau[-1], 1.0))
        submit = self._warp(tau)
        df = pd.DataFrame({
            "job_id": np.arange(1, n_jobs + 1), "submit": np.round(submit).astype(np.int64), "run": run,
            "walltime": wall, "nodes": nodes, "procs": nodes, "user": -1, "group": -1, "queue": -1,
            "status": np.where(killed, "killed", "completed"), "walltime_known": True,
        })
        out = jobtable.finalize(df)
        out.attrs.update(name=f"lublin-synthetic-{self.nodes}", unix_start_time=0, invalid={})
        return out


def _gamma_cdf(x: np.ndarray, shape: float, scale: float) -> np.ndarray:
    """The Gamma CDF by numerical integration (avoids a scipy dependency in the core)."""
    grid = np.linspace(0.0, max(float(x.max()), shape * scale * 4), 8193)
    pdf = np.where(grid > 0, grid ** (shape - 1) * np.exp(-grid / scale), 0.0)
    cdf = np.concatenate([[0.0], np.cumsum((pdf[1:] + pdf[:-1]) / 2 * np.diff(grid))])
    return np.interp(x, grid, cdf / cdf[-1])  # normalized over the grid, which covers the bulk of the mass


class LublinSynthesizer(Synthesizer):
    """The Lublin-Feitelson model behind the synthesizer interface.

    It learns nothing about job shapes: ``fit`` only reads the machine size (the largest job, or ``max_nodes``)
    and the data's offered load, to which the model's arrivals are calibrated. It is the classic baseline.
    """

    name = "lublin"

    def __init__(self, max_nodes: int | None = None, load: float | None = None, **params: Any):
        super().__init__(max_nodes=max_nodes, load=load, **params)
        self.load = load

    def _fit(self, table: pd.DataFrame, jobs: pd.DataFrame, rng: np.random.Generator) -> None:
        if self.load is None:
            self.load = float(jobtable.offered_load(jobs, int(self.max_nodes)))
        self.model = LublinModel(int(self.max_nodes), load=self.load)

    def _sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        from synth import features

        jobs = self.model.sample(n, seed=rng)
        jobs.attrs["unix_start_time"] = self.unix_start_time
        return features.to_training(jobs)
