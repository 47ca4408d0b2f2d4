"""Priority policies: the protocol the simulator accepts, and the compiled scores of the built-in formulas.

A policy gives each queued job a score; the lowest runs first, ties going to the earlier submit, then the lower
job id. The built-in formulas are compiled into the engine and picked by code; any other *static* priority (one
that does not change while a job waits) plugs in as :class:`PriorityPolicy` with a ``key`` function that maps a
job table to one score per job. Two more codes add ``+ log(r)`` or ``- log(r)`` of the job's *estimate* to such a key,
so that a custom score can weigh a runtime prediction that is only known when the job arrives
(:mod:`hpcgym.sim.predict`; a positive weight ``a`` on ``log(r)`` is the key divided by ``a``, plus ``log(r)``).
A policy can also carry a runtime predictor and a separate backfill scan order. The named heuristics users pick from
live in :mod:`hpcgym.sim.heuristics`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numba as nb
import numpy as np
import pandas as pd

# Codes of the compiled formulas. w = now - submit, r = the estimate (the walltime unless a predictor is on),
# n = nodes, s = submit.
FCFS, SJF, LJF, SAF, WFP3, UNICEP, F1, KEY, KEY_PLUS_LOG_R, KEY_MINUS_LOG_R = range(10)
DYNAMIC_CODES = (WFP3, UNICEP)
CUSTOM_CODES = (KEY, KEY_PLUS_LOG_R, KEY_MINUS_LOG_R)
#: The orders a backfill scan can follow on its own (formulas of the job alone, no custom key).
SCAN_CODES = (FCFS, SJF, LJF, SAF, F1)


@nb.njit(cache=True)
def priority(code: int, now: int, submit: int, wall: int, nodes: int, key: float) -> float:  # pragma: no cover
    """The priority score of one job; lower runs first. ``key`` is the precomputed score of a custom static policy."""
    if code == FCFS:
        return float(submit)
    if code == SJF:
        return float(wall)
    if code == LJF:
        return -float(wall)
    if code == SAF:
        return float(wall) * float(nodes)
    if code == WFP3:
        x = (now - submit) / wall
        return -x * x * x * nodes
    if code == UNICEP:
        lg = math.log2(nodes) if nodes > 1 else 1.0
        return -(now - submit) / (lg * wall)
    if code == F1:
        return math.log10(wall) * nodes + 870.0 * math.log10(max(submit, 1))
    if code == KEY_PLUS_LOG_R:
        return key + math.log(wall)
    if code == KEY_MINUS_LOG_R:
        return key - math.log(wall)
    return key


@dataclass(frozen=True)
class PriorityPolicy:
    """A priority rule the engine can run.

    Attributes:
        name: short name (``"fcfs"``).
        code: one of the compiled formula codes, or :data:`KEY` for a custom static key (:data:`KEY_PLUS_LOG_R`,
            :data:`KEY_MINUS_LOG_R`: the key plus or minus the log of the job's estimate).
        key: for the custom codes: maps a job table to one float score per row (lower runs first).
        description: the formula, for docs and tables.
        predictor: the runtime predictor whose estimates replace the walltimes (a name of
            :data:`hpcgym.sim.predict.PREDICTORS`; ``"walltime"``: none).
        scan: the order of EASY's backfill scan when it differs from the queue order (a code of
            :data:`SCAN_CODES`, e.g. :data:`SJF` for shortest-job-backfilled-first); ``None``: the queue order.
    """

    name: str
    code: int
    key: Callable[[pd.DataFrame], np.ndarray] | None = field(default=None, compare=False)
    description: str = ""
    predictor: str = "walltime"
    scan: int | None = None

    def __post_init__(self) -> None:
        if self.code in CUSTOM_CODES and self.key is None:
            raise ValueError(f"policy {self.name!r}: a custom policy (code KEY) needs a key function")
        if not 0 <= self.code <= KEY_MINUS_LOG_R:
            raise ValueError(f"policy {self.name!r}: unknown code {self.code}")
        if self.scan is not None and self.scan not in SCAN_CODES:
            raise ValueError(f"policy {self.name!r}: the backfill scan order must be one of the codes {SCAN_CODES}")

    @property
    def dynamic(self) -> bool:
        """Whether scores change while jobs wait (then every pass re-sorts the queue)."""
        return self.code in DYNAMIC_CODES

    def keys(self, jobs: pd.DataFrame) -> np.ndarray:
        """The custom static keys of ``jobs`` (zeros for the compiled formulas)."""
        if self.code not in CUSTOM_CODES:
            return np.zeros(len(jobs))
        keys = np.asarray(self.key(jobs), dtype=np.float64)  # type: ignore[misc]
        if keys.shape != (len(jobs),) or not np.isfinite(keys).all():
            raise ValueError(f"policy {self.name!r}: key must give one finite score per job")
        return keys

    def scores(self, now: int, jobs: pd.DataFrame) -> np.ndarray:
        """Scores of the jobs of ``jobs`` at time ``now`` (a slow helper for inspection and tests)."""
        keys = self.keys(jobs)
        cols = [jobs[c].to_numpy(np.int64) for c in ("submit", "walltime", "nodes")]
        return np.array([priority(self.code, now, s, r, n, k) for s, r, n, k in zip(*cols, keys, strict=True)])


@nb.njit(cache=True)
def static_keys(code, submit, wall, nodes, key_in):  # pragma: no cover - compiled
    """Every job's score at time 0: the whole order for static policies (dynamic ones re-score at each pass)."""
    key = np.empty(len(submit))
    for j in range(len(submit)):
        key[j] = priority(code, 0, submit[j], wall[j], nodes[j], key_in[j])
    return key


def __getattr__(name: str) -> Any:
    if name == "score":  # the old name (hpcgym has several scores: this is the priority one)
        warnings.warn("hpcgym.sim.policy.score is renamed priority", DeprecationWarning, stacklevel=2)
        return priority
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
