"""Fit the learned runtime predictor: a gradient-boosted model of log runtime, from the log's past.

The model is scikit-learn's ``HistGradientBoostingRegressor``: it is already a dependency, it fits a hundred
thousand jobs in seconds on two cores, it takes missing values (a user with no finished job) without imputation,
and it offers the quantile loss, which lets the fit lean towards under- or over-prediction. Its trees are exported
to plain arrays (:func:`export`) that the compiled engine walks at each job's arrival (:mod:`hpcgym.sim.learned`
defines the features and the layout); a test holds the export to scikit-learn's own ``predict``.

**The training rows.** Every job of the train split, with its features as the engine would compute them at its
arrival (:func:`hpcgym.sim.learned.replay`) in the FCFS+EASY schedule of the split on the walltimes, and its log
hold time as the target. The rows are taken twice: once with the whole split as one stream (users with long
histories, as in a whole-trace run) and once cut into consecutive windows of :data:`WINDOW` jobs, each starting
with no history (as an evaluation window starts).

**When it learns** (``docs/simulation.md``): once, on the train split; never on the test split. The loss is chosen
by the scheduling outcome, not by accuracy, in a blocked cross-validation of the train split (:func:`fit`): each
candidate of :data:`LOSSES` is scored by the mean bounded slowdown of SAF+EASY on its predictions over windows of
each block, fitted without that block; the best is refitted on the whole train split.
"""

from __future__ import annotations

import json
import shlex
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from hpcgym import metrics, traces
from hpcgym.io import atomic_write
from hpcgym.sim import hold_times, learned, predict, run_batch, start_times
from hpcgym.sim.heuristics import SAF

#: The candidate losses: ``quantile:q`` (pinball loss at quantile ``q`` of log runtime) or a scikit-learn loss name.
LOSSES = ("squared_error", "quantile:0.35", "quantile:0.5", "quantile:0.65")
#: At most this many rows (drawn at random, seeded) fit a candidate loss, and twice as many the final model: the
#: quantile losses cost about ten times the squared error per row.
MAX_ROWS = 50_000
#: Jobs per window of the windowed training rows and of the validation windows.
WINDOW = 1024
#: The boosting's settings (not tuned per trace; the loss is).
BOOSTING = {"max_iter": 20, "learning_rate": 0.3, "max_leaf_nodes": 31, "min_samples_leaf": 40,
            "l2_regularization": 1.0, "early_stopping": False}


@dataclass
class FitInfo:
    """How a learned model was made (saved beside it)."""

    trace: str
    loss: str
    rows: int  #: training rows (jobs, counted twice: whole stream and windows)
    jobs: int  #: jobs of the train split
    validation: dict[str, float] = field(default_factory=dict)  #: loss -> SAF+EASY mean bsld on validation windows
    #: loss -> (ratio, low, high): its paired ratio to the chosen loss on the validation windows, with a 95% CI
    versus_chosen: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    features: tuple[str, ...] = learned.FEATURES
    seconds: float = 0.0
    sklearn: str = ""
    command: str = ""
    description: str = ""


def training_parts(jobs: pd.DataFrame, window: int = WINDOW) -> list[pd.DataFrame]:
    """The parts the training rows are taken from: ``jobs`` as one stream, then its windows of ``window`` jobs."""
    return [p for p in [jobs, *(jobs.iloc[s:s + window] for s in range(0, len(jobs), window))] if len(p)]


def training_rows(jobs: pd.DataFrame, nodes: int, window: int = WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """(features, log hold) of every job of ``jobs``, as one stream and in windows of ``window`` jobs."""
    xs, ys = [], []
    for part in training_parts(jobs, window):
        xs.append(arrival_features(part, nodes))
        ys.append(np.log(np.maximum(hold_times(part), 1).astype(np.float64)))
    return np.concatenate(xs), np.concatenate(ys)


def arrival_features(jobs: pd.DataFrame, nodes: int) -> np.ndarray:
    """The features of ``jobs`` at their arrivals in their FCFS+EASY schedule on the walltimes.

    The history the training rows and the accuracy report read.
    """
    return _features_under(jobs, start_times(jobs, nodes, "fcfs", "easy"))


def _features_under(jobs: pd.DataFrame, start: np.ndarray) -> np.ndarray:
    """The features of ``jobs`` at their arrivals in the schedule ``start``."""
    users, n_users = predict.user_index(jobs["user"].to_numpy(np.int64))
    return learned.replay(jobs["submit"].to_numpy(np.int64), start, hold_times(jobs),
                          jobs["walltime"].to_numpy(np.int64), jobs["nodes"].to_numpy(np.int64), users, n_users)


def regressor(loss: str, seed: int = 0):
    """An unfitted ``HistGradientBoostingRegressor`` for ``loss`` (one of :data:`LOSSES`' forms)."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    if loss.startswith("quantile:"):
        q = float(loss.split(":", 1)[1])
        if not 0 < q < 1:
            raise ValueError(f"a quantile loss needs 0 < q < 1, not {q}")
        return HistGradientBoostingRegressor(loss="quantile", quantile=q, random_state=seed, **BOOSTING)
    return HistGradientBoostingRegressor(loss=loss, random_state=seed, **BOOSTING)


def export(model) -> np.ndarray:
    """A fitted ``HistGradientBoostingRegressor`` as the engine's packed arrays (:func:`hpcgym.sim.learned.pack`).

    It reads the fitted trees (``_predictors``: one ``TreePredictor`` per iteration, whose ``nodes`` record holds
    each node's feature, threshold, missing-value side, children and value) and the baseline; scikit-learn has no
    public export of them. The tests hold the packed model to ``model.predict``.
    """
    if getattr(model, "is_categorical_", None) is not None and np.any(model.is_categorical_):
        raise ValueError("categorical features cannot be exported")
    trees = []
    for (tree,) in model._predictors:
        nd = tree.nodes
        leaf = nd["is_leaf"].astype(bool)
        rows = np.zeros((len(nd), 6))
        rows[:, 0] = np.where(leaf, -1, nd["feature_idx"])
        rows[:, 1] = nd["num_threshold"]
        rows[:, 2] = nd["missing_go_to_left"]
        rows[:, 3] = nd["left"]
        rows[:, 4] = nd["right"]
        rows[:, 5] = np.where(leaf, nd["value"], 0.0)
        trees.append(rows)
    baseline = float(np.ravel(model._baseline_prediction)[0])
    return learned.pack(trees, baseline)


def fit_model(x: np.ndarray, y: np.ndarray, loss: str, seed: int = 0, max_rows: int | None = None) -> np.ndarray:
    """Fit ``loss``'s regressor on ``(x, y)`` (at most ``max_rows`` of them, drawn with ``seed``) and export it."""
    if max_rows is not None and len(y) > max_rows:
        keep = np.sort(np.random.default_rng(seed).choice(len(y), max_rows, replace=False))
        x, y = x[keep], y[keep]
    from threadpoolctl import threadpool_limits

    # A feature no row has (every user unknown: no history) is constant for the fit; no split then reads it.
    x = np.where(np.isnan(x).all(axis=0), 0.0, x)
    model = regressor(loss, seed)
    # One thread: a small fit gains little from more, and OpenMP's waiting threads crawl on a busy machine.
    with threadpool_limits(1, "openmp"):
        model.fit(x, y)
    return export(model)


def _validation_scores(packed: np.ndarray, windows: list[pd.DataFrame], nodes: int) -> list[float]:
    """SAF+EASY's mean bsld on each of ``windows`` on the packed model's predictions."""
    pred = predict.Predictor(predict.LEARNED_NAME, predict.LEARNED, learned.K, model=packed)
    values = []
    for w in windows:
        submit, hold = w["submit"].to_numpy(np.int64), hold_times(w)
        start, _ = run_batch(submit, hold, w["walltime"].to_numpy(np.int64), w["nodes"].to_numpy(np.int64),
                             SAF.keys(w), nodes, SAF, "easy", w["user"].to_numpy(np.int64), pred)
        values.append(float(metrics.bounded_slowdown(start - submit, hold).mean()))
    return values


def fit(train: pd.DataFrame, nodes: int, losses: Sequence[str] = LOSSES, folds: int = 5, windows: int = 20,
        seed: int = 0, progress: bool = True) -> tuple[np.ndarray, FitInfo]:
    """Choose the loss by blocked cross-validation on the train split, then fit it on the whole split.

    The train split is cut into ``folds`` consecutive blocks. For each block, every candidate loss is fitted on the
    rows of the other blocks' jobs and scored on windows of the block (SAF+EASY's mean bsld on its predictions); the
    loss with the best mean over every block's windows wins. (A job's features may read the runtimes of a held-out
    block's jobs as its user's history; no held-out job's runtime is a target.)

    Args:
        train: the chronological train split of a trace (never the test split).
        nodes: the machine's nodes.
        losses: the candidate losses (:data:`LOSSES`); with one, no validation is run.
        folds: consecutive blocks of the train split (at least 2).
        windows: validation windows of :data:`WINDOW` jobs in all (shorter ones on a short split), spread evenly
            over the blocks.
        seed: the seed of the validation windows' draw and of the boosting.
        progress: show a progress bar.

    Returns:
        The packed model and how it was made.
    """
    if len(train) < 100:
        raise ValueError(f"the train split has {len(train)} jobs: too few to learn runtimes from")
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, not {folds}")
    began = time.perf_counter()
    x, y = training_rows(train, nodes)
    job = np.concatenate([np.arange(len(train)), np.arange(len(train))])  # the job of each row (two passes)
    scores: dict[str, float] = {}
    per_loss: dict[str, list[float]] = {}
    blocks: list[int] = []  # each validation window's block of consecutive jobs, for the paired CIs
    steps = (folds * len(losses) if len(losses) > 1 else 0) + 1
    with tqdm(total=steps, desc="fitting runtime model", disable=not progress) as bar:
        if len(losses) > 1:
            per_loss = {loss: [] for loss in losses}
            edges = np.linspace(0, len(train), folds + 1).astype(int)
            for b in range(folds):
                block = train.iloc[edges[b]:edges[b + 1]]
                length = min(WINDOW, len(block))
                starts = traces.window_starts(len(block), length, max(1, windows // folds), seed + b)
                val = [traces.window(block, length, start=s) for s in starts]
                blocks += metrics.window_blocks(np.asarray(starts) + edges[b], length).tolist()
                keep = (job < edges[b]) | (job >= edges[b + 1])
                for loss in losses:
                    bar.set_postfix_str(f"block {b + 1}/{folds}, {loss}")
                    packed = fit_model(x[keep], y[keep], loss, seed, MAX_ROWS)
                    per_loss[loss] += _validation_scores(packed, val, nodes)
                    bar.update()
            scores = {loss: float(np.mean(v)) for loss, v in per_loss.items()}
        best = min(scores, key=scores.get) if scores else losses[0]
        versus = {loss: metrics.paired_ratio_ci(v, per_loss[best], blocks) for loss, v in per_loss.items()
                  if loss != best}
        bar.set_postfix_str(f"{best} on the whole train split")
        packed = fit_model(x, y, best, seed, 2 * MAX_ROWS)
        bar.update()
    import sklearn

    info = FitInfo(trace=str(train.attrs.get("name", "")), loss=best, rows=len(y), jobs=len(train),
                   validation=scores, versus_chosen=versus, seconds=round(time.perf_counter() - began, 1),
                   sklearn=sklearn.__version__,
                   description=f"gradient-boosted log runtime ({best}) on the job and its user's history")
    return packed, info


def out_of_fold(train: pd.DataFrame, nodes: int, loss: str, folds: int = 5,
                seed: int = 0) -> Callable[[int, int], predict.Predictor]:
    """Models fitted without each of ``folds`` consecutive blocks of ``train``, for windows of its rows.

    Returns ``held_out(first, end)``: the predictor of a model fitted without every block that rows
    ``first .. end - 1`` touch (the blocks are fitted lazily, once each pair is needed).
    """
    x, y = training_rows(train, nodes)
    job = np.concatenate([np.arange(len(train)), np.arange(len(train))])
    edges = np.linspace(0, len(train), folds + 1).astype(int)
    cache: dict[tuple[int, int], predict.Predictor] = {}

    def held_out(first: int, end: int) -> predict.Predictor:
        lo = int(np.searchsorted(edges, first, side="right") - 1)
        hi = int(np.searchsorted(edges, end - 1, side="right") - 1)
        if (lo, hi) not in cache:
            keep = (job < edges[lo]) | (job >= edges[min(hi + 1, folds)])
            packed = fit_model(x[keep], y[keep], loss, seed, 2 * MAX_ROWS)
            held = f"out of fold: rows {edges[lo]}-{edges[min(hi + 1, folds)]} held out"
            cache[lo, hi] = predict.Predictor(predict.LEARNED_NAME, predict.LEARNED, learned.K, model=packed,
                                              source=held)
        return cache[lo, hi]

    return held_out


def predictions(jobs: pd.DataFrame, nodes: int, packed: np.ndarray | None = None) -> pd.DataFrame:
    """Every job's hold time and each predictor's estimate of it at the job's arrival.

    The jobs are scheduled as one stream by FCFS+EASY on the walltimes, and each estimate is made from the history
    of that schedule: ``walltime``, ``last2`` and ``median5`` by their rules (:mod:`hpcgym.sim.predict`), and
    ``learned`` by ``packed`` (when given).
    """
    start = start_times(jobs, nodes, "fcfs", "easy")
    x = _features_under(jobs, start)
    wall = jobs["walltime"].to_numpy(np.int64)
    out = {"hold": hold_times(jobs), "walltime": wall}
    for name, col in (("last2", learned.FEATURES.index("last2")), ("median5", learned.FEATURES.index("median5"))):
        v = x[:, col]
        out[name] = np.where(np.isnan(v), wall, np.clip(np.ceil(np.nan_to_num(v, nan=1.0)), 1, wall)).astype(np.int64)
    if packed is not None:
        out["learned"] = np.array([learned.seconds(learned.raw_value(packed, tuple(r)), w)
                                   for r, w in zip(x, wall, strict=True)], np.int64)
    return pd.DataFrame(out)


def accuracy(estimate: np.ndarray, hold: np.ndarray) -> dict[str, float]:
    """How close estimates are to hold times.

    The mean absolute error of log runtime, the share under-predicted, and the share within a factor of 2 (seconds
    below 1 count as 1).
    """
    est = np.log(np.maximum(np.asarray(estimate, np.float64), 1))
    act = np.log(np.maximum(np.asarray(hold, np.float64), 1))
    return {"mae_log": float(np.abs(est - act).mean()), "under": float((est < act).mean()),
            "within_2x": float((np.abs(est - act) <= np.log(2)).mean())}


def save(packed: np.ndarray, info: FitInfo, path: str | Path) -> Path:
    """Write a model and its :class:`FitInfo` as one ``.npz`` (atomically)."""
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, model=packed, about=np.array(json.dumps(asdict(info))))

    return atomic_write(path, write)


def about(path: str | Path) -> dict:
    """The :class:`FitInfo` saved with a model, as a dict."""
    with np.load(path, allow_pickle=False) as data:
        return json.loads(str(data["about"]))


def local_path(trace: str) -> Path:
    """Where a fit for ``trace`` is cached: ``./predictors/<name>.npz``."""
    return predict.LOCAL_MODELS / predict.model_file(trace)


def ensure(trace: str, jobs: pd.DataFrame, nodes: int, progress: bool = True) -> str:
    """The predictor name ``learned:...`` for ``trace``: its model if one exists, else one fitted now.

    A new fit reads the train split of ``jobs`` and is cached in ``./predictors/`` with the command that makes it.
    """
    try:
        predict.model_path(trace)
        return f"{predict.LEARNED_NAME}:{trace}"
    except FileNotFoundError:
        pass
    packed, info = fit(traces.split(jobs, "train"), nodes, progress=progress)
    info.command = f"python -m baselines.learn --trace {shlex.quote(trace)}"
    path = save(packed, info, local_path(trace))
    return f"{predict.LEARNED_NAME}:{path}"


def ensure_quietly(trace: str, jobs: pd.DataFrame, nodes: int, progress: bool = True) -> str | None:
    """:func:`ensure`, or ``None`` with a warning where no model can be fitted (too few jobs, no name)."""
    if not trace:
        return None
    try:
        return ensure(trace, jobs, nodes, progress)
    except ValueError as exc:
        warnings.warn(f"no learned runtime model for {trace}: {exc}", stacklevel=2)
        return None


__all__ = ["BOOSTING", "LOSSES", "MAX_ROWS", "WINDOW", "FitInfo", "about", "accuracy", "arrival_features", "ensure",
           "ensure_quietly", "export", "fit", "fit_model", "local_path", "out_of_fold", "predictions", "regressor",
           "save", "training_parts", "training_rows"]
