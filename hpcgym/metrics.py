"""Per-job records and the metrics of a schedule (docs/definitions.md, "Metrics").

A record table has one row per job: ``job_id, submit, start, end, wait, run, walltime, nodes, bsld`` where
``run`` is the time the job actually held its nodes (``min(run, walltime)`` when killed at its walltime).

- wait = start - submit; turnaround = end - submit
- bounded slowdown: ``bsld = max((wait + run) / max(run, 10), 1)``
- utilization = sum(nodes x run) / (machine nodes x (last end - first submit))
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

TAU = 10  # seconds: the bound of bounded slowdown


def bounded_slowdown(wait: np.ndarray, run: np.ndarray, tau: int = TAU) -> np.ndarray:
    """``max((wait + run) / max(run, tau), 1)``, element-wise."""
    return np.maximum((wait + run) / np.maximum(run, tau), 1.0)


def records(jobs: pd.DataFrame, start: np.ndarray, hold: np.ndarray) -> pd.DataFrame:
    """Per-job records from a job table, the start times and the hold times (actual runtimes)."""
    return pd.DataFrame(record_columns(jobs["job_id"].to_numpy(), jobs["submit"].to_numpy(np.int64), start, hold,
                                       jobs["walltime"].to_numpy(np.int64), jobs["nodes"].to_numpy(np.int64)))


def record_columns(job_id: np.ndarray, submit: np.ndarray, start: np.ndarray, hold: np.ndarray,
                   walltime: np.ndarray, nodes: np.ndarray) -> dict[str, np.ndarray]:
    """The columns of :func:`records` from arrays (no pandas: environments build these at every episode end)."""
    wait = start - submit
    return {"job_id": job_id, "submit": submit, "start": start, "end": start + hold, "wait": wait, "run": hold,
            "walltime": walltime, "nodes": nodes, "bsld": bounded_slowdown(wait, hold)}


def utilization(rec: pd.DataFrame | dict[str, np.ndarray], machine_nodes: int) -> float:
    """Node-seconds used over node-seconds available from the first submit to the last end."""
    span = float(np.max(rec["end"]) - np.min(rec["submit"]))
    used = float(np.dot(np.asarray(rec["nodes"], np.float64), np.asarray(rec["run"], np.float64)))
    return used / (machine_nodes * span) if span > 0 else float("nan")


def summarize(rec: pd.DataFrame | dict[str, np.ndarray], machine_nodes: int) -> dict[str, float]:
    """Mean, median, p95 and max of wait, turnaround and bsld; utilization; makespan; job count.

    ``rec`` is a record table or its columns (:func:`record_columns`).
    """
    end, submit = np.asarray(rec["end"]), np.asarray(rec["submit"])
    out: dict[str, float] = {"jobs": float(len(submit))}
    for name, values in (("wait", rec["wait"]), ("turnaround", end - submit), ("bsld", rec["bsld"])):
        v = np.asarray(values, np.float64)
        p50, p95 = np.percentile(v, (50, 95))
        out.update({f"{name}_mean": float(v.mean()), f"{name}_median": float(p50), f"{name}_p95": float(p95),
                    f"{name}_max": float(v.max())})
    out["utilization"] = utilization(rec, machine_nodes)
    out["makespan"] = float(end.max() - submit.min())
    return out


def bootstrap_ci(values: Sequence[float] | np.ndarray, confidence: float = 0.95, n_boot: int = 2000,
                 seed: int | np.random.Generator | None = 0) -> tuple[float, float, float]:
    """Mean of per-window values with a percentile bootstrap confidence interval: (mean, low, high)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    return float(v.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha))


def window_blocks(starts: Sequence[int] | np.ndarray, length: int) -> np.ndarray:
    """The block of each window: the stretch of ``length`` consecutive jobs of the split its start falls in.

    Windows drawn at random starts overlap; those that start in the same stretch share most of their jobs and go
    into one block, so that :func:`paired_ratio_ci` resamples them together.

    >>> window_blocks([0, 1000, 1100, 5000], 1024).tolist()
    [0, 0, 1, 4]
    """
    if length < 1:
        raise ValueError(f"window_blocks needs a length of at least 1, not {length}")
    return np.asarray(starts, dtype=np.int64) // length


def block_bootstrap_ratios(values: np.ndarray, reference: np.ndarray, blocks: np.ndarray, n_boot: int = 2000,
                           seed: int | np.random.Generator | None = 0) -> np.ndarray:
    """``n_boot`` ratios ``sum(values) / sum(reference)``, each over blocks drawn with replacement (whole blocks)."""
    labels, block = np.unique(np.asarray(blocks), return_inverse=True)
    mine = np.bincount(block, weights=np.asarray(values, np.float64), minlength=len(labels))
    ref = np.bincount(block, weights=np.asarray(reference, np.float64), minlength=len(labels))
    draws = np.random.default_rng(seed).integers(0, len(labels), size=(n_boot, len(labels)))
    return mine[draws].sum(axis=1) / ref[draws].sum(axis=1)


def paired_ratio_ci(values: Sequence[float] | np.ndarray, reference: Sequence[float] | np.ndarray,
                    blocks: Sequence[int] | np.ndarray | None = None, confidence: float = 0.95, n_boot: int = 2000,
                    seed: int | np.random.Generator | None = 0) -> tuple[float, float, float]:
    """The paired ratio ``mean(values) / mean(reference)`` with a block-bootstrap CI: ``(ratio, low, high)``.

    ``values[i]`` and ``reference[i]`` are two schedulers' scores on the same window (or job); ``blocks[i]`` is the
    block it belongs to (:func:`window_blocks`; default: every item its own block). Whole blocks are resampled, so
    that overlapping windows are not counted as independent. A ratio below 1 means ``values`` is lower (better, for
    bsld); "beats" needs the CI's upper end below 1. Deterministic for a given ``seed``.
    """
    v, r = np.asarray(values, np.float64), np.asarray(reference, np.float64)
    if v.shape != r.shape or v.size == 0:
        raise ValueError(f"paired_ratio_ci needs two equal, non-empty sets of scores, not {v.size} and {r.size}")
    b = np.arange(v.size) if blocks is None else np.asarray(blocks)
    if b.shape != v.shape:
        raise ValueError(f"paired_ratio_ci needs one block per score: {b.size} blocks for {v.size} scores")
    ratios = block_bootstrap_ratios(v, r, b, n_boot, seed)
    alpha = (1.0 - confidence) / 2.0
    return float(v.sum() / r.sum()), float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1.0 - alpha))


def ratio_text(ratio: float, low: float, high: float) -> str:
    """A paired ratio with its CI, and what it shows (lower is better, as for bsld).

    >>> ratio_text(0.987, 0.962, 1.011), ratio_text(0.9, 0.8, 0.95), ratio_text(float("nan"), 0, 0)
    ('0.987 (0.962-1.011)', '0.900 (0.800-0.950) better', '-')
    """
    if math.isnan(ratio):
        return "-"
    verdict = " better" if high < 1 else " worse" if low > 1 else ""
    return f"{ratio:.3f} ({low:.3f}-{high:.3f}){verdict}"
