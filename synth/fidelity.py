"""How close is a synthetic job trace to a real one? Metrics, each next to a real-vs-real noise floor.

Every pairwise metric is computed twice: between the **first and second half of the real train split**
(chronological; the *noise floor*: how much two stretches of the same real workload differ) and between the
**real train split and the synthetic trace**. A synthetic trace is as good as the real data can tell when its
number is near the floor. Per-trace statistics (CV, autocorrelation, load, ...) are shown as values and as absolute
differences (``|half 1 - half 2|`` for the floor, ``|synthetic - train|`` for the synthetic column).

Sections (each a plain function usable on its own):

1. :func:`marginals`: KS statistic and Wasserstein-1 distance on ``log1p`` of ``interarrival``, ``nodes``,
   ``run`` and ``walltime``.
2. :func:`correlations`: Spearman matrices over the numeric training columns and ``hour``; mean absolute difference
   of their off-diagonal entries.
3. :func:`sdmetrics_quality`: the SDMetrics ``QualityReport`` overall score (optional dependency; reported, not
   trusted: it scores marginals and pairwise trends one at a time and misses the rest).
4. :func:`c2st`: classifier two-sample test, 5-fold ROC AUC of gradient boosting (0.5 = indistinguishable).
5. :func:`validity`: non-integer nodes, power-of-two share, walltime-menu share, exact-copy rate.
6. :func:`arrival_stats` / :func:`hourly_profile`: inter-arrival CV, lag-1 autocorrelation of ``log1p``
   inter-arrivals, hourly index of dispersion, 24 h spectral peak, hour-of-day profile.
7. :func:`scheduling`: FCFS + EASY replays on the real machine in windows of consecutive jobs: offered load,
   utilization, KS of the wait and bounded-slowdown distributions.
8. :func:`dcr`: distance to closest record (privacy): synthetic rows vs holdout rows, both to the train rows.

:func:`fidelity_table` gives one row per metric; :func:`evaluate` computes everything (and writes the report of
:mod:`synth.report` when given ``out_dir``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable
from hpcgym import machines, metrics
from hpcgym import traces as tracelib
from hpcgym.machines import Machine
from synth import features
from synth.base import require

NUMERIC = features.NUMERIC  # interarrival, nodes, run, walltime
CORRELATION_COLUMNS = (*NUMERIC, "hour")
MENU_SIZE = 10
WINDOW = 2048
MAX_WINDOWS = 4
C2ST_ROWS = 5000
SDMETRICS_ROWS = 5000
DCR_ROWS = 2000
SEGMENT_DAYS = 7

#: Row name -> (section, ideal value as shown in the report).
METRICS: dict[str, tuple[str, str]] = {
    **{f"KS {c}": ("marginals", "0") for c in NUMERIC},
    **{f"W1 log1p {c}": ("marginals", "0") for c in NUMERIC},
    "Spearman correlation MAD": ("correlation", "0"),
    "SDMetrics quality score": ("sdmetrics", "1 (not trusted)"),
    "C2ST ROC AUC": ("c2st", "0.5"),
    "non-integer nodes share": ("validity", "0"),
    "power-of-two nodes share": ("validity", "= real"),
    "walltime-menu share": ("validity", "= real"),
    "exact-copy rate": ("validity", "~ floor"),
    "inter-arrival CV": ("arrivals", "= real"),
    "lag-1 ACF log1p inter-arrival": ("arrivals", "= real"),
    "hourly index of dispersion": ("arrivals", "= real"),
    "24 h spectral peak": ("arrivals", "= real"),
    "hour-of-day TV distance": ("arrivals", "0"),
    "offered load": ("scheduling", "= real"),
    "utilization (FCFS+EASY)": ("scheduling", "= real"),
    "KS wait (FCFS+EASY)": ("scheduling", "0"),
    "KS bsld (FCFS+EASY)": ("scheduling", "0"),
    "DCR median": ("privacy", ">= floor"),
    "share DCR < holdout p5": ("privacy", "~ floor"),
}
TABLE_COLUMNS = ("metric", "section", "real_vs_real", "synthetic_vs_real", "real", "synthetic", "ideal", "note")


# ---- helpers -------------------------------------------------------------------------------------------------
def halves(jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The chronological first and second half of a job table (attrs kept, submit times unchanged).

    Args:
        jobs: a canonical job table, sorted by submit time.

    Returns:
        ``(first, second)``; the first gets the extra job when the count is odd.
    """
    cut = (len(jobs) + 1) // 2
    first, second = jobs.iloc[:cut].reset_index(drop=True), jobs.iloc[cut:].reset_index(drop=True)
    first.attrs, second.attrs = dict(jobs.attrs), dict(jobs.attrs)
    return first, second


def _training(jobs: pd.DataFrame) -> pd.DataFrame:
    return features.to_training(jobs)


def _log_numeric(table: pd.DataFrame) -> np.ndarray:
    return np.log1p(np.maximum(table[list(NUMERIC)].to_numpy(np.float64), 0.0))


def _subsample(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(n, size=size, replace=False)) if n > size else np.arange(n)


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: the largest gap between the two empirical CDFs.

    Args:
        a: first sample.
        b: second sample.

    Returns:
        ``max |F_a - F_b|`` in ``[0, 1]`` (NaN if a sample is empty).
    """
    a, b = np.sort(np.asarray(a, np.float64)), np.sort(np.asarray(b, np.float64))
    if a.size == 0 or b.size == 0:
        return float("nan")
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / a.size
    fb = np.searchsorted(b, grid, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


def wasserstein(a: np.ndarray, b: np.ndarray) -> float:
    """Wasserstein-1 (earth mover's) distance between two samples: the area between their empirical CDFs.

    Args:
        a: first sample.
        b: second sample.

    Returns:
        The distance, in the units of the samples (NaN if a sample is empty).
    """
    a, b = np.sort(np.asarray(a, np.float64)), np.sort(np.asarray(b, np.float64))
    if a.size == 0 or b.size == 0:
        return float("nan")
    grid = np.sort(np.concatenate([a, b]))
    fa = np.searchsorted(a, grid[:-1], side="right") / a.size
    fb = np.searchsorted(b, grid[:-1], side="right") / b.size
    return float(np.sum(np.abs(fa - fb) * np.diff(grid)))


# ---- 1. marginals --------------------------------------------------------------------------------------------
def marginals(real: pd.DataFrame, synthetic: pd.DataFrame) -> pd.DataFrame:
    """KS statistic and Wasserstein-1 distance of the four numeric training columns, on a ``log1p`` scale.

    Args:
        real: canonical job table (the reference).
        synthetic: canonical job table to compare.

    Returns:
        A DataFrame indexed by column (``interarrival``, ``nodes``, ``run``, ``walltime``) with columns ``ks``
        and ``wasserstein_log1p`` (KS is scale-free; the log scale matters for Wasserstein only).
    """
    a, b = _log_numeric(_training(real)), _log_numeric(_training(synthetic))
    rows = {col: {"ks": ks_statistic(a[:, i], b[:, i]), "wasserstein_log1p": wasserstein(a[:, i], b[:, i])}
            for i, col in enumerate(NUMERIC)}
    return pd.DataFrame.from_dict(rows, orient="index")


# ---- 2. correlations -----------------------------------------------------------------------------------------
def correlation_matrix(jobs: pd.DataFrame) -> pd.DataFrame:
    """Spearman rank correlations of ``interarrival, nodes, run, walltime, hour`` (constant columns give 0).

    Args:
        jobs: canonical job table.

    Returns:
        A 5 x 5 DataFrame.
    """
    table = _training(jobs)[list(CORRELATION_COLUMNS)].astype(np.float64)
    corr = table.rank().corr(method="pearson")  # Spearman = Pearson on ranks (no scipy needed)
    corr = corr.fillna(0.0)
    np.fill_diagonal(corr.values, 1.0)
    return corr


def correlations(real: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, Any]:
    """Spearman matrices of both tables and the mean absolute difference of their off-diagonal entries.

    Args:
        real: canonical job table (the reference).
        synthetic: canonical job table to compare.

    Returns:
        ``{"real": DataFrame, "synthetic": DataFrame, "mad": float}``.
    """
    a, b = correlation_matrix(real), correlation_matrix(synthetic)
    upper = np.triu_indices(len(a), k=1)
    mad = float(np.mean(np.abs(a.to_numpy()[upper] - b.to_numpy()[upper])))
    return {"real": a, "synthetic": b, "mad": mad}


# ---- 3. SDMetrics --------------------------------------------------------------------------------------------
def sdmetrics_quality(real: pd.DataFrame, synthetic: pd.DataFrame, seed: int = 0,
                      max_rows: int = SDMETRICS_ROWS) -> dict[str, Any]:
    """The SDMetrics ``QualityReport`` overall score on the training tables (``user`` left out).

    The score averages per-column shape and per-pair trend similarities; it cannot see inter-arrival structure,
    cross-column interactions beyond pairs, or scheduling behaviour, so it is reported, not trusted.

    Args:
        real: canonical job table (the reference).
        synthetic: canonical job table to compare.
        seed: seed of the row subsample.
        max_rows: rows per table (a random subsample above this).

    Returns:
        ``{"score": float or NaN, "status": "ok" | "not installed" | "failed: ..."}``.
    """
    try:
        import sdmetrics  # noqa: F401
    except ImportError:
        return {"score": float("nan"), "status": "not installed"}
    try:  # the unified report of sdmetrics >= 0.2x takes dicts of tables
        from sdmetrics.reports import QualityReport
        unified = True
    except ImportError:
        from sdmetrics.reports.single_table import QualityReport
        unified = False
    rng = np.random.default_rng(seed)
    cols = ["interarrival", "nodes", "run", "walltime", "status", "hour", "dow"]
    a, b = _training(real)[cols], _training(synthetic)[cols]
    a, b = a.iloc[_subsample(len(a), max_rows, rng)], b.iloc[_subsample(len(b), max_rows, rng)]
    sdtypes = {"interarrival": "numerical", "nodes": "numerical", "run": "numerical", "walltime": "numerical",
               "status": "categorical", "hour": "categorical", "dow": "categorical"}
    meta: dict[str, Any] = {"columns": {c: {"sdtype": t} for c, t in sdtypes.items()}}
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    try:
        report = QualityReport()
        if unified:
            report.generate({"jobs": a}, {"jobs": b}, {"tables": {"jobs": meta}}, verbose=False)
        else:
            report.generate(a, b, meta, verbose=False)
        return {"score": float(report.get_score()), "status": "ok"}
    except Exception as exc:  # noqa: BLE001 - a third-party report must not sink the whole evaluation
        return {"score": float("nan"), "status": f"failed: {type(exc).__name__}: {exc}"}


# ---- 4. classifier two-sample test ---------------------------------------------------------------------------
def c2st_features(jobs: pd.DataFrame, statuses: list[str]) -> np.ndarray:
    """The C2ST feature matrix: ``log1p`` numeric columns, hour, day of week, one-hot status (no user ids).

    Args:
        jobs: canonical job table.
        statuses: the status values to one-hot encode (the union over both tables).

    Returns:
        A float array, one row per job.
    """
    table = _training(jobs)
    onehot = (table["status"].to_numpy()[:, None] == np.asarray(statuses, dtype=object)[None, :]).astype(float)
    return np.column_stack([_log_numeric(table), table[["hour", "dow"]].to_numpy(np.float64), onehot])


def _group_folds(y: np.ndarray, groups: np.ndarray, folds: int,
                 rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified group k-fold: whole groups go to one fold, dealt out by kind (all 0, all 1, mixed labels).

    (scikit-learn's ``StratifiedGroupKFold`` does the same more carefully, but takes seconds on 10k groups.)
    """
    _, inverse = np.unique(groups, return_inverse=True)
    size = np.bincount(inverse)
    ones = np.bincount(inverse, weights=y, minlength=size.size)
    kind = np.where(ones == 0, 0, np.where(ones == size, 1, 2))
    fold_of = np.empty(size.size, np.int64)
    for k in range(3):
        idx = rng.permutation(np.flatnonzero(kind == k))
        fold_of[idx] = (np.arange(idx.size) + k) % folds
    fold = fold_of[inverse]
    return [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(folds)]


def c2st(real: pd.DataFrame, synthetic: pd.DataFrame, seed: int = 0, max_rows: int = C2ST_ROWS,
         folds: int = 5) -> dict[str, float]:
    """Classifier two-sample test: can gradient boosting tell real rows (0) from synthetic rows (1)?

    Both classes are subsampled to the same size (at most ``max_rows``); the score is the mean ROC AUC over
    stratified ``folds``-fold cross-validation of ``HistGradientBoostingClassifier``. 0.5 means indistinguishable,
    1.0 means perfectly separable. Rows with identical features are kept in the same fold (grouped), so exact
    copies score about 0.5 instead of being "anti-learned" below it.

    Args:
        real: canonical job table (label 0).
        synthetic: canonical job table (label 1).
        seed: seed of the subsample, the folds and the classifier.
        max_rows: rows per class.
        folds: cross-validation folds.

    Returns:
        ``{"auc": mean AUC, "auc_std": its spread over folds, "rows_per_class": n}``.
    """
    ensemble = require("sklearn.ensemble", "synth")
    selection = require("sklearn.model_selection", "synth")
    threadpoolctl = require("threadpoolctl", "synth")  # a scikit-learn dependency
    rng = np.random.default_rng(seed)
    statuses = sorted(set(real["status"].astype(str)) | set(synthetic["status"].astype(str)))
    n = min(len(real), len(synthetic), max_rows)
    if n < 2 * folds:
        return {"auc": float("nan"), "auc_std": float("nan"), "rows_per_class": n}
    xa = c2st_features(real, statuses)[_subsample(len(real), n, rng)]
    xb = c2st_features(synthetic, statuses)[_subsample(len(synthetic), n, rng)]
    x, y = np.vstack([xa, xb]), np.repeat([0, 1], n)
    # identical feature rows share a group, so a copied row and its original never sit on both sides of a split
    # (otherwise the classifier learns the twin's opposite label and the AUC of a copy drops well below 0.5)
    groups = pd.util.hash_pandas_object(pd.DataFrame(x), index=False).to_numpy()
    model = ensemble.HistGradientBoostingClassifier(max_iter=100, early_stopping=False, random_state=seed)
    # one thread: OpenMP spin-waiting makes HistGradientBoosting crawl when the cores are shared (seen: 30x)
    with threadpoolctl.threadpool_limits(1):
        scores = selection.cross_val_score(model, x, y, cv=_group_folds(y, groups, folds, rng), scoring="roc_auc")
    return {"auc": float(np.mean(scores)), "auc_std": float(np.std(scores)), "rows_per_class": n}


# ---- 5. validity gates ---------------------------------------------------------------------------------------
def non_integer_nodes(jobs: pd.DataFrame) -> float:
    """Share of non-integer node counts, on the raw sampled values where the table records them.

    A synthesizer's ``sample`` rounds nodes up and counts it in ``attrs["postprocess"]["rounded nodes"]``; the
    raw row count is the table's rows plus the rejected ones. Without that record the share is computed on the
    table itself (0 for any canonical table, whose nodes are integers).

    Args:
        jobs: canonical job table (synthetic or real).

    Returns:
        The share in ``[0, 1]``.
    """
    counts = jobs.attrs.get("postprocess")
    if counts:
        raw = len(jobs) + sum(v for k, v in counts.items() if k.startswith("rejected"))
        return float(counts.get("rounded nodes", 0)) / max(raw, 1)
    nodes = jobs["nodes"].to_numpy(np.float64)
    return float(np.mean(nodes != np.round(nodes))) if len(nodes) else float("nan")


def walltime_menu(jobs: pd.DataFrame, size: int = MENU_SIZE) -> np.ndarray:
    """The ``size`` most common walltime requests of a table (its "menu").

    Args:
        jobs: canonical job table.
        size: menu length.

    Returns:
        The walltimes in seconds, most common first.
    """
    return jobs["walltime"].value_counts().index.to_numpy(np.int64)[:size]


def validity(real: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, float]:
    """Validity gates: non-integer nodes, powers of two, walltime menu and exact copies.

    Args:
        real: canonical job table (the reference; its menu and rows are the targets).
        synthetic: canonical job table to check.

    Returns:
        ``non_integer_nodes`` (synthetic), ``pow2_real``/``pow2_synthetic`` (share of node counts that are powers
        of two), ``menu_real``/``menu_synthetic`` (share of walltimes on the real table's 10 most common values)
        and ``exact_copy`` (share of synthetic rows whose ``(nodes, run, walltime)`` equals some real row's).
    """
    def pow2(df: pd.DataFrame) -> float:
        n = df["nodes"].to_numpy(np.int64)
        return float(np.mean((n > 0) & ((n & (n - 1)) == 0)))

    menu = walltime_menu(real)
    key = ["nodes", "run", "walltime"]
    copies = pd.MultiIndex.from_frame(synthetic[key]).isin(pd.MultiIndex.from_frame(real[key]))
    return {
        "non_integer_nodes": non_integer_nodes(synthetic),
        "pow2_real": pow2(real), "pow2_synthetic": pow2(synthetic),
        "menu_real": float(np.isin(real["walltime"].to_numpy(), menu).mean()),
        "menu_synthetic": float(np.isin(synthetic["walltime"].to_numpy(), menu).mean()),
        "exact_copy": float(np.mean(copies)),
    }


# ---- 6. arrivals ---------------------------------------------------------------------------------------------
def hourly_counts(jobs: pd.DataFrame) -> np.ndarray:
    """Submits per hour bucket over the whole span of the trace (empty hours included).

    Args:
        jobs: canonical job table.

    Returns:
        An int array, one entry per hour from the first submit.
    """
    submit = jobs["submit"].to_numpy(np.int64)
    if submit.size == 0:
        return np.zeros(0, np.int64)
    return np.bincount((submit - submit[0]) // 3600)


def spectral_peak_24h(counts: np.ndarray, segment_days: int = SEGMENT_DAYS) -> float:
    """Power of the 24 h period in hourly submit counts, relative to the mean power of all non-zero frequencies.

    Welch-style: the series is cut into segments of ``segment_days`` whole days (the whole series, cut to whole
    days, if shorter), each segment's mean is removed, and the periodograms are averaged. Segments of a whole
    number of days put 24 h exactly on a frequency bin, and a fixed segment length keeps the ratio comparable
    between traces of different lengths. About 1 for arrivals without a daily cycle.

    Args:
        counts: submits per hour.
        segment_days: segment length in days.

    Returns:
        The ratio (NaN for less than two days of data).
    """
    seg = 24 * segment_days
    if counts.size < seg:
        seg = 24 * (counts.size // 24)
    if seg < 48:
        return float("nan")
    k = counts.size // seg
    segments = counts[: k * seg].reshape(k, seg).astype(np.float64)
    segments -= segments.mean(axis=1, keepdims=True)
    power = (np.abs(np.fft.rfft(segments, axis=1)) ** 2).mean(axis=0)[1:]  # drop the zero frequency
    mean = power.mean()
    return float(power[seg // 24 - 1] / mean) if mean > 0 else float("nan")


def arrival_stats(jobs: pd.DataFrame) -> dict[str, float]:
    """Statistics of the arrival process.

    - ``cv``: coefficient of variation (std / mean) of the inter-arrival times (1 for Poisson arrivals).
    - ``lag1_acf``: lag-1 autocorrelation of ``log1p(inter-arrival)``. ``log1p`` keeps the zero gaps of
      simultaneous submits (bursts are part of the structure being measured) and tames the heavy tail.
    - ``dispersion``: index of dispersion (variance / mean) of submits per hour bucket over the whole trace
      (1 for Poisson arrivals).
    - ``spectral_24h``: see :func:`spectral_peak_24h`.

    Args:
        jobs: canonical job table.

    Returns:
        The four statistics (NaN where the trace is too short).
    """
    gaps = np.diff(jobs["submit"].to_numpy(np.float64))
    cv = float(gaps.std() / gaps.mean()) if gaps.size > 1 and gaps.mean() > 0 else float("nan")
    x = np.log1p(gaps)
    acf = float(np.corrcoef(x[:-1], x[1:])[0, 1]) if x.size > 2 and x.std() > 0 else float("nan")
    counts = hourly_counts(jobs)
    dispersion = float(counts.var() / counts.mean()) if counts.size > 1 else float("nan")
    return {"cv": cv, "lag1_acf": acf, "dispersion": dispersion, "spectral_24h": spectral_peak_24h(counts)}


def hourly_profile(jobs: pd.DataFrame) -> np.ndarray:
    """Share of submits in each hour of the day (on the trace's clock, UTC).

    Args:
        jobs: canonical job table.

    Returns:
        24 shares summing to 1.
    """
    hours = _training(jobs)["hour"].to_numpy(np.int64)
    counts = np.bincount(hours, minlength=24).astype(np.float64)
    return counts / max(counts.sum(), 1.0)


def arrivals(real: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, Any]:
    """Arrival statistics of both tables and the total-variation distance of their hour-of-day profiles.

    Args:
        real: canonical job table (the reference).
        synthetic: canonical job table to compare.

    Returns:
        ``{"real": stats, "synthetic": stats, "hourly_real": 24 shares, "hourly_synthetic": ..., "hour_tv": float}``.
    """
    pa, pb = hourly_profile(real), hourly_profile(synthetic)
    return {"real": arrival_stats(real), "synthetic": arrival_stats(synthetic), "hourly_real": pa,
            "hourly_synthetic": pb, "hour_tv": float(0.5 * np.abs(pa - pb).sum())}


# ---- 7. scheduling outcome -----------------------------------------------------------------------------------
def _window_starts(n: int, k: int, window: int) -> list[int]:
    if n <= window:
        return [0]
    return [int(s) for s in np.linspace(0, n - window, k).round()]


def replay(jobs: pd.DataFrame, machine: Machine, n_windows: int, window: int = WINDOW) -> dict[str, Any]:
    """Replay ``n_windows`` evenly spaced windows of ``window`` consecutive jobs under FCFS + EASY.

    Jobs that cannot run on the machine (nodes above its size, non-positive run or walltime) are dropped first
    and counted. A table shorter than ``window`` is replayed whole.

    Args:
        jobs: canonical job table.
        machine: the machine to replay on.
        n_windows: number of windows.
        window: jobs per window.

    Returns:
        ``records`` (per-job records of all windows, concatenated), ``offered_load`` and ``utilization``
        (means over windows), ``dropped`` (jobs removed as unrunnable) and ``windows``.
    """
    from baselines.priorities import FCFS
    from hpcgym.sim import simulate

    ok = (jobs["nodes"] <= machine.nodes) & (jobs["nodes"] > 0) & (jobs["run"] > 0) & (jobs["walltime"] > 0)
    runnable = jobs.loc[ok].reset_index(drop=True)
    runnable.attrs = dict(jobs.attrs)
    recs, loads, utils = [], [], []
    for start in _window_starts(len(runnable), n_windows, window):
        part = tracelib.window(runnable, min(window, len(runnable)), start=start)
        rec = simulate(part, machine, FCFS, backfill="easy")
        recs.append(rec)
        loads.append(jobtable.offered_load(part, machine.nodes))
        utils.append(metrics.utilization(rec, machine.nodes))
    return {"records": pd.concat(recs, ignore_index=True), "offered_load": float(np.mean(loads)),
            "utilization": float(np.mean(utils)), "dropped": int((~ok).sum()), "windows": len(recs)}


def scheduling(real: pd.DataFrame, synthetic: pd.DataFrame, machine: Machine | str, window: int = WINDOW,
               max_windows: int = MAX_WINDOWS) -> dict[str, Any]:
    """Scheduling outcome under FCFS + EASY on the real machine, the same number of windows from each table.

    Args:
        real: canonical job table (the reference).
        synthetic: canonical job table to compare.
        machine: the real machine (object or catalog name).
        window: jobs per window.
        max_windows: at most this many windows per table (fewer when a table is short).

    Returns:
        ``{"real": replay, "synthetic": replay, "ks_wait": float, "ks_bsld": float, "summary": DataFrame}`` where
        a replay is the dict of :func:`replay` and ``summary`` holds :func:`hpcgym.metrics.summarize`-style means
        and medians of wait and bsld per side.
    """
    machine = machines.get(machine)
    k = max(1, min(max_windows, len(real) // window, len(synthetic) // window))
    a, b = replay(real, machine, k, window), replay(synthetic, machine, k, window)
    summary = {}
    for side, rep in (("real", a), ("synthetic", b)):
        s = metrics.summarize(rep["records"], machine.nodes)
        summary[side] = {key: s[key] for key in ("wait_mean", "wait_median", "wait_p95", "bsld_mean",
                                                 "bsld_median", "bsld_p95")}
        summary[side].update(offered_load=rep["offered_load"], utilization=rep["utilization"],
                             windows=rep["windows"], jobs=len(rep["records"]))
    return {"real": a, "synthetic": b,
            "ks_wait": ks_statistic(a["records"]["wait"].to_numpy(), b["records"]["wait"].to_numpy()),
            "ks_bsld": ks_statistic(a["records"]["bsld"].to_numpy(), b["records"]["bsld"].to_numpy()),
            "summary": pd.DataFrame(summary)}


# ---- 8. privacy ----------------------------------------------------------------------------------------------
def _nearest(reference: pd.DataFrame, query: pd.DataFrame, max_rows: int, rng: np.random.Generator) -> np.ndarray:
    """Distance of (a subsample of) the query rows to their nearest reference row, standardized log1p space."""
    neighbors = require("sklearn.neighbors", "synth")
    ref = _log_numeric(_training(reference))
    mu, sd = ref.mean(axis=0), ref.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    nn = neighbors.NearestNeighbors(n_neighbors=1).fit((ref - mu) / sd)
    x = _log_numeric(_training(query))
    x = x[_subsample(len(x), max_rows, rng)]
    return nn.kneighbors((x - mu) / sd, return_distance=True)[0][:, 0]


def dcr(train: pd.DataFrame, synthetic: pd.DataFrame, holdout: pd.DataFrame, seed: int = 0,
        max_rows: int = DCR_ROWS, holdout_reference: pd.DataFrame | None = None) -> dict[str, float]:
    """Distance to closest record: synthetic rows and holdout rows, each to their nearest train row.

    Features are ``log1p`` of the four numeric training columns, standardized with the train rows' mean and
    standard deviation; distances are Euclidean to *all* train rows. Holdout rows are real jobs the model never
    saw, so their DCRs are what "similar but not copied" looks like; synthetic rows much closer than that
    suggest memorization.

    Args:
        train: the rows the model learned from.
        synthetic: the synthetic rows.
        holdout: real rows not used for training (e.g. the test split).
        seed: seed of the subsamples.
        max_rows: synthetic and holdout rows evaluated (random subsamples above this).
        holdout_reference: measure the holdout rows against these rows instead of ``train`` (for a floor when
            there is no true holdout: the second half of train against the first half).

    Returns:
        ``median_synthetic``, ``median_holdout``, ``holdout_p5`` (5th percentile of holdout DCRs),
        ``below_p5_synthetic``/``below_p5_holdout`` (share strictly below it) and
        ``zero_synthetic``/``zero_holdout`` (share at distance 0).
    """
    rng = np.random.default_rng(seed)
    ds = _nearest(train, synthetic, max_rows, rng)
    dh = _nearest(train if holdout_reference is None else holdout_reference, holdout, max_rows, rng)
    p5 = float(np.percentile(dh, 5))
    return {"median_synthetic": float(np.median(ds)), "median_holdout": float(np.median(dh)), "holdout_p5": p5,
            "below_p5_synthetic": float(np.mean(ds < p5)), "below_p5_holdout": float(np.mean(dh < p5)),
            "zero_synthetic": float(np.mean(ds == 0)), "zero_holdout": float(np.mean(dh == 0))}


# ---- summary -------------------------------------------------------------------------------------------------
def _sections(machine: Machine, seed: int) -> dict[str, Callable[[pd.DataFrame, pd.DataFrame], Any]]:
    return {
        "marginals": marginals,
        "correlation": correlations,
        "sdmetrics": lambda a, b: sdmetrics_quality(a, b, seed=seed),
        "c2st": lambda a, b: c2st(a, b, seed=seed),
        "validity": validity,
        "arrivals": arrivals,
        "scheduling": lambda a, b: scheduling(a, b, machine),
    }


#: section names in report order (privacy is computed apart: it needs the holdout)
SECTIONS = ("marginals", "correlation", "sdmetrics", "c2st", "validity", "arrivals", "scheduling", "privacy")


def _stat_row(name: str, floor: tuple[float, float], synth: tuple[float, float]) -> dict[str, Any]:
    """A per-trace statistic: values on train and synthetic, differences |h1 - h2| and |synthetic - train|."""
    return {"metric": name, "real_vs_real": abs(floor[1] - floor[0]), "synthetic_vs_real": abs(synth[1] - synth[0]),
            "real": synth[0], "synthetic": synth[1]}


def _pair_rows(floor: dict[str, Any], synth: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    f, s = floor["marginals"], synth["marginals"]
    rows += [{"metric": f"KS {c}", "real_vs_real": f.at[c, "ks"], "synthetic_vs_real": s.at[c, "ks"]}
             for c in NUMERIC]
    rows += [{"metric": f"W1 log1p {c}", "real_vs_real": f.at[c, "wasserstein_log1p"],
              "synthetic_vs_real": s.at[c, "wasserstein_log1p"]} for c in NUMERIC]
    rows.append({"metric": "Spearman correlation MAD", "real_vs_real": floor["correlation"]["mad"],
                 "synthetic_vs_real": synth["correlation"]["mad"]})
    sd_f, sd_s = floor["sdmetrics"], synth["sdmetrics"]
    rows.append({"metric": "SDMetrics quality score", "real_vs_real": sd_f["score"], "synthetic_vs_real": sd_s["score"],
                 "note": "" if sd_s["status"] == "ok" else sd_s["status"]})
    rows.append({"metric": "C2ST ROC AUC", "real_vs_real": floor["c2st"]["auc"],
                 "synthetic_vs_real": synth["c2st"]["auc"]})
    vf, vs = floor["validity"], synth["validity"]
    for name, key in (("non-integer nodes share", "non_integer_nodes"),):
        rows.append({"metric": name, "real_vs_real": vf[key], "synthetic_vs_real": vs[key], "real": 0.0,
                     "synthetic": vs[key]})
    rows.append(_stat_row("power-of-two nodes share", (vf["pow2_real"], vf["pow2_synthetic"]),
                          (vs["pow2_real"], vs["pow2_synthetic"])))
    rows.append(_stat_row("walltime-menu share", (vf["menu_real"], vf["menu_synthetic"]),
                          (vs["menu_real"], vs["menu_synthetic"])))
    rows.append({"metric": "exact-copy rate", "real_vs_real": vf["exact_copy"], "synthetic_vs_real": vs["exact_copy"]})
    af, as_ = floor["arrivals"], synth["arrivals"]
    for name, key in (("inter-arrival CV", "cv"), ("lag-1 ACF log1p inter-arrival", "lag1_acf"),
                      ("hourly index of dispersion", "dispersion"), ("24 h spectral peak", "spectral_24h")):
        rows.append(_stat_row(name, (af["real"][key], af["synthetic"][key]),
                              (as_["real"][key], as_["synthetic"][key])))
    rows.append({"metric": "hour-of-day TV distance", "real_vs_real": af["hour_tv"],
                 "synthetic_vs_real": as_["hour_tv"]})
    cf, cs = floor["scheduling"], synth["scheduling"]
    for name, key in (("offered load", "offered_load"), ("utilization (FCFS+EASY)", "utilization")):
        rows.append(_stat_row(name, (cf["real"][key], cf["synthetic"][key]), (cs["real"][key], cs["synthetic"][key])))
    rows.append({"metric": "KS wait (FCFS+EASY)", "real_vs_real": cf["ks_wait"], "synthetic_vs_real": cs["ks_wait"]})
    rows.append({"metric": "KS bsld (FCFS+EASY)", "real_vs_real": cf["ks_bsld"], "synthetic_vs_real": cs["ks_bsld"]})
    return rows


def _privacy_rows(privacy: dict[str, float]) -> list[dict[str, Any]]:
    return [
        {"metric": "DCR median", "real_vs_real": privacy["median_holdout"],
         "synthetic_vs_real": privacy["median_synthetic"]},
        {"metric": "share DCR < holdout p5", "real_vs_real": privacy["below_p5_holdout"],
         "synthetic_vs_real": privacy["below_p5_synthetic"]},
    ]


def make_table(floor: dict[str, Any], synth: dict[str, Any], privacy: dict[str, float] | None) -> pd.DataFrame:
    """Assemble the one-row-per-metric table from section results (see :func:`fidelity_table`).

    Args:
        floor: section name -> result, for the first vs the second half of the train split.
        synth: section name -> result, for the train split vs the synthetic trace.
        privacy: the :func:`dcr` result, or ``None`` to leave the privacy rows out.

    Returns:
        The table, columns :data:`TABLE_COLUMNS`.
    """
    rows = _pair_rows(floor, synth) + (_privacy_rows(privacy) if privacy is not None else [])
    table = pd.DataFrame(rows)
    table["section"] = [METRICS[m][0] for m in table["metric"]]
    table["ideal"] = [METRICS[m][1] for m in table["metric"]]
    for col in TABLE_COLUMNS:
        if col not in table:
            table[col] = "" if col == "note" else np.nan
    table["note"] = table["note"].fillna("")
    return table[list(TABLE_COLUMNS)]


def _compute(train: pd.DataFrame, synthetic: pd.DataFrame, holdout: pd.DataFrame | None, machine: Machine,
             seed: int, bar: Any = None) -> dict[str, Any]:
    first, second = halves(train)
    sections = _sections(machine, seed)
    floor, synth, timing = {}, {}, {}
    for name in SECTIONS:
        if bar is not None:
            bar.set_postfix_str(name)
        started = time.perf_counter()
        if name == "privacy":
            # the floor is the holdout; without one, the second half of train against the first
            privacy = (dcr(train, synthetic, holdout, seed=seed) if holdout is not None else
                       dcr(train, synthetic, second, seed=seed, holdout_reference=first))
        else:
            floor[name], synth[name] = sections[name](first, second), sections[name](train, synthetic)
        timing[name] = time.perf_counter() - started
        if bar is not None:
            bar.update(1)
    return {"floor": floor, "synthetic": synth, "privacy": privacy, "timing": timing,
            "halves": (first, second), "table": make_table(floor, synth, privacy)}


def fidelity_table(real_train: pd.DataFrame, synthetic: pd.DataFrame, machine: Machine | str | None = None,
                   seed: int = 0, holdout: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per metric: the real-vs-real noise floor next to the synthetic-vs-real value.

    Columns: ``metric``, ``section``, ``real_vs_real`` (first vs second half of ``real_train``),
    ``synthetic_vs_real`` (``real_train`` vs ``synthetic``), ``real`` and ``synthetic`` (the per-trace values,
    for rows that are statistics of one trace; their ``real_vs_real``/``synthetic_vs_real`` are then absolute
    differences), ``ideal`` (text) and ``note`` (e.g. SDMetrics "not installed").

    The privacy rows compare synthetic DCRs with ``holdout`` DCRs (both to ``real_train``); without a holdout the
    floor is the second half of ``real_train`` measured against the first half.

    Args:
        real_train: the real rows the synthesizer learned from (chronological train split).
        synthetic: the synthetic job table.
        machine: the real machine for the scheduling replays; default ``real_train.attrs["machine"]``.
        seed: seed of every subsample and classifier.
        holdout: real rows not used for training (the test split), for the privacy floor.

    Returns:
        The table (see :data:`METRICS` for the rows).
    """
    machine = machines.get(machine if machine is not None else real_train.attrs["machine"])
    return _compute(real_train, synthetic, holdout, machine, seed)["table"]


def evaluate(real: pd.DataFrame, synthetic_jobs: pd.DataFrame, out_dir: str | Path | None = None, seed: int = 0,
             progress: bool = False, source: str | None = None) -> dict[str, Any]:
    """Compute the whole fidelity report for a real trace and a synthetic job table.

    The real trace is split chronologically (:func:`hpcgym.traces.split`): the train split (first 70%) is the
    reference, its two halves give the noise floor, and the test split is the privacy holdout.

    Args:
        real: the whole real trace (a canonical job table with ``attrs["machine"]``).
        synthetic_jobs: the synthetic job table (its ``attrs`` may lack the machine; the real one is used).
        out_dir: if given, write ``report.md`` and the PNG plots there (see :mod:`synth.report`).
        seed: seed of every subsample and classifier.
        progress: show a progress bar (tqdm, on stderr) over the sections.
        source: how the synthetic trace was made, for the report's header.

    Returns:
        ``table`` (see :func:`fidelity_table`), ``floor`` and ``synthetic`` (section -> result), ``privacy``,
        ``timing`` (seconds per section and ``total``, the computation without the report), ``meta`` (sizes,
        names, seed), ``tables`` (the training views used by the plots) and ``report`` (the path of
        ``report.md``, or ``None``).
    """
    from tqdm.auto import tqdm

    started = time.perf_counter()
    machine = machines.get(real.attrs["machine"])
    train, test = tracelib.split(real, "train"), tracelib.split(real, "test")
    bar = tqdm(total=len(SECTIONS) + (out_dir is not None), desc="fidelity report", disable=not progress)
    out = _compute(train, synthetic_jobs, test, machine, seed, bar=bar)
    first, second = out.pop("halves")
    out["meta"] = {
        "real": str(real.attrs.get("name", "real")), "machine": machine.name, "machine_nodes": machine.nodes,
        "jobs_real": len(real), "jobs_train": len(train), "jobs_test": len(test), "jobs_half1": len(first),
        "jobs_half2": len(second), "jobs_synthetic": len(synthetic_jobs), "seed": seed,
        "synthetic": source or str(synthetic_jobs.attrs.get("name", "synthetic")),
        "postprocess": dict(synthetic_jobs.attrs.get("postprocess", {}) or {}),
        "menu": [int(w) for w in walltime_menu(train)],
    }
    out["tables"] = {"train": _training(train), "synthetic": _training(synthetic_jobs)}
    out["timing"]["total"] = time.perf_counter() - started
    out["report"] = None
    if out_dir is not None:
        from synth import report

        bar.set_postfix_str("writing the report")
        out["report"] = report.write_report(out, out_dir)
        bar.update(1)
    bar.close()
    return out
