"""``tuned``: a weighted priority whose weights are fitted per machine, on windows of the train split.

The score of a waiting job (lower runs first) is a weighted sum of four features::

    a * log(r) + b * log(n) + c * log(walltime) - d * w / 3600

with ``r`` the job's runtime *prediction* (:mod:`hpcgym.sim.predict`), ``n`` its nodes, ``walltime`` the user's
request and ``w`` its wait in seconds. SJF (``a=1``), SAF (``a=b=1``) and FCFS (``d > 0``, the rest 0) are points of
this family; the tuning looks for a better one on the machine's own history, as Legrand, Trystram and Zrigui (IPDPS
2019) and Carastan-Santos and de Camargo (SC 2017) did. Because the wait enters linearly, the score differs between
two jobs by a constant while both wait, so the order is static: ``- d * w`` is ``+ d * submit`` up to a term common
to every job, and the engine keeps the queue sorted at no cost per pass.

**The fit** (:func:`fit`) searches the weights with CMA-ES (the ``cma`` package, Hansen's reference
implementation): the weights are continuous and few, and CMA-ES needs no gradient, ranks candidates only by their
order (so the heavy-tailed bounded slowdown needs no transform), and copes with a noisy objective. The weights are
kept non-negative (a job never gains priority by being bigger, longer or younger: no starvation by design), and the
search starts at SAF. The objective is the mean bounded slowdown over 64 fixed windows of 1,024 jobs of the *train
split* (all the history an operator has; never the test split), under the backfilling the weights are for. Each
history predictor is tried, and the one whose weights score better on those windows is kept. On the learned
predictor (``tuned-learned``, saved as ``<trace>-<backfill>-learned.json``) each window is scheduled on a model
fitted without that part of the split (``held_out``), not on the in-sample predictions of the trace's model.

Why the whole train split and not only its last 20% (the part ``experiments.train`` holds out to select agents):
that part is about 3,300 jobs on Theta, so its 1,024-job windows overlap heavily, and weights tuned on the rest and
selected on it agreed poorly with the test split (on Theta, SDSC-SP2 and HPC2N the validation ranking of the tuned
candidates and of SAF was the reverse of the test ranking in several cases; ``docs/results.md``).

A fit is saved as JSON with its weights, predictor, tuning score, the SAF-with-predictions score it started
from, and the command that made it (:func:`save`). The fits for the bundled traces ship in ``baselines/tuned/``;
:func:`find` looks in ``./tuned/`` first, where ``python -m baselines.tune`` writes by default.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from hpcgym import metrics, traces
from hpcgym.io import write_text
from hpcgym.sim import Predictor, PriorityPolicy, heuristics, hold_times, run_batch
from hpcgym.sim import policy as codes

#: The name under which the fitted priority is asked for (``--clone tuned``, evaluation rows).
TUNED = "tuned"
#: The suffix of the fits tuned on a learned runtime model (``tuned-learned``; files ``<trace>-<backfill>-learned``).
LEARNED_VARIANT = "-learned"
FEATURES = ("log_estimate", "log_nodes", "log_walltime", "wait_hours")
#: Where the fits of the bundled traces are, and where ``baselines.tune`` writes by default.
BUNDLED = Path(__file__).with_name("tuned")
LOCAL = Path("tuned")


@dataclass(frozen=True)
class LinearKey:
    """The static part of the score, divided by ``|a|`` (the engine adds ``+-log(r)`` at each job's arrival)."""

    nodes: float
    walltime: float
    wait: float

    def __call__(self, jobs: pd.DataFrame) -> np.ndarray:
        """One score per job."""
        return (self.nodes * np.log(jobs["nodes"].to_numpy(np.float64))
                + self.walltime * np.log(jobs["walltime"].to_numpy(np.float64))
                + self.wait * jobs["submit"].to_numpy(np.float64) / 3600.0)


def policy(weights: Sequence[float], predictor: str, name: str = TUNED) -> PriorityPolicy:
    """The priority of the weights ``(a, b, c, d)`` of the module docstring, on ``predictor``'s estimates."""
    a, b, c, d = (float(x) for x in weights)
    scale = abs(a) if a != 0 else 1.0
    code = codes.KEY_PLUS_LOG_R if a > 0 else codes.KEY_MINUS_LOG_R if a < 0 else codes.KEY
    text = f"{a:.3g} log r + {b:.3g} log n + {c:.3g} log walltime - {d:.3g} w/h, r by {predictor}"
    return PriorityPolicy(name, code, key=LinearKey(b / scale, c / scale, d / scale), description=text,
                          predictor=predictor)


@dataclass
class Fit:
    """A fitted ``tuned`` priority and how it was made."""

    trace: str
    backfill: str
    predictor: str
    weights: dict[str, float]
    tuning_bsld: float  #: the mean bsld of the weights on the tuning windows
    start_bsld: float  #: SAF on the same predictions, the search's starting point
    windows: int
    length: int
    seed: int
    evaluations: int
    command: str = ""
    tried: dict[str, float] = field(default_factory=dict)  #: predictor -> its best tuning bsld

    def policy(self, name: str = TUNED) -> PriorityPolicy:
        """The priority it defines (named ``name``)."""
        return policy([self.weights[f] for f in FEATURES], self.predictor, name)


class _Windows:
    """Fixed windows as engine columns, and the mean bsld of a policy over them.

    ``held_out`` maps a predictor name to one predictor per window that replaces it there (a learned model fitted
    without the window's part of the split: :func:`baselines.learned.out_of_fold`).
    """

    def __init__(self, jobs: pd.DataFrame, nodes: int, windows: int, length: int, seed: int,
                 held_out: Callable[[int, int], Predictor] | None = None, learned_names: Sequence[str] = ()):
        self.nodes = nodes
        starts = traces.window_starts(len(jobs), length, windows, seed)
        self.held_out = {name: [held_out(s, s + length) for s in starts] for name in learned_names} \
            if held_out is not None else {}
        self.tables = [traces.window(jobs, length, start=s) for s in starts]
        self.columns = [(w["submit"].to_numpy(np.int64), hold_times(w), w["walltime"].to_numpy(np.int64),
                         w["nodes"].to_numpy(np.int64), w["user"].to_numpy(np.int64)) for w in self.tables]

    def score(self, pol: PriorityPolicy, backfill: str) -> float:
        values = []
        swap = self.held_out.get(pol.predictor)
        for i, (table, (submit, hold, wall, nodes, user)) in enumerate(zip(self.tables, self.columns, strict=True)):
            start, _ = run_batch(submit, hold, wall, nodes, pol.keys(table), self.nodes, pol, backfill, user,
                                 None if swap is None else swap[i])
            values.append(metrics.bounded_slowdown(start - submit, hold).mean())
        return float(np.mean(values))


def _search(win: _Windows, predictor: str, backfill: str, evaluations: int, seed: int,
            bar: tqdm) -> tuple[np.ndarray, float, float, int]:
    """CMA-ES from SAF's weights; returns (best weights, their score, SAF's score, evaluations used)."""
    import cma

    x0 = np.array([1.0, 1.0, 0.0, 0.0])  # SAF on the predictions
    start = win.score(policy(x0, predictor), backfill)
    best, best_x, used = start, x0, 1
    # cma seeds numpy's global generator from its 'seed' option: keep the process's stream as it was.
    saved = np.random.get_state()
    try:
        options = {"seed": seed + 1, "maxfevals": evaluations, "verbose": -9, "bounds": [0, None]}
        es = cma.CMAEvolutionStrategy(x0, 0.5, options)
        while not es.stop():
            xs = es.ask()
            values = [win.score(policy(x, predictor), backfill) for x in xs]
            es.tell(xs, values)
            used += len(xs)
            bar.update(len(xs))
            k = int(np.argmin(values))
            if values[k] < best:
                best, best_x = values[k], np.asarray(xs[k])
    finally:
        np.random.set_state(saved)
    return best_x, best, start, used


def fit(train: pd.DataFrame, nodes: int, backfill: str = "easy", predictors: Sequence[str] = ("last2", "median5"),
        windows: int = 64, length: int = 1024, evaluations: int = 300, seed: int = 0, trace: str = "",
        progress: bool = True, held_out: Callable[[int, int], Predictor] | None = None) -> Fit:
    """Tune the weights on windows of the train split ``train`` (never the test split).

    Args:
        train: the chronological train split of a trace.
        nodes: the machine's nodes.
        backfill: the backfilling the weights are for.
        predictors: the runtime predictors to try (the better on the tuning windows is kept).
        windows: how many windows.
        length: jobs per window (at most the train split's length).
        seed: the seed of the windows' draw and of CMA-ES.
        evaluations: the CMA-ES budget per predictor (each evaluation simulates every window).
        trace: the trace's name, recorded in the fit.
        progress: show a progress bar.
        held_out: for a learned predictor, ``held_out(first, end)`` gives the predictor to use on the window of
            rows ``first .. end - 1`` instead: one fitted without those rows, so that the weights are tuned for
            predictions as good as they will be on unseen jobs, not for the in-sample ones of a model fitted on the
            whole split (:func:`baselines.learned.out_of_fold`).
    """
    length = min(length, len(train))
    if length < 2:
        raise ValueError(f"the train split has {len(train)} jobs: too few to tune on")
    learned_names = [p for p in predictors if p.lower().startswith("learned")]
    win = _Windows(train, nodes, windows, length, seed, held_out, learned_names)
    results = {}
    with tqdm(total=evaluations * len(predictors), desc=f"tuning ({backfill})", disable=not progress) as bar:
        for pred in predictors:
            results[pred] = _search(win, pred, backfill, evaluations, seed, bar)
    pred = min(results, key=lambda p: results[p][1])
    x, value, start, _ = results[pred]
    return Fit(trace=trace or str(train.attrs.get("name", "")), backfill=backfill, predictor=pred,
               weights=dict(zip(FEATURES, (float(v) for v in x), strict=True)), tuning_bsld=value,
               start_bsld=start, windows=windows, length=length, seed=seed,
               evaluations=sum(r[3] for r in results.values()), tried={p: r[1] for p, r in results.items()})


def save(result: Fit, path: str | Path) -> Path:
    """Write a fit as JSON (atomically)."""
    path = Path(path)
    write_text(path, json.dumps(asdict(result), indent=2) + "\n")
    return path


def load(path: str | Path) -> Fit:
    """Read a fit saved by :func:`save`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        result = Fit(**data)
        if set(result.weights) != set(FEATURES) or not all(math.isfinite(v) for v in result.weights.values()):
            raise ValueError(f"weights must be finite values for {FEATURES}")
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: not a tuned-priority fit ({exc}); make one with python -m baselines.tune") from exc
    return result


def family(argument: str, trace: str | None, backfill: str, variant: str = "") -> PriorityPolicy:
    """``tuned`` as a heuristic family of :func:`hpcgym.sim.heuristics.resolve`.

    ``tuned:FIT.json`` is that fit, a bare ``tuned`` the fit for ``trace`` and ``backfill`` (:func:`find`).

    Raises:
        ValueError: the file is no fit, or the trace has no fit for that backfilling (the message says how to make
            one).
    """
    name = TUNED + variant
    if argument:
        return load(argument).policy(name)
    if not trace:
        raise ValueError(f"{name} is fitted per trace and backfilling: give the trace (trace=...), or name a fit "
                         f"file as {name}:FIT.json")
    found = find(trace, backfill, variant=variant)
    if found is None:
        make = f"python -m baselines.tune --trace {trace} --backfill {backfill}"
        if variant:
            make += f" --predictors learned:{Path(trace).name} --out tuned/{file_name(trace, backfill, variant)}"
        raise ValueError(f"no {name} fit for {Path(trace).name} with backfill {backfill!r} in ./{LOCAL}/ or "
                         f"{BUNDLED}: make one with {make}")
    return found.policy(name)


def learned_family(argument: str, trace: str | None, backfill: str) -> PriorityPolicy:
    """``tuned-learned``: :func:`family` for the fits tuned on the trace's learned runtime model."""
    return family(argument, trace, backfill, LEARNED_VARIANT)


def named(name: str, trace: str, backfill: str) -> PriorityPolicy:
    """Deprecated: :func:`hpcgym.sim.heuristics.resolve` (``resolve(name, trace, backfill)``) does this and more.

    A heuristic by name, where ``tuned`` is the fit for ``trace`` and ``backfill``.

    Raises:
        ValueError: ``tuned`` is asked for and the trace has no fit for that backfilling.
        hpcgym.errors.UnknownNameError: no heuristic has that name.
    """
    return heuristics.resolve(name, trace, backfill)


def weights_of(pol: PriorityPolicy) -> tuple[float, float, float, float]:
    """The weights ``(a, b, c, d)`` of the module docstring's score that order jobs as ``pol`` does.

    SJF and SAF (on any predictor's estimates) and the ``tuned`` fits are points of that family; other heuristics
    (FCFS, WFP3, UNICEP, F1, LJF) are not, and raise ``ValueError``.
    """
    if pol.code == codes.SJF:
        return 1.0, 0.0, 0.0, 0.0
    if pol.code == codes.SAF:
        return 1.0, 1.0, 0.0, 0.0
    key = pol.key
    if pol.code in codes.CUSTOM_CODES and isinstance(key, LinearKey):
        a = {codes.KEY_PLUS_LOG_R: 1.0, codes.KEY_MINUS_LOG_R: -1.0, codes.KEY: 0.0}[pol.code]
        return a, key.nodes, key.walltime, key.wait
    raise ValueError(f"{pol.name} is not a weighted sum of log estimate, log nodes, log walltime and wait (SJF, SAF "
                     "and the tuned fits are)")


def file_name(trace: str, backfill: str, variant: str = "") -> str:
    """The file a fit for ``trace`` and ``backfill`` is saved as (``variant``: ``""`` or :data:`LEARNED_VARIANT`)."""
    return f"{Path(trace).name.split('.')[0]}-{backfill}{variant}.json"


def find(trace: str, backfill: str, search: Sequence[Path] = (LOCAL, BUNDLED), variant: str = "") -> Fit | None:
    """The fit for ``trace`` (its name) and ``backfill``: ``./tuned/`` first, then the bundled ones; None if none.

    ``variant`` :data:`LEARNED_VARIANT` asks for the fit tuned on the trace's learned runtime model.
    """
    for folder in search:
        path = Path(folder) / file_name(trace, backfill, variant)
        if path.exists():
            return load(path)
    return None


# ``tuned`` for every resolver of this process; other processes find it through the ``hpcgym.heuristic_families``
# entry points of pyproject.toml (an environment given ``baseline="tuned"`` without importing baselines).
heuristics.register_family(TUNED, family, "FIT.json")
heuristics.register_family(TUNED + LEARNED_VARIANT, learned_family, "FIT.json")
