"""The memorizer baseline: a day-block bootstrap of the train split.

A perfect memorizer hands back real training rows. This one draws whole **days** of the train split (on the
trace's clock, UTC) with replacement and lays them end to end on a calendar that starts on the train split's first
day: each calendar day gets a random train day of the same day of the week (any day when the train split has none),
with its jobs' times of day, their order and every column (ids included), until there are ``n_jobs`` jobs. So the
rows are exact training rows, the daily and weekly cycles and the burstiness within a day are the real ones, and the
submits are ordered. What it loses: the gaps across day boundaries, the order of days (slow trends, long queues
built over several days) and the drift from the train period to the test period, which no model fitted on train
can know either. A generator is only interesting where it beats this
baseline on fidelity, and it must stay well away from it on privacy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable

DAY = 86400


def day_bootstrap(train: pd.DataFrame, n_jobs: int, seed: int | np.random.Generator | None = 0) -> pd.DataFrame:
    """``n_jobs`` training rows, resampled in whole days (see the module docstring).

    Args:
        train: the train split (a canonical job table, sorted by submit).
        n_jobs: jobs to return.
        seed: seed or generator of the day draws.

    Returns:
        A canonical job table with ``attrs`` of ``train`` (``name`` ``"bootstrap of train"``, ``postprocess``
        empty), job ids renumbered, submits starting at 0 and ``unix_start_time`` set so that hours of day match.
    """
    if n_jobs <= 0 or not len(train):
        out = jobtable.empty()
        out.attrs = dict(train.attrs, name="bootstrap of train", postprocess={})
        return out
    rng = np.random.default_rng(seed)
    start = int(train.attrs.get("unix_start_time", 0) or 0)
    clock = train["submit"].to_numpy(np.int64) + start
    day = clock // DAY
    days, first = np.unique(day, return_index=True)
    last = np.append(first[1:], len(train))
    weekday = (days + 3) % 7  # 1970-01-01 was a Thursday (3, with Monday = 0)
    picks: list[np.ndarray] = []
    offsets: list[np.ndarray] = []
    have = 0
    while have < n_jobs:
        want = np.flatnonzero(weekday == (weekday[0] + len(picks)) % 7)  # keep the calendar's day of the week
        k = int(rng.choice(want)) if want.size else int(rng.integers(days.size))
        rows = np.arange(first[k], last[k])
        picks.append(rows)
        offsets.append((len(picks) - 1) * DAY + clock[rows] - days[k] * DAY)
        have += rows.size
    rows, submit = np.concatenate(picks)[:n_jobs], np.concatenate(offsets)[:n_jobs]
    out = train.iloc[rows].reset_index(drop=True)
    base = int(days[0]) * DAY + int(submit[0])
    out["submit"] = submit - submit[0]
    out["job_id"] = np.arange(1, len(out) + 1)
    out.attrs = dict(train.attrs, name="bootstrap of train", unix_start_time=base, postprocess={}, invalid={})
    return out
