"""The parts of a real trace a training run uses: what it learns from, what it is selected on (docs/protocol.md).

The trace is split chronologically, 70% train and 30% test (:func:`hpcgym.traces.split`). The last
``val_fraction`` of the train split is the *validation* part, and training sees only the rest (:class:`Data`).
Fixed validation windows (:func:`validation_starts`, seed 0: the same for every run) pick the checkpoint kept and
the warm start; :func:`validation_references` puts heuristics on the same windows. The test split is left to the
evaluation (:mod:`experiments.evaluate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from experiments.arguments import TraceArgs
from hpcgym import cli


@dataclass
class Data:
    """The parts of the real trace a run uses."""

    machine: Any
    fit: pd.DataFrame  #: the train split minus the validation part: all the agent (or synthesizer) sees
    validation: pd.DataFrame  #: the last ``val_fraction`` of the train split
    test_jobs: int = 0  #: the test split's length (the evaluation's windows come from it)


def load_data(args: TraceArgs, val_fraction: float) -> Data:
    """Read the trace and carve the train split into the training part and the last ``val_fraction`` of it."""
    from hpcgym import machines, traces

    real = traces.read(args.trace, **args.read_kwargs())
    train = traces.split(real, "train")
    fit, validation = (traces.split(train, part, 1.0 - val_fraction) for part in ("train", "test"))
    return Data(machines.get(real.attrs["machine"]), fit, validation, len(real) - len(train))


def validation_starts(data: Data, length: int, count: int) -> list[int]:
    """``count`` fixed windows of ``length`` jobs (seed 0: the same for every run) in the validation part."""
    from hpcgym import traces

    if count <= 0:
        return []
    if len(data.validation) < length:
        raise cli.UsageError(f"the validation part has {len(data.validation)} jobs, fewer than --val-window "
                             f"{length}: lower it or raise --val-fraction")
    return traces.window_starts(len(data.validation), length, count, seed=0)


def validation_references(data: Data, length: int, starts: list[int], backfill: str) -> dict[str, float]:
    """Mean bsld on the validation windows of SAF with ``backfill`` and of the reference (the curves' lines)."""
    from baselines.grid import simulate_grid
    from experiments.runs import REFERENCE_HEURISTIC
    from hpcgym import traces

    windows = [traces.window(data.validation, length, start=s) for s in starts]
    policy, reference_backfill = REFERENCE_HEURISTIC
    cells = [*simulate_grid(windows, data.machine, ["saf"], [backfill]),
             *simulate_grid(windows, data.machine, [policy], [reference_backfill])]
    return {c.label: float(sum(rec["bsld"].mean() for rec in c.records) / len(c.records)) for c in cells}
