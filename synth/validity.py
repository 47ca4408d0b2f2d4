"""Validity as a scored metric: how much of a generated trace had to be dropped or repaired before it could run.

A raw sample is counted *before* it is cleaned, from three sources:

- ``attrs["postprocess"]``: what :meth:`synth.base.Synthesizer.sample` already rejected (``"rejected: ..."``, rows
  replaced by fresh draws) or repaired (``"rounded ..."``, ``"negative interarrival set to 0"``) while sampling;
- ``attrs["invalid"]`` and ``attrs["repaired"]``: jobs a trace reader dropped, and values its rounding policy
  rounded (a synthetic trace handed over as a file, e.g. another tool's sample read with ``round=``);
- the table itself: rows with a missing value, ``run <= 0``, ``walltime <= 0``, ``nodes <= 0`` or more nodes than
  the machine (dropped), non-integer node counts (rounded up) and submits out of order (sorted; the repaired rows
  are the fewest that must move: those outside the longest subsequence of submits already in order).

:func:`check` returns the clean table that every other metric scores, and the counts. An empty sample, or one
without the job-table columns, has no valid row: its shares are 1, the worst value.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable

REQUIRED = ("submit", "run", "walltime", "nodes")
#: defaults for canonical columns a raw sample may lack
DEFAULTS: dict[str, Any] = {"procs": -1, "user": -1, "group": -1, "queue": -1, "status": "unknown",
                            "walltime_known": True}


def _sampling_counts(attrs: dict[str, Any]) -> tuple[int, int, dict[str, int]]:
    """Rows rejected and repairs made before the table was handed over (sampler and reader records)."""
    post = dict(attrs.get("postprocess") or {})
    reader = {f"dropped by the reader: {k}": int(v) for k, v in dict(attrs.get("invalid") or {}).items()}
    rounded = {f"repaired by the reader: {k}": int(v) for k, v in dict(attrs.get("repaired") or {}).items()}
    rejected = sum(int(v) for k, v in post.items() if k.startswith("rejected")) + sum(reader.values())
    repaired = sum(int(v) for k, v in post.items() if not k.startswith("rejected")) + sum(rounded.values())
    reasons = {f"sampler {k}": int(v) for k, v in post.items()} | reader | rounded
    return rejected, repaired, reasons


def _row_checks(raw: pd.DataFrame, max_nodes: int | None) -> dict[str, np.ndarray]:
    """Per-row drop reasons of a table holding the required columns (each mask marks the failing rows)."""
    value = {c: pd.to_numeric(raw[c], errors="coerce").to_numpy(np.float64) for c in REQUIRED}
    checks = {"missing or non-finite value": ~np.all([np.isfinite(v) for v in value.values()], axis=0),
              "run <= 0": value["run"] <= 0, "walltime <= 0": value["walltime"] <= 0,
              "nodes <= 0": value["nodes"] <= 0}
    if max_nodes:
        checks["nodes > machine"] = value["nodes"] > max_nodes
    return checks


def _out_of_order(values: np.ndarray) -> int:
    """The fewest rows that must move to make ``values`` non-decreasing (length minus its longest such run)."""
    if values.size < 2 or bool(np.all(values[1:] >= values[:-1])):
        return 0
    tails: list[int] = []  # patience sorting: tails[k] = smallest tail of a non-decreasing subsequence of length k+1
    for v in values.tolist():
        k = bisect.bisect_right(tails, v)
        tails[k:k + 1] = [v]
    return int(values.size - len(tails))


def _clean(raw: pd.DataFrame, keep: np.ndarray) -> tuple[pd.DataFrame, dict[str, int]]:
    """The kept rows as a canonical table (nodes rounded up, sorted by submit), and the repairs made."""
    out = raw.loc[keep].reset_index(drop=True).copy()
    repairs: dict[str, int] = {}
    nodes = pd.to_numeric(out["nodes"]).to_numpy(np.float64)
    fractional = int(np.sum(nodes != np.round(nodes)))
    if fractional:
        repairs["non-integer nodes rounded up"] = fractional
    out["nodes"] = np.ceil(nodes).astype(np.int64)
    for col in ("submit", "run", "walltime"):
        out[col] = np.round(pd.to_numeric(out[col]).to_numpy(np.float64)).astype(np.int64)
    submit = out["submit"].to_numpy(np.int64)
    late = _out_of_order(submit)
    if late:
        repairs["submit out of order (sorted)"] = late
    if "job_id" not in out:
        out["job_id"] = np.arange(1, len(out) + 1)
    for col, default in DEFAULTS.items():
        if col not in out:
            out[col] = default
    order = np.argsort(submit, kind="stable")
    out = out.iloc[order].reset_index(drop=True)
    out["job_id"] = np.arange(1, len(out) + 1)  # unique ids in submit order
    return jobtable.finalize(out), repairs


def check(raw: pd.DataFrame | None, max_nodes: int | None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Count what a raw sample needs dropped or repaired, and return the clean table.

    Args:
        raw: the sample as generated (a job table, possibly with invalid rows, out of order, empty or ``None``).
        max_nodes: the machine's node count (rows asking for more are dropped); ``None`` skips that check.

    Returns:
        ``(clean, result)``: ``clean`` is a canonical job table of the valid rows in submit order (``attrs`` kept);
        ``result`` holds ``raw_rows`` (rows generated, those rejected while sampling included), ``valid_rows``,
        ``dropped``, ``repaired`` (repairs are counted per field, so one row repaired twice counts twice; capped at
        the valid rows), ``dropped_share``, ``repaired_share``, ``invalid_share`` (dropped or repaired, over the
        raw rows; 1 when there are none) and ``reasons`` (reason -> count).
    """
    raw = pd.DataFrame() if raw is None else raw
    attrs = dict(raw.attrs)
    rejected, repaired, reasons = _sampling_counts(attrs)
    if len(raw) and all(c in raw for c in REQUIRED):
        checks = _row_checks(raw, max_nodes)
        bad = np.zeros(len(raw), bool)
        for reason, mask in checks.items():
            new = mask & ~bad
            if new.any():
                reasons[reason] = int(new.sum())
            bad |= mask
        clean, repairs = _clean(raw, ~bad)
    else:
        bad = np.ones(len(raw), bool)
        if len(raw):
            reasons[f"missing columns {[c for c in REQUIRED if c not in raw]}"] = len(raw)
        clean, repairs = jobtable.empty(), {}
    clean.attrs = attrs
    reasons |= repairs
    raw_rows = len(raw) + rejected
    dropped = rejected + int(bad.sum())
    fixed = min(repaired + sum(repairs.values()), len(clean))

    def share(k: int) -> float:
        return k / raw_rows if raw_rows else 1.0

    return clean, {"raw_rows": raw_rows, "valid_rows": len(clean), "dropped": dropped, "repaired": fixed,
                   "dropped_share": share(dropped), "repaired_share": share(fixed),
                   "invalid_share": 1.0 if not len(clean) else min(1.0, share(dropped + fixed)), "reasons": reasons}
