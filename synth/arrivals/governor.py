"""The load governor: the arrival clock's target load, and the passes that make a long sample hold it exactly.

The samples offer the training jobs' load between outages (or the ``load`` asked for). Once a sample's requests and
runtimes are drawn, the arrival clock runs again over the same random numbers and stretches each gap by
``exp(debt / horizon)`` (at most :data:`GOVERNOR_LIMIT` either way), where ``debt`` is the work submitted so far over
the target's node-seconds per second minus the time elapsed (outages capped at :data:`~synth.replay.OUTAGE`) and
``horizon`` is :data:`GOVERNOR_JOBS` mean gaps of the data (:meth:`synth.arrivals.process.ArrivalProcess.clock`). A
sample longer than the horizon runs the clock again until its load is the target
(:meth:`~synth.arrivals.process.ArrivalProcess.governed_clock`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpcgym.jobs import offered_load
from synth.arrivals.context import calendar
from synth.replay import OUTAGE, busy_load

GOVERNOR_JOBS = 2048  # the load governor's horizon, in the training data's mean gaps: the longest evaluation window
GOVERNOR_LIMIT = 2.0  # the governor stretches or shrinks a gap by at most this factor
GOVERNOR_SHARE = 4  # a governor's horizon is at most the training table's length over this (tiny logs)
CLOSE_ROUNDS = 8  # passes of the governed clock, at most, to hold a long sample's load exactly
CLOSE_TOLERANCE = 0.005  # relative error of a long sample's load that ends the passes

Clock = tuple[np.ndarray, np.ndarray, np.ndarray]  # (gaps, hours, weekdays) of a sample's submits


@dataclass
class Governor:
    """The governor's target and its time unit.

    Attributes:
        target_load: the load between outages the samples hold (None: no governor; settable, to sample ungoverned).
        own_load: the training jobs' load between outages (None: no time span to learn it from).
        gap_scale: every gap's factor, so that the governor only corrects fluctuations (1 unless ``load`` is given).
        mean_gap: the training data's mean gap (seconds), the governor's time unit.
        nodes: the machine's nodes the load refers to.
    """

    target_load: float | None
    own_load: float | None
    gap_scale: float
    mean_gap: float
    nodes: int

    @classmethod
    def fit(cls, jobs: pd.DataFrame, nodes: int, load: float | None = None) -> Governor:
        """The target: the training jobs' load between outages, or ``load`` over one minus the data's outage share.

        Args:
            jobs: the training jobs.
            nodes: the machine's nodes.
            load: the samples' whole-trace load asked for (None: the training jobs').
        """
        span = float(jobs["submit"].iat[-1] - jobs["submit"].iat[0])
        own = busy_load(jobs, nodes)  # the training jobs' load between outages
        # ``load`` is the whole-trace load: the samples carry the data's outage share, so hold it / (1 - that share)
        target = own if load is None else load * own / offered_load(jobs, nodes)
        usable = bool(np.isfinite(own) and own > 0 and target > 0)
        return cls(target_load=float(target) if usable else None, own_load=float(own) if usable else None,
                   gap_scale=float(own / target) if usable else 1.0, mean_gap=span / (len(jobs) - 1), nodes=nodes)

    def at_own_load(self) -> Governor:
        """The governor at the training jobs' own load, gaps unscaled (the slow component's calibration)."""
        return Governor(self.own_load, self.own_load, 1.0, self.mean_gap, self.nodes)


def rescaled(clock: Clock, need: float, clock0: int) -> Clock:
    """The clock's gaps but the outages scaled at once so that the span (outages capped) is ``need``.

    The last resort of :meth:`~synth.arrivals.process.ArrivalProcess.governed_clock` where the passes oscillate (the
    hour classes make the load a step function of the target: a 148-job Mustang sample cycled between 0.658 and 0.726
    for 0.700); the hours and weekdays follow the scaled clock.
    """
    gaps = clock[0].astype(np.float64)
    inner = gaps[1:-1]
    free = inner <= OUTAGE
    fixed = OUTAGE * float((~free).sum())
    if inner[free].sum() > 0 and need > fixed:
        gaps[1:-1] = np.where(free, np.minimum(inner * (need - fixed) / inner[free].sum(), OUTAGE), inner)
    gaps = np.round(gaps).astype(np.int64)
    return (gaps, *calendar(int(clock0) + np.cumsum(gaps)))
