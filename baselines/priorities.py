"""The priority heuristics users pick from: a re-export of :mod:`hpcgym.sim.heuristics`, where they live.

:func:`names` lists every heuristic: the built-in ones, those :func:`register` added in this process, and those of
installed packages (the ``hpcgym.heuristics`` entry points; ``docs/extend.md``).
"""

from __future__ import annotations

from hpcgym.sim.heuristics import F1, FCFS, LJF, POLICIES, SAF, SJF, UNICEP, WFP3, get, names, register

__all__ = ["F1", "FCFS", "LJF", "POLICIES", "SAF", "SJF", "UNICEP", "WFP3", "get", "names", "register"]
