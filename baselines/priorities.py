"""The priority heuristics users pick from: a re-export of :mod:`hpcgym.sim.heuristics`, where they live."""

from __future__ import annotations

from hpcgym.sim.heuristics import F1, FCFS, LJF, POLICIES, SAF, SJF, UNICEP, WFP3, get, register

__all__ = ["F1", "FCFS", "LJF", "POLICIES", "SAF", "SJF", "UNICEP", "WFP3", "get", "register"]
