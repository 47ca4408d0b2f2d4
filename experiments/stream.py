"""The whole test split scheduled as one stream: every row of an evaluation on one long episode, and its paired CI.

Twenty windows drawn from a small test split overlap (Theta's holds six disjoint 1,024-job windows), so they carry
less evidence than their count says. The stream is the other half of the evaluation's judge: each agent plays the
whole test split as one episode (the cluster empty at its first job), every reference row schedules the same jobs,
and each row's mean bsld over the jobs is compared with the strongest reference's on the same jobs. The ratio's 95%
CI comes from a block bootstrap over blocks of consecutive jobs (:data:`BLOCK` jobs each, in submit order), so
that neighbouring jobs, which share a queue, are resampled together (:func:`hpcgym.metrics.paired_ratio_ci`).

:func:`experiments.evaluation.run_stream` gives the per-job records (the window evaluation's columns, ``window``
0); :func:`table` the paired ratios, which ``experiments.evaluate`` writes as ``stream.csv`` beside the window
tables and :func:`beside` adds to the summary.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from experiments import tables
from experiments.results import CLAIRVOYANT, HEURISTIC, NETWORKS, Windows, strongest
from experiments.runs import SUMMARY
from hpcgym import metrics

#: jobs per bootstrap block of the stream (as long as an evaluation window)
BLOCK = 1024
#: the stream's table in an evaluation folder
FILE = "stream.csv"
#: what the stream's columns of a summary measured
DESCRIPTION = ("whole split vs reference: the whole test split scheduled as one episode by each row, its mean bsld "
               "over the jobs paired with the reference's on the same jobs (the strongest implementable row on the "
               f"whole split), 95% block-bootstrap CI (blocks of {BLOCK} consecutive jobs)")
CONFIDENCE = 0.95
#: the columns of :func:`paired_rows`
PAIRED = ["scheduler", "kind", "reference", "windows_ratio", "windows_low", "windows_high", "stream_reference",
          "stream_ratio", "stream_low", "stream_high", "beats"]
#: the columns of :func:`table`
COLUMNS = ["scheduler", "kind", "backfill", "jobs", "bsld", "vs_reference", "vs_reference_low", "vs_reference_high"]


def table(per_job: pd.DataFrame, reference: str | None = None, block: int = BLOCK, seed: int = 0) -> pd.DataFrame:
    """Each row's mean bsld over the stream and its paired ratio to the reference with a block-bootstrap CI.

    The reference is ``reference``, by default the stream's own strongest implementable row (the heuristic row with
    the lowest mean bsld over the stream's jobs; it may differ from the windows'); its name is in the column
    ``reference``. Jobs are paired by ``job_id``; the blocks are runs of ``block`` consecutive jobs of the
    reference's records in submit order. Without a heuristic row the ratio columns are NaN. Rows are sorted as the
    window summary's are: implementable rows by mean bsld, the clairvoyant upper bounds last.
    """
    reference = reference or strongest(per_job[per_job["kind"] == HEURISTIC])
    ref = _jobs(per_job, reference, block) if reference else None
    rows = []
    for (scheduler, kind, backfill), rec in per_job.groupby(["scheduler", "kind", "backfill"], sort=False):
        mine = rec.set_index("job_id")["bsld"]
        ratio = (np.nan,) * 3
        if ref is not None:
            paired = ref.join(mine.rename("mine"), how="inner")
            ratio = metrics.paired_ratio_ci(paired["mine"], paired["bsld"], paired["block"], CONFIDENCE, seed=seed)
        rows.append([scheduler, kind, backfill, len(rec), float(mine.mean()), *ratio])
    out = pd.DataFrame(rows, columns=COLUMNS).assign(reference=reference)
    out["upper"] = out["kind"] == CLAIRVOYANT
    return out.sort_values(["upper", "bsld"]).drop(columns="upper").reset_index(drop=True)


def _jobs(per_job: pd.DataFrame, scheduler: str, block: int) -> pd.DataFrame:
    """One row's per-job bsld indexed by ``job_id``, with each job's block (``block`` consecutive jobs by submit)."""
    rec = per_job[per_job["scheduler"] == scheduler].sort_values(["submit", "job_id"], kind="stable")
    return pd.DataFrame({"bsld": rec["bsld"].to_numpy(), "block": np.arange(len(rec)) // block},
                        index=rec["job_id"].to_numpy())


def beside(summary: pd.DataFrame, streamed: pd.DataFrame) -> pd.DataFrame:
    """The window summary with each row's stream columns (``stream_bsld``, ``stream_vs_reference``, its CI) added."""
    cols = {c: f"stream_{c}" for c in ("bsld", "vs_reference", "vs_reference_low", "vs_reference_high")}
    out = summary.merge(streamed[["scheduler", *cols]].rename(columns=cols), on="scheduler", how="left")
    out.attrs = dict(summary.attrs, stream_reference=streamed["reference"].iat[0] if len(streamed) else None)
    return out


def paired_rows(folder: Path, kinds: tuple[str, ...] = NETWORKS) -> pd.DataFrame:
    """The networks' paired ratios to the reference in an evaluation folder, on the windows and the whole split.

    The window ratio is the evaluation's own (``summary.csv``), else recomputed from ``per_window.csv`` with blocks of
    windows (:func:`experiments.tables.paired`); the whole split's comes from ``stream.csv`` (NaN without one),
    against the stream's own reference (``stream_reference``).
    Columns :data:`PAIRED`; ``beats``: the whole split's CI lies below 1 (the windows' where there is no stream).
    """
    results = Windows.read(folder)
    reference = results.reference()
    rows = results.of_kind(*kinds)[["scheduler", "kind"]].drop_duplicates()
    if reference is None or rows.empty:
        return pd.DataFrame(columns=PAIRED)
    ref = results.rows(reference)
    streamed = _table(folder / FILE, "vs_reference")
    summary = _table(folder / SUMMARY, "vs_reference")
    ratio = ["vs_reference", "vs_reference_low", "vs_reference_high"]
    out = []
    for r in rows.itertuples():
        key = (r.scheduler, r.kind)
        if summary is not None and key in summary.index:
            w = summary.loc[key, ratio].tolist()
        else:
            mine = results.table[(results.table["scheduler"] == r.scheduler) & (results.table["kind"] == r.kind)]
            w = tables.paired(pd.concat([ref, mine]), reference).set_index("scheduler").loc[r.scheduler, ratio].tolist()
        s = (streamed.loc[key, ["reference", *ratio]].tolist() if streamed is not None and key in streamed.index
             else [None, *[np.nan] * 3])
        out.append([r.scheduler, r.kind, reference, *w, *s, bool((s[3] if streamed is not None else w[2]) < 1)])
    return pd.DataFrame(out, columns=PAIRED)


def _table(path: Path, column: str) -> pd.DataFrame | None:
    """A CSV of an evaluation folder indexed by ``(scheduler, kind)``; None when it is missing or lacks ``column``."""
    if not path.is_file():
        return None
    table = pd.read_csv(path)
    return table.set_index(["scheduler", "kind"]) if column in table else None


def verdict(versus: pd.DataFrame) -> str:
    """One sentence per network kind of :func:`paired_rows` over several runs: the median ratio and the seeds that beat.

    >>> rows = pd.DataFrame({"kind": ["agent"] * 3, "stream_ratio": [0.9, 0.95, 1.1], "beats": [True, False, False]})
    >>> verdict(rows)
    'agent: median ratio 0.950 to the reference on the whole split; 1 of 3 runs beat it (CI upper end below 1).'
    """
    parts = []
    for kind, g in versus.groupby("kind", sort=False):
        on = "whole split" if g["stream_ratio"].notna().all() else "windows"
        ratio = g["stream_ratio" if on == "whole split" else "windows_ratio"].median()
        parts.append(f"{kind}: median ratio {ratio:.3f} to the reference on the {on}; {int(g['beats'].sum())} of "
                     f"{len(g)} runs beat it (CI upper end below 1).")
    return " ".join(parts)
