"""The parts of a real trace a training run uses: what it learns from, what it is selected on (docs/protocol.md).

The trace is split chronologically, 70% train and 30% test (:func:`hpcgym.traces.split`). The last
``val_fraction`` of the train split is the *validation* part, and training sees only the rest (:class:`Data`). With
``periods`` > 1 the validation part comes from several periods: the train split is cut into ``periods`` equal
stretches, and the last ``val_fraction`` of each is held out (validation windows never straddle two of them).
Fixed validation windows (:func:`validation_starts`, seed 0: the same for every run) pick the checkpoint kept and
the warm start; :func:`validation_references` puts heuristics on the same windows. The test split is left to the
evaluation (:mod:`experiments.evaluate`). :func:`environment_predictor` gives the runtime predictor of the
environment a run's networks play in (its other settings: :func:`experiments.recipe.agent_env`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from experiments.arguments import TraceReading
from hpcgym import cli
from hpcgym.errors import EmptyTraceError
from hpcgym.sim.policy import PriorityPolicy

#: the scheduler every results table compares with (win rates, shares of improvement, the seeds' check)
BASELINE_HEURISTIC = ("fcfs", "easy")


@dataclass
class Data:
    """The parts of the real trace a run uses."""

    machine: Any
    fit: pd.DataFrame  #: the train split minus the validation part: all the agent (or synthesizer) sees
    validation: pd.DataFrame  #: the last ``val_fraction`` of the train split (of each period's stretch of it)
    test_jobs: int = 0  #: the test split's length (the evaluation's windows come from it)
    #: the validation part's periods, as ``[lo, hi)`` rows of ``validation`` (one unless ``periods`` > 1)
    val_periods: list[tuple[int, int]] = field(default_factory=list)

    @property
    def shortest_validation(self) -> int:
        """Jobs in the shortest validation period (the whole validation part when there is one period)."""
        return min((hi - lo for lo, hi in self.val_periods), default=len(self.validation))


def load_data(args: TraceReading, val_fraction: float, periods: int = 1) -> Data:
    """Read the trace and carve the train split into the training part and the validation part.

    The train split is cut into ``periods`` equal stretches of jobs; the last ``val_fraction`` of each is
    validation, the rest training (one stretch: the last ``val_fraction`` of the train split, as always). The
    training part of several periods is one table with the held-out stretches missing: the time they took is a
    quiet spell in it, as an outage is in the data.
    """
    from hpcgym import machines, traces

    real = traces.read(args.trace, **args.read_kwargs())
    if len(real) == 0:  # say why (every job dropped), not that a validation window is longer than 0 jobs
        raise EmptyTraceError(real.attrs.get("source", args.trace), real.attrs.get("invalid"), need="to train")
    train = traces.split(real, "train")
    edges = np.round(np.linspace(0, len(train), periods + 1)).astype(int)
    fits, vals = [], []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        stretch = train.iloc[lo:hi].reset_index(drop=True)
        stretch.attrs = train.attrs
        fits.append(traces.split(stretch, "train", 1.0 - val_fraction))
        vals.append(traces.split(stretch, "test", 1.0 - val_fraction))
    fit, validation = (parts[0] if len(parts) == 1 else _joined(parts) for parts in (fits, vals))
    ends = np.cumsum([0] + [len(v) for v in vals])
    return Data(machines.get(real.attrs["machine"]), fit, validation, len(real) - len(train),
                [(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:], strict=True)])


class ValidationPart(Protocol):
    """Where the validation part comes from (``experiments.recipe.Selection``)."""

    val_fraction: float
    val_periods: int


def run_data(source: TraceReading, selection: ValidationPart) -> Data:
    """:func:`load_data` with a run's own ``--val-fraction`` and ``--val-periods``."""
    return load_data(source, selection.val_fraction, selection.val_periods)


def _joined(parts: list[pd.DataFrame]) -> pd.DataFrame:
    out = pd.concat(parts, ignore_index=True)
    out.attrs = parts[0].attrs
    return out


def validation_starts(data: Data, length: int, count: int, seed: int = 0) -> list[int]:
    """``count`` fixed windows of ``length`` jobs (seed 0: the same for every run) in the validation part.

    With several periods the windows are shared out among them in turn (the first periods take one more when
    ``count`` does not divide evenly), each inside its period.
    """
    from hpcgym import traces

    if count <= 0:
        return []
    periods = data.val_periods or [(0, len(data.validation))]
    shortest = data.shortest_validation
    if shortest < length:
        where = ("the validation part has" if len(periods) == 1
                 else f"the shortest of {len(periods)} validation periods has")
        raise cli.UsageError(f"{where} {shortest} jobs, fewer than --val-window {length}: lower it or raise "
                             "--val-fraction" + ("" if len(periods) == 1 else " or lower --val-periods"))
    starts = []
    for i, (lo, hi) in enumerate(periods):
        share = count // len(periods) + (i < count % len(periods))
        starts += [lo + s for s in traces.window_starts(hi - lo, length, share, seed=seed + i)] if share else []
    return starts


def validation_references(data: Data, length: int, starts: list[int], backfill: str) -> dict[str, float]:
    """Mean bsld on the validation windows of SAF with ``backfill`` and of the reference (the curves' lines)."""
    from baselines.grid import simulate_grid
    from hpcgym import traces

    windows = [traces.window(data.validation, length, start=s) for s in starts]
    policy, reference_backfill = BASELINE_HEURISTIC
    cells = [*simulate_grid(windows, data.machine, ["saf"], [backfill]),
             *simulate_grid(windows, data.machine, [policy], [reference_backfill])]
    return {c.label: float(sum(rec["bsld"].mean() for rec in c.records) / len(c.records)) for c in cells}


#: ``--tuned workload``: the run fits its own ``tuned`` on its training workload (``experiments.recipe``).
TUNED_ON_WORKLOAD = "workload"
#: how the fits of ``--tuned workload`` name the command that made them
WORKLOAD_FIT_COMMAND = "python -m experiments.train --tuned workload"


def tuned_flag(value: str) -> str:
    """The ``--tuned`` a saved setting came from: a run's fit made by ``--tuned workload`` counts as ``workload``.

    A ``--tuned workload`` run records the fit it made (a file), so that its evaluation plays the same ``tuned``;
    a study compares settings as they were asked for.
    """
    from baselines import tuned

    if not value or value == TUNED_ON_WORKLOAD:
        return value
    try:
        made = tuned.load(value).command.startswith(WORKLOAD_FIT_COMMAND)
    except ValueError:
        return value
    return TUNED_ON_WORKLOAD if made else value


def resolve_heuristic(name: str, *, trace: str, backfill: str = "none", tuned_fit: str = "") -> PriorityPolicy:
    """The heuristic ``name`` of a run on ``trace`` with ``backfill`` whose ``--tuned`` is ``tuned_fit``.

    Any spelling of :func:`hpcgym.sim.heuristics.resolve` (``saf``, ``saf@last2``, ``tuned:FIT.json``). A bare
    ``tuned`` is the fit file ``tuned_fit`` when it names one, else the fit for the trace and backfilling: before a
    ``--tuned workload`` run has fitted its own (its flags' checks), the trace's fit stands in, of the same family of
    priorities, so the same checks pass. ``NAME@PREDICTOR`` is that heuristic on another predictor's estimates
    (``tuned@exact``: ``tuned``'s weights on the jobs' own runtimes, a clairvoyant teacher).
    """
    from baselines import priorities, tuned

    base, at, predictor = name.partition("@")
    if tuned_fit and tuned_fit != TUNED_ON_WORKLOAD and base.lower() == tuned.TUNED:
        base = f"{tuned.TUNED}:{tuned_fit}"
    return priorities.resolve(base + at + predictor, trace, backfill)


def environment_predictor(predictor: str, imitated: Iterable[PriorityPolicy]) -> str:
    """The runtime predictor of a run's environment: ``predictor`` when given, else that of the heuristics it imitates.

    ``imitated`` are, in order, the heuristics the agent starts from or is ordered by (:func:`imitated`); the first
    on a predictor that is not clairvoyant gives it, and none gives ``walltime``. A clone or prior of a heuristic on
    predictions must see the predictions it reads; a clairvoyant teacher (``tuned@exact``) is passed over: an agent
    never sees the jobs' own runtimes.
    """
    from hpcgym.sim import predict

    if predictor:
        return predictor
    for pol in imitated:
        if pol.predictor and not predict.get(pol.predictor).clairvoyant:
            return pol.predictor
    return "walltime"


def imitated(prior: str, clone: str, order: str, backfill: str, **context: str) -> Iterator[PriorityPolicy]:
    """The heuristics a run imitates, in the order that decides its predictor.

    ``--prior``, ``--clone``, then the backfill scan order (only with backfilling), each resolved only when reached
    (the first on predictions decides). ``context``: the other keywords of :func:`resolve_heuristic`.
    """
    order = order if backfill != "none" else ""
    return (resolve_heuristic(name, backfill=backfill, **context) for name in (prior, clone, order) if name)
