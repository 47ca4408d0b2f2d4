"""The verdict line that ends a training run.

The network kept and why, and the agent against its start and the reference (the strongest implementable row) on
the test windows, as paired ratios with 95% CIs.
"""

from __future__ import annotations

import pandas as pd

from experiments import runs
from experiments.results import Windows


def kept_network(curve: pd.DataFrame) -> str:
    """Which network ``model.zip`` holds and why, from the learning curve (``timesteps, val_bsld, network``)."""
    kept = curve[~curve["network"].astype(str).str.contains("not kept")]
    start, rl = kept[kept["timesteps"] == 0], kept[kept["timesteps"] > 0]
    if start.empty or rl.empty:
        return "kept the last network (no validation)"
    label, first = start["network"].iat[-1], float(start["val_bsld"].iat[-1])
    best = rl.loc[rl["val_bsld"].idxmin()]
    if best["val_bsld"] < first:
        return (f"kept the RL network of step {int(best['timesteps']):,} (validation bsld {best['val_bsld']:.2f}, "
                f"its {label} start {first:.2f})")
    return (f"kept the {label} start: RL did not improve validation (best RL checkpoint {best['val_bsld']:.2f} at "
            f"step {int(best['timesteps']):,}, start {first:.2f})")


def comparison(ratio: tuple[float, float, float], what: str) -> str:
    """``0.987 (0.962-1.011) x WHAT: a tie`` (the CI spans 1), ``...: better`` or ``...: worse``."""
    word = "better" if ratio[2] < 1 else "worse" if ratio[1] > 1 else "a tie"
    return f"{ratio[0]:.3f} ({ratio[1]:.3f}-{ratio[2]:.3f}) x {what}: {word}"


def verdict(run: runs.RunFolder, table: pd.DataFrame) -> str:
    """One line: the network kept and why; the agent against its start and the reference on the test windows.

    The comparisons are paired ratios of mean bsld with 95% block-bootstrap CIs (:mod:`experiments.tables`).
    """
    from experiments import tables

    per_window = Windows.read(run.per_window).table
    kinds = per_window.groupby("scheduler")["kind"].first()
    agent = kinds.index[kinds == "agent"]
    kept = kept_network(run.learning_curve())
    if agent.empty:
        return f"verdict: {kept}"
    row = table.set_index("scheduler").loc[agent[0]]
    parts = [f"verdict: {kept}. On the test windows the agent's bsld is {row['bsld']:.2f}"]
    chosen = run.chosen_start() or "untrained"
    start = kinds.index[kinds == chosen]
    if len(start):
        ratio = tables.paired(per_window, start[0]).set_index("scheduler").loc[agent[0]]
        parts.append(comparison(tuple(ratio), f"its {chosen} start"))
    reference = table.attrs.get("reference")
    if reference and "vs_reference" in row:
        ratio = (row["vs_reference"], row["vs_reference_low"], row["vs_reference_high"])
        ref_bsld = table.set_index("scheduler").loc[reference, "bsld"]
        parts.append(comparison(ratio, f"the reference {reference} ({ref_bsld:.2f})"))
    return "; ".join(parts) + " (paired ratios of mean bsld, 95% block-bootstrap CI)"
