"""The named priority heuristics (lower score runs first; ties: earlier submit, then lower job id) and their registry.

``w`` is the current wait (``now - submit``), ``r`` the walltime, ``n`` the nodes, ``s`` the submit time. The
formulas are compiled into the engine (:func:`hpcgym.sim.policy.priority`); this module names them. Other code adds
its own with :func:`register` (for one process), and an installed package through the ``hpcgym.heuristics`` entry
points (:mod:`hpcgym.plugins`), which every CLI, environment and results table then finds by name
(``docs/extend.md``). :mod:`baselines.priorities` re-exports this module for users.

Three more read the log's history: their ``r`` is a runtime prediction from the user's last two finished jobs
(:mod:`hpcgym.sim.predict`, after Tsafrir, Etsion and Feitelson, IEEE TPDS 18(6), 2007) instead of the walltime.
``sjbf`` keeps the queue in FCFS order and scans EASY's backfill candidates shortest-predicted first: with EASY it is
their EASY++. ``sjf-last2`` and ``saf-last2`` are SJF and SAF on the predictions.

>>> get("SAF").description
'r * n (smallest area first)'
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hpcgym import plugins
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


#: The entry-point group of installed packages' heuristics (:mod:`hpcgym.plugins`).
ENTRY_POINTS = "hpcgym.heuristics"
_plugins_loaded = False


def register(policy: PriorityPolicy) -> PriorityPolicy:
    """Add a heuristic under its name for this process (environments and CLIs then find it by name).

    To add one to every process (every CLI), declare it in the ``hpcgym.heuristics`` entry points of a package.
    """
    if not isinstance(policy, PriorityPolicy):
        raise TypeError(f"register takes a PriorityPolicy, not {type(policy).__name__}")
    POLICIES[policy.name.lower()] = policy
    return policy


def _from_plugin(name: str, obj: Any) -> PriorityPolicy:
    """An entry point's object as a heuristic named ``name``: a policy, or a function that returns one."""
    policy = obj() if callable(obj) and not isinstance(obj, PriorityPolicy) else obj
    if not isinstance(policy, PriorityPolicy):
        raise TypeError(f"expected a PriorityPolicy (or a function returning one), got {type(policy).__name__}")
    return policy if policy.name == name else dataclasses.replace(policy, name=name)


def load_plugins() -> None:
    """Register the installed packages' heuristics (once per process; a name taken already is kept)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for name, policy in plugins.load(ENTRY_POINTS, _from_plugin).items():
        POLICIES.setdefault(name.lower(), policy)


def names() -> list[str]:
    """Every heuristic's name, built-in ones first, then those registered or installed (in table order)."""
    load_plugins()
    return list(POLICIES)


def get(name: str | PriorityPolicy) -> PriorityPolicy:
    """Look a heuristic up by name (case-insensitive); a policy object passes through."""
    if isinstance(name, PriorityPolicy):
        return name
    key = name.lower()
    if key not in POLICIES:
        load_plugins()
    if key not in POLICIES:
        raise UnknownNameError("policy", name, POLICIES,
                               hint="Add your own with hpcgym.sim.heuristics.register or the hpcgym.heuristics entry "
                                    "points (docs/extend.md).")
    return POLICIES[key]
