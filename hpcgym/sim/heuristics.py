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

:func:`resolve` is the one function that turns what a user types into a policy, for the environments, the CLIs and
the evaluation alike. Its spellings:

- ``NAME``: a heuristic registered here (``saf``, ``wfp3``, an installed package's);
- ``FAMILY`` or ``FAMILY:ARGUMENT``: a heuristic that depends on where it runs, built by a *family* that another
  package registers (:func:`register_family`, or the ``hpcgym.heuristic_families`` entry points). ``baselines``
  provides ``tuned`` (the weights fitted for the trace and backfilling), ``tuned-learned`` and ``tuned:FIT.json``
  (a fit file); a family gets the argument, the trace and the backfilling;
- ``package.module:attribute``: a :class:`PriorityPolicy` (or a function returning one) imported from a module;
- ``SPEC@PREDICTOR``: any of the above on another runtime predictor's estimates (``saf@last2``, ``tuned@exact``,
  ``sjf@learned:theta``; :func:`hpcgym.sim.predict.get` reads the predictor's name).

>>> get("SAF").description
'r * n (smallest area first)'
>>> resolve("saf@median5").predictor
'median5'
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable
from typing import Any

from hpcgym import plugins
from hpcgym.errors import UnknownNameError
from hpcgym.sim import policy as codes
from hpcgym.sim import predict
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
    plugins.add_to(POLICIES, ENTRY_POINTS, _from_plugin, str.lower)


def names() -> list[str]:
    """Every heuristic's name, built-in ones first, then those registered or installed (in table order)."""
    load_plugins()
    return list(POLICIES)


def get(name: str | PriorityPolicy) -> PriorityPolicy:
    """Look a heuristic up by its registered name (case-insensitive); a policy object passes through.

    :func:`resolve` reads every other spelling too (``saf@last2``, ``tuned``): call it for what a user typed.
    """
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


# ---- the resolver: every spelling of a heuristic -------------------------------------------------------------
#: A family of heuristics: ``family(argument, trace, backfill)`` gives the policy that ``FAMILY:argument`` (``""``
#: for a bare ``FAMILY``) names on ``trace`` (its name or path; None when unknown) with ``backfill``.
Family = Callable[[str, "str | None", str], PriorityPolicy]
#: The entry-point group of installed packages' families (``baselines`` declares ``tuned`` there).
FAMILY_ENTRY_POINTS = "hpcgym.heuristic_families"
#: family name -> family (registered, or loaded from the entry points on first use).
FAMILIES: dict[str, Family] = {}
#: What a family's argument looks like in messages (``tuned`` -> ``FIT.json``).
FAMILY_ARGUMENTS: dict[str, str] = {}
_MODULE_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def register_family(name: str, family: Family, argument: str = "") -> Family:
    """Make ``name`` and ``name:ARGUMENT`` resolve through ``family(argument, trace, backfill)`` in this process.

    A heuristic's name wins over a family's (a family cannot take ``saf``). ``argument`` describes the argument for
    messages (``"FIT.json"``); empty when the family takes none. To add one to every process, declare it in the
    ``hpcgym.heuristic_families`` entry points of a package.
    """
    if not callable(family):
        raise TypeError(f"register_family takes a function (argument, trace, backfill) -> PriorityPolicy, not "
                        f"{type(family).__name__}")
    FAMILIES[name.lower()] = family
    if argument:
        FAMILY_ARGUMENTS[name.lower()] = argument
    return family


def _load_families() -> None:
    """Register the installed packages' families (once per process; a name registered already is kept)."""
    plugins.add_to(FAMILIES, FAMILY_ENTRY_POINTS, _callable, str.lower)


def is_family(name: str) -> bool:
    """Whether ``name`` is a family's (registered or installed), so that ``name:ARGUMENT`` is its heuristic."""
    if name.lower() not in FAMILIES:
        _load_families()
    return name.lower() in FAMILIES


def _callable(name: str, obj: Any) -> Any:
    if not callable(obj):
        raise TypeError(f"expected a function (argument, trace, backfill) -> PriorityPolicy, got {type(obj).__name__}")
    return obj


def spellings() -> list[str]:
    """What :func:`resolve` accepts besides ``@PREDICTOR``: every name, then each family and its argument."""
    _load_families()
    return [*names(), *FAMILIES, *(f"{n}:{a}" for n, a in FAMILY_ARGUMENTS.items()), "module:ATTRIBUTE"]


def resolve(spec: str | PriorityPolicy, trace: str | None = None, backfill: str = "none") -> PriorityPolicy:
    """The heuristic that ``spec`` names, for a run on ``trace`` with ``backfill`` (spellings: module docstring).

    A policy object passes through. Names are case-insensitive; a family's argument (a file) is kept as typed.

    Raises:
        UnknownNameError: no heuristic, family or predictor has that name (the message lists the known ones).
        ValueError: a family cannot build its heuristic here (e.g. ``tuned`` for a trace without a fit).
    """
    if isinstance(spec, PriorityPolicy):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a heuristic is a name or a PriorityPolicy, not {type(spec).__name__}")
    base, at, predictor = spec.partition("@")
    found = _named(base.strip(), trace, backfill)
    return on_predictor(found, predictor, trace) if at else found


def on_predictor(pol: PriorityPolicy, predictor: str, trace: str | None = None) -> PriorityPolicy:
    """``pol`` on ``predictor``'s estimates, named ``NAME@PREDICTOR`` (a bare ``learned``: ``trace``'s model)."""
    if not predictor.strip():
        raise ValueError(f"{pol.name}@: name a runtime predictor after the @ (one of {', '.join(predict.PREDICTORS)}"
                         ", learned:TRACE)")
    found = predict.get(predictor, trace=trace)
    key = predictor if found.code == predict.LEARNED else found.name
    if key.lower() == predict.LEARNED_NAME:
        key = f"{predict.LEARNED_NAME}:{trace}"  # bare: the trace's model, named so that any later lookup finds it
    return dataclasses.replace(pol, name=f"{pol.name}@{found.name}", predictor=key)


def _named(name: str, trace: str | None, backfill: str) -> PriorityPolicy:
    family, colon, argument = name.partition(":")
    key = family.lower()
    if not colon and key in POLICIES:  # the common case reads no entry point (a family imports its package)
        return POLICIES[key]
    if is_family(key):
        return _checked(FAMILIES[key](argument, trace, backfill), name)
    if colon and _MODULE_SPEC.fullmatch(name):
        return _imported(name)
    if not colon and key in names():  # names() loads the installed heuristics
        return POLICIES[key]
    raise _unknown(name)


def _unknown(name: str, why: str = "") -> UnknownNameError:
    missing = "" if FAMILIES else (" No family is installed: tuned comes from the hpcgym.heuristic_families entry "
                                   "points that pip install -e . writes.")
    return UnknownNameError("policy", name, spellings(),
                            hint=why + "NAME@PREDICTOR puts a heuristic on a predictor's estimates; add your own with "
                                       "hpcgym.sim.heuristics.register or the hpcgym.heuristics entry points "
                                       "(docs/extend.md)." + missing)


def _imported(spec: str) -> PriorityPolicy:
    """The policy that ``package.module:attribute`` names (a function is called for it), under its own name."""
    module, _, attr = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ModuleNotFoundError, AttributeError) as exc:  # a typo'd family reads as a module: say both
        raise _unknown(spec, f"It is no family's name, and importing it failed: {exc}. ") from None
    return _checked(obj() if callable(obj) and not isinstance(obj, PriorityPolicy) else obj, spec)


def _checked(pol: Any, spec: str) -> PriorityPolicy:
    if not isinstance(pol, PriorityPolicy):
        raise TypeError(f"{spec!r} gave a {type(pol).__name__}, not a PriorityPolicy")
    return pol
