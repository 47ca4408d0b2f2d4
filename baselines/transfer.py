"""The learned runtime predictor fitted on one job table and scored on a real test split.

Trained on synthetic, tested on real: :func:`baselines.learned.fit` takes any job table as its train split (a
synthetic sample, or the real train split for the floor), and :class:`Target` scores the fitted model on the real
test split, where it never looked:

- **accuracy** (:func:`baselines.learned.accuracy`): the mean absolute error of log runtime, the share
  under-predicted and the share within a factor of 2, of the estimates made at each job's arrival in the FCFS+EASY
  schedule of the whole test split (:func:`baselines.learned.predictions`);
- **scheduling**: the mean bounded slowdown of SAF+EASY on the predictor's estimates (kill times unchanged), averaged
  over fixed windows of the test split (the evaluation's 20 windows of 1,024 jobs, starts
  :func:`hpcgym.traces.window_starts` with seed 0, by default).

The same numbers for the rules (``last2``, ``walltime``) come from :meth:`Target.rule`. A table without user ids
(every ``user`` is -1) gives a predictor nothing to learn from: its row is NaN ("n/a"), not fitted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from baselines import learned as fitting
from hpcgym import metrics, traces
from hpcgym.sim import hold_times, learned, predict, start_times

#: the evaluation protocol's test windows: how many, how long, the seed of their starts
WINDOWS, WINDOW, SEED = 20, 1024, 0
#: what a scored predictor reports (accuracy on the whole test split, then SAF+EASY's mean bsld on its windows)
MEASURES = ("mae_log", "under", "within_2x", "bsld")
#: the rule-based predictors scored beside the learned ones
RULES = ("last2", "walltime")
NO_USERS = "n/a (no user ids)"


def has_users(table: pd.DataFrame) -> bool:
    """Whether ``table`` has a known user id (>= 0) on at least one job."""
    return "user" in table and bool((table["user"].to_numpy(np.int64) >= 0).any())


class Target:
    """The real test split a predictor is scored on: its windows and its one-stream schedule, computed once.

    Args:
        test: the real test split (a canonical job table).
        nodes: the machine's nodes.
        windows: how many test windows score the scheduling outcome.
        length: jobs per window (at most the split's length: shorter windows on a short split).
        seed: the seed of the window starts.
    """

    def __init__(self, test: pd.DataFrame, nodes: int, windows: int = WINDOWS, length: int = WINDOW,
                 seed: int = SEED):
        self.test, self.nodes = test, int(nodes)
        length = min(length, len(test))
        self.windows = [traces.window(test, length, start=s)
                        for s in traces.window_starts(len(test), length, windows, seed)]
        self._rules = fitting.predictions(test, self.nodes)

    def bsld(self, predictor: str | predict.Predictor) -> float:
        """SAF+EASY's mean bounded slowdown over the windows, on ``predictor``'s estimates."""
        values = []
        for w in self.windows:
            start = start_times(w, self.nodes, "saf", "easy", predictor=predictor)
            values.append(metrics.bounded_slowdown(start - w["submit"].to_numpy(np.int64), hold_times(w)).mean())
        return float(np.mean(values))

    def rule(self, name: str) -> dict[str, float]:
        """The measures (:data:`MEASURES`) of a rule-based predictor (``last2``, ``median5`` or ``walltime``)."""
        acc = fitting.accuracy(self._rules[name].to_numpy(), self._rules["hold"].to_numpy())
        return acc | {"bsld": self.bsld(name)}

    def model(self, packed: np.ndarray) -> dict[str, float]:
        """The measures (:data:`MEASURES`) of a packed learned model."""
        est = fitting.predictions(self.test, self.nodes, packed)
        acc = fitting.accuracy(est["learned"].to_numpy(), est["hold"].to_numpy())
        return acc | {"bsld": self.bsld(predict.Predictor(predict.LEARNED_NAME, predict.LEARNED, learned.K,
                                                          model=packed))}

    def fitted(self, table: pd.DataFrame, losses: Sequence[str] = fitting.LOSSES, seed: int = 0) -> dict:
        """Fit the learned predictor on ``table`` (its "train split") and score it here.

        Args:
            table: a clean job table (a synthetic sample or a real split) of jobs on this machine.
            losses: the candidate losses (:func:`baselines.learned.fit` chooses on validation windows of ``table``).
            seed: the seed of the fit.

        Returns:
            :data:`MEASURES` (NaN for a table without user ids or with too few jobs to learn from), ``loss`` (the
            chosen loss, or why none was fitted) and ``fit_s`` (seconds of the fit).
        """
        if not has_users(table):
            return dict.fromkeys(MEASURES, float("nan")) | {"loss": NO_USERS, "fit_s": 0.0}
        began = time.perf_counter()
        try:
            packed, info = fitting.fit(table, self.nodes, losses=losses, seed=seed, progress=False)
        except ValueError as exc:  # too few jobs to learn from
            return dict.fromkeys(MEASURES, float("nan")) | {"loss": f"n/a ({exc})", "fit_s": 0.0}
        fit_s = time.perf_counter() - began
        return self.model(packed) | {"loss": info.loss, "fit_s": fit_s}

    def __call__(self, table: pd.DataFrame) -> dict[str, float]:
        """:meth:`fitted` with the default losses: what :func:`synth.fidelity.prepare` takes as ``predictor``."""
        return self.fitted(table)


__all__ = ["MEASURES", "NO_USERS", "RULES", "SEED", "WINDOW", "WINDOWS", "Target", "has_users"]
