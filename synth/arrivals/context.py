"""The arrival context every sub-model of the arrivals generator conditions on: the calendar and the gap bins."""

from __future__ import annotations

import numpy as np

GAP_BINS = np.array([0.0, 2.0, 4.0, 6.0, 8.0, 10.0])  # edges on log1p(gap): ~1 s, 1 min, 7 min, 50 min, 6 h
MIN_POOL = 30  # fewer training jobs than this: borrow from the coarser level (every sub-model's back-off)
N_CONTEXTS = 8 * len(GAP_BINS)  # 8 periods of the week x the gap bins


def calendar(clocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hour of day and weekday (0 = Monday) of Unix times: 1970-01-01 was a Thursday."""
    return (clocks // 3600) % 24, ((clocks // 86400) + 3) % 7


def hour_class(hour: np.ndarray, dow: np.ndarray) -> np.ndarray:
    """The 48 hour classes: hour of day x weekday/weekend."""
    return hour + 24 * (dow >= 5)


def period(hour: np.ndarray, dow: np.ndarray) -> np.ndarray:
    """The 8 periods: quarter of the day x weekday/weekend."""
    return hour // 6 + 4 * (dow >= 5)


def gap_bin(x: np.ndarray) -> np.ndarray:
    """The bin of :data:`GAP_BINS` of each log gap ``x = log1p(gap)``."""
    return np.searchsorted(GAP_BINS, x, side="right") - 1


def arrival_context(hour: np.ndarray, dow: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each job's arrival context (48): its period of the day (:func:`period`) x the bin of the log gap before it."""
    return period(hour, dow) * len(GAP_BINS) + gap_bin(x)


def lag1(x: np.ndarray) -> float:
    """Lag-1 autocorrelation; 0 for a series with none to measure (too short, or constant: a burst of submits)."""
    if len(x) <= 2 or np.ptp(x[1:]) == 0 or np.ptp(x[:-1]) == 0:
        return 0.0
    return float(np.corrcoef(x[1:], x[:-1])[0, 1])
