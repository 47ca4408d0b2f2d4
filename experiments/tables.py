"""Markdown tables of results, and the comparison every evaluation table makes with the strongest reference.

*Reference* means one thing throughout: the strongest implementable row of a table (the heuristic row with the
lowest mean bsld; ``tuned`` where the trace has a fit). FCFS+EASY is the *baseline* (the win rate's), and the
clairvoyant row, which no scheduler can reach, is an upper bound. :func:`paired` gives each row's ratio to the
reference on the same windows with a block-bootstrap CI (:func:`hpcgym.metrics.paired_ratio_ci`); :func:`paired_ci`
picks its blocks (of jobs where the records allow, else of windows) for every table and figure alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from experiments.results import CLAIRVOYANT, HEURISTIC, Windows
from hpcgym import metrics
from hpcgym.metrics import ratio_text  # noqa: F401 - the tables' name for it

__all__ = ["CLAIRVOYANT", "HEURISTIC", "cell", "markdown", "paired", "paired_by_jobs", "paired_ci", "ratio_text",
           "strongest_reference"]
CONFIDENCE = 0.95


def markdown(df: pd.DataFrame, formats: Mapping[str, Callable[[object], str]] | None = None,
             digits: int = 3) -> str:
    """``df`` as a Markdown table: numbers right-aligned, floats with ``digits`` decimals unless ``formats`` says."""
    formats = formats or {}
    cols = list(df.columns)
    numeric = [pd.api.types.is_numeric_dtype(df[c]) for c in cols]
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(formats[c](row[c]) if c in formats else cell(row[c], digits)
                                       for c in cols) + " |")
    return "\n".join(lines)


def cell(value: object, digits: int = 3) -> str:
    """One table cell: a float with ``digits`` decimals (``-`` for NaN), anything else as text (pipes escaped)."""
    if isinstance(value, float | np.floating):
        return "-" if math.isnan(value) else f"{value:,.{digits}f}"
    return str(value).replace("|", "\\|")


def strongest_reference(per_window: pd.DataFrame) -> str | None:
    """The heuristic row with the lowest mean bsld over the windows (None: no heuristic row)."""
    return Windows(per_window).reference()


def paired(per_window: pd.DataFrame, reference: str, seed: int = 0) -> pd.DataFrame:
    """Each scheduler's bsld ratio to ``reference`` on the same windows, with a 95% block-bootstrap CI.

    ``per_window`` has ``scheduler``, ``window``, ``bsld`` and, where known, ``block`` (the block of consecutive
    jobs the window starts in: :func:`hpcgym.metrics.window_blocks`; without it every window is its own block).

    Returns:
        One row per scheduler: ``scheduler, vs_reference, vs_reference_low, vs_reference_high``.
    """
    ref = Windows(per_window).rows(reference).set_index("window")
    rows = []
    for scheduler, group in per_window.groupby("scheduler", sort=False):
        mine = group.set_index("window")
        common = mine.index.intersection(ref.index)
        blocks = ref.loc[common, "block"] if "block" in ref else None
        ratio = metrics.paired_ratio_ci(mine.loc[common, "bsld"], ref.loc[common, "bsld"], blocks, CONFIDENCE,
                                        seed=seed) if len(common) else (np.nan,) * 3
        rows.append(dict(zip(("scheduler", "vs_reference", "vs_reference_low", "vs_reference_high"),
                             (scheduler, *ratio), strict=True)))
    return pd.DataFrame(rows)


def paired_by_jobs(per_job: pd.DataFrame, per_window: pd.DataFrame, reference: str, block: int,
                   seed: int = 0) -> pd.DataFrame:
    """:func:`paired` with the CI's blocks made of jobs, not windows: overlapping windows never count twice.

    Each window's jobs are placed at their rows of the split (the window's ``start`` in ``per_window`` plus the job's
    rank in the window by submit time); a job's term ``bsld / window length`` goes to the block of ``block``
    consecutive rows it falls in. A window is the sum of its terms, so the point ratio is :func:`paired`'s; but two
    overlapping windows put their shared jobs into the same blocks, which the bootstrap draws together.
    """
    terms = _job_terms(per_job, per_window, block)
    ref = terms[terms["scheduler"] == reference].groupby(["window", "block"])["term"].sum()
    rows = []
    for scheduler, group in terms.groupby("scheduler", sort=False):
        mine = group.groupby(["window", "block"])["term"].sum()
        windows = mine.index.get_level_values("window").unique().intersection(ref.index.get_level_values("window"))
        pair = pd.DataFrame({"mine": mine, "ref": ref}).loc[windows].fillna(0.0).groupby(level="block").sum()
        ratio = metrics.paired_ratio_ci(pair["mine"], pair["ref"], None, CONFIDENCE, seed=seed) if len(pair) \
            else (np.nan,) * 3
        rows.append(dict(zip(("scheduler", "vs_reference", "vs_reference_low", "vs_reference_high"),
                             (scheduler, *ratio), strict=True)))
    return pd.DataFrame(rows)


def paired_ci(per_window: pd.DataFrame, reference: str, per_job: pd.DataFrame | None = None,
              seed: int = 0) -> tuple[pd.DataFrame, str]:
    """The paired ratios of every evaluation table and figure, and the CI's blocks in words.

    By blocks of jobs as long as a window (:func:`paired_by_jobs`) where the per-job records and the windows'
    ``start`` allow it; else by blocks of windows (:func:`paired`).
    """
    if per_job is None or per_job.empty or "start" not in per_window:
        return paired(per_window, reference, seed), "blocks of windows"
    length = int(per_job.groupby(["scheduler", "window"]).size().max())
    return paired_by_jobs(per_job, per_window, reference, length, seed), f"blocks of {length:,} consecutive jobs"


def _job_terms(per_job: pd.DataFrame, per_window: pd.DataFrame, block: int) -> pd.DataFrame:
    """``scheduler, window, block, term``: each job's ``bsld / window length`` and the block of its row in the split."""
    jobs = per_job.sort_values(["scheduler", "window", "submit", "job_id"], kind="stable")
    start = per_window.drop_duplicates("window").set_index("window")["start"]
    keys = [jobs["scheduler"], jobs["window"]]
    row = jobs["window"].map(start).to_numpy() + jobs.groupby(keys, sort=False).cumcount().to_numpy()
    size = jobs.groupby(keys, sort=False)["bsld"].transform("size").to_numpy()
    return pd.DataFrame({"scheduler": jobs["scheduler"].to_numpy(), "window": jobs["window"].to_numpy(),
                         "block": row // block, "term": jobs["bsld"].to_numpy() / size})


