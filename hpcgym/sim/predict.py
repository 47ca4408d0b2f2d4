"""Runtime predictors: the estimates a scheduler uses instead of (or next to) the users' walltimes.

Users' walltimes are poor estimates (the median job on Theta runs 39% of its walltime, on SDSC-SP2 16%), so a
scheduler that predicts runtimes from the log's history can reserve and backfill better (Tsafrir, Etsion and
Feitelson, "Backfilling using system-generated predictions rather than user runtime estimates", IEEE TPDS 18(6),
2007). A predictor gives each job an *estimate* when it arrives; EASY's shadow time, its backfill checks,
conservative reservations and the estimate-based priorities (SJF, SAF, LJF, F1, WFP3, UNICEP) then read the estimate
instead of the walltime. Kill times never change: a job still ends at ``start + min(run, walltime)``.

The predictors (:data:`PREDICTORS`):

- ``walltime``: the user's walltime (the default; no history).
- ``last2``: the mean of the runtimes of the same user's last two finished jobs (Tsafrir et al.), rounded up to
  whole seconds; with one finished job, its runtime.
- ``median5``: the median of the same user's last five finished jobs' runtimes (the mean of the two middle ones
  for an even count), rounded up.
- ``learned``: a tree ensemble fitted on the log's past (``python -m baselines.learn``) predicts the log runtime
  from the job's request and its user's last :data:`hpcgym.sim.learned.K` finished jobs (:mod:`hpcgym.sim.learned`
  defines the features). It needs a model: ``learned:NAME`` reads the model fitted for trace ``NAME`` (``./predictors/``
  first, then the bundled ones), ``learned:PATH.json`` a model file, and a bare ``learned`` the model of the trace
  a job table comes from (``jobs.attrs["name"]``, where the caller passes the table).
- ``exact``: the job's own runtime. It is *clairvoyant*: no real scheduler has it. It exists to measure the room
  that better estimates leave (the clairvoyant reference row of the evaluation tables).

Every history predictor sees only the past: the jobs of the same user that *finished* (were released) at or before
the job's arrival, in the order they finished (ties in end time: the later row is the more recent). A job whose
user has no finished job yet, or whose user is unknown (-1), gets its walltime. A prediction is capped at the
walltime and is at least 1 s; it is fixed at the job's arrival.

**Correction.** A job that is still running when its estimate runs out (``start + estimate``) has its estimate
raised to its walltime at that moment: an *expiry* event, after the releases and before the arrivals of that
timestamp, followed by a scheduling pass. This is the "back to the user's estimate" correction that Tsafrir et al.
compare with stepwise increments; it keeps each correction to one event per job and makes the estimate an upper
bound again (the kill time). Under conservative backfilling a correction compresses the reservations as an early end
does, and a reservation may then move *later*: with predictions a reservation is no guarantee.

>>> get("last2").description
"mean of the user's last 2 finished runtimes (Tsafrir et al. 2007)"
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numba as nb
import numpy as np

from hpcgym.errors import UnknownNameError
from hpcgym.sim import learned
from hpcgym.sim.state import PK, PRED, borrowing

# Codes of the compiled predictors.
WALLTIME, MEAN, MEDIAN, EXACT, LEARNED = range(5)
HISTORY_CODES = (MEAN, MEDIAN, LEARNED)


@dataclass(frozen=True)
class Predictor:
    """A runtime predictor the engine can run.

    Attributes:
        name: short name (``"last2"``).
        code: one of the compiled predictor codes.
        k: how many of the user's finished jobs it reads (0: none).
        description: what it predicts, for docs and tables.
        clairvoyant: whether it reads the job's own runtime (not implementable by a real scheduler).
        model: the learned predictor's packed tree ensemble (:mod:`hpcgym.sim.learned`); ``None`` for the rules.
        source: where the model came from (a file), for tables and messages.
    """

    name: str
    code: int
    k: int = 0
    description: str = ""
    clairvoyant: bool = False
    model: np.ndarray | None = field(default=None, repr=False, compare=False)
    source: str = ""

    def __post_init__(self) -> None:
        if self.code not in (WALLTIME, MEAN, MEDIAN, EXACT, LEARNED):
            raise ValueError(f"predictor {self.name!r}: unknown code {self.code}")
        if (self.code in HISTORY_CODES) != (self.k > 0):
            raise ValueError(f"predictor {self.name!r}: a history predictor needs k >= 1, the others k = 0")
        if (self.code == LEARNED) != (self.model is not None):
            raise ValueError(f"predictor {self.name!r}: the learned code needs a model, and only it takes one")
        if self.model is not None:
            learned.check_model(self.model)
            object.__setattr__(self, "model", learned.with_since_bins(self.model))  # the engine's memo reads them

    @property
    def arrays(self) -> np.ndarray:
        """The packed model the engine reads (an empty one for the rules)."""
        return learned.EMPTY if self.model is None else self.model

    @property
    def history(self) -> bool:
        """Whether it reads the users' finished jobs."""
        return self.code in HISTORY_CODES


WALLTIME_PREDICTOR = Predictor("walltime", WALLTIME, description="the user's walltime")
LAST2 = Predictor("last2", MEAN, 2, description="mean of the user's last 2 finished runtimes (Tsafrir et al. 2007)")
MEDIAN5 = Predictor("median5", MEDIAN, 5, description="median of the user's last 5 finished runtimes")
EXACT_PREDICTOR = Predictor("exact", EXACT, description="the job's own runtime (clairvoyant)", clairvoyant=True)

#: name -> predictor.
PREDICTORS: dict[str, Predictor] = {p.name: p for p in (WALLTIME_PREDICTOR, LAST2, MEDIAN5, EXACT_PREDICTOR)}


class IdDefault(str):
    """A predictor name an environment id supplies (the ``-predict`` ids' ``last2``), not one the user gave.

    It is the name itself everywhere; an environment with ``reward="counterfactual"`` replaces it (as it replaces
    no predictor) with its baseline's, where a predictor the user gave must match the baseline's.
    """

    __slots__ = ()


LEARNED_NAME = "learned"
#: Where ``learned:NAME`` looks for the model fitted for trace ``NAME``: here first (``baselines.learned`` writes
#: there by default), then the bundled fits.
LOCAL_MODELS = Path("predictors")
BUNDLED_MODELS = Path(__file__).resolve().parents[1] / "data" / "predictors"


def get(name: str | Predictor | None, trace: str | None = None) -> Predictor:
    """Look a predictor up by name (``None``: the walltime); a predictor object passes through.

    ``learned:NAME`` or ``learned:PATH`` loads a learned model (see the module docstring); a bare ``learned`` loads
    the one fitted for ``trace``.
    """
    if name is None:
        return WALLTIME_PREDICTOR
    if isinstance(name, Predictor):
        return name
    key = name.lower()
    if key == LEARNED_NAME or key.startswith(LEARNED_NAME + ":"):
        where = name[len(LEARNED_NAME) + 1:] or trace
        if not where:
            raise ValueError("the learned predictor needs a model: name it learned:TRACE or learned:PATH.npz (fit "
                             "one with python -m baselines.learn --trace TRACE)")
        return load_learned(model_path(where))
    if key not in PREDICTORS:
        raise UnknownNameError("predictor", name, (*PREDICTORS, "learned:TRACE"))
    return PREDICTORS[key]


def model_path(where: str) -> Path:
    """The model file that ``learned:where`` names: a path, or the fit for trace ``where`` (local, then bundled)."""
    if where.endswith(".npz") or "/" in where or "\\" in where:
        path = Path(where)
        if not path.is_file():
            raise FileNotFoundError(f"no runtime model at {path}")
        return path
    for folder in (LOCAL_MODELS, BUNDLED_MODELS):
        if (folder / model_file(where)).is_file():
            return folder / model_file(where)
    raise FileNotFoundError(f"no learned runtime model for trace {where!r} in ./{LOCAL_MODELS}/ or the bundled "
                            f"ones: fit one with python -m baselines.learn --trace {where}")


def model_file(trace: str) -> str:
    """The file name of the model fitted for ``trace`` (a name or a trace file's path)."""
    return f"{Path(trace).name.split('.')[0].lower()}.npz"


def load_learned(path: str | Path) -> Predictor:
    """The learned predictor of a model file written by ``baselines.learned`` (loaded once per file version)."""
    path = Path(path).resolve()
    return _load_learned(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _load_learned(path: str, stamp: int) -> Predictor:
    with np.load(path, allow_pickle=False) as data:
        model = np.ascontiguousarray(data["model"], np.float64)
        about = json.loads(str(data["about"])) if "about" in data else {}
    text = about.get("description", "a tree ensemble of log runtime on the job and its user's history")
    return Predictor(LEARNED_NAME, LEARNED, learned.K, description=text, model=model, source=path)


def user_index(users: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense user indices ``0 .. u - 1`` in order of first appearance (-1 stays -1), and ``u``."""
    users = np.asarray(users, np.int64)
    known = users >= 0
    out = np.full(len(users), -1, np.int64)
    if known.any():
        uniq, first, inverse = np.unique(users[known], return_index=True, return_inverse=True)
        rank = np.empty(len(uniq), np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
        out[known] = rank[inverse]
    return out, int(out.max(initial=-1) + 1)


# ---- compiled ----------------------------------------------------------------------------------------------
@nb.njit(cache=True, inline="always")
def remember(j, sc, hist, hcount, user):  # pragma: no cover - compiled
    """Job ``j`` finished: add it to its user's history (a ring of the last ``k``)."""
    u = user[j]
    if sc[PRED] == MEAN or sc[PRED] == MEDIAN or sc[PRED] == LEARNED:
        if u >= 0:
            k = sc[PK]
            hist[u * k + hcount[u] % k] = j
            hcount[u] += 1


@borrowing
def predict(j, t, sc, hist, hcount, user, hold, limit, nodes, begin, model):  # pragma: no cover - compiled
    """The estimate of job ``j`` at its arrival ``t``, from its user's finished jobs (see the module docstring)."""
    code = sc[PRED]
    if code == EXACT:
        return hold[j]
    if code == LEARNED:
        return learned.estimate(j, t, model, hist, hcount, user, begin, hold, limit, nodes)
    u = user[j]
    if code == WALLTIME or u < 0 or hcount[u] == 0:
        return limit[j]
    k = sc[PK]
    m = min(hcount[u], k)
    base = u * k
    if code == MEAN:
        total = 0
        for i in range(m):
            total += hold[hist[base + i]]
        guess = -(-total // m)  # ceil in integers
    else:
        lo = learned.ranked_hold(hist, base, 0, m, k, hold, (m - 1) // 2)
        hi = learned.ranked_hold(hist, base, 0, m, k, hold, m // 2)
        guess = -(-(lo + hi) // 2)
    return max(1, min(limit[j], guess))


__all__ = ["EXACT_PREDICTOR", "LAST2", "LEARNED_NAME", "MEDIAN5", "PREDICTORS", "Predictor", "WALLTIME_PREDICTOR",
           "get", "load_learned", "model_file", "model_path", "predict", "remember", "user_index"]
