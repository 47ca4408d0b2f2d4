"""Post-processing shared by every synthesizer: repair what has one right answer, reject what has none.

Repairs (counted): non-integer values are rounded (nodes up, so a job never gets fewer nodes than sampled);
negative inter-arrivals become 0. Rejections (counted): runtime <= 0, walltime <= 0, nodes <= 0, or more nodes than
the machine. The counts go to ``attrs["postprocess"]`` of the sampled table, and nothing else changes silently.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def clean(table: pd.DataFrame, max_nodes: int | None) -> tuple[pd.DataFrame, dict[str, int]]:
    """Repair and filter sampled training-table rows; return the rows kept and the counts by action."""
    if _already_clean(table, max_nodes):  # generators that are valid by construction skip the repairs
        return table, {}
    out = table.copy()
    counts: dict[str, int] = {}
    for col in ("interarrival", "nodes", "run", "walltime", "user", "hour", "dow"):
        if col not in out:
            continue
        values = pd.to_numeric(out[col], errors="coerce").to_numpy(np.float64)
        fractional = np.isfinite(values) & (values != np.round(values))
        if fractional.any():
            counts[f"rounded {col}"] = int(fractional.sum())
        out[col] = np.ceil(values) if col == "nodes" else np.round(values)
    negative = out["interarrival"].to_numpy() < 0
    if negative.any():
        counts["negative interarrival set to 0"] = int(negative.sum())
        out.loc[negative, "interarrival"] = 0
    checks = {
        "rejected: missing values": out[["interarrival", "nodes", "run", "walltime"]].isna().any(axis=1).to_numpy(),
        "rejected: run <= 0": out["run"].to_numpy() <= 0,
        "rejected: walltime <= 0": out["walltime"].to_numpy() <= 0,
        "rejected: nodes <= 0": out["nodes"].to_numpy() <= 0,
    }
    if max_nodes:
        checks["rejected: nodes > machine"] = out["nodes"].to_numpy() > max_nodes
    bad = np.zeros(len(out), bool)
    for reason, mask in checks.items():
        new = mask & ~bad
        if new.any():
            counts[reason] = int(new.sum())
        bad |= mask
    out = out.loc[~bad].reset_index(drop=True)
    for col in ("interarrival", "nodes", "run", "walltime", "user", "hour", "dow"):
        if col in out:
            out[col] = out[col].fillna(-1).astype(np.int64)
    return out, counts


def _already_clean(table: pd.DataFrame, max_nodes: int | None) -> bool:
    numeric = [table[c].to_numpy() for c in ("interarrival", "nodes", "run", "walltime")]
    if not all(v.dtype.kind in "iu" for v in numeric):
        return False
    gap, nodes, run, wall = numeric
    return bool(gap.min(initial=0) >= 0 and nodes.min(initial=1) > 0 and run.min(initial=1) > 0
                and wall.min(initial=1) > 0 and (max_nodes is None or nodes.max(initial=0) <= max_nodes))
