"""hpcgym's own generator: an explicit arrival process, with job attributes drawn from a model conditioned on it.

Rows generated independently (as tabular GANs do) lose what makes a trace schedule like the real one: bursts, the
daily and weekly cycle, users resubmitting the same job, the walltime menu, and the killed jobs that overrun their
walltime. This model keeps each of them by construction, and it never hands back a training row: every attribute
is drawn from a fitted distribution, runtimes from a smoothed density, and users are fresh synthetic identities.

1. **Arrivals.** The log inter-arrival time ``x = log1p(gap)`` is modelled per *hour class* (hour of day x
   weekday/weekend: 48 classes) of the submit the gap *starts* from, by its quantile function in that class,
   linearly interpolated between the sorted training values and smoothed by a Gaussian kernel (sd
   :data:`GAP_JITTER`), so gaps are not the training gaps themselves; it reproduces the daily and weekly cycle.
   (The generator draws each gap from the current clock's class; classing the training gaps by the hour they end
   in instead biased the arrival rate low by 2-9%.) Bursts come from serial dependence: the normal scores
   ``z = Phi^-1(F_class(x))`` follow an AR(1) process whose coefficient is calibrated so that the generated log
   gaps have the training sequence's lag-1 autocorrelation.

   **A slow component** (revision 6). An AR(1) forgets within a few jobs, and the data does not: the log gaps of
   Theta's train split are still correlated 0.12 at lag 10 and 0.05 at lag 100 (HPC2N's 0.35 and 0.18), where
   AR(1) samples give 0.02 and 0.01, so a stretch of many short gaps, which builds a queue, is rarer in the
   samples than in the data. The normal scores are ``sqrt(1 - a) fast + sqrt(a) slow``: ``fast`` the AR(1)
   above, ``slow`` an AR(1) that remembers a day of the data's jobs (at most :data:`SLOW_MAX_JOBS`, an eighth of
   the load governor's horizon), both of unit variance, so each gap's distribution is unchanged. The share ``a``
   is calibrated at fit time on what it is for, the queue: for each of :data:`SLOW_SHARES` (``phi`` calibrated
   again for it), :data:`CAL_SAMPLES` samples at the training jobs' own load are replayed under FCFS + EASY, and
   the share whose waits are closest to the training jobs' own (whole-trace KS, mean over the samples, the same
   seeds for every share) wins. Matching the long-lag autocorrelation instead would overshoot: on HPC2N a share
   of 0.1 already makes the samples queue more than the data (KS against the train split's waits 0.05 -> 0.10),
   because there the long runs of short gaps are bursts of small jobs. **Why.** Theta's samples queued less than
   its data (75th-percentile wait 1.22 h against the train split's 1.82 h), and their whole-trace EASY-wait KS
   against the test split was 0.064-0.075 over 30 samples for each of five fits (bar 0.084; seeds 0-2 missed it
   on three fits of five). Calibrated, Theta takes ``a = 0.1`` on fits 0-4, and seeds 0-2 score 0.040-0.061
   (30-sample means 0.044-0.053); Mira takes 0.1 on four fits of five (30-sample means 0.16-0.18 against 0.24);
   SDSC-SP2, HPC2N and Mustang keep ``a = 0``. Measurements: ``docs/benchmarks.md``. The calibration replays
   ``3 x CAL_SAMPLES`` samples: about 10 s of Theta's 12-14 s fit.
2. **Sessions.** A user often resubmits the same job. With a probability fitted per gap bin (short gaps: high),
   the next job continues the previous job's *session*: same user, same request (nodes, walltime); its outcome
   and runtime are drawn given the session's (steps 4-5). Otherwise a new session starts.
3. **Requests.** A new session's request ``(nodes, walltime)`` is drawn from a categorical distribution over the
   request menu (the pairs seen in training: node counts, powers of two, the machine's limits and the walltime
   menu are discrete by nature) conditioned on the arrival *context* (period of day x weekday/weekend x gap bin,
   48 contexts), shrunk towards the overall distribution: ``P(pair | ctx) = (count + a P(pair)) / (n_ctx + a)``
   with ``a = smoothing``. The draw is then **calibrated** so that the sampled *jobs* have the training jobs'
   request mix: session starts follow longer gaps than jobs do, so drawing them from the jobs' conditional mix
   and repeating them shifts the mix (Theta's samples averaged 145 nodes instead of 158, HPC2N's 4.2 instead
   of 3.8, and the whole-trace waits shifted with them). Three rounds sample request sequences and reweight each
   request by its training share over its sampled share (:meth:`ArrivalAwareSynthesizer._calibrate_mix`).
4. **Outcome.** Each job's outcome (its status, and whether it overran its walltime: the killed-job spike) is
   drawn from ``P(outcome | request)``, shrunk the same way towards ``P(outcome | request class)``, where a request
   class is ``(floor(log2 walltime/min), floor(log2 nodes))``. Within a session a job keeps the previous job's
   outcome with probability ``p_keep`` (revision 7), fitted so that consecutive jobs of a session agree as often
   as the data's (two fresh draws of request ``r`` agree with probability ``sum_o P(o | r)^2``); a kept outcome is
   a draw of the same request's, so the outcome mix is unchanged. **Why.** Drawn afresh, a session's consecutive
   jobs agreed 0.44 of the time on Theta, 0.60 on Mira and 0.71 on SDSC-SP2, against the data's 0.81-0.85,
   0.90-0.92 and 0.89-0.92: a user whose job fails fails again, one whose job runs to its walltime does again.
5. **Runtime.** Jobs that finish: a Gaussian kernel density estimate (a smoothed bootstrap) of
   ``log(run / walltime)`` per (request, outcome), backing off to (request class, outcome) and then to the outcome
   alone below :data:`MIN_RUNS` training jobs. The bandwidth is Silverman's rule for the pool, clipped to
   ``[jitter, MAX_BANDWIDTH]`` (so values are not the training values, and the failures-plus-full-runs pools are
   not smeared), and shrunk to a member's distance from the walltime (at least :data:`EDGE_BANDWIDTH`); draws
   above 0 are reflected, so runs stay below the walltime.
   (A fixed bandwidth, reflected, cut the jobs that run to their walltime by about a fifth: Theta's samples offered
   0.56 of the machine against the train split's 0.62.) Within a session, with the probability fitted on the data
   (consecutive same-user, same-request, same-outcome pairs less than :data:`CLOSE` apart), a job runs about as long as
   the session's first job (kernel sd: the spread of those pairs, at least ``jitter``). **Users' runtimes persist**
   (revision 7): a session's first job whose user opened a session of the same request before runs, with probability
   ``p_return`` (fitted the same way on the data's returns), about as long as that session's first job. **Why.** A
   user's consecutive runtimes were correlated 0.32 on SDSC-SP2 and 0.16 on Theta in revision 6's samples against the
   test splits' 0.70 and 0.47, and the last-two predictor (what the history references and the agents' features read)
   was right to within its median ratio 0.17 and 0.23 against 0.61 and 0.54 (now 0.32 and 0.27;
   ``docs/benchmarks.md``). Jobs that overrun get ``walltime + overrun``, the overrun (seconds) from a kernel density
   of ``log1p(overrun)`` per outcome (the spike of jobs killed slightly after their walltime).
6. **Identities.** Users are synthetic: the ``k``-th is ``user_base + k``, where ``user_base`` is a power of ten (at
   least 10^6) above every training id, so a synthetic id never equals a real one. The training users are ranked by
   their session counts (the activity profile; the ids are dropped), and **users own their requests** (revision 7):
   a session's user is drawn given its request, from the ranks of the users who opened that request's sessions in
   the data, with one pseudo-session of the activity profile beside them (:data:`OWNER_PRIOR`). **Why.** Drawn from
   the profile alone, a request's jobs were spread over all users: the main user's share of a request's jobs was
   0.17 on SDSC-SP2 and 0.43 on Theta (test splits 0.54 and 0.64; now 0.47 and 0.56), and a user's consecutive
   runtimes were correlated 0.32 and 0.16 (test splits 0.70 and 0.47; with items 4-5, now 0.57 and 0.31), a history
   weaker than real users give to the agents that read it. One uniform per session draws the user, as before. Groups
   and queues are not modelled (``-1``, unknown). A log without user ids (anonymised: every id ``-1``) gives samples
   without them too (``-1``); sessions are then the runs of equal requests.
7. **Load.** The samples offer the training jobs' load between outages (node-seconds asked for over the submit span
   times the machine's nodes, each gap counting at most :data:`OUTAGE`) through a **governor** on the arrival clock, and
   the data's outage time per gap through **stratified outages** (below), so that their whole-trace load is the training
   jobs', or ``load`` when it is given (the governor then holds ``load`` over one minus the data's outage share of the
   span). Once a sample's requests and runtimes are drawn, the clock runs again with the same random numbers, and each
   gap is stretched by ``exp(debt / horizon)`` (at most :data:`GOVERNOR_LIMIT` either way): ``debt`` is the work
   submitted so far divided by the target's node-seconds per second, minus the time elapsed (outages capped), and
   ``horizon`` is :data:`GOVERNOR_JOBS` mean gaps of the training data. The gaps are stretched inside the clock, so the
   hour classes (the daily and weekly cycle) follow the governed clock; a stretch of jobs shorter than the horizon (a
   256-job training episode) keeps its burstiness. A ``load`` asked for also scales every gap (and the outages) by the
   training load over it, so that the governor only corrects fluctuations. **Why.** Ungoverned, five samples of the test
   split's length offered +9% more than the train split on Theta and +10% on Mustang (+11% and +16% over 40 samples),
   for two different reasons. On Mustang the samples ask for more work per second (+10% between outages, from the work
   per job: the requests and runtimes drawn), and a sample's load ranged 0.37-1.53 (train 0.71), samples above load 1
   never draining: the governor corrects it. On Theta the load between outages was right (+1.4%); a quarter of the train
   span is outages of 7-13 days, and a sample of 7,000 jobs catches fewer of them than train has, more often than more:
   the data's own windows of that length offer +34% on average (the day-block bootstrap of the train rows +11%). Holding
   the whole-trace load instead (outages counted in the debt) gives Theta's samples the train's load, but it fills each
   outage's time with a flood of jobs afterwards and lowers the load between outages of the samples that have none: the
   whole-trace EASY-wait KS rose from 0.066 to 0.104 (bar 0.084) and the 24 h spectral peak missed its target. A rate
   factor fitted at fit time by sampling (as the request mix is calibrated) centres the long-run load but leaves the
   spread (Mustang samples up to 1.76) and raised Theta's wait KS to 0.108 (eight samples). Measurements:
   ``docs/benchmarks.md``.

   **Stratified outages** (revision 5). The gap quantiles leave the outages out, and every sample carries the
   training data's outage time (past :data:`OUTAGE`) per gap, times its gaps (:meth:`ArrivalAwareSynthesizer._outages`):
   ``k = round(budget / mean outage)`` outages, their lengths the data's at ``k`` systematic quantiles scaled to
   spend the budget exactly, one at a random job of each of ``k`` equal strata; a budget below half a mean outage
   (an episode) buys one outage of the data's with probability ``budget / mean``. An outage's gap is neither scaled
   nor governed, and the governor counts it :data:`OUTAGE` long, as the training load between outages does; no
   other gap may grow past :data:`OUTAGE` (revision 7: the debt cannot see the time beyond it, and a governed gap
   that grew to 28 h took a Mustang 2012-02 sample's whole-trace load to 0.557 while its load between outages held
   0.700). **Why.**
   With outages drawn by the quantiles, a sample of 7,016 jobs caught fewer of Theta's (a quarter of its train span,
   7-13 days each) than train has more often than more, and its whole-trace load was +10.7% over train's (mean of
   five); counting outages in the governor's debt instead met the load but flooded each outage's time with jobs.
   Stratified, the five samples are within 0.5% on every bundled trace (Theta -0.4%, range 0.586-0.664), and the
   load between outages is the governor's as before.

   **Long samples hold the load exactly** (revision 6). The governor leaves a debt at a sample's end, and a burst
   it cannot stretch enough (at most :data:`GOVERNOR_LIMIT`) stays: a Theta sample of the test split's length
   offered 0.75-0.87 between outages for a target of 0.805 (sd 0.033 over 30), a Mustang one up to 1.16 for 0.71
   (five samples 5% off on one fit of five). A sample longer than the horizon (:data:`GOVERNOR_JOBS` jobs) runs
   its clock again over the same random numbers, the governor's target and a stretch of every gap moved by the
   square root of the ratio of the target to the load obtained, until its load between outages is the target
   within :data:`CLOSE_TOLERANCE` (at most :data:`CLOSE_ROUNDS` passes, then the closest pass's gaps scaled at
   once; ``_governed_clock``). Shorter samples (training episodes) are left as drawn, so episodes keep their
   spread; long samples keep theirs inside (their windows differ as before), not between one sample and the next.
   The horizon is at most a quarter of the training table (:data:`GOVERNOR_SHARE`): a log of 346 jobs (a bundled
   Mustang week) cannot tell how its load varies over 2,048 jobs, and its test-length samples (148 jobs) went
   ungoverned, their load 0.34-1.21 for the train split's 0.70.
8. **No estimates.** When most training jobs have no walltime estimate (``walltime_known`` false: the reader set
   ``walltime = run``), the sampled walltime is the request's, smoothed by the same kernel, and ``run`` equals it
   (perfect estimates, flagged ``walltime_known`` false, as in the data). A request is then ``(nodes, run)``, so few
   jobs repeat the one before (on Theta, 6% of the jobs submitted within 6 s of another repeat its request, against
   81% with walltimes), and the session structure is mostly lost.

Fitting is a few vectorized passes over the training table plus the calibrations, which sample (the slow share's
replays most: about 10 s on Theta); sampling is vectorized except the arrival clock (a pass, then the governed
passes, which reuse the first pass's gaps per hour class) and the runtimes of the sessions that return to a request
(a loop over them, each reading an earlier one's). Times are in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy.signal import lfilter
from scipy.special import ndtr

from hpcgym.jobs import offered_load
from hpcgym.machines import Machine
from synth import features
from synth.base import Synthesizer
from synth.distances import ks_statistic
from synth.replay import OUTAGE, busy_load, replay  # OUTAGE: the longest a gap counts in the governor's debt

GAP_BINS = np.array([0.0, 2.0, 4.0, 6.0, 8.0, 10.0])  # edges on log1p(gap): ~1 s, 1 min, 7 min, 50 min, 6 h
GAP_JITTER = 0.1  # sd of the Gaussian kernel on log1p(gap)
MIN_POOL = 30  # fewer training jobs than this: borrow from the coarser level
MAX_BANDWIDTH = 0.5  # Silverman's rule oversmooths the multimodal runtime pools (failures + full runs)
CLOSE = 0.25  # log-runtime difference below which a resubmitted job "runs about as long" as the one before
MIN_RUNS = 8  # runtime kernel pools smaller than this back off to the coarser level
EDGE_BANDWIDTH = 0.02  # the runtime kernels' sd at the walltime (log run / walltime = 0)
N_CLASSES = 20 * 16  # request classes: 16 walltime octaves x 20 node-count octaves (see _request_class)
MIX_ROUNDS = 3  # rounds of the request-mix calibration
MIX_JOBS = 100_000  # jobs sampled per round, at least (more when the training table is longer)
MIX_CLIP = 5.0  # a round changes a request's weight by at most this factor
GOVERNOR_JOBS = 2048  # the load governor's horizon, in the training data's mean gaps: the longest evaluation window
GOVERNOR_LIMIT = 2.0  # the governor stretches or shrinks a gap by at most this factor
CHUNK = 1 << 16  # the arrival clock works out every hour class's gap for this many jobs at a time
SLOW_SHARES = (0.0, 0.1, 0.2)  # the slow component's candidate shares of the normal scores' variance
SLOW_MEMORY = 86_400.0  # the slow component remembers this long of the data's arrivals (seconds between outages)
SLOW_MAX_JOBS = GOVERNOR_JOBS // 8  # the slow component's memory, in jobs, at most (the governor must outlast it)
GOVERNOR_SHARE = 4  # a governor's horizon is at most the training table's length over this (tiny logs)
PHI_GAPS = 16_000  # gaps per sample in the AR(1) coefficient's bisection
PHI_STEPS = 9  # bisection steps: the coefficient to within 0.002
CAL_SAMPLES = 16  # samples per candidate share in the slow component's calibration
CAL_JOBS = 16_384  # jobs per calibration sample, at most (the training table's length when it is shorter)
CLOSE_ROUNDS = 8  # passes of the governed clock, at most, to hold a long sample's load exactly
CLOSE_TOLERANCE = 0.005  # relative error of a long sample's load that ends the passes
OWNER_PRIOR = 1.0  # pseudo-sessions of the activity profile beside a request's own users (revision 7)


def _calendar(clocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hour of day and weekday (0 = Monday) of Unix times: 1970-01-01 was a Thursday."""
    return (clocks // 3600) % 24, ((clocks // 86400) + 3) % 7


def _hour_class(hour: np.ndarray, dow: np.ndarray) -> np.ndarray:
    return hour + 24 * (dow >= 5)


def _period(hour: np.ndarray, dow: np.ndarray) -> np.ndarray:
    return hour // 6 + 4 * (dow >= 5)  # 8 periods: quarter of the day x weekday/weekend


def arrival_context(hour: np.ndarray, dow: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each job's arrival context (48): its period of the day (:func:`_period`) x the bin of the log gap before it."""
    return _period(hour, dow) * len(GAP_BINS) + _gap_bin(x)


def _lag1(x: np.ndarray) -> float:
    """Lag-1 autocorrelation; 0 for a series with none to measure (too short, or constant: a burst of submits)."""
    if len(x) <= 2 or np.ptp(x[1:]) == 0 or np.ptp(x[:-1]) == 0:
        return 0.0
    return float(np.corrcoef(x[1:], x[:-1])[0, 1])


def _gap_bin(x: np.ndarray) -> np.ndarray:
    return np.searchsorted(GAP_BINS, x, side="right") - 1


def _request_class(nodes: np.ndarray, wall: np.ndarray) -> np.ndarray:
    wb = np.clip(np.floor(np.log2(np.maximum(wall, 60) / 60.0)), 0, 15).astype(np.int64)
    nb = np.clip(np.floor(np.log2(np.maximum(nodes, 1))), 0, 19).astype(np.int64)
    return wb * 20 + nb


def _ratio(target: np.ndarray, got: np.ndarray) -> np.ndarray:
    """``target / got`` where something was drawn, else 1 (nothing to correct)."""
    return np.where(got > 0, target / np.maximum(got, 1e-12), 1.0)


def _repeats(request: np.ndarray, user: np.ndarray) -> np.ndarray:
    """For each job but the first, whether it repeats the previous job's user and request (continues its session)."""
    return (request[1:] == request[:-1]) & (user[1:] == user[:-1])


def _returns(starts: np.ndarray, user: np.ndarray, request: np.ndarray,
             n_requests: int) -> tuple[np.ndarray, np.ndarray]:
    """Session starts of known users that return to a request: ``(j, i)``, ``i`` the user's last start of it."""
    starts = starts[user[starts] >= 0]
    back = _previous_same(user[starts].astype(np.int64) * n_requests + request[starts])
    return starts[back >= 0], starts[back[back >= 0]]


def _previous_same(key: np.ndarray) -> np.ndarray:
    """For each entry, the position of the last earlier entry with the same key (-1: none)."""
    order = np.argsort(key, kind="stable")  # positions ascending within each key
    back = np.full(len(key), -1, np.int64)
    same = key[order[1:]] == key[order[:-1]]
    back[order[1:][same]] = order[:-1][same]
    return back


def _draw_rows(cdf: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per entry of ``rows``, from that row of a matrix of cumulative probabilities."""
    u = rng.random(len(rows))
    if cdf.shape[1] <= 64:  # few categories: one vectorized comparison
        return np.minimum((u[:, None] * cdf[rows, -1:] >= cdf[rows]).sum(axis=1), cdf.shape[1] - 1)
    out = np.empty(len(rows), np.int64)
    for r in np.unique(rows):
        mask = rows == r
        out[mask] = np.searchsorted(cdf[r], u[mask] * cdf[r, -1], side="right")
    return np.minimum(out, cdf.shape[1] - 1)


class _Kernel:
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
    """``centre`` plus Gaussian noise whose sd shrinks near ``edge`` (see :class:`_Kernel`)."""
    return centre + _edge_sd(centre, bandwidth, edge) * rng.standard_normal(len(centre))


def _edge_sd(centre: np.ndarray | float, bandwidth: np.ndarray | float, edge: float) -> np.ndarray | float:
    """The kernel's sd at ``centre``: ``bandwidth``, at most the distance to ``edge`` (at least EDGE_BANDWIDTH)."""
    return np.minimum(bandwidth, np.maximum(np.abs(edge - centre), EDGE_BANDWIDTH))


class ArrivalAwareSynthesizer(Synthesizer):
    """The arrival-aware generator (see the module docstring).

    Args:
        max_nodes: machine size (default: the largest job seen).
        load: the samples' offered load, outages included (None: the training jobs').
        machine_nodes: nodes of the machine the load refers to (default ``max_nodes``).
        jitter: the smallest kernel bandwidth of the runtime densities (on ``log`` seconds).
        smoothing: pseudo-count of the shrinkage of the conditional request and outcome distributions.
        slow: the slow arrival component's share of the normal scores' variance (None: calibrated at fit time,
            see the module docstring, item 1).
    """

    name = "arrivals"
    packages = ("numpy", "pandas", "scipy")
    revision = 7  # 2: runtime kernels shrink at the walltime; 3: the request mix is calibrated; 4: load governor;
    # 5: outages stratified; 6: a slow arrival component, and long samples hold their load exactly; 7: users own
    # their requests, sessions keep their outcome, returning users run as long as last time, no gap becomes an outage

    def __init__(self, max_nodes: int | None = None, load: float | None = None, machine_nodes: int | None = None,
                 jitter: float = 0.3, smoothing: float = 20.0, slow: float | None = None, **params: Any):
        if slow is not None and not 0.0 <= slow < 1.0:
            raise ValueError(f"arrivals: slow must be in [0, 1), not {slow!r}")
        super().__init__(max_nodes=max_nodes, load=load, machine_nodes=machine_nodes, jitter=jitter,
                         smoothing=smoothing, slow=slow, **params)
        self.load, self.machine_nodes, self.jitter, self.smoothing = load, machine_nodes, jitter, smoothing
        self.slow = slow

    # ---- fitting ---------------------------------------------------------------------------------------------
    def _fit(self, table: pd.DataFrame, jobs: pd.DataFrame, rng: np.random.Generator) -> None:
        x = np.log1p(table["interarrival"].to_numpy(np.float64))
        hour, dow = table["hour"].to_numpy(), table["dow"].to_numpy()
        # a gap belongs to the hour class where it *starts* (the previous submit), as the generator draws it
        hc = _hour_class(hour, dow)[:-1]
        busy = table["interarrival"].to_numpy(np.int64)[1:] <= OUTAGE  # outages are placed apart (_fit_outages)
        if not busy.any():  # nothing to learn the gaps from (every quantile pool would be empty)
            raise ValueError(f"arrivals: every gap between the {len(jobs)} training jobs' submits is over {OUTAGE:,} s "
                             f"({OUTAGE / 3600:g} h), which the model counts as an outage; it needs jobs submitted "
                             f"less than {OUTAGE / 3600:g} h apart to learn the arrival process from")
        self.quantiles = {}
        for c in range(48):
            pool = x[1:][(hc == c) & busy]
            self.quantiles[c] = np.sort(pool if pool.size >= MIN_POOL else x[1:][busy])  # sparse: borrow the whole
        self._fit_outages(table["interarrival"].to_numpy(np.int64)[1:])
        busy_gaps = table["interarrival"].to_numpy(np.float64)[1:][busy]
        # the governor's horizon in jobs: a tiny log cannot tell how its load varies over stretches near its length
        self.horizon_jobs = int(max(min(GOVERNOR_JOBS, len(jobs) // GOVERNOR_SHARE), 1))
        # the slow component remembers a day of the data's jobs (at most an eighth of the horizon)
        day = SLOW_MEMORY / max(busy_gaps.mean(), 1.0) if busy_gaps.size else 1.0
        self.slow_jobs = float(max(min(day, SLOW_MAX_JOBS * self.horizon_jobs / GOVERNOR_JOBS), 1.0))
        self.slow_share = 0.0  # the calibrations below run without it; _fit_slow picks it last
        self.phi_seed = int(rng.integers(2**31))
        lag1 = _lag1(x)
        self.phi = self._calibrate_phi(lag1, np.random.default_rng(self.phi_seed))
        ctx = arrival_context(hour, dow, x)
        self.perfect = bool((~jobs["walltime_known"].to_numpy(bool)).mean() > 0.5)  # no estimates in the data
        self._fit_requests(table, ctx)
        self._fit_sessions(table, x)
        self._fit_outcomes(table)
        self._fit_runtimes(table)
        self._calibrate_mix(rng)
        self._fit_load(jobs)
        self._fit_slow(jobs, lag1, rng)

    def _fit_outages(self, gaps: np.ndarray) -> None:
        """The data's outages (gaps over :data:`OUTAGE`): their lengths past it, sorted, and that time per gap."""
        self.outage_excess = np.sort(gaps[gaps > OUTAGE] - OUTAGE).astype(np.float64)
        self.outage_per_gap = float(self.outage_excess.sum() / max(len(gaps), 1))

    def _fit_load(self, jobs: pd.DataFrame) -> None:
        """The governor's target and its time unit.

        The target is the training jobs' load between outages, or ``load`` over one minus the data's outage share.
        """
        nodes = int(self.machine_nodes or self.max_nodes)
        span = float(jobs["submit"].iat[-1] - jobs["submit"].iat[0])
        own = busy_load(jobs, nodes)  # the training jobs' load between outages
        # ``load`` is the whole-trace load: the samples carry the data's outage share, so hold it / (1 - that share)
        target = own if self.load is None else self.load * own / offered_load(jobs, nodes)
        usable = bool(np.isfinite(own) and own > 0 and target > 0)
        self.target_load = float(target) if usable else None  # None: no governor (no time span to learn from)
        self.own_load = float(own) if usable else None
        # a load asked for: every gap scaled at once, so that the governor only corrects the samples' fluctuations
        self.gap_scale = float(own / target) if usable else 1.0
        self.mean_gap = span / (len(jobs) - 1)

    def _fit_slow(self, jobs: pd.DataFrame, lag1: float, rng: np.random.Generator) -> None:
        """The slow component's share: ``slow`` when given, else the candidate whose samples queue most like the data.

        Each candidate of :data:`SLOW_SHARES` (with ``phi`` calibrated again for it) draws :data:`CAL_SAMPLES`
        samples of the training table's length (at most :data:`CAL_JOBS`) at the training jobs' own load, the same
        seeds for every candidate; each is replayed under FCFS + EASY on the machine, and the share whose mean
        whole-trace wait KS against the training jobs' own replay is lowest wins (ties: the smaller share).
        """
        phi0 = self.phi  # calibrated without the slow component (_fit)
        if self.slow is not None or self.own_load is None:  # given, or no load to replay the samples at
            self.slow_share = float(self.slow or 0.0)
            self.phi = self._phi_for(lag1) if self.slow_share > 0 else phi0
            return
        machine = Machine("arrivals-calibration", int(self.machine_nodes or self.max_nodes))
        data_wait = replay(jobs, machine)["records"]["wait"].to_numpy()
        seeds = rng.integers(2**31, size=CAL_SAMPLES)
        n = min(len(jobs), CAL_JOBS)
        kept = (self.target_load, self.gap_scale)
        self.target_load, self.gap_scale = self.own_load, 1.0  # the data's own load, as its replay has
        scores = {}
        try:
            for share in SLOW_SHARES:
                self.slow_share = share
                self.phi = phi = self._phi_for(lag1) if share > 0 else phi0
                waits = [replay(features.to_jobs(self._sample(n, np.random.default_rng(int(s)))), machine)
                         ["records"]["wait"].to_numpy() for s in seeds]
                scores[share] = (float(np.mean([ks_statistic(w, data_wait) for w in waits])), phi)
        finally:
            self.target_load, self.gap_scale = kept
        self.slow_share = min(scores, key=lambda a: (scores[a][0], a))
        self.phi = scores[self.slow_share][1]
        self.slow_scores = {a: v[0] for a, v in scores.items()}

    def _phi_for(self, lag1: float) -> float:
        """``phi`` calibrated for the current slow share (the same seed for every share)."""
        self.phi = self._calibrate_phi(lag1, np.random.default_rng(self.phi_seed))
        return self.phi

    def _fit_requests(self, table: pd.DataFrame, ctx: np.ndarray) -> None:
        """The request menu and its cumulative distribution per arrival context, shrunk towards the overall one."""
        pairs = table[["nodes", "walltime"]].to_numpy(np.int64)
        menu, self.request = np.unique(pairs, axis=0, return_inverse=True)
        self.request = self.request.ravel()
        self.menu_nodes, self.menu_wall = menu[:, 0], menu[:, 1]
        n_ctx, n_req = 8 * len(GAP_BINS), len(menu)
        counts = np.zeros((n_ctx, n_req))
        np.add.at(counts, (ctx, self.request), 1.0)
        overall = counts.sum(axis=0) / counts.sum()
        probs = (counts + self.smoothing * overall) / (counts.sum(axis=1, keepdims=True) + self.smoothing)
        self.request_cdf = np.cumsum(probs, axis=1)

    def _fit_sessions(self, table: pd.DataFrame, x: np.ndarray) -> None:
        """P(same user and request as the previous job | gap bin), the users' activity profile, and who owns what."""
        user = table["user"].to_numpy()
        self.users_known = bool((user >= 0).any())  # anonymised logs have none: the samples' users are -1 too
        same = _repeats(self.request, user)
        b = _gap_bin(x[1:])
        self.p_same = np.array([same[b == k].mean() if (b == k).sum() >= MIN_POOL else same.mean()
                                for k in range(len(GAP_BINS))])
        # sessions per user, sorted: an activity profile without the ids (rank 0: the most sessions)
        starts = np.concatenate([[True], ~same])
        _, user_of = np.unique(user[starts], return_inverse=True)
        sessions = np.bincount(user_of.ravel()).astype(np.float64)
        by_rank = np.argsort(-sessions, kind="stable")
        rank_of = np.empty_like(by_rank)
        rank_of[by_rank] = np.arange(len(by_rank))
        self.user_weights = np.cumsum(sessions[by_rank] / sessions.sum())
        # who opened each request's sessions (their ranks, grouped by request): a session's user is drawn from them
        request, rank = self.request[starts], rank_of[user_of.ravel()]
        order = np.lexsort((rank, request))
        self.owner_ranks = rank[order].astype(np.int64)
        self.owner_start = np.searchsorted(request[order], np.arange(len(self.menu_nodes) + 1))
        top = int(max(np.max(np.abs(user)), 1))
        self.user_base = 10 ** max(6, len(str(top)))  # above every training id: a synthetic id is never a real one

    def _fit_outcomes(self, table: pd.DataFrame) -> None:
        """P(outcome | request), shrunk towards P(outcome | request class); outcome = (status, overran walltime)."""
        run, wall = table["run"].to_numpy(np.int64), table["walltime"].to_numpy(np.int64)
        self.statuses, status = np.unique(table["status"].astype(str).to_numpy(), return_inverse=True)
        self.outcome = status.ravel() * 2 + (run > wall)
        n_out = 2 * len(self.statuses)
        self.menu_class = _request_class(self.menu_nodes, self.menu_wall)
        by_req = np.zeros((len(self.menu_nodes), n_out))
        np.add.at(by_req, (self.request, self.outcome), 1.0)
        by_class = np.zeros((N_CLASSES, n_out))
        np.add.at(by_class, (self.menu_class[self.request], self.outcome), 1.0)
        prior = by_class[self.menu_class] / by_class[self.menu_class].sum(axis=1, keepdims=True)
        probs = (by_req + self.smoothing * prior) / (by_req.sum(axis=1, keepdims=True) + self.smoothing)
        self.outcome_cdf = np.cumsum(probs, axis=1)
        # a resubmitted job keeps the previous job's outcome with probability p_keep, else draws afresh: fitted so
        # that session pairs agree as often as the data's (two fresh draws of request r agree with sum_o P(o|r)^2)
        user = table["user"].to_numpy()
        pair = _repeats(self.request, user)
        self.p_keep = 0.0
        if pair.sum() >= MIN_POOL:
            agree = float((self.outcome[1:] == self.outcome[:-1])[pair].mean())
            fresh = float((probs[self.request[1:][pair]] ** 2).sum(axis=1).mean())
            self.p_keep = float(np.clip((agree - fresh) / (1.0 - fresh), 0.0, 1.0)) if fresh < 1.0 else 0.0

    def _fit_runtimes(self, table: pd.DataFrame) -> None:
        """Kernel densities of log(run) (finished jobs) and log1p(overrun) (jobs past their walltime)."""
        run, wall = table["run"].to_numpy(np.int64), table["walltime"].to_numpy(np.int64)
        over = run > wall
        n_out = 2 * len(self.statuses)
        fin, o = ~over, self.outcome
        ratio = np.log(np.maximum(run, 1) / wall)  # <= 0 for the jobs that finish
        top = MAX_BANDWIDTH
        self.run_levels = [
            _Kernel((self.request * n_out + o)[fin], ratio[fin], self.jitter, top, edge=0.0),
            _Kernel((self.menu_class[self.request] * n_out + o)[fin], ratio[fin], self.jitter, top, edge=0.0),
            _Kernel(o[fin], ratio[fin], self.jitter, top, edge=0.0),
        ]
        self.overrun = _Kernel(o[over], np.log1p((run - wall)[over].astype(np.float64)), self.jitter)
        # a resubmitted job often runs about as long as the one before it: the share of such pairs, and their spread
        user = table["user"].to_numpy()
        repeat = _repeats(self.request, user)
        d = (ratio[1:] - ratio[:-1])[repeat & (o[1:] == o[:-1]) & fin[1:]]
        close = np.abs(d) < CLOSE
        self.p_close = float(close.mean()) if d.size >= MIN_POOL else 0.0
        self.close_sd = float(max(np.std(d[close]) if close.sum() > 1 else 0.0, self.jitter))
        # a user who comes back to a request often runs about as long as when they last opened a session of it
        j, i = _returns(np.flatnonzero(np.concatenate([[True], ~repeat])), user, self.request, len(self.menu_nodes))
        ok = (o[j] == o[i]) & fin[j] & fin[i]
        d = (ratio[j] - ratio[i])[ok]
        self.p_return = float((np.abs(d) < CLOSE).mean()) if d.size >= MIN_POOL else 0.0

    def _calibrate_mix(self, rng: np.random.Generator) -> None:
        """Reweight the new-session request draw until the sampled jobs' request mix matches the training jobs'.

        A new session draws its request given its arrival context, from the distribution fitted on *all* jobs, and
        then repeats it. Session starts do not fall in the contexts jobs fall in (they follow longer gaps), so
        without a correction the sampled mix drifts from the data's: on Theta's train split to 145 nodes on average
        instead of 158, on HPC2N's to 4.2 instead of 3.8, and the whole-trace waits drift with it. Each round
        samples :data:`MIX_JOBS` (or as many as the training table) request sequences and multiplies each request's
        probability, in every context, by its training share over its sampled share: per request where it has
        :data:`MIN_POOL` training jobs or more, else per request class (the requests' octaves of nodes and
        walltime), clipped to [1/:data:`MIX_CLIP`, :data:`MIX_CLIP`]. (Classes alone leave the mix inside a class
        free: on Mustang they cut the mean requested area to 0.88 of the data's.)
        """
        n_req = len(self.menu_nodes)
        count = np.bincount(self.request, minlength=n_req).astype(np.float64)
        own = count >= MIN_POOL
        probs = np.diff(self.request_cdf, axis=1, prepend=0.0)
        seed = int(rng.integers(2**31))
        for _ in range(MIX_ROUNDS):
            request = self._requests(max(MIX_JOBS, len(self.request)), np.random.default_rng(seed))[0]
            got = np.bincount(request, minlength=n_req) / len(request)
            weight = _ratio(count / count.sum(), got)
            by_class = _ratio(np.bincount(self.menu_class, count / count.sum(), N_CLASSES),
                              np.bincount(self.menu_class, got, N_CLASSES))
            weight = np.clip(np.where(own, weight, by_class[self.menu_class]), 1 / MIX_CLIP, MIX_CLIP)
            probs = probs * weight[None, :]
            probs /= probs.sum(axis=1, keepdims=True)
            self.request_cdf = np.cumsum(probs, axis=1)
        self.mix_tv = float(0.5 * np.abs(got - count / count.sum()).sum())  # the last round's, before reweighting

    def _calibrate_phi(self, target: float, rng: np.random.Generator) -> float:
        """Bisect the AR(1) coefficient so that generated gaps have the data's lag-1 autocorrelation of log gaps.

        The normal-score coefficient alone falls short: the hour classes absorb part of the dependence. (Revision 6:
        :data:`PHI_GAPS` gaps, not 4,000, and :data:`PHI_STEPS` steps: the lag-1 autocorrelation of 4,000 gaps of
        one seed is off by about 0.015, and Theta's samples landed at 0.397-0.405 for the data's 0.434.)
        """
        lo, hi = 0.0, 0.99
        seed = int(rng.integers(2**31))
        for _ in range(PHI_STEPS):
            self.phi = (lo + hi) / 2
            gaps, _, _ = self._gaps(PHI_GAPS, np.random.default_rng(seed), self.unix_start_time)
            if _lag1(np.log1p(gaps[1:].astype(np.float64))) < target:
                lo = self.phi
            else:
                hi = self.phi
        return (lo + hi) / 2

    # ---- sampling --------------------------------------------------------------------------------------------
    def _draws(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The arrival process's randomness: uniform scores (AR(1) plus the slow component), kernel noise, outages.

        The normal scores are ``sqrt(1 - a) fast + sqrt(a) slow``, both stationary AR(1) with unit variance: ``fast``
        with ``phi``, ``slow`` with memory ``slow_jobs`` (coefficient ``1 - 1/slow_jobs``), ``a = slow_share``. The
        slow draws come last, so that every share sees the same fast scores, kernel noise and outages.
        """
        eps = rng.standard_normal(n) * np.sqrt(1.0 - self.phi**2)
        z = lfilter([1.0], [1.0, -self.phi], eps)
        noise = rng.normal(0.0, GAP_JITTER, n)  # kernel smoothing of the log gaps
        outages = self._outages(n, rng)
        share = getattr(self, "slow_share", 0.0)
        slow = rng.standard_normal(n)
        if share > 0.0:
            rho = 1.0 - 1.0 / self.slow_jobs
            slow[1:] *= np.sqrt(1.0 - rho**2)  # the first score has unit variance: stationary from the start
            z = np.sqrt(1.0 - share) * z + np.sqrt(share) * lfilter([1.0], [1.0, -rho], slow)
        return ndtr(z), noise, outages

    def _outages(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Each job's gap where an outage precedes it, else 0: the data's outage time per gap, stratified.

        The budget is the training data's time past :data:`OUTAGE` per gap, times the sample's gaps (and the gaps'
        scale). It buys ``k = round(budget / mean length)`` outages, whose lengths are the data's at ``k``
        systematic quantiles (a random start, then every ``1/k``), scaled to spend the budget exactly, in a random
        order, one at a random job of each of ``k`` equal strata of the sample. A budget below half a mean length
        (a short sample) buys one outage of a length drawn from the data's with probability ``budget / mean``, so
        that short samples have the data's share of outages in expectation (see the module docstring, item 7).
        """
        out = np.zeros(n, np.int64)
        lengths = getattr(self, "outage_excess", np.zeros(0))
        if not lengths.size or n < 2:
            return out
        budget = self.outage_per_gap * (n - 1) * getattr(self, "gap_scale", 1.0)
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

    def _gaps(self, n: int, rng: np.random.Generator, clock0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gaps with the AR(1) normal scores mapped through the current hour class's (interpolated) quantiles."""
        return self._clock(*self._draws(n, rng), clock0)

    def _clock(self, u: np.ndarray, noise: np.ndarray, outage: np.ndarray, clock0: int,
               work: np.ndarray | None = None, target: float | None = None, stretch: float = 1.0,
               cache: dict | None = None,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Run the arrival clock: each gap from the hour class the clock is in; with ``work``, governed.

        Every gap is worked out for all 48 hour classes at once (:data:`CHUNK` jobs at a time), and the loop only
        picks the class of the clock. Every gap is scaled by ``gap_scale`` (1 unless a ``load`` was asked for). With
        ``work`` (each job's node-seconds) the governor stretches each gap by ``exp(debt / horizon)``, bounded by
        :data:`GOVERNOR_LIMIT`, where ``debt`` is the work submitted so far divided by the target's node-seconds
        per second, minus the time elapsed (a gap counting at most :data:`OUTAGE`), and ``horizon`` is
        :data:`GOVERNOR_JOBS` mean gaps (see the module docstring). ``target`` replaces ``target_load`` as the
        governor's load and ``stretch`` multiplies every gap but the outages before the governor sees it
        (:meth:`_governed_clock` moves both); ``cache`` keeps each chunk's gaps per hour class for the next pass
        over the same random numbers.

        Returns:
            ``(gaps, hours, dows)``: the gaps (the first is 0) and the hour and weekday of each submit.
        """
        n = len(u)
        gaps, clocks = np.zeros(n, np.int64), np.empty(n, np.int64)
        grid = {c: (np.arange(len(q)) + 0.5) / len(q) for c, q in self.quantiles.items()}
        governed = work is not None and getattr(self, "target_load", None) is not None
        per_work, horizon, limit = 0.0, 1.0, float(np.log(GOVERNOR_LIMIT))
        scale = getattr(self, "gap_scale", 1.0)  # 1 while fitting (the calibrations run before the load's)
        if governed:
            per_work = 1.0 / ((target or self.target_load) * int(self.machine_nodes or self.max_nodes))
            horizon = self.horizon_jobs * self.mean_gap * scale
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
        return (gaps, *_calendar(clocks))

    def _governed_clock(self, draws: tuple[np.ndarray, np.ndarray, np.ndarray], work: np.ndarray,
                        cache: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The governed arrival clock; a sample longer than the governor's horizon offers the target load exactly.

        The governor leaves a debt at the end of a sample, so a sample's load between outages varies about the
        target (Theta, 7,016 jobs: sd 0.033 about 0.805), and a burst it cannot stretch enough (at most
        :data:`GOVERNOR_LIMIT`) stays (Mustang: a sample at 0.872 for 0.711). Past the horizon (``horizon_jobs``), the
        clock runs again (at most :data:`CLOSE_ROUNDS` passes, the same random numbers) with the governor's target
        moved by the square root of the ratio of the target to the load obtained and every gap stretched by the
        square root of its inverse (the stretch still works where the governor is at its limit), until they agree
        within :data:`CLOSE_TOLERANCE`. The gaps are stretched inside the clock, so the hour classes follow it. Where
        the passes do not get there, the closest is scaled at once (:meth:`_rescaled`).
        """
        if len(work) <= self.horizon_jobs:  # a short sample (a training episode) keeps its burstiness
            return self._clock(*draws, self.unix_start_time, work=work, cache=cache)
        out = self._clock(*draws, self.unix_start_time, work=work, cache=cache)
        # the load of the jobs handed back: Synthesizer.sample draws n + 1 and keeps the first n (on a 148-job sample
        # the last job's work alone moved the load by up to 5%)
        nodes, total = int(self.machine_nodes or self.max_nodes), float(work[:-1].sum())
        need = total / (nodes * self.target_load)  # the node-seconds' span the target asks for
        if len(work) < 3 or need <= 0:
            return out  # no span to hold
        target, stretch, best = self.target_load, 1.0, (np.inf, out)
        for k in range(CLOSE_ROUNDS):
            ratio = float(np.minimum(out[0][1:-1], OUTAGE).sum()) / need  # < 1: too much load
            best = min(best, (abs(ratio - 1.0), out), key=lambda b: b[0])
            if abs(ratio - 1.0) <= CLOSE_TOLERANCE or k == CLOSE_ROUNDS - 1 or ratio <= 0:
                break
            target, stretch = target * ratio**0.5, stretch / ratio**0.5  # half each: together, one ratio
            out = self._clock(*draws, self.unix_start_time, work=work, target=target, stretch=stretch, cache=cache)
        return self._rescaled(best[1], need) if best[0] > CLOSE_TOLERANCE else best[1]

    def _rescaled(self, clock: tuple[np.ndarray, np.ndarray, np.ndarray],
                  need: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The clock's gaps but the outages scaled at once so that the span (outages capped) is ``need``.

        The last resort of :meth:`_governed_clock` where the passes oscillate (the hour classes make the load a step
        function of the target: a 148-job Mustang sample cycled between 0.658 and 0.726 for 0.700); the hours and
        weekdays follow the scaled clock.
        """
        gaps = clock[0].astype(np.float64)
        inner = gaps[1:-1]
        free = inner <= OUTAGE
        fixed = OUTAGE * float((~free).sum())
        if inner[free].sum() > 0 and need > fixed:
            gaps[1:-1] = np.where(free, np.minimum(inner * (need - fixed) / inner[free].sum(), OUTAGE), inner)
        gaps = np.round(gaps).astype(np.int64)
        return (gaps, *_calendar(int(self.unix_start_time) + np.cumsum(gaps)))

    def _runtimes(self, request: np.ndarray, outcome: np.ndarray, first: np.ndarray, user: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
        """Smoothed runtimes: below the walltime for finished jobs, walltime + a smoothed overrun for the rest.

        ``first`` is the index of each job's session start: with probability ``p_close`` a resubmitted job with the
        same outcome runs about as long as its session's first job (``close_sd`` apart, on log seconds). A session's
        first job whose user opened a session of the same request before runs, with probability ``p_return`` and the
        same outcome, about as long as that session's first job (revision 7; ``user``: each job's user rank, or -1).
        """
        n_out = 2 * len(self.statuses)
        wall = self.menu_wall[request]
        keys = [request * n_out + outcome, self.menu_class[request] * n_out + outcome, outcome]
        level = np.full(len(request), 2)
        for k in (1, 0):
            level = np.where(self.run_levels[k].size(keys[k]) >= MIN_RUNS, k, level)
        over = outcome % 2 == 1
        v = np.zeros(len(request))  # the overrun jobs' entries are unused (np.empty's garbage warned in casts)
        for k in range(3):
            m = (level == k) & ~over
            v[m] = self.run_levels[k].draw(keys[k][m], rng)
        coin = rng.random(len(request))
        z = rng.standard_normal(len(request))  # the noise of the jobs that run about as long as an earlier one
        opens = first == np.arange(len(v))
        near = (coin < self.p_close) & (outcome == outcome[first]) & ~opens
        j, i = _returns(np.flatnonzero(opens), user, request, len(self.menu_nodes))
        comes_back = (coin[j] < self.p_return) & (outcome[j] == outcome[i]) & ~over[j] & ~over[i]
        for a, b in zip(j[comes_back].tolist(), i[comes_back].tolist(), strict=True):  # in order: b's value is final
            v[a] = self._near(v[b], z[a])
        v = np.where(near, self._near(v[first], z), v)
        run = np.clip(np.round(wall * np.exp(-np.abs(v))), 1, wall).astype(np.int64)  # reflected at the walltime
        if over.any():
            extra = np.expm1(np.maximum(self.overrun.draw(outcome[over], rng), 0.0))
            run[over] = wall[over] + np.maximum(np.round(extra), 1).astype(np.int64)
        return run

    def _near(self, centre: np.ndarray | float, z: np.ndarray | float) -> np.ndarray | float:
        """A log runtime ratio about ``centre``: ``close_sd`` of noise, shrunk near the walltime (as edge_noise)."""
        centre = -np.abs(centre)
        return centre + _edge_sd(centre, self.close_sd, 0.0) * z

    def _requests(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...],
                                                                    tuple[np.ndarray, ...], dict | None]:
        """Arrivals, sessions and requests: each job's request index, its session's index, and the arrival arrays.

        Returns:
            ``(request, session, (gaps, hours, dows, starts), draws, rows)``; ``starts`` are the jobs that open a
            session, ``draws`` the arrival process's randomness (:meth:`_draws`) and ``rows`` the clock's gaps per
            hour class (``None`` past :data:`CHUNK` jobs), to run the clock again governed.
        """
        draws = self._draws(n, rng)
        rows = {} if n <= CHUNK else None  # the governed passes reuse these gaps per hour class (_sample)
        gaps, hours, dows = self._clock(*draws, self.unix_start_time, cache=rows)
        x = np.log1p(gaps.astype(np.float64))
        bins = _gap_bin(x)
        ctx = arrival_context(hours, dows, x)
        repeat = rng.random(n) < self.p_same[bins]
        repeat[0] = False
        session = np.cumsum(~repeat) - 1
        starts = np.flatnonzero(~repeat)
        request = _draw_rows(self.request_cdf, ctx[starts], rng)[session]
        return request, session, (gaps, hours, dows, starts), draws, rows

    def sample(self, n_jobs: int, seed: int | np.random.Generator | None = None) -> pd.DataFrame:
        """``n_jobs`` jobs (see :meth:`synth.base.Synthesizer.sample`).

        Where the data had no walltimes, the jobs are flagged as the readers flag such jobs: ``walltime_known``
        false, ``walltime = run`` (perfect estimates).
        """
        out = super().sample(n_jobs, seed)
        if getattr(self, "perfect", False):
            out["walltime_known"] = False
        return out

    def _session_users(self, request: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Each session's user rank, given its request and one uniform draw ``u`` per session.

        With probability ``k / (k + OWNER_PRIOR)`` (``k >= 1``: the request's sessions in the training data; a
        request's first job opens one) one of the users who opened them, else a user of the activity profile; one
        uniform per session does both (its low part picks the owner, the rest is rescaled for the profile).
        """
        lo, hi = self.owner_start[request], self.owner_start[request + 1]
        k = hi - lo
        w = k / (k + OWNER_PRIOR)
        owner = self.owner_ranks[np.minimum(lo + (u / w * k).astype(np.int64), hi - 1)]
        rest = np.clip((u - w) / (1.0 - w), 0.0, 1.0 - 1e-12)
        profile = np.searchsorted(self.user_weights, rest * self.user_weights[-1], side="right")
        return np.where(u < w, owner, profile)

    def _session_outcomes(self, fresh: np.ndarray, session: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each job keeps the previous job's outcome within its session with probability ``p_keep``.

        Else it keeps its own fresh draw; a kept outcome is a fresh draw of the same request's, so the marginal is
        unchanged.
        """
        keep = rng.random(len(fresh)) < self.p_keep
        keep[0] = False
        keep[1:] &= session[1:] == session[:-1]
        source = np.maximum.accumulate(np.where(keep, 0, np.arange(len(fresh))))
        return fresh[source]

    def _sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        request, session, (gaps, hours, dows, starts), draws, rows = self._requests(n, rng)
        rank = self._session_users(request[starts], rng.random(len(starts)))
        rank = rank[session] if self.users_known else np.full(n, -1, np.int64)  # each job's user rank, or -1
        user = np.where(rank >= 0, self.user_base + 1 + rank, -1)
        outcome = self._session_outcomes(_draw_rows(self.outcome_cdf, request, rng), session, rng)
        run = self._runtimes(request, outcome, starts[session], rank, rng)
        nodes, wall = self.menu_nodes[request], self.menu_wall[request]
        if getattr(self, "perfect", False):  # the data has no estimates (walltime = run): smoothed, and kept equal
            wall = np.maximum(np.round(wall * np.exp(self.jitter * rng.standard_normal(n))), 1).astype(np.int64)
            run = wall
        if self.target_load is not None:  # the arrival clock again, governed by the jobs' work
            gaps, hours, dows = self._governed_clock(draws, nodes * run.astype(np.float64), rows)
        return pd.DataFrame({"interarrival": gaps, "nodes": nodes, "run": run, "walltime": wall, "user": user,
                             "status": self.statuses[outcome // 2], "hour": hours, "dow": dows})
