"""Privacy: does a generated trace hand back the training data?

Every measure is taken against the **train split** (the rows a model learned from), for the candidate rows and,
as the floor, for the **test split's** own rows: real jobs from a later period that no model saw. A candidate
should be no closer to train than the test split is.

- :func:`dcr`: distance to closest record, on standardized ``log1p`` inter-arrival, nodes, run and walltime.
- :func:`exact_copy_share`: share of rows whose ``(nodes, run, walltime)`` tuple occurs in train.
- :func:`identifier_reuse`: share of rows whose ``user`` (or ``group``) value occurs in train. Values are compared
  as strings (real traces hold hashed or integer ids); ``-1`` ("unknown") is no identifier and never counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from synth.base import require
from synth.distances import log_numeric, subsample, training

DCR_ROWS = 2000
COPY_KEY = ["nodes", "run", "walltime"]
UNKNOWN_ID = "-1"


def _nearest(reference: pd.DataFrame, query: pd.DataFrame, max_rows: int, rng: np.random.Generator) -> np.ndarray:
    """Distance of (a subsample of) the query rows to their nearest reference row, standardized log1p space."""
    if not len(query):
        return np.zeros(0)
    neighbors = require("sklearn.neighbors", "synth")
    ref = log_numeric(training(reference))
    mu, sd = ref.mean(axis=0), ref.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    nn = neighbors.NearestNeighbors(n_neighbors=1).fit((ref - mu) / sd)
    x = log_numeric(training(query))
    x = x[subsample(len(x), max_rows, rng)]
    return nn.kneighbors((x - mu) / sd, return_distance=True)[0][:, 0]


def dcr(train: pd.DataFrame, synthetic: pd.DataFrame, holdout: pd.DataFrame, seed: int = 0,
        max_rows: int = DCR_ROWS, holdout_reference: pd.DataFrame | None = None) -> dict[str, float]:
    """Distance to closest record: synthetic rows and holdout rows, each to their nearest train row.

    Features are ``log1p`` of the four numeric training columns, standardized with the train rows' mean and
    standard deviation; distances are Euclidean to *all* train rows. Holdout rows are real jobs the model never
    saw, so their DCRs are what "similar but not copied" looks like; synthetic rows much closer than that
    suggest memorization. An empty synthetic table scores the worst values (distance 0, every row "too close").

    Args:
        train: the rows the model learned from.
        synthetic: the synthetic rows.
        holdout: real rows not used for training (the test split).
        seed: seed of the subsamples.
        max_rows: synthetic and holdout rows evaluated (random subsamples above this).
        holdout_reference: measure the holdout rows against these rows instead of ``train``.

    Returns:
        ``median_synthetic``/``median_holdout``, ``p5_synthetic``/``p5_holdout`` (5th percentiles), ``holdout_p5``
        (the same as ``p5_holdout``), ``below_p5_synthetic``/``below_p5_holdout`` (share strictly below the
        holdout's 5th percentile) and ``zero_synthetic``/``zero_holdout`` (share at distance 0).
    """
    rng = np.random.default_rng(seed)
    ds = _nearest(train, synthetic, max_rows, rng)
    dh = _nearest(train if holdout_reference is None else holdout_reference, holdout, max_rows, rng)
    p5 = float(np.percentile(dh, 5)) if dh.size else float("nan")
    if not ds.size:
        return {"median_synthetic": 0.0, "median_holdout": float(np.median(dh)), "p5_synthetic": 0.0,
                "p5_holdout": p5, "holdout_p5": p5, "below_p5_synthetic": 1.0,
                "below_p5_holdout": float(np.mean(dh < p5)), "zero_synthetic": 1.0,
                "zero_holdout": float(np.mean(dh == 0))}
    return {"median_synthetic": float(np.median(ds)), "median_holdout": float(np.median(dh)),
            "p5_synthetic": float(np.percentile(ds, 5)), "p5_holdout": p5, "holdout_p5": p5,
            "below_p5_synthetic": float(np.mean(ds < p5)), "below_p5_holdout": float(np.mean(dh < p5)),
            "zero_synthetic": float(np.mean(ds == 0)), "zero_holdout": float(np.mean(dh == 0))}


def exact_copy_share(train: pd.DataFrame, rows: pd.DataFrame) -> float:
    """Share of ``rows`` whose ``(nodes, run, walltime)`` tuple occurs in ``train`` (1, the worst, when empty).

    Args:
        train: the training rows.
        rows: the rows to check.

    Returns:
        The share in ``[0, 1]``.
    """
    if not len(rows):
        return 1.0
    found = pd.MultiIndex.from_frame(rows[COPY_KEY]).isin(pd.MultiIndex.from_frame(train[COPY_KEY]))
    return float(np.mean(found))


def identifier_reuse(train: pd.DataFrame, rows: pd.DataFrame, column: str) -> float:
    """Share of ``rows`` whose ``column`` value (as a string, ``-1`` excluded) occurs in ``train``.

    Args:
        train: the training rows.
        rows: the rows to check (1, the worst, when empty).
        column: ``"user"`` or ``"group"``.

    Returns:
        The share in ``[0, 1]``; 0 when either table lacks the column.
    """
    if not len(rows):
        return 1.0
    if column not in rows or column not in train:
        return 0.0
    known = set(train[column].astype(str)) - {UNKNOWN_ID}
    return float(rows[column].astype(str).isin(known).mean())


def privacy(train: pd.DataFrame, candidate: pd.DataFrame, test: pd.DataFrame, seed: int = 0,
            max_rows: int = DCR_ROWS) -> dict[str, Any]:
    """Every privacy measure of ``candidate`` against ``train``, next to the test split's own values (the floor).

    Args:
        train: the rows the model learned from.
        candidate: the generated rows.
        test: the held-out real rows.
        seed: seed of the DCR subsamples.
        max_rows: rows per DCR subsample.

    Returns:
        ``dcr`` (:func:`dcr`), ``copy_candidate``/``copy_test`` (:func:`exact_copy_share`) and
        ``user_candidate``/``user_test``/``group_candidate``/``group_test`` (:func:`identifier_reuse`).
    """
    return {"dcr": dcr(train, candidate, test, seed=seed, max_rows=max_rows),
            "copy_candidate": exact_copy_share(train, candidate), "copy_test": exact_copy_share(train, test),
            "user_candidate": identifier_reuse(train, candidate, "user"),
            "user_test": identifier_reuse(train, test, "user"),
            "group_candidate": identifier_reuse(train, candidate, "group"),
            "group_test": identifier_reuse(train, test, "group")}
