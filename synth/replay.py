"""Scheduling outcome: replay job tables under FCFS + EASY backfilling on the real machine and compare.

Two views of the same question, "does a scheduler see the same workload?":

- **Whole trace** (the headline): each table is replayed from its first to its last job, so the queue builds up
  over months exactly as the offered load drives it. A generator that overloads the machine shows it here (waits
  grow without bound), even when short windows look fine.
- **Windows**: ``N_WINDOWS`` windows of ``WINDOW`` consecutive jobs per table, drawn with
  :func:`hpcgym.traces.window_starts` (the protocol's window drawer), each replayed from an empty machine; the
  per-window means are reported as a distribution, with bootstrap confidence intervals
  (:func:`hpcgym.metrics.bootstrap_ci`).

The whole-trace replay also gives the **windowed load spread** (:func:`load_spread`): how much the offered load of
consecutive :data:`LOAD_WINDOW`-job windows (the training episodes' length) varies inside the table. A generator
held to the data's load on average must keep that burstiness: episodes of very different load are what a
scheduler has to learn from.

Jobs that cannot run on the machine are left out and counted (:mod:`synth.validity` scores them). Empty tables
give empty records and NaN summaries, never an exception.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable
from hpcgym import machines, metrics
from hpcgym import traces as tracelib
from hpcgym.machines import Machine
from synth.distances import ks_statistic

WINDOW = 2048
N_WINDOWS = 8
POLICY, BACKFILL = "fcfs", "easy"
RECORD_COLUMNS = ("job_id", "submit", "start", "end", "wait", "run", "walltime", "nodes", "bsld")
#: per-window quantities summarized with bootstrap CIs
WINDOW_STATS = ("offered_load", "utilization", "wait_mean", "bsld_mean")
#: jobs per window of the windowed load spread: the training episodes' length (``docs/protocol.md``)
LOAD_WINDOW = 256
#: a gap between submits longer than this is an outage or a holiday; the load between outages counts it this long
OUTAGE = 12 * 3600


def runnable(jobs: pd.DataFrame, machine: Machine) -> tuple[pd.DataFrame, int]:
    """The jobs that can run on ``machine`` (``0 < nodes <= machine``, positive run and walltime), and the rest's count.

    Args:
        jobs: canonical job table.
        machine: the machine.

    Returns:
        ``(table, dropped)``; the table keeps ``jobs.attrs``.
    """
    if not len(jobs):
        return jobs, 0
    ok = (jobs["nodes"] <= machine.nodes) & (jobs["nodes"] > 0) & (jobs["run"] > 0) & (jobs["walltime"] > 0)
    out = jobs.loc[ok].reset_index(drop=True)
    out.attrs = dict(jobs.attrs)
    return out, int((~ok).sum())


def window_loads(jobs: pd.DataFrame, machine_nodes: int, window: int = LOAD_WINDOW) -> np.ndarray:
    """Offered load (:func:`hpcgym.jobs.offered_load`) of each run of ``window`` consecutive jobs, not overlapping.

    Args:
        jobs: canonical job table, sorted by submit time.
        machine_nodes: nodes of the machine the load refers to.
        window: jobs per window; a shorter remainder at the end is left out.

    Returns:
        One load per window (``inf`` for a window whose jobs all arrive at once); empty when the table is shorter
        than a window.
    """
    count = len(jobs) // window
    if count == 0 or window < 2:
        return np.zeros(0)
    submit = jobs["submit"].to_numpy(np.float64)[: count * window].reshape(count, window)
    work = (jobs["nodes"].to_numpy(np.float64) * jobs["run"].to_numpy(np.float64))[: count * window]
    span = submit[:, -1] - submit[:, 0]
    with np.errstate(divide="ignore"):
        return work.reshape(count, window).sum(axis=1) / (machine_nodes * span)


def busy_load(jobs: pd.DataFrame, machine_nodes: int, outage: int = OUTAGE) -> float:
    """The offered load between outages: as :func:`hpcgym.jobs.offered_load`, each gap counting at most ``outage``.

    Args:
        jobs: canonical job table, sorted by submit time.
        machine_nodes: nodes of the machine the load refers to.
        outage: the longest a gap counts, in seconds.

    Returns:
        The load (NaN with fewer than two jobs, ``inf`` when they all arrive at once).
    """
    if len(jobs) < 2:
        return float("nan")
    span = float(np.minimum(np.diff(jobs["submit"].to_numpy(np.int64)), outage).sum())
    work = float(np.dot(jobs["nodes"].to_numpy(np.float64), jobs["run"].to_numpy(np.float64)))
    return work / (machine_nodes * span) if span > 0 else float("inf")


def load_spread(loads: np.ndarray) -> float:
    """The spread of windowed loads: their interquartile range over their median.

    Scale-free, and robust to the windows whose jobs all arrive within seconds (their load is huge).

    Args:
        loads: offered loads of windows (:func:`window_loads`).

    Returns:
        ``(p75 - p25) / p50``; NaN with fewer than four windows.
    """
    if len(loads) < 4:
        return float("nan")
    p25, p50, p75 = np.quantile(loads, [0.25, 0.5, 0.75])
    return float((p75 - p25) / p50) if p50 > 0 else float("inf")


def _simulate(jobs: pd.DataFrame, machine: Machine) -> pd.DataFrame:
    from hpcgym.sim import simulate

    if not len(jobs):
        return pd.DataFrame({c: pd.Series(dtype=np.float64) for c in RECORD_COLUMNS})
    return simulate(jobs, machine, POLICY, backfill=BACKFILL)


def _window_row(part: pd.DataFrame, rec: pd.DataFrame, machine: Machine) -> dict[str, float]:
    return {"offered_load": jobtable.offered_load(part, machine.nodes),
            "utilization": metrics.utilization(rec, machine.nodes) if len(rec) else float("nan"),
            "wait_mean": float(rec["wait"].mean()) if len(rec) else float("nan"),
            "bsld_mean": float(rec["bsld"].mean()) if len(rec) else float("nan")}


def replay(jobs: pd.DataFrame, machine: Machine | str, n_windows: int | None = None, window: int = WINDOW,
           seed: int = 0) -> dict[str, Any]:
    """Replay a table under FCFS + EASY: whole, or in ``n_windows`` windows of ``window`` consecutive jobs.

    Args:
        jobs: canonical job table.
        machine: the machine (object or catalog name).
        n_windows: ``None`` for one whole-trace replay; else the number of windows, their starts drawn by
            :func:`hpcgym.traces.window_starts` from ``seed`` (a table no longer than ``window`` is one window).
        window: jobs per window.
        seed: seed of the window starts.

    Returns:
        ``records`` (per-job records, windows concatenated), ``offered_load`` and ``utilization`` (of the whole
        trace, or means over windows), ``load_spread`` (:func:`load_spread` of the runnable table's
        :data:`LOAD_WINDOW`-job windows), ``per_window`` (a DataFrame of :data:`WINDOW_STATS`, one row per window),
        ``dropped`` (jobs left out as unrunnable) and ``windows``.
    """
    machine = machines.get(machine)
    table, dropped = runnable(jobs, machine)
    if n_windows is None or len(table) <= window:
        parts = [table]  # a table no longer than a window is one window
    else:
        parts = [tracelib.window(table, window, start=s)
                 for s in tracelib.window_starts(len(table), window, n_windows, seed)]
    recs, rows = [], []
    for part in parts:
        rec = _simulate(part, machine)
        recs.append(rec)
        rows.append(_window_row(part, rec, machine))
    per_window = pd.DataFrame(rows, columns=list(WINDOW_STATS))
    return {"records": pd.concat(recs, ignore_index=True), "per_window": per_window,
            "offered_load": float(per_window["offered_load"].mean()),
            "utilization": float(per_window["utilization"].mean()), "dropped": dropped,
            "load_spread": load_spread(window_loads(table, machine.nodes)),
            "busy_load": busy_load(table, machine.nodes),
            "windows": len(parts) if len(table) else 0}


def window_ci(per_window: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Mean and 95% bootstrap CI of each per-window quantity (NaN where there are no windows).

    Args:
        per_window: the ``per_window`` table of :func:`replay`.
        seed: seed of the bootstrap.

    Returns:
        A DataFrame indexed by quantity with columns ``mean``, ``low``, ``high``.
    """
    rows = {}
    for col in WINDOW_STATS:
        v = per_window[col].to_numpy(np.float64)
        v = v[np.isfinite(v)]
        rows[col] = metrics.bootstrap_ci(v, seed=seed) if v.size else (float("nan"),) * 3
    return pd.DataFrame.from_dict(rows, orient="index", columns=["mean", "low", "high"])


def _ks(a: dict[str, Any], b: dict[str, Any], col: str) -> float:
    return ks_statistic(a["records"][col].to_numpy(), b["records"][col].to_numpy())


def scheduling(real: pd.DataFrame, synthetic: pd.DataFrame, machine: Machine | str, window: int = WINDOW,
               n_windows: int = N_WINDOWS, seed: int = 0) -> dict[str, Any]:
    """Scheduling outcome of a candidate table next to a reference table, both replayed on the real machine.

    Args:
        real: the reference job table (the test split).
        synthetic: the candidate job table.
        machine: the real machine (object or catalog name).
        window: jobs per window of the windowed view.
        n_windows: windows per table.
        seed: seed of the window starts and the bootstrap CIs.

    Returns:
        ``real``/``synthetic`` (whole-trace :func:`replay` results), ``ks_wait``/``ks_bsld`` (KS of the
        whole-trace wait and bsld distributions), ``windows_real``/``windows_synthetic`` (windowed replays),
        ``ci_real``/``ci_synthetic`` (:func:`window_ci`), ``ks_wait_windows``/``ks_bsld_windows`` (KS of the pooled
        window records) and ``summary`` (a DataFrame of whole-trace means, medians and p95s per side).
    """
    machine = machines.get(machine)
    whole = {side: replay(t, machine) for side, t in (("real", real), ("synthetic", synthetic))}
    win = {side: replay(t, machine, n_windows, window, seed) for side, t in (("real", real), ("synthetic", synthetic))}
    summary = {}
    for side, rep in whole.items():
        rec = rep["records"]
        s = metrics.summarize(rec, machine.nodes) if len(rec) else {}
        summary[side] = {k: s.get(k, float("nan")) for k in ("wait_mean", "wait_median", "wait_p95", "bsld_mean",
                                                              "bsld_median", "bsld_p95")}
        summary[side].update(offered_load=rep["offered_load"], busy_load=rep["busy_load"],
                             load_spread=rep["load_spread"], utilization=rep["utilization"], jobs=len(rec),
                             dropped=rep["dropped"])
    return {**whole, "ks_wait": _ks(whole["real"], whole["synthetic"], "wait"),
            "ks_bsld": _ks(whole["real"], whole["synthetic"], "bsld"),
            "windows_real": win["real"], "windows_synthetic": win["synthetic"],
            "ci_real": window_ci(win["real"]["per_window"], seed),
            "ci_synthetic": window_ci(win["synthetic"]["per_window"], seed),
            "ks_wait_windows": _ks(win["real"], win["synthetic"], "wait"),
            "ks_bsld_windows": _ks(win["real"], win["synthetic"], "bsld"), "summary": pd.DataFrame(summary)}
