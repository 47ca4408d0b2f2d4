"""The priority heuristics users pick from: a re-export of :mod:`hpcgym.sim.heuristics`, where they live.

:func:`names` lists every heuristic: the built-in ones, those :func:`register` added in this process, and those of
installed packages (the ``hpcgym.heuristics`` entry points; ``docs/extend.md``). :func:`resolve` reads every
spelling of one (``saf@last2``, ``tuned``, ``tuned:FIT.json``); importing this module registers ``tuned``
(:mod:`baselines.tuned`) for it, as the ``hpcgym.heuristic_families`` entry points do for other processes.
"""

from __future__ import annotations

from baselines import tuned as _tuned  # noqa: F401 - registers the tuned family with the resolver
from hpcgym.sim.heuristics import F1, FCFS, LJF, POLICIES, SAF, SJF, UNICEP, WFP3, get, names, register, resolve

__all__ = ["F1", "FCFS", "LJF", "POLICIES", "SAF", "SJF", "UNICEP", "WFP3", "get", "names", "register", "resolve"]
