"""Job tables into the engine: the settings a table can be simulated with, and the hold times it reads."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable
from hpcgym.sim.backfill import BACKFILL_MODES, Backfill
from hpcgym.sim.predict import WALLTIME, Predictor


def hold_times(jobs: pd.DataFrame, kill_at_walltime: bool = True) -> np.ndarray:
    """How long each job keeps its nodes: ``min(run, walltime)`` if killed at its walltime, else ``run``."""
    run = jobs["run"].to_numpy(np.int64)
    return np.minimum(run, jobs["walltime"].to_numpy(np.int64)) if kill_at_walltime else run


def check(jobs: pd.DataFrame, nodes: int, backfill: Backfill, kill_at_walltime: bool,
          predictor: Predictor | None = None) -> None:
    """Raise ``ValueError`` unless ``jobs`` can be simulated on ``nodes`` nodes with ``backfill`` and ``predictor``.

    The settings must agree with each other; the table must pass :func:`hpcgym.jobs.check_valid`.
    """
    if backfill not in BACKFILL_MODES:
        raise ValueError(f"backfill must be one of {sorted(BACKFILL_MODES)}, not {backfill!r}")
    if predictor is not None and predictor.code != WALLTIME and not kill_at_walltime:
        raise ValueError(f"the runtime predictor {predictor.name!r} needs kill_at_walltime=True: a prediction is "
                         "capped at the walltime, which must bound the runtime")
    if backfill == "conservative" and not kill_at_walltime:
        raise ValueError("conservative backfilling needs kill_at_walltime=True: reservations assume estimates "
                         "are upper bounds")
    jobtable.check_valid(jobs, nodes)  # the one rule of a valid table
