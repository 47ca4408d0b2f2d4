"""The named priority heuristics (lower score runs first; ties: earlier submit, then lower job id) and their registry.

``w`` is the current wait (``now - submit``), ``r`` the walltime, ``n`` the nodes, ``s`` the submit time. The
formulas are compiled into the engine (:func:`hpcgym.sim.policy.score`); this module names them. Other packages add
their own with :func:`register` (:mod:`baselines.priorities` re-exports this module for users).

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

#: name -> heuristic, in the order tables list them.
POLICIES: dict[str, PriorityPolicy] = {p.name: p for p in (FCFS, SJF, WFP3, UNICEP, F1, LJF, SAF)}


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
