"""The request mix: a new session's ``(nodes, walltime)`` drawn from the request menu given its arrival context.

The menu is the pairs seen in training (node counts, powers of two, the machine's limits and the walltime menu are
discrete by nature). ``P(pair | ctx) = (count + a P(pair)) / (n_ctx + a)``, ``a`` the smoothing, shrinks each arrival
context's distribution towards the overall one; the draw is then calibrated so that the sampled *jobs* have the
training jobs' mix (:func:`synth.arrivals.calibration.calibrate_mix`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.arrivals.context import N_CONTEXTS

N_CLASSES = 20 * 16  # request classes: 16 walltime octaves x 20 node-count octaves (see request_class)


def request_class(nodes: np.ndarray, wall: np.ndarray) -> np.ndarray:
    """A request's class: ``(floor(log2 walltime/min), floor(log2 nodes))``, as one of :data:`N_CLASSES`."""
    wb = np.clip(np.floor(np.log2(np.maximum(wall, 60) / 60.0)), 0, 15).astype(np.int64)
    nb = np.clip(np.floor(np.log2(np.maximum(nodes, 1))), 0, 19).astype(np.int64)
    return wb * 20 + nb


def draw_rows(cdf: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per entry of ``rows``, from that row of a matrix of cumulative probabilities."""
    u = rng.random(len(rows))
    if cdf.shape[1] <= 64:  # few categories: one vectorized comparison
        return np.minimum((u[:, None] * cdf[rows, -1:] >= cdf[rows]).sum(axis=1), cdf.shape[1] - 1)
    out = np.empty(len(rows), np.int64)
    for r in np.unique(rows):
        mask = rows == r
        out[mask] = np.searchsorted(cdf[r], u[mask] * cdf[r, -1], side="right")
    return np.minimum(out, cdf.shape[1] - 1)


@dataclass
class RequestMix:
    """The request menu and its cumulative distribution per arrival context.

    Attributes:
        menu_nodes: each request's nodes.
        menu_wall: each request's walltime (seconds).
        menu_class: each request's class (:func:`request_class`).
        request_cdf: arrival context x request: cumulative probabilities.
        mix_tv: the calibration's last round's total-variation distance between the sampled and the training mix
            (NaN before it ran).
    """

    menu_nodes: np.ndarray
    menu_wall: np.ndarray
    menu_class: np.ndarray
    request_cdf: np.ndarray
    mix_tv: float = float("nan")

    @classmethod
    def fit(cls, nodes: np.ndarray, wall: np.ndarray, ctx: np.ndarray,
            smoothing: float) -> tuple[RequestMix, np.ndarray]:
        """The menu of the training requests and their distribution per context, shrunk towards the overall one.

        Args:
            nodes: each training job's nodes.
            wall: each training job's walltime.
            ctx: each training job's arrival context (:func:`~synth.arrivals.context.arrival_context`).
            smoothing: the shrinkage's pseudo-count.

        Returns:
            The mix, and each training job's request (its index in the menu).
        """
        pairs = np.column_stack([nodes, wall]).astype(np.int64)
        menu, request = np.unique(pairs, axis=0, return_inverse=True)
        request = request.ravel()
        counts = np.zeros((N_CONTEXTS, len(menu)))
        np.add.at(counts, (ctx, request), 1.0)
        overall = counts.sum(axis=0) / counts.sum()
        probs = (counts + smoothing * overall) / (counts.sum(axis=1, keepdims=True) + smoothing)
        mix = cls(menu[:, 0], menu[:, 1], request_class(menu[:, 0], menu[:, 1]), np.cumsum(probs, axis=1))
        return mix, request

    def __len__(self) -> int:
        return len(self.menu_nodes)

    def draw(self, ctx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One request (index in the menu) per arrival context of ``ctx``."""
        return draw_rows(self.request_cdf, ctx, rng)
