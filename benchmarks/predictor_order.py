"""Which estimates give SAF its best order, on a development split of the train split and on the test split.

Usage: ``python benchmarks/predictor_order.py --trace theta [--windows 20] [--window 1024] [--dev 0.4]``.

Almost all of the clairvoyant room is in the queue's order, not in EASY's reservations (``baselines.accuracy``'s
third table). This benchmark asks which estimates order best when the model is fitted on the past only:

- **dev**: the learned model (the trace's bundled loss, ``baselines.learned.fit_model``) fitted on the first
  ``1 - dev`` of the train split, and scored on windows of its last ``dev`` share;
- **test**: the model fitted on the whole train split, scored on the evaluation's test windows (window seed 0).

On each window SAF is ordered by fixed keys (estimate x nodes, the estimates made at each arrival from the history
of the window's FCFS+EASY schedule, as ``baselines.accuracy`` makes them) while EASY reserves on the walltimes, for
the estimates of ``walltime``, ``last2``, ``median5``, ``learned``, and ``learned`` corrected per user (the learned
estimate times the median ratio of runtime to learned estimate over the user's last five finished jobs, capped by the
walltime). Each row: the mean bsld and the paired ratio to ``median5`` with a 95% bootstrap CI over the windows,
and how many windows a CI as wide would need to resolve a 5% difference (``windows_for_5pct``: the CI's half-width
in log terms, scaled by the square root of the window count). The dev rows may choose; the test rows only measure.

**Variants of the model** (rows after the orders): the same boosting, fitted on the same rows, with one change each:

- ``expected 10 s / runtime``: a Poisson fit of ``10 / max(runtime, 10)`` (the rate at which a job's bounded
  slowdown grows while it waits), its prediction ``r`` turned into the estimate ``10 / r``: a harmonic mean that
  puts a job with a fair chance of ending within seconds ahead of one that surely runs an hour;
- ``rows weighted by FCFS wait``: each training row weighted by ``0.05 +`` its hours of wait (at most 24) in the
  FCFS+EASY schedule the features come from: jobs that wait are those whose order matters;
- ``residual on median5``: the target is the log runtime less the log of ``median5`` (of the walltime for a user
  with no finished job), so that a user who repeats a job keeps the rule's estimate unless the model knows better;
- ``with submit-time columns``: the hour of day and day of week of the submit (the log's start time, UTC) and the
  log's queue, group and requested processors (those that vary), beside the history features.

They are not in the engine (their estimates are computed here, from the same features); they record what was tried.
"""

from __future__ import annotations

import argparse
import math
import warnings
from collections import defaultdict, deque
from collections.abc import Callable

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from baselines import learned
from baselines.accuracy import ordered_by
from hpcgym import machines, metrics, traces
from hpcgym.sim import hold_times, predict, simulate, start_times
from hpcgym.sim import learned as features

ORDERS = ("walltime", "last2", "median5", "learned", "learned, corrected per user")
VARIANTS = ("expected 10 s / runtime", "rows weighted by FCFS wait", "residual on median5",
            "with submit-time columns")
#: The bounded slowdown's threshold (seconds), as in :func:`hpcgym.metrics.bounded_slowdown`.
TAU = metrics.TAU
#: The columns of the log read by the ``with submit-time columns`` variant (where they vary).
LOG_COLUMNS = ("queue", "group", "req_procs")


def corrected(window: pd.DataFrame, nodes: int, estimate: np.ndarray, k: int = 5) -> np.ndarray:
    """``estimate`` times the median ratio of runtime to estimate over the user's last ``k`` finished jobs."""
    hold = hold_times(window)
    end = start_times(window, nodes, "fcfs", "easy") + hold
    submit, user = window["submit"].to_numpy(), window["user"].to_numpy()
    wall = window["walltime"].to_numpy()
    order, e = np.argsort(end, kind="stable"), 0
    ratios: dict[int, deque] = defaultdict(lambda: deque(maxlen=k))
    out = estimate.astype(np.float64).copy()
    for j in range(len(window)):
        while e < len(window) and end[order[e]] <= submit[j]:
            g = order[e]
            ratios[user[g]].append(np.log(max(hold[g], 1) / estimate[g]))
            e += 1
        if user[j] >= 0 and ratios[user[j]]:
            out[j] = min(wall[j], max(1.0, np.ceil(estimate[j] * np.exp(np.median(ratios[user[j]])))))
    return out


def submit_columns(jobs: pd.DataFrame, start: int, names: tuple[str, ...]) -> np.ndarray:
    """The hour of day, the day of week (``start``: the log's start, Unix seconds) and the log columns ``names``."""
    t = jobs["submit"].to_numpy(np.int64) + start
    cols = [(t // 3600) % 24, (t // 86400 + 3) % 7]  # 1970-01-01 was a Thursday (day 3, Monday 0)
    return np.column_stack([*cols, *(jobs[c].to_numpy(np.float64) for c in names)]).astype(np.float64)


def _fcfs_wait(part: pd.DataFrame, nodes: int) -> np.ndarray:
    return (start_times(part, nodes, "fcfs", "easy") - part["submit"].to_numpy(np.int64)).astype(np.float64)


def _offset(x: np.ndarray) -> np.ndarray:
    """The log of ``median5``, or of the walltime where the user has no finished job."""
    m5 = x[:, features.FEATURES.index("median5")]
    return np.log(np.where(np.isnan(m5), x[:, features.FEATURES.index("walltime")], np.maximum(m5, 1)))


def fit_variants(fitted: pd.DataFrame, nodes: int, loss: str, rows: tuple[np.ndarray, np.ndarray], seed: int = 0
                 ) -> dict[str, Callable[[np.ndarray, pd.DataFrame], np.ndarray]]:
    """Each of :data:`VARIANTS` fitted on ``fitted``: a function of (features, jobs) to log-second estimates.

    ``rows`` are ``fitted``'s training rows (:func:`baselines.learned.training_rows`).
    """
    x, y = rows
    keep = np.random.default_rng(seed).permutation(len(y))[:2 * learned.MAX_ROWS]
    start = int(fitted.attrs.get("unix_start_time") or 0)
    names = tuple(c for c in LOG_COLUMNS if c in fitted and fitted[c].nunique() > 1)
    parts = learned.training_parts(fitted)  # row for row as ``rows``
    wait = np.concatenate([_fcfs_wait(p, nodes) for p in parts])
    extra = np.concatenate([submit_columns(p, start, names) for p in parts])

    def fit(model, xs, target, weight=None):
        with threadpool_limits(1, "openmp"):
            return model.fit(xs[keep], target[keep], sample_weight=None if weight is None else weight[keep])

    rate = learned.regressor("squared_error", seed).set_params(loss="poisson")
    rate = fit(rate, x, TAU / np.maximum(np.exp(y), TAU))
    weighted = fit(learned.regressor(loss, seed), x, y, 0.05 + np.minimum(wait / 3600, 24))
    residual = fit(learned.regressor(loss, seed), x, y - _offset(x))
    wider = fit(learned.regressor(loss, seed), np.hstack([x, extra]), y)
    return {VARIANTS[0]: lambda xs, jobs: math.log(TAU) - np.log(rate.predict(xs)),
            VARIANTS[1]: lambda xs, jobs: weighted.predict(xs),
            VARIANTS[2]: lambda xs, jobs: residual.predict(xs) + _offset(xs),
            VARIANTS[3]: lambda xs, jobs: wider.predict(np.hstack([xs, submit_columns(jobs, start, names)]))}


def scores(windows: list[pd.DataFrame], machine: machines.Machine, packed: np.ndarray,
           variants: dict[str, Callable[[np.ndarray, pd.DataFrame], np.ndarray]] | None = None
           ) -> dict[str, list[float]]:
    """Each order's mean bsld on each window (and each variant's, where given)."""
    variants = variants or {}
    out: dict[str, list[float]] = {name: [] for name in (*ORDERS, *variants)}
    for w in windows:
        est = learned.predictions(w, machine.nodes, packed)
        keys = {name: est[name].to_numpy(np.float64) for name in ORDERS[:4]}
        keys[ORDERS[4]] = corrected(w, machine.nodes, est["learned"].to_numpy())
        if variants:
            x = learned.arrival_features(w, machine.nodes)
            wall = w["walltime"].to_numpy(np.float64)
            for name, estimate in variants.items():
                keys[name] = np.clip(np.ceil(np.exp(estimate(x, w))), 1, wall)
        for name, key in keys.items():
            out[name].append(float(simulate(w, machine, ordered_by(key), "easy")["bsld"].mean()))
    return out


def table(trace: str, windows: int, length: int, dev: float, variants: bool = True) -> pd.DataFrame:
    """The rows of one trace: dev, then test."""
    jobs = traces.load(trace)
    machine = machines.get(jobs.attrs["machine"])
    train, test = traces.split(jobs, "train"), traces.split(jobs, "test")
    loss = learned.about(predict.get(f"{predict.LEARNED_NAME}:{trace}").source)["loss"]
    cut = int(len(train) * (1 - dev))
    rows = []
    for part, fitted, scored, seed in (("dev", train.iloc[:cut], train.iloc[cut:], 1), ("test", train, test, 0)):
        x, y = learned.training_rows(fitted, machine.nodes)
        packed = learned.fit_model(x, y, loss, 0, 2 * learned.MAX_ROWS)
        starts = traces.window_starts(len(scored), length, windows, seed)
        fits = fit_variants(fitted, machine.nodes, loss, (x, y)) if variants else None
        got = scores([traces.window(scored, length, start=s) for s in starts], machine, packed, fits)
        for name, values in got.items():
            ratio, low, high = metrics.paired_ratio_ci(values, got["median5"])
            rows.append({"trace": trace, "part": part, "order": name, "bsld": float(np.mean(values)),
                         "vs_median5": ratio, "low": low, "high": high,
                         "windows_for_5pct": windows_for(low, high, len(values), 0.05)})
    return pd.DataFrame(rows)


def windows_for(low: float, high: float, windows: int, difference: float) -> float:
    """How many windows a paired CI ``(low, high)`` from ``windows`` would need to be ``+-difference`` wide.

    The half-width in log terms shrinks as one over the square root of the windows; NaN for a row against itself.
    """
    half = (math.log(high) - math.log(low)) / 2
    return float(np.ceil(windows * (half / math.log(1 + difference)) ** 2)) if half > 0 else math.nan


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", nargs="+", default=["theta", "sdsc-sp2", "hpc2n"])
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--dev", type=float, default=0.4, help="the share of the train split held out as dev")
    ap.add_argument("--no-variants", action="store_true", help="only the orders, not the variants of the model")
    ap.add_argument("--out", default=None, help="a CSV file for the rows")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    out = pd.concat([table(t, args.windows, args.window, args.dev, not args.no_variants) for t in args.trace],
                    ignore_index=True)
    print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        out.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
