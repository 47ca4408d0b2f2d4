"""Evaluate trained agents and every heuristic x backfill mode on identical held-out real windows.

Example::

    python -m experiments.evaluate --model runs/theta-real-ppo-s0 --trace theta --windows 20 --length 1024

Windows are drawn once (``--seed``) from the chronological *test* split (the last 30% of the trace), and every
scheduler runs on the same ones. Writes ``per_window.csv`` (one row per scheduler x window) and ``per_job.csv``
(one row per scheduler x window x job) to ``--out`` (default: ``<model dir>/eval``), and prints the summary table:
mean bounded slowdown with a 95% bootstrap interval over windows, and the win rate against FCFS+EASY.
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from baselines import priorities
from baselines.run import write_atomic
from hpcgym import machines, metrics, traces
from hpcgym.env import SchedulingEnv
from hpcgym.sim import simulate

HEURISTIC_BACKFILLS = ("none", "easy")
REFERENCE = ("fcfs", "easy")


def window_starts(n_jobs: int, length: int, count: int, seed: int) -> list[int]:
    """``count`` window starts drawn once from ``seed`` (the same for every scheduler)."""
    if length > n_jobs:
        raise ValueError(f"windows of {length} jobs do not fit in {n_jobs} test jobs")
    return [int(s) for s in np.random.default_rng(seed).integers(0, n_jobs - length + 1, size=count)]


def run_heuristics(test: pd.DataFrame, machine: machines.Machine, starts: Sequence[int], length: int,
                   backfills: Sequence[str] = HEURISTIC_BACKFILLS) -> list[pd.DataFrame]:
    """Per-job records of every heuristic x backfill mode on every window."""
    out = []
    for w, start in enumerate(starts):
        jobs = traces.window(test, length, start=start)
        for name, policy in priorities.POLICIES.items():
            for backfill in backfills:
                rec = simulate(jobs, machine, policy, backfill)
                out.append(rec.assign(scheduler=f"{name}+{backfill}", kind="heuristic", window=w))
    return out


def run_agent(model: Any, label: str, trace: str | pd.DataFrame, machine: machines.Machine, starts: Sequence[int],
              length: int, backfill: str, slots: int) -> list[pd.DataFrame]:
    """Per-job records of a trained agent (deterministic, masked) on every window of the test split."""
    env = SchedulingEnv(machine, trace, backfill=backfill, window=length, slots=slots, split="test")
    out = []
    for w, start in enumerate(starts):
        obs, info = env.reset(seed=0, options={"window_start": start})
        while not info["done"]:
            action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True) \
                if _takes_masks(model) else model.predict(obs, deterministic=True)
            obs, _, _, _, info = env.step(int(action))
        out.append(pd.DataFrame(info["records"]).assign(scheduler=label, kind="agent", window=w))
    return out


def _takes_masks(model: Any) -> bool:
    import inspect

    return "action_masks" in inspect.signature(model.predict).parameters


def per_window_table(per_job: pd.DataFrame, machine_nodes: int) -> pd.DataFrame:
    """One row per scheduler x window: mean bsld, mean wait, utilization."""
    rows = []
    for (scheduler, kind, window), rec in per_job.groupby(["scheduler", "kind", "window"], sort=False):
        s = metrics.summarize(rec, machine_nodes)
        rows.append({"scheduler": scheduler, "kind": kind, "window": window, "bsld": s["bsld_mean"],
                     "wait": s["wait_mean"], "utilization": s["utilization"]})
    return pd.DataFrame(rows)


def summary(per_window: pd.DataFrame, reference: str = "+".join(REFERENCE)) -> pd.DataFrame:
    """Mean bsld with a bootstrap CI over windows, and the win rate against ``reference`` (lower bsld wins)."""
    ref = per_window[per_window["scheduler"] == reference].set_index("window")["bsld"]
    rows = []
    for scheduler, group in per_window.groupby("scheduler", sort=False):
        mean, lo, hi = metrics.bootstrap_ci(group["bsld"].to_numpy())
        mine = group.set_index("window")["bsld"]
        rows.append({"scheduler": scheduler, "kind": group["kind"].iat[0], "bsld": mean, "ci_low": lo,
                     "ci_high": hi, "wait": group["wait"].mean(), "utilization": group["utilization"].mean(),
                     f"win_rate_vs_{reference}": float((mine < ref.loc[mine.index]).mean())})
    return pd.DataFrame(rows).sort_values("bsld").reset_index(drop=True)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    """Write a CSV atomically (the same writer as ``baselines.run``)."""
    write_atomic(df, path)


def write_results(out: Path, per_window: pd.DataFrame, per_job: pd.DataFrame) -> pd.DataFrame:
    """Write ``per_window.csv``, ``per_job.csv`` and ``summary.csv`` to ``out``; return the summary."""
    table = summary(per_window)
    for name, df in (("per_window", per_window), ("per_job", per_job), ("summary", table)):
        write_csv(df, out / f"{name}.csv")
    return table


def load_agent(run_dir: Path) -> tuple[Any, dict[str, Any]]:
    """The final model of a training run and the run's arguments."""
    args = json.loads((run_dir / "args.json").read_text())
    if args["algo"] == "ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO.load(run_dir / "model.zip", device="cpu"), args
    from agents.dqn import MaskedDQN

    return MaskedDQN.load(run_dir / "model.zip", device="cpu"), args


def evaluate(trace: str, agents: dict[str, tuple[Any, str, int]], windows: int = 20, length: int = 1024,
             seed: int = 0, progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run agents (``label -> (model, backfill, slots)``) and the heuristics on the same test windows.

    Returns:
        ``(per_window, per_job)`` tables.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = traces.read(trace)
    machine = machines.get(real.attrs["machine"])
    test = traces.split(real, "test")
    starts = window_starts(len(test), length, windows, seed)
    recs = run_heuristics(test, machine, starts, length)
    for label, (model, backfill, slots) in tqdm(agents.items(), desc="agents", disable=not progress):
        recs += run_agent(model, label, trace, machine, starts, length, backfill, slots)
    per_job = pd.concat(recs, ignore_index=True)
    return per_window_table(per_job, machine.nodes), per_job


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = argparse.ArgumentParser(prog="python -m experiments.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, nargs="*", default=[], help="training run directories (with model.zip)")
    ap.add_argument("--trace", default="theta", help="real trace whose test split is used (default: theta)")
    ap.add_argument("--windows", type=int, default=20, help="number of test windows (default: 20)")
    ap.add_argument("--length", type=int, default=1024, help="jobs per window (default: 1024)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the window draw (default: 0)")
    ap.add_argument("--out", type=Path, default=None, help="output directory (default: <first model>/eval)")
    args = ap.parse_args(argv)
    agents = {}
    for run in args.model:
        model, run_args = load_agent(run)
        agents[f"{run.name}"] = (model, run_args["backfill"], run_args["slots"])
    per_window, per_job = evaluate(args.trace, agents, args.windows, args.length, args.seed)
    out = args.out or (args.model[0] / "eval" if args.model else Path("eval"))
    table = write_results(out, per_window, per_job)
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.2f}"))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
