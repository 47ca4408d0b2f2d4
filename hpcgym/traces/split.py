"""Chronological parts of a job table: train/test splits, windows, the first or last jobs, halves (docs/protocol.md)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

Split = Literal["train", "test", "all"]


def split_index(n_jobs: int, part: Split, train_fraction: float = 0.7) -> tuple[int, int]:
    """The ``[lo, hi)`` row range of a chronological split: the first ``train_fraction`` of jobs is train."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), not {train_fraction}")
    cut = int(round(n_jobs * train_fraction))
    ranges = {"train": (0, cut), "test": (cut, n_jobs), "all": (0, n_jobs)}
    if part not in ranges:
        raise ValueError(f"split must be 'train', 'test' or 'all', not {part!r}")
    return ranges[part]


def split(df: pd.DataFrame, part: Split, train_fraction: float = 0.7) -> pd.DataFrame:
    """Return the chronological ``part`` of a (submit-sorted) job table, with its attrs."""
    lo, hi = split_index(len(df), part, train_fraction)
    out = df.iloc[lo:hi].reset_index(drop=True)
    out.attrs = dict(df.attrs, split=part)
    return out


def window(df: pd.DataFrame, n_jobs: int, rng: np.random.Generator | int | None = None,
           start: int | None = None) -> pd.DataFrame:
    """``n_jobs`` consecutive jobs from a random (or given) start, submit times rebased to the first job."""
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
        raise ValueError(f"a window holds a whole number of jobs >= 1, not {n_jobs!r}")
    if n_jobs > len(df):
        raise ValueError(f"a window of {n_jobs} jobs does not fit in a table of {len(df)}")
    if start is None:
        start = int(np.random.default_rng(rng).integers(0, len(df) - n_jobs + 1))
    elif not 0 <= start <= len(df) - n_jobs:  # a window cut short at the table's end would be silently smaller
        raise ValueError(f"a window of {n_jobs} jobs starting at job {start} does not fit in a table of {len(df)} "
                         f"(starts 0 to {len(df) - n_jobs})")
    out = df.iloc[start:start + n_jobs].reset_index(drop=True)
    out["submit"] = out["submit"] - out["submit"].iat[0]
    out.attrs = dict(df.attrs, window_start=start)
    return out


def window_starts(n_jobs: int, length: int, count: int, seed: int) -> list[int]:
    """``count`` window starts in a table of ``n_jobs``, drawn once from ``seed`` (the same for every scheduler)."""
    if length > n_jobs:
        raise ValueError(f"windows of {length} jobs do not fit in {n_jobs} jobs")
    return [int(s) for s in np.random.default_rng(seed).integers(0, n_jobs - length + 1, size=count)]


def head(table: pd.DataFrame, n: int) -> pd.DataFrame:
    """The first ``n`` jobs of a table, ``attrs`` kept; the reader's drop counts are scaled to the share kept.

    ``attrs["invalid"]`` counts the jobs the reader dropped from the whole file; cut to ``n`` of its jobs, the
    table is credited with ``n / len(table)`` of them (rounded), so the validity floor stays a share of the jobs
    actually used.

    Args:
        table: canonical job table.
        n: jobs to keep.

    Returns:
        The table itself when it has at most ``n`` jobs, else its first ``n`` jobs.
    """
    return _part(table, n, slice(None, n))


def tail(table: pd.DataFrame, n: int) -> pd.DataFrame:
    """The last ``n`` jobs of a table (submit times unchanged), as :func:`head` keeps the first.

    Args:
        table: canonical job table.
        n: jobs to keep; 0 keeps all of them.

    Returns:
        The table itself when ``n`` is 0 or it has at most ``n`` jobs, else its last ``n`` jobs.
    """
    return _part(table, n, slice(-n, None)) if n else table


def _part(table: pd.DataFrame, n: int, rows: slice) -> pd.DataFrame:
    if n >= len(table):
        return table
    attrs = dict(table.attrs)
    attrs["invalid"] = {k: int(round(v * n / len(table))) for k, v in dict(attrs.get("invalid") or {}).items()}
    out = table.iloc[rows].reset_index(drop=True)
    out.attrs = attrs
    return out


def halves(jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The chronological first and second half of a job table (attrs kept, submit times unchanged).

    Args:
        jobs: a canonical job table, sorted by submit time.

    Returns:
        ``(first, second)``; the first gets the extra job when the count is odd.
    """
    cut = (len(jobs) + 1) // 2
    first, second = jobs.iloc[:cut].reset_index(drop=True), jobs.iloc[cut:].reset_index(drop=True)
    first.attrs, second.attrs = dict(jobs.attrs), dict(jobs.attrs)
    return first, second
