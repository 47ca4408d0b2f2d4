"""The reference rows of every evaluation table, and each scheduler's share of the estimate headroom.

A learned scheduler is measured against what a scheduler could do by hand with the information the log already
has (``docs/definitions.md``, "References that read the log's history"):

- every registered heuristic (:func:`baselines.priorities.names`, installed packages' too): the classic ones on the
  users' walltimes, and those on runtime predictions (``sjbf``: EASY++; ``sjf-last2``; ``saf-last2``);
- ``tuned``, the weighted priority fitted for this trace and backfill mode (:mod:`baselines.tuned`), where a fit
  exists;
- on the trace's *learned* runtime predictions (:mod:`baselines.learned`), where the trace has a model:
  ``sjbf-learned`` (EASY++ on them), ``sjf-learned``, ``saf-learned``, and ``tuned-learned`` (the weighted priority
  tuned on them) where that fit exists;
- ``clairvoyant``: the classic heuristic that does best on these windows when told every job's runtime (the
  ``exact`` predictor). No real scheduler can do this; it bounds the room that better estimates leave.

:func:`headroom` turns a table's mean bsld into each scheduler's share of the room between the best classic
heuristic (walltimes) and the clairvoyant row, both with the scheduler's backfilling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from baselines import priorities, tuned
from baselines.grid import Cell, simulate_grid
from hpcgym.machines import Machine
from hpcgym.sim import PriorityPolicy, heuristics, predict
from hpcgym.sim.heuristics import CLASSIC, PREDICTIVE

TUNED = tuned.TUNED
CLAIRVOYANT = "clairvoyant"
#: The row kinds of the reference rows: implementable ones are heuristics; the clairvoyant row is not.
KINDS = {TUNED: "heuristic", CLAIRVOYANT: "clairvoyant"}


def mean_bsld(cell: Cell) -> float:
    """A cell's mean over its windows of the windows' mean bounded slowdown."""
    return float(np.mean([s["bsld_mean"] for s in cell.summaries]))


def clairvoyant(windows: Sequence[pd.DataFrame], machine: Machine, backfill: str) -> tuple[Cell, str]:
    """The best classic heuristic given exact runtimes on these windows: its cell (named ``clairvoyant``), and which."""
    exact = [dataclasses.replace(p, predictor="exact") for p in CLASSIC]
    cells = simulate_grid(windows, machine, exact, [backfill])
    best = min(cells, key=mean_bsld)
    return dataclasses.replace(best, policy=CLAIRVOYANT), best.policy


def learned_policies(trace: str) -> list[PriorityPolicy]:
    """The heuristics on runtime predictions (EASY++, SJF, SAF) on ``trace``'s learned model; none without one."""
    try:
        predict.model_path(trace)
    except FileNotFoundError:
        return []
    name = f"{predict.LEARNED_NAME}:{trace}"
    texts = {"sjbf": "FCFS order, backfilling the shortest learned prediction first (EASY++ on learned predictions)",
             "sjf-last2": "shortest learned prediction first (SJF on learned predictions)",
             "saf-last2": "smallest area first, by learned prediction x nodes (SAF on learned predictions)"}
    return [dataclasses.replace(p, name=p.name.replace("-last2", "") + "-learned", predictor=name,
                                description=texts.get(p.name, p.description))
            for p in PREDICTIVE]


def learned_row(name: str, trace: str | None) -> PriorityPolicy:
    """The learned-prediction row ``name`` (``saf-learned``, ``sjf-learned``, ``sjbf-learned``) on ``trace``'s model.

    Raises:
        ValueError: no trace is given, or it has no learned model (the message says how to fit one).
    """
    if not trace:
        raise ValueError(f"{name} reads the trace's learned runtime model: give the trace (trace=...)")
    found = {p.name: p for p in learned_policies(trace)}
    if not found:
        raise ValueError(f"{name}: no learned runtime model for {Path(trace).name}; fit one with python -m "
                         f"baselines.learn --trace {trace}")
    return found[name]


def saf_learned(argument: str, trace: str | None, backfill: str) -> PriorityPolicy:
    """``saf-learned`` as a heuristic family (:func:`hpcgym.sim.heuristics.resolve`): SAF on the learned model."""
    return learned_row("saf-learned", trace)


def sjf_learned(argument: str, trace: str | None, backfill: str) -> PriorityPolicy:
    """``sjf-learned``: SJF on the trace's learned runtime model."""
    return learned_row("sjf-learned", trace)


def sjbf_learned(argument: str, trace: str | None, backfill: str) -> PriorityPolicy:
    """``sjbf-learned``: EASY++ (FCFS, backfill shortest predicted first) on the trace's learned runtime model."""
    return learned_row("sjbf-learned", trace)


# Every resolver of this process reads the learned rows by name; other processes find them through the
# ``hpcgym.heuristic_families`` entry points of pyproject.toml.
for _name, _family in (("saf-learned", saf_learned), ("sjf-learned", sjf_learned), ("sjbf-learned", sjbf_learned)):
    heuristics.register_family(_name, _family)


def reference_cells(windows: Sequence[pd.DataFrame], machine: Machine, trace: str, backfills: Sequence[str],
                    kill_at_walltime: bool = True, progress: bool = False) -> tuple[list[Cell], dict[str, str]]:
    """Every reference row on ``windows``; returns the cells and notes (label -> what it stands for).

    ``trace`` is the trace's name, under which a ``tuned`` fit is looked up (:func:`baselines.tuned.find`). The
    predictors need ``kill_at_walltime``: without it only the classic heuristics run.
    """
    if not kill_at_walltime:
        return simulate_grid(windows, machine, list(CLASSIC), backfills, False, progress), {}
    smart = learned_policies(trace) if trace else []
    cells = simulate_grid(windows, machine, [*priorities.names(), *smart], backfills, True, progress)
    notes = {}
    if smart:
        notes.update({f"{p.name}+{b}": f"{p.description}; predictions of {p.predictor} "
                                       f"({Path(predict.get(p.predictor).source).name})"
                      for p in smart for b in backfills})
    for backfill in backfills:
        for variant in ("", tuned.LEARNED_VARIANT):
            fit = tuned.find(trace, backfill, variant=variant) if trace else None
            if fit is None:
                continue
            policy = priorities.resolve(tuned.TUNED + variant, trace, backfill)  # as every tool reads the name
            cell = simulate_grid(windows, machine, [policy], [backfill])[0]
            cells.append(cell)
            notes[cell.label] = f"weights fitted on the train split ({fit.predictor} predictions; {fit.command})"
        cell, which = clairvoyant(windows, machine, backfill)
        cells.append(cell)
        notes[cell.label] = f"{which} told every job's runtime: not implementable"
    return cells, notes


def kind(policy: str) -> str:
    """The row kind of a reference row: ``heuristic``, or ``clairvoyant`` for the row no scheduler can reach."""
    return KINDS.get(policy, "heuristic")


def headroom(table: pd.DataFrame) -> pd.Series:
    """Each row's share of the walltime-to-exact headroom, ``(B - bsld) / (B - C)`` (NaN where undefined).

    ``table`` has the columns ``scheduler``, ``backfill`` and ``bsld`` (the mean over the same windows). ``B`` is the
    best classic heuristic's bsld and ``C`` the clairvoyant row's, both with the row's backfilling.
    """
    classic = {f"{p.name}+{b}" for p in CLASSIC for b in table["backfill"].unique()}
    share = pd.Series(np.nan, index=table.index)
    for backfill, rows in table.groupby("backfill"):
        best = rows.loc[rows["scheduler"].isin(classic), "bsld"]
        clair = rows.loc[rows["scheduler"] == f"{CLAIRVOYANT}+{backfill}", "bsld"]
        if best.empty or clair.empty or best.min() <= clair.iat[0]:
            continue
        share[rows.index] = (best.min() - rows["bsld"]) / (best.min() - clair.iat[0])
    return share
