"""Distances between job tables, the fidelity report's distribution metrics (no scheduling, no privacy, no drawing).

Each function compares two canonical job tables, a *reference* and a *candidate*, or summarizes one table:

1. :func:`marginals`: KS statistic and Wasserstein-1 distance on ``log1p`` of ``interarrival``, ``nodes``, ``run``
   and ``walltime``.
2. :func:`correlations`: Spearman matrices over the numeric training columns and ``hour``; mean absolute difference
   of their off-diagonal entries.
3. :func:`sdmetrics_quality`: the SDMetrics ``QualityReport`` overall score (optional dependency; reported, not
   trusted: it scores marginals and pairwise trends one at a time and misses the rest).
4. :func:`c2st`: classifier two-sample test, 5-fold ROC AUC of gradient boosting (0.5 = indistinguishable).
5. :func:`shape`: power-of-two node counts and the walltime menu.
6. :func:`arrival_stats` / :func:`arrivals`: inter-arrival CV, lag-1 autocorrelation of ``log1p`` inter-arrivals,
   hourly index of dispersion, 24 h spectral peak, hour-of-day profile.
7. :func:`history_stats` / :func:`history`: whether users have a history worth reading (the accuracy of the
   last-two runtime predictor, the correlation of a user's consecutive runtimes); NaN without user ids.

Empty tables give NaN (or an empty result), never an exception; :mod:`synth.fidelity` turns those into the worst
score.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from synth import features
from synth.base import require

NUMERIC = features.NUMERIC  # interarrival, nodes, run, walltime
CORRELATION_COLUMNS = (*NUMERIC, "hour")
MENU_SIZE = 10
C2ST_ROWS = 5000
MIN_LEAF = 20  # scikit-learn's default min_samples_leaf (HistGradientBoosting), kept from 100 rows per class
SDMETRICS_ROWS = 5000
SEGMENT_DAYS = 7


# ---- helpers -------------------------------------------------------------------------------------------------
def training(jobs: pd.DataFrame) -> pd.DataFrame:
    """The training view of a job table (:func:`synth.features.to_training`)."""
    return features.to_training(jobs)


def log_numeric(table: pd.DataFrame) -> np.ndarray:
    """``log1p`` of the four numeric training columns (negatives clipped to 0), one row per job."""
    return np.log1p(np.maximum(table[list(NUMERIC)].to_numpy(np.float64), 0.0))


def subsample(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of a random subsample of ``size`` out of ``n`` (all of them when ``n <= size``)."""
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
    a, b = log_numeric(training(real)), log_numeric(training(synthetic))
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
    table = training(jobs)[list(CORRELATION_COLUMNS)].astype(np.float64)
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
    a, b = training(real)[cols], training(synthetic)[cols]
    a, b = a.iloc[subsample(len(a), max_rows, rng)], b.iloc[subsample(len(b), max_rows, rng)]
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
    table = training(jobs)
    onehot = (table["status"].to_numpy()[:, None] == np.asarray(statuses, dtype=object)[None, :]).astype(float)
    return np.column_stack([log_numeric(table), table[["hour", "dow"]].to_numpy(np.float64), onehot])


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
    xa = c2st_features(real, statuses)[subsample(len(real), n, rng)]
    xb = c2st_features(synthetic, statuses)[subsample(len(synthetic), n, rng)]
    x, y = np.vstack([xa, xb]), np.repeat([0, 1], n)
    # identical feature rows share a group, so a copied row and its original never sit on both sides of a split
    # (otherwise the classifier learns the twin's opposite label and the AUC of a copy drops well below 0.5)
    groups = pd.util.hash_pandas_object(pd.DataFrame(x), index=False).to_numpy()
    # scikit-learn's default leaf (20 rows) cannot split a training fold of under 40 rows: every AUC would be 0.5
    # ("indistinguishable") however different the tables; below 100 rows per class the leaf shrinks with the fold
    leaf = int(min(MIN_LEAF, max(2, 2 * n * (folds - 1) // folds // 8)))
    model = ensemble.HistGradientBoostingClassifier(max_iter=100, early_stopping=False, random_state=seed,
                                                    min_samples_leaf=leaf)
    # one thread: OpenMP spin-waiting makes HistGradientBoosting crawl when the cores are shared (seen: 30x)
    with threadpoolctl.threadpool_limits(1):
        scores = selection.cross_val_score(model, x, y, cv=_group_folds(y, groups, folds, rng), scoring="roc_auc")
    return {"auc": float(np.mean(scores)), "auc_std": float(np.std(scores)), "rows_per_class": n}


# ---- 5. shape of the job mix ---------------------------------------------------------------------------------
def walltime_menu(jobs: pd.DataFrame, size: int = MENU_SIZE) -> np.ndarray:
    """The ``size`` most common walltime requests of a table (its "menu").

    Args:
        jobs: canonical job table.
        size: menu length.

    Returns:
        The walltimes in seconds, most common first.
    """
    return jobs["walltime"].value_counts().index.to_numpy(np.int64)[:size]


def pow2_share(jobs: pd.DataFrame) -> float:
    """Share of node counts that are powers of two (NaN for an empty table).

    Args:
        jobs: canonical job table.

    Returns:
        The share in ``[0, 1]``.
    """
    n = jobs["nodes"].to_numpy(np.int64)
    return float(np.mean((n > 0) & ((n & (n - 1)) == 0))) if n.size else float("nan")


def shape(reference: pd.DataFrame, candidate: pd.DataFrame) -> dict[str, float]:
    """Power-of-two node counts and the walltime menu, in both tables.

    Args:
        reference: canonical job table (its menu is the target).
        candidate: canonical job table to check.

    Returns:
        ``pow2_reference``/``pow2_candidate`` (share of power-of-two node counts) and
        ``menu_reference``/``menu_candidate`` (share of walltimes on the reference's 10 most common values).
    """
    menu = walltime_menu(reference)

    def on_menu(df: pd.DataFrame) -> float:
        return float(np.isin(df["walltime"].to_numpy(), menu).mean()) if len(df) else float("nan")

    return {"pow2_reference": pow2_share(reference), "pow2_candidate": pow2_share(candidate),
            "menu_reference": on_menu(reference), "menu_candidate": on_menu(candidate)}


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
    between traces of different lengths (:func:`arrivals` gives both tables the same one). About 1 for arrivals
    without a daily cycle.

    Args:
        counts: submits per hour.
        segment_days: segment length in days.

    Returns:
        The ratio (NaN for less than a day of data).
    """
    seg = 24 * segment_days
    if counts.size < seg:
        seg = 24 * (counts.size // 24)
    if seg < 24:
        return float("nan")
    k = counts.size // seg
    segments = counts[: k * seg].reshape(k, seg).astype(np.float64)
    segments -= segments.mean(axis=1, keepdims=True)
    power = (np.abs(np.fft.rfft(segments, axis=1)) ** 2).mean(axis=0)[1:]  # drop the zero frequency
    mean = power.mean()
    return float(power[seg // 24 - 1] / mean) if mean > 0 else float("nan")


def arrival_stats(jobs: pd.DataFrame, segment_days: int = SEGMENT_DAYS) -> dict[str, float]:
    """Statistics of the arrival process.

    - ``cv``: coefficient of variation (std / mean) of the inter-arrival times (1 for Poisson arrivals).
    - ``lag1_acf``: lag-1 autocorrelation of ``log1p(inter-arrival)``. ``log1p`` keeps the zero gaps of
      simultaneous submits (bursts are part of the structure being measured) and tames the heavy tail.
    - ``dispersion``: index of dispersion (variance / mean) of submits per hour bucket over the whole trace
      (1 for Poisson arrivals).
    - ``spectral_24h``: see :func:`spectral_peak_24h`.

    Args:
        jobs: canonical job table.
        segment_days: segment length of the spectral peak.

    Returns:
        The four statistics (NaN where the trace is too short).
    """
    gaps = np.diff(jobs["submit"].to_numpy(np.float64))
    cv = float(gaps.std() / gaps.mean()) if gaps.size > 1 and gaps.mean() > 0 else float("nan")
    x = np.log1p(gaps)
    acf = float(np.corrcoef(x[:-1], x[1:])[0, 1]) if x.size > 2 and x.std() > 0 else float("nan")
    counts = hourly_counts(jobs)
    dispersion = float(counts.var() / counts.mean()) if counts.size > 1 else float("nan")
    return {"cv": cv, "lag1_acf": acf, "dispersion": dispersion,
            "spectral_24h": spectral_peak_24h(counts, segment_days)}


def hourly_profile(jobs: pd.DataFrame) -> np.ndarray:
    """Share of submits in each hour of the day (on the trace's clock, UTC).

    Args:
        jobs: canonical job table.

    Returns:
        24 shares summing to 1.
    """
    hours = training(jobs)["hour"].to_numpy(np.int64)
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
    # One segment length for both, or a 2-day test split and a 1.9-day sample would be measured differently (or
    # not at all): the shorter table's whole days, at most SEGMENT_DAYS.
    days = max(1, min(SEGMENT_DAYS, *(hourly_counts(t).size // 24 for t in (real, synthetic))))
    return {"real": arrival_stats(real, days), "synthetic": arrival_stats(synthetic, days), "hourly_real": pa,
            "hourly_synthetic": pb, "hour_tv": float(0.5 * np.abs(pa - pb).sum())}


# ---- history: is a user's past worth reading? ------------------------------------------------------------------
def _last2_ratios(submit: np.ndarray, held: np.ndarray, wall: np.ndarray) -> np.ndarray:
    """One user's jobs (in submit order): ``min(pred, held) / max(pred, held)`` for each job that has history.

    ``pred`` is the last-two prediction of :mod:`hpcgym.sim.predict`: the mean of the held runtimes of the user's
    last two jobs ended at or before the job's submit (in end order, ties: the later row), rounded up, capped by the
    job's walltime and at least 1 s. A job ends at ``submit + held``: no queue wait (a table has no schedule).
    """
    order = np.lexsort((np.arange(len(submit)), submit + held))  # by end, ties: the later row last
    ends, out, last, k = (submit + held)[order], [], [], 0
    for i in range(len(submit)):
        while k < len(order) and ends[k] <= submit[i]:
            last = [*last[-1:], held[order[k]]]
            k += 1
        if last:
            pred = min(max(float(np.ceil(np.mean(last))), 1.0), float(wall[i]))
            out.append(min(pred, held[i]) / max(pred, held[i]))
    return np.asarray(out, dtype=np.float64)


def _user_groups(jobs: pd.DataFrame) -> list[np.ndarray]:
    """Row positions of each known user's jobs (user >= 0), in submit order."""
    user = jobs["user"].to_numpy(np.int64) if "user" in jobs else np.full(len(jobs), -1)
    rows = np.argsort(jobs["submit"].to_numpy(np.int64), kind="stable")
    known = rows[user[rows] >= 0]
    return [g.to_numpy() for _, g in pd.Series(known).groupby(user[known], sort=True)] if len(known) else []


def history_stats(jobs: pd.DataFrame) -> dict[str, float]:
    """Whether a table's users have a history worth reading; NaN where it has no known user ids.

    - ``last2_accuracy``: the median, over the jobs whose user has an ended job before their submit, of
      ``min(pred, held) / max(pred, held)`` (1 = exact), ``pred`` the last-two prediction (:func:`_last2_ratios`)
      and ``held = min(run, walltime)`` the time the job held its nodes.
    - ``runtime_lag1_corr``: the Pearson correlation of ``log(held)`` between consecutive jobs (in submit order) of
      the same user, the pairs of every user pooled.
    - ``request_owner_share``: the share of the jobs of a request (a ``(nodes, walltime)`` pair) that its main user
      submitted, the requests pooled (jobs of known users only): real requests belong to a few users each.

    Args:
        jobs: canonical job table.

    Returns:
        ``{"last2_accuracy": float, "runtime_lag1_corr": float, "request_owner_share": float}``.
    """
    held = np.maximum(np.minimum(jobs["run"].to_numpy(np.float64), jobs["walltime"].to_numpy(np.float64)), 1.0)
    submit, wall = jobs["submit"].to_numpy(np.float64), jobs["walltime"].to_numpy(np.float64)
    ratios, pairs = [], []
    for rows in _user_groups(jobs):
        ratios.append(_last2_ratios(submit[rows], held[rows], wall[rows]))
        logs = np.log(held[rows])
        pairs.append(np.column_stack([logs[:-1], logs[1:]]))
    ratio = np.concatenate(ratios) if ratios else np.empty(0)
    pair = np.concatenate(pairs) if pairs else np.empty((0, 2))
    corr = np.nan
    if len(pair) >= 2 and pair[:, 0].std() > 0 and pair[:, 1].std() > 0:
        corr = float(np.corrcoef(pair[:, 0], pair[:, 1])[0, 1])
    return {"last2_accuracy": float(np.median(ratio)) if len(ratio) else np.nan, "runtime_lag1_corr": corr,
            "request_owner_share": _owner_share(jobs)}


def _owner_share(jobs: pd.DataFrame) -> float:
    """Share of each request's jobs submitted by the request's main user, pooled over requests (NaN: no users)."""
    if not {"user", "nodes", "walltime"} <= set(jobs.columns):
        return np.nan
    known = jobs[jobs["user"].to_numpy(np.int64) >= 0]
    if known.empty:
        return np.nan
    per_user = known.groupby(["nodes", "walltime", "user"]).size()
    return float(per_user.groupby(level=["nodes", "walltime"]).max().sum() / len(known))


def history(real: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, Any]:
    """:func:`history_stats` of both tables: ``{"real": stats, "synthetic": stats}``."""
    return {"real": history_stats(real), "synthetic": history_stats(synthetic)}
