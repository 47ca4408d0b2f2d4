"""hpcgym's own generator: an explicit arrival process, with job attributes conditioned on it.

Rows generated independently (as tabular GANs do) lose what makes a trace schedule like the real one: bursts, the
daily and weekly cycle, users resubmitting the same job, the walltime menu, and the killed jobs that overrun their
walltime. This model keeps each of them, by construction:

1. **Arrivals.** The log inter-arrival time ``x = log1p(gap)`` is modelled per *hour class* (hour of day x
   weekday/weekend: 48 classes): its empirical quantile function in each class reproduces the daily and weekly
   cycle. Bursts come from serial dependence: the normal scores ``z = Phi^-1(F_class(x))`` follow an AR(1) process
   whose coefficient is calibrated so that the generated log gaps have the training sequence's lag-1
   autocorrelation, so short gaps follow short gaps.
2. **Sessions.** A user often resubmits the same job. With a probability fitted per gap bin (short gaps: high),
   the next job repeats the previous one's template (nodes, walltime, user, status kind), with a fresh runtime
   drawn from the real runtimes of that template.
3. **Attributes.** Otherwise a *donor* job is drawn from the training jobs of the same context (period of day x
   weekday/weekend x gap bin) and its discrete attributes are kept as they are: integer node counts, powers of two,
   the machine's limits, the walltime menu. The runtime is jittered (lognormal, 10%) below the walltime; killed jobs
   (runtime > walltime in the data) are redrawn as walltime + an overrun from the real overrun distribution, which
   keeps the spike of killed jobs.
4. **Load.** ``load=None`` keeps the data's own offered load; a number rescales the gaps to reach it.

Fitting is a few vectorized passes over the training table (seconds for Theta).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtr

from synth.base import Synthesizer

GAP_BINS = np.array([0.0, 2.0, 4.0, 6.0, 8.0, 10.0])  # edges on log1p(gap): ~1 s, 1 min, 7 min, 50 min, 6 h
MIN_POOL = 30


def _hour_class(hour: np.ndarray, dow: np.ndarray) -> np.ndarray:
    return hour + 24 * (dow >= 5)


def _period(hour: np.ndarray, dow: np.ndarray) -> np.ndarray:
    return hour // 6 + 4 * (dow >= 5)  # 8 periods: quarter of the day x weekday/weekend


def _lag1(x: np.ndarray) -> float:
    return float(np.corrcoef(x[1:], x[:-1])[0, 1]) if len(x) > 2 else 0.0


def _gap_bin(x: np.ndarray) -> np.ndarray:
    return np.searchsorted(GAP_BINS, x, side="right") - 1


class ArrivalAwareSynthesizer(Synthesizer):
    """The arrival-aware generator (see the module docstring).

    Args:
        max_nodes: machine size (default: the largest job seen).
        load: target offered load, or None for the data's own.
        machine_nodes: nodes of the machine the load refers to (default ``max_nodes``).
        jitter: lognormal sigma of the runtime jitter.
    """

    name = "arrivals"
    packages = ("numpy", "pandas", "scipy")

    def __init__(self, max_nodes: int | None = None, load: float | None = None, machine_nodes: int | None = None,
                 jitter: float = 0.1, **params: Any):
        super().__init__(max_nodes=max_nodes, load=load, machine_nodes=machine_nodes, jitter=jitter, **params)
        self.load, self.machine_nodes, self.jitter = load, machine_nodes, jitter

    # ---- fitting ---------------------------------------------------------------------------------------------
    def _fit(self, table: pd.DataFrame, jobs: pd.DataFrame, rng: np.random.Generator) -> None:
        x = np.log1p(table["interarrival"].to_numpy(np.float64))
        hour, dow = table["hour"].to_numpy(), table["dow"].to_numpy()
        hc = _hour_class(hour, dow)
        self.quantiles = {}
        for c in range(48):
            pool = x[hc == c]
            self.quantiles[c] = np.sort(pool if pool.size >= MIN_POOL else x)  # sparse classes borrow the whole
        self.phi = self._calibrate_phi(_lag1(x), rng)
        self._fit_attributes(table, x, hour, dow)

    def _fit_attributes(self, table: pd.DataFrame, x: np.ndarray, hour: np.ndarray, dow: np.ndarray) -> None:
        cols = table[["nodes", "walltime", "run", "user", "status"]].reset_index(drop=True)
        self.rows = cols
        run, wall = cols["run"].to_numpy(), cols["walltime"].to_numpy()
        self.killed = run > wall
        over = run[self.killed] - wall[self.killed]
        self.overruns = np.sort(over) if over.size else np.array([1])
        key = _period(hour, dow) * len(GAP_BINS) + _gap_bin(x)
        self.pools = {int(k): np.flatnonzero(key == k) for k in np.unique(key)}
        self.all_rows = np.arange(len(cols))
        template = cols["nodes"].to_numpy() * 10_000_000 + wall
        same = (template[1:] == template[:-1]) & (cols["user"].to_numpy()[1:] == cols["user"].to_numpy()[:-1])
        b = _gap_bin(x[1:])
        self.p_same = np.array([same[b == k].mean() if (b == k).sum() >= MIN_POOL else same.mean()
                                for k in range(len(GAP_BINS))])
        self.template_runs = {int(t): np.flatnonzero(template == t) for t in np.unique(template)}
        self.template = template

    def _calibrate_phi(self, target: float, rng: np.random.Generator) -> float:
        """Bisect the AR(1) coefficient so that generated gaps have the data's lag-1 autocorrelation of log gaps.

        The normal-score coefficient alone falls short: the hour classes absorb part of the dependence.
        """
        lo, hi = 0.0, 0.99
        seed = int(rng.integers(2**31))
        for _ in range(7):
            self.phi = (lo + hi) / 2
            gaps, _, _ = self._gaps(4000, np.random.default_rng(seed), self.unix_start_time)
            if _lag1(np.log1p(gaps[1:].astype(np.float64))) < target:
                lo = self.phi
            else:
                hi = self.phi
        return (lo + hi) / 2

    # ---- sampling --------------------------------------------------------------------------------------------
    def _gaps(self, n: int, rng: np.random.Generator, clock0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gaps with the AR(1) normal scores mapped through the current hour class's quantiles."""
        eps = rng.standard_normal(n)
        scale = np.sqrt(1.0 - self.phi**2)
        gaps = np.empty(n, np.int64)
        hours, dows = np.empty(n, np.int64), np.empty(n, np.int64)
        clock, z = clock0, 0.0
        for t in range(n):
            z = self.phi * z + scale * eps[t]
            hour, dow = (clock // 3600) % 24, ((clock // 86400) + 3) % 7  # 1970-01-01 was a Thursday
            q = self.quantiles[int(hour + 24 * (dow >= 5))]
            x = q[min(int(ndtr(z) * len(q)), len(q) - 1)]
            gaps[t] = 0 if t == 0 else int(round(np.expm1(x)))
            clock += gaps[t]
            hours[t], dows[t] = (clock // 3600) % 24, ((clock // 86400) + 3) % 7
        return gaps, hours, dows

    def _runtimes(self, donors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Jittered donor runtimes below the walltime; killed donors overrun it by a real overrun."""
        wall = self.rows["walltime"].to_numpy()[donors]
        run = self.rows["run"].to_numpy()[donors] * np.exp(rng.normal(0.0, self.jitter, len(donors)))
        run = np.minimum(np.maximum(np.round(run), 1), wall).astype(np.int64)
        over = self.overruns[rng.integers(len(self.overruns), size=len(donors))]
        return np.where(self.killed[donors], wall + over, run)

    def _sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        gaps, hours, dows = self._gaps(n, rng, self.unix_start_time)
        bins = _gap_bin(np.log1p(gaps.astype(np.float64)))
        keys = _period(hours, dows) * len(GAP_BINS) + bins
        donors = np.empty(n, np.int64)
        for t in range(n):
            if t > 0 and rng.random() < self.p_same[bins[t]]:
                same = self.template_runs[int(self.template[donors[t - 1]])]
                donors[t] = same[rng.integers(len(same))]  # same template, another real run of it
            else:
                pool = self.pools.get(int(keys[t]), self.all_rows)
                pool = pool if len(pool) >= MIN_POOL else self.all_rows
                donors[t] = pool[rng.integers(len(pool))]
        rows = self.rows.iloc[donors].reset_index(drop=True)
        run = self._runtimes(donors, rng)
        if self.load is not None:
            nodes = self.machine_nodes or self.max_nodes
            work = float(np.dot(rows["nodes"], np.minimum(run, rows["walltime"])))
            gaps = np.round(gaps * (work / (self.load * nodes)) / max(float(gaps.sum()), 1.0)).astype(np.int64)
        return pd.DataFrame({"interarrival": gaps, "nodes": rows["nodes"].to_numpy(), "run": run,
                             "walltime": rows["walltime"].to_numpy(), "user": rows["user"].to_numpy(),
                             "status": rows["status"].to_numpy(), "hour": hours, "dow": dows})
