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

from dataclasses import dataclass

import numba as nb
import numpy as np

from hpcgym.errors import UnknownNameError
from hpcgym.sim.state import PK, PRED, borrowing

# Codes of the compiled predictors.
WALLTIME, MEAN, MEDIAN, EXACT = range(4)
HISTORY_CODES = (MEAN, MEDIAN)


@dataclass(frozen=True)
class Predictor:
    """A runtime predictor the engine can run.

    Attributes:
        name: short name (``"last2"``).
        code: one of the compiled predictor codes.
        k: how many of the user's finished jobs it reads (0: none).
        description: what it predicts, for docs and tables.
        clairvoyant: whether it reads the job's own runtime (not implementable by a real scheduler).
    """

    name: str
    code: int
    k: int = 0
    description: str = ""
    clairvoyant: bool = False

    def __post_init__(self) -> None:
        if self.code not in (WALLTIME, MEAN, MEDIAN, EXACT):
            raise ValueError(f"predictor {self.name!r}: unknown code {self.code}")
        if (self.code in HISTORY_CODES) != (self.k > 0):
            raise ValueError(f"predictor {self.name!r}: a history predictor needs k >= 1, the others k = 0")

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


def get(name: str | Predictor | None) -> Predictor:
    """Look a predictor up by name (``None``: the walltime); a predictor object passes through."""
    if name is None:
        return WALLTIME_PREDICTOR
    if isinstance(name, Predictor):
        return name
    key = name.lower()
    if key not in PREDICTORS:
        raise UnknownNameError("predictor", name, PREDICTORS)
    return PREDICTORS[key]


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
    if sc[PRED] == MEAN or sc[PRED] == MEDIAN:
        if u >= 0:
            k = sc[PK]
            hist[u * k + hcount[u] % k] = j
            hcount[u] += 1


@borrowing
def _ranked(hist, base, m, hold, r):  # pragma: no cover - compiled
    """The ``r``-th smallest (0-based) hold time of the jobs ``hist[base:base + m]``, without allocating."""
    for a in range(m):
        v = hold[hist[base + a]]
        below = 0
        equal_before = 0
        for b in range(m):
            w = hold[hist[base + b]]
            if w < v:
                below += 1
            elif w == v and b < a:
                equal_before += 1
        if below + equal_before == r:
            return v
    return hold[hist[base]]


@borrowing
def predict(j, sc, hist, hcount, user, hold, limit):  # pragma: no cover - compiled
    """The estimate of job ``j`` at its arrival, from its user's finished jobs (see the module docstring)."""
    code = sc[PRED]
    if code == EXACT:
        return hold[j]
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
        lo = _ranked(hist, base, m, hold, (m - 1) // 2)
        hi = _ranked(hist, base, m, hold, m // 2)
        guess = -(-(lo + hi) // 2)
    return max(1, min(limit[j], guess))


__all__ = ["EXACT_PREDICTOR", "LAST2", "MEDIAN5", "PREDICTORS", "Predictor", "WALLTIME_PREDICTOR", "get", "predict",
           "remember", "user_index"]
