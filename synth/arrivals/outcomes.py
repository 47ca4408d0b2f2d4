"""Each job's outcome: its status, and whether it overran its walltime (the killed-job spike).

``P(outcome | request)`` is shrunk towards ``P(outcome | request class)``
(:func:`~synth.arrivals.requests.request_class`). Within a session a job keeps the previous job's outcome with
probability ``p_keep``, fitted so that consecutive jobs of a session agree as often as the data's (two fresh draws of
request ``r`` agree with probability ``sum_o P(o | r)^2``); a kept outcome is a draw of the same request's, so the
outcome mix is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.arrivals.context import MIN_POOL
from synth.arrivals.requests import N_CLASSES, RequestMix, draw_rows


@dataclass
class Outcomes:
    """The outcome model. An outcome is ``2 * status + overran``.

    Attributes:
        statuses: the training statuses, sorted (an outcome's status is ``statuses[outcome // 2]``).
        outcome_cdf: request x outcome: cumulative probabilities.
        p_keep: the probability that a job keeps its session's previous outcome.
    """

    statuses: np.ndarray
    outcome_cdf: np.ndarray
    p_keep: float

    @classmethod
    def fit(cls, status: np.ndarray, overran: np.ndarray, request: np.ndarray, same: np.ndarray, mix: RequestMix,
            smoothing: float) -> tuple[Outcomes, np.ndarray]:
        """Fit on the training jobs.

        Args:
            status: each job's status.
            overran: whether each job ran past its walltime.
            request: each job's request (index in ``mix``'s menu).
            same: for each job but the first, whether it continues the previous job's session.
            mix: the request mix.
            smoothing: the shrinkage's pseudo-count.

        Returns:
            The model, and each training job's outcome.
        """
        statuses, code = np.unique(np.asarray(status).astype(str), return_inverse=True)
        outcome = code.ravel() * 2 + overran
        n_out = 2 * len(statuses)
        by_req = np.zeros((len(mix), n_out))
        np.add.at(by_req, (request, outcome), 1.0)
        by_class = np.zeros((N_CLASSES, n_out))
        np.add.at(by_class, (mix.menu_class[request], outcome), 1.0)
        prior = by_class[mix.menu_class] / by_class[mix.menu_class].sum(axis=1, keepdims=True)
        probs = (by_req + smoothing * prior) / (by_req.sum(axis=1, keepdims=True) + smoothing)
        return cls(statuses, np.cumsum(probs, axis=1), _p_keep(probs, request, outcome, same)), outcome

    @property
    def n_outcomes(self) -> int:
        """The number of outcomes (two per status)."""
        return 2 * len(self.statuses)

    def draw(self, request: np.ndarray, session: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each job's outcome: a fresh draw given its request, or (``p_keep``) its session's previous job's."""
        fresh = draw_rows(self.outcome_cdf, request, rng)
        keep = rng.random(len(fresh)) < self.p_keep
        keep[0] = False
        keep[1:] &= session[1:] == session[:-1]
        source = np.maximum.accumulate(np.where(keep, 0, np.arange(len(fresh))))
        return fresh[source]


def _p_keep(probs: np.ndarray, request: np.ndarray, outcome: np.ndarray, same: np.ndarray) -> float:
    """The keep probability that makes session pairs agree as often as the data's (0 below MIN_POOL pairs)."""
    if same.sum() < MIN_POOL:
        return 0.0
    agree = float((outcome[1:] == outcome[:-1])[same].mean())
    fresh = float((probs[request[1:][same]] ** 2).sum(axis=1).mean())
    return float(np.clip((agree - fresh) / (1.0 - fresh), 0.0, 1.0)) if fresh < 1.0 else 0.0
