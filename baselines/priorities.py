"""The priority heuristics (DESIGN.md): lower score runs first; ties go to the earlier submit, then the lower id.

``w`` is the current wait (``now - submit``), ``r`` the walltime, ``n`` the nodes, ``s`` the submit time.
The formulas are compiled into the engine (:func:`hpcgym.sim.policy.score`); this module names them.
"""

from __future__ import annotations

from hpcgym.errors import UnknownMachineError
from hpcgym.sim.policy import F1 as _F1
from hpcgym.sim.policy import FCFS as _FCFS
from hpcgym.sim.policy import LJF as _LJF
from hpcgym.sim.policy import SAF as _SAF
from hpcgym.sim.policy import SJF as _SJF
from hpcgym.sim.policy import UNICEP as _UNICEP
from hpcgym.sim.policy import WFP3 as _WFP3
from hpcgym.sim.policy import PriorityPolicy

FCFS = PriorityPolicy("fcfs", _FCFS, description="s")
SJF = PriorityPolicy("sjf", _SJF, description="r")
LJF = PriorityPolicy("ljf", _LJF, description="-r")
SAF = PriorityPolicy("saf", _SAF, description="r * n (smallest area first)")
WFP3 = PriorityPolicy("wfp3", _WFP3, description="-(w / r)^3 * n")
UNICEP = PriorityPolicy("unicep", _UNICEP, description="-w / (log2(n) * r), log2(1) taken as 1")
F1 = PriorityPolicy("f1", _F1, description="log10(r) * n + 870 * log10(max(s, 1))")

POLICIES: dict[str, PriorityPolicy] = {p.name: p for p in (FCFS, SJF, WFP3, UNICEP, F1, LJF, SAF)}


def get(name: str | PriorityPolicy) -> PriorityPolicy:
    """Look a heuristic up by name (case-insensitive); a policy object passes through."""
    if isinstance(name, PriorityPolicy):
        return name
    key = name.lower()
    if key not in POLICIES:
        raise UnknownMachineError(name, POLICIES, what="policy")
    return POLICIES[key]
