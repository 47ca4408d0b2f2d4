"""The verdict line that ends a training run, and where the run keeps it.

The network kept and why, and the agent against its start and the reference (the strongest implementable row) on
the test windows, as paired ratios with 95% CIs. :func:`save` writes it to ``eval/verdict.json`` and puts the line
first in ``eval/summary.md``.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from experiments import runs
from experiments.results import Windows
from hpcgym import io as hpcgym_io

#: how the verdict's ratios were computed (the end of its line)
METHOD = "paired ratios of mean bsld, 95% block-bootstrap CI"


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


def outcome(ratio: tuple[float, float, float]) -> str:
    """``better`` (the CI is below 1), ``worse`` (above 1) or ``a tie`` (it spans 1)."""
    return "better" if ratio[2] < 1 else "worse" if ratio[1] > 1 else "a tie"


def comparison(ratio: tuple[float, float, float], what: str) -> str:
    """``0.987 (0.962-1.011) x WHAT: a tie`` (the CI spans 1), ``...: better`` or ``...: worse``."""
    return f"{ratio[0]:.3f} ({ratio[1]:.3f}-{ratio[2]:.3f}) x {what}: {outcome(ratio)}"


def _ratio(ratio: tuple[float, float, float], **against: Any) -> dict[str, Any]:
    """What the agent was compared with (``against``), the ratio, its CI and the outcome, as JSON values."""
    return {**against, "ratio": float(ratio[0]), "ci_low": float(ratio[1]), "ci_high": float(ratio[2]),
            "outcome": outcome(ratio)}


def judge(run: runs.RunFolder, table: pd.DataFrame) -> dict[str, Any]:
    """The verdict's facts, as JSON values.

    ``kept`` (the network kept and why), the ``agent`` row and its ``bsld``, and ``vs_start`` and ``vs_reference``
    (each a paired ratio with its CI and ``outcome``) where the table has them. The comparisons are paired ratios of
    mean bsld with 95% block-bootstrap CIs (:mod:`experiments.tables`).
    """
    from experiments import tables

    per_window = Windows.read(run.per_window).table
    kinds = per_window.groupby("scheduler")["kind"].first()
    agent = kinds.index[kinds == "agent"]
    kept = kept_network(run.learning_curve())
    if agent.empty:
        return {"kept": kept}
    row = table.set_index("scheduler").loc[agent[0]]
    facts: dict[str, Any] = {"kept": kept, "agent": str(agent[0]), "bsld": float(row["bsld"])}
    chosen = run.chosen_start() or "untrained"
    start = kinds.index[kinds == chosen]
    if len(start):
        ratio = tables.paired(per_window, start[0]).set_index("scheduler").loc[agent[0]]
        facts["vs_start"] = _ratio(tuple(ratio), start=chosen)
    reference = table.attrs.get("reference")
    if reference and "vs_reference" in row:
        ratio = (row["vs_reference"], row["vs_reference_low"], row["vs_reference_high"])
        ref_bsld = float(table.set_index("scheduler").loc[reference, "bsld"])
        facts["vs_reference"] = _ratio(ratio, reference=reference, reference_bsld=ref_bsld)
    return facts


def line(facts: dict[str, Any]) -> str:
    """The verdict of :func:`judge`'s facts as one line."""
    if "agent" not in facts:
        return f"verdict: {facts['kept']}"
    parts = [f"verdict: {facts['kept']}. On the test windows the agent's bsld is {facts['bsld']:.2f}"]
    if "vs_start" in facts:
        f = facts["vs_start"]
        parts.append(comparison((f["ratio"], f["ci_low"], f["ci_high"]), f"its {f['start']} start"))
    if "vs_reference" in facts:
        f = facts["vs_reference"]
        parts.append(comparison((f["ratio"], f["ci_low"], f["ci_high"]),
                                f"the reference {f['reference']} ({f['reference_bsld']:.2f})"))
    return "; ".join(parts) + f" ({METHOD})"


def verdict(run: runs.RunFolder, table: pd.DataFrame) -> str:
    """One line: the network kept and why; the agent against its start and the reference on the test windows."""
    return line(judge(run, table))


def save(run: runs.RunFolder, table: pd.DataFrame) -> str:
    """Write the verdict to ``eval/verdict.json`` and as the first line of ``eval/summary.md``; return the line.

    Call it after the evaluation is written (it reads ``eval/per_window.csv``); a verdict already at the top of
    ``summary.md`` is replaced, not stacked.
    """
    facts = judge(run, table)
    text = line(facts)
    record = {"verdict": text, **facts, "method": METHOD if "agent" in facts else None}
    hpcgym_io.write_text(run.verdict, json.dumps(record, indent=2) + "\n")
    body = run.summary_md.read_text() if run.summary_md.is_file() else ""
    if body.startswith("verdict: "):
        body = body.split("\n\n", 1)[1] if "\n\n" in body else ""
    hpcgym_io.write_text(run.summary_md, f"{text}\n\n{body}" if body else f"{text}\n")
    return text
