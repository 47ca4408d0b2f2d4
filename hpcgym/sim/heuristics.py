"""The named priority heuristics (lower score runs first; ties: earlier submit, then lower job id) and their registry.

``w`` is the current wait (``now - submit``), ``r`` the walltime, ``n`` the nodes, ``s`` the submit time. The
formulas are compiled into the engine (:func:`hpcgym.sim.policy.score`); this module names them. Other packages add
their own with :func:`register` (:mod:`baselines.priorities` re-exports this module for users).

Three more read the log's history: their ``r`` is a runtime prediction from the user's last two finished jobs
(:mod:`hpcgym.sim.predict`, after Tsafrir, Etsion and Feitelson, IEEE TPDS 18(6), 2007) instead of the walltime.
``sjbf`` keeps the queue in FCFS order and scans EASY's backfill candidates shortest-predicted first: with EASY it is
their EASY++. ``sjf-last2`` and ``saf-last2`` are SJF and SAF on the predictions.

>>> get("SAF").description
'r * n (smallest area first)'
"""

from __future__ import annotations

from hpcgym.errors import UnknownNameError
from hpcgym.sim import policy as codes
from hpcgym.sim.policy import PriorityPolicy

FCFS = PriorityPolicy("fcfs", codes.FCFS, description="s")
SJF = PriorityPolicy("sjf", codes.SJF, description="r")
LJF = PriorityPolicy("ljf", codes.LJF, description="-r")
SAF = PriorityPolicy("saf", codes.SAF, description="r * n (smallest area first)")
WFP3 = PriorityPolicy("wfp3", codes.WFP3, description="-(w / r)^3 * n")
UNICEP = PriorityPolicy("unicep", codes.UNICEP, description="-w / (log2(n) * r), log2(1) taken as 1")
F1 = PriorityPolicy("f1", codes.F1, description="log10(r) * n + 870 * log10(max(s, 1))")

SJBF = PriorityPolicy("sjbf", codes.FCFS, description="s; backfill shortest predicted r first (EASY++)",
                      predictor="last2", scan=codes.SJF)
SJF_LAST2 = PriorityPolicy("sjf-last2", codes.SJF, description="r predicted: mean of the user's last 2 runtimes",
                           predictor="last2")
SAF_LAST2 = PriorityPolicy("saf-last2", codes.SAF, description="r * n, r predicted: the user's last 2 runtimes",
                           predictor="last2")

#: The single-feature heuristics on the users' walltimes.
CLASSIC: tuple[PriorityPolicy, ...] = (FCFS, SJF, WFP3, UNICEP, F1, LJF, SAF)
#: The heuristics on runtime predictions.
PREDICTIVE: tuple[PriorityPolicy, ...] = (SJBF, SJF_LAST2, SAF_LAST2)
#: name -> heuristic, in the order tables list them.
POLICIES: dict[str, PriorityPolicy] = {p.name: p for p in (*CLASSIC, *PREDICTIVE)}


def register(policy: PriorityPolicy) -> PriorityPolicy:
    """Add a heuristic under its name (environments and CLIs then find it by name)."""
    POLICIES[policy.name.lower()] = policy
    return policy


def get(name: str | PriorityPolicy) -> PriorityPolicy:
    """Look a heuristic up by name (case-insensitive); a policy object passes through."""
    if isinstance(name, PriorityPolicy):
        return name
    key = name.lower()
    if key not in POLICIES:
        raise UnknownNameError("policy", name, POLICIES)
    return POLICIES[key]
