"""Runtimes: a smoothed bootstrap of ``log(run / walltime)`` per request and outcome, with sessions and returns.

Jobs that finish: a Gaussian kernel density estimate of ``log(run / walltime)`` per (request, outcome), backing off
to (request class, outcome) and then to the outcome alone below :data:`MIN_RUNS` training jobs. The bandwidth is
Silverman's rule for the pool, clipped to ``[jitter, MAX_BANDWIDTH]`` and shrunk to a member's distance from the
walltime (at least :data:`EDGE_BANDWIDTH`); draws above 0 are reflected, so runs stay below the walltime. Within a
session, with probability ``p_close``, a job runs about as long as the session's first job (kernel sd ``close_sd``);
a session's first job whose user opened a session of the same request before runs, with probability ``p_return``,
about as long as that session's first job. Jobs that overrun get ``walltime + overrun``, the overrun from a kernel
density of ``log1p(overrun)`` per outcome (the jobs killed slightly after their walltime).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.arrivals.context import MIN_POOL
from synth.arrivals.requests import RequestMix
from synth.arrivals.sessions import repeats, returns

MAX_BANDWIDTH = 0.5  # Silverman's rule oversmooths the multimodal runtime pools (failures + full runs)
CLOSE = 0.25  # log-runtime difference below which a resubmitted job "runs about as long" as the one before
MIN_RUNS = 8  # runtime kernel pools smaller than this back off to the coarser level
EDGE_BANDWIDTH = 0.02  # the runtime kernels' sd at the walltime (log run / walltime = 0)


class Kernel:
    """Kernel density estimates of a value per integer key: draw a member of the key's pool, add Gaussian noise.

    With ``edge`` (values never exceed it; the runtime kernels, on ``log(run / walltime)``), a member's noise sd is
    at most its distance to the edge (at least :data:`EDGE_BANDWIDTH`): a fixed bandwidth would push the members at
    the edge away from it once the draws are reflected, by 0.8 bandwidths on average.
    """

    def __init__(self, keys: np.ndarray, values: np.ndarray, min_bandwidth: float, max_bandwidth: float = np.inf,
                 edge: float | None = None):
        self.edge = edge
        order = np.argsort(keys, kind="stable")
        self.values = values[order].astype(np.float64)
        self.keys, self.start, self.count = np.unique(keys[order], return_index=True, return_counts=True)
        sums = np.add.reduceat(self.values, self.start) if len(self.values) else np.zeros(0)
        sq = np.add.reduceat(self.values**2, self.start) if len(self.values) else np.zeros(0)
        sd = np.sqrt(np.maximum(sq / self.count - (sums / self.count) ** 2, 0.0))
        self.bandwidth = np.clip(1.06 * sd * self.count ** -0.2, min_bandwidth, max(max_bandwidth, min_bandwidth))

    def size(self, keys: np.ndarray) -> np.ndarray:
        """Pool size of each key (0 where the key was never seen)."""
        i = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        return np.where(self.keys[i] == keys, self.count[i], 0) if len(self.keys) else np.zeros(len(keys), np.int64)

    def draw(self, keys: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One smoothed draw per key (each key must have a pool)."""
        i = np.searchsorted(self.keys, keys)
        member = self.start[i] + (rng.random(len(keys)) * self.count[i]).astype(np.int64)
        centre = self.values[member]
        if self.edge is None:
            return centre + self.bandwidth[i] * rng.standard_normal(len(keys))
        return edge_noise(centre, self.bandwidth[i], self.edge, rng)


def edge_noise(centre: np.ndarray, bandwidth: np.ndarray | float, edge: float,
               rng: np.random.Generator) -> np.ndarray:
    """``centre`` plus Gaussian noise whose sd shrinks near ``edge`` (see :class:`Kernel`)."""
    return centre + edge_sd(centre, bandwidth, edge) * rng.standard_normal(len(centre))


def edge_sd(centre: np.ndarray | float, bandwidth: np.ndarray | float, edge: float) -> np.ndarray | float:
    """The kernel's sd at ``centre``: ``bandwidth``, at most the distance to ``edge`` (at least EDGE_BANDWIDTH)."""
    return np.minimum(bandwidth, np.maximum(np.abs(edge - centre), EDGE_BANDWIDTH))


@dataclass
class Runtimes:
    """The runtime model (see the module docstring).

    Attributes:
        run_levels: the kernels of ``log(run / walltime)`` keyed by (request, outcome), (request class, outcome)
            and outcome.
        overrun: the kernel of ``log1p(overrun)`` keyed by outcome.
        p_close: the probability that a resubmitted job runs about as long as its session's first job.
        close_sd: the spread of such pairs (log seconds).
        p_return: the probability that a returning user's session runs about as long as their last one's.
    """

    run_levels: list[Kernel]
    overrun: Kernel
    p_close: float
    close_sd: float
    p_return: float

    @classmethod
    def fit(cls, run: np.ndarray, wall: np.ndarray, request: np.ndarray, outcome: np.ndarray, user: np.ndarray,
            mix: RequestMix, n_out: int, jitter: float) -> Runtimes:
        """Fit on the training jobs' runtimes, walltimes, requests, outcomes and users (``jitter``: least bandwidth)."""
        over = run > wall
        fin, o = ~over, outcome
        ratio = np.log(np.maximum(run, 1) / wall)  # <= 0 for the jobs that finish
        top = MAX_BANDWIDTH
        levels = [Kernel(key[fin], ratio[fin], jitter, top, edge=0.0)
                  for key in (request * n_out + o, mix.menu_class[request] * n_out + o, o)]
        overrun = Kernel(o[over], np.log1p((run - wall)[over].astype(np.float64)), jitter)
        # a resubmitted job often runs about as long as the one before it: the share of such pairs, and their spread
        repeat = repeats(request, user)
        d = (ratio[1:] - ratio[:-1])[repeat & (o[1:] == o[:-1]) & fin[1:]]
        close = np.abs(d) < CLOSE
        p_close = float(close.mean()) if d.size >= MIN_POOL else 0.0
        close_sd = float(max(np.std(d[close]) if close.sum() > 1 else 0.0, jitter))
        # a user who comes back to a request often runs about as long as when they last opened a session of it
        j, i = returns(np.flatnonzero(np.concatenate([[True], ~repeat])), user, request, len(mix))
        ok = (o[j] == o[i]) & fin[j] & fin[i]
        d = (ratio[j] - ratio[i])[ok]
        p_return = float((np.abs(d) < CLOSE).mean()) if d.size >= MIN_POOL else 0.0
        return cls(levels, overrun, p_close, close_sd, p_return)

    def draw(self, request: np.ndarray, outcome: np.ndarray, first: np.ndarray, user: np.ndarray, mix: RequestMix,
             n_out: int, rng: np.random.Generator) -> np.ndarray:
        """Smoothed runtimes: below the walltime for finished jobs, walltime + a smoothed overrun for the rest.

        Args:
            request: each job's request (menu index).
            outcome: each job's outcome (:class:`~synth.arrivals.outcomes.Outcomes`).
            first: the index of each job's session start.
            user: each job's user rank, or -1.
            mix: the request mix (the menu's walltimes and classes).
            n_out: the number of outcomes.
            rng: the random numbers.
        """
        wall = mix.menu_wall[request]
        over = outcome % 2 == 1
        keys = [request * n_out + outcome, mix.menu_class[request] * n_out + outcome, outcome]
        v = self._ratios(keys, over, rng)
        coin = rng.random(len(request))
        z = rng.standard_normal(len(request))  # the noise of the jobs that run about as long as an earlier one
        opens = first == np.arange(len(v))
        near = (coin < self.p_close) & (outcome == outcome[first]) & ~opens
        j, i = returns(np.flatnonzero(opens), user, request, len(mix))
        comes_back = (coin[j] < self.p_return) & (outcome[j] == outcome[i]) & ~over[j] & ~over[i]
        for a, b in zip(j[comes_back].tolist(), i[comes_back].tolist(), strict=True):  # in order: b's value is final
            v[a] = self._near(v[b], z[a])
        v = np.where(near, self._near(v[first], z), v)
        run = np.clip(np.round(wall * np.exp(-np.abs(v))), 1, wall).astype(np.int64)  # reflected at the walltime
        if over.any():
            extra = np.expm1(np.maximum(self.overrun.draw(outcome[over], rng), 0.0))
            run[over] = wall[over] + np.maximum(np.round(extra), 1).astype(np.int64)
        return run

    def _ratios(self, keys: list[np.ndarray], over: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each finished job's ``log(run / walltime)`` from the finest level with MIN_RUNS members."""
        level = np.full(len(over), 2)
        for k in (1, 0):
            level = np.where(self.run_levels[k].size(keys[k]) >= MIN_RUNS, k, level)
        v = np.zeros(len(over))  # the overrun jobs' entries are unused (np.empty's garbage warned in casts)
        for k in range(3):
            m = (level == k) & ~over
            v[m] = self.run_levels[k].draw(keys[k][m], rng)
        return v

    def _near(self, centre: np.ndarray | float, z: np.ndarray | float) -> np.ndarray | float:
        """A log runtime ratio about ``centre``: ``close_sd`` of noise, shrunk near the walltime (as edge_noise)."""
        centre = -np.abs(centre)
        return centre + edge_sd(centre, self.close_sd, 0.0) * z
