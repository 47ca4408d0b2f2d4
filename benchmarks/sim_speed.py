"""Simulator speed: jobs per CPU second on whole traces, and a 2,000,000-job stream on a Trinity-size machine.

Usage: ``python benchmarks/sim_speed.py [--repeat 3] [--traces ...] [--predictors last2 median5 learned]
[--big-jobs 2000000] [--skip-big] [--learned-parts]``.

Each row is measured with the users' walltimes and with each runtime predictor of ``--predictors``
(:mod:`hpcgym.sim.predict`), side by side in one run, with the slowdown of the predictor against the walltimes.
``learned`` is each trace's bundled learned model (its features and its 20 trees walked at every arrival).
``--learned-parts`` splits the learned predictor's cost under FCFS+EASY into its parts, with two stand-in models
whose every estimate is the walltime (so that the schedule is the walltimes' own): 20 one-leaf trees (the features
and the history, no walk), and the trace's model with its baseline raised by 1,000 (the features and the whole
walk). What is left to the real model is the cost of scheduling on its estimates (their expiries, other backfills).

Every figure is the best of ``--repeat`` runs, in CPU time (``time.process_time``), after one warm-up run that
pays numba's compilation. The big stream tiles HPC2N in time and scales its job widths to Trinity's 9,408 nodes;
it reports wall time and the process's peak resident memory.
For scale, on this machine class RLScheduler's simulator does about 4,900 jobs/s (FCFS) and 11,800 jobs/s (with
its backfilling), AccaSim about 76 and 400 (figures from the project's issue tracker, not re-measured here; see
``benchmarks/peer_accasim.py`` for a side-by-side run).
"""

from __future__ import annotations

import argparse
import resource
import time
import warnings

import numpy as np
import pandas as pd

from baselines.priorities import FCFS, SJF, WFP3
from hpcgym import jobs as jobtable
from hpcgym import machines, traces
from hpcgym.sim import learned, predict, start_times


def cpu_rate(df: pd.DataFrame, nodes: int, policy, backfill: str, repeat: int,
             predictor: str | predict.Predictor = "walltime") -> float:
    """Best jobs per CPU second over ``repeat`` runs."""
    start_times(df, nodes, policy, backfill, predictor=predictor)  # warm-up (compilation)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        start_times(df, nodes, policy, backfill, predictor=predictor)
        best = min(best, time.process_time() - t0)
    return len(df) / best


def learned_parts(df: pd.DataFrame, nodes: int, trace: str, repeat: int) -> list[tuple[str, float]]:
    """FCFS+EASY's jobs per CPU second on the walltimes, the two stand-in models and the trace's learned model.

    The stand-ins are those of the module docstring; each must leave the walltimes' schedule, or this raises.
    """
    model = predict.get(f"{predict.LEARNED_NAME}:{trace}").model
    raised = model.copy()
    raised[0, 1] += 1000.0  # exp(raw) is above every walltime: each estimate is capped to it
    leaves = learned.pack([np.array([[-1.0, 0, 0, 0, 0, 0]])] * int(model[0, 0]), 1000.0)
    stand_ins = {"features, no walk": leaves, "features and walk": raised}
    plain = start_times(df, nodes, FCFS, "easy")
    rows = [("walltimes", cpu_rate(df, nodes, FCFS, "easy", repeat))]
    for name, packed in stand_ins.items():
        pred = predict.Predictor(predict.LEARNED_NAME, predict.LEARNED, learned.K, model=packed)
        if not np.array_equal(start_times(df, nodes, FCFS, "easy", predictor=pred), plain):
            raise AssertionError(f"the stand-in '{name}' does not keep the walltimes' schedule")
        rows.append((f"{name} (the walltimes' schedule)", cpu_rate(df, nodes, FCFS, "easy", repeat, pred)))
    rows.append(("learned", cpu_rate(df, nodes, FCFS, "easy", repeat, f"{predict.LEARNED_NAME}:{trace}")))
    return rows


def tile(df: pd.DataFrame, n_jobs: int, width: float, max_nodes: int) -> pd.DataFrame:
    """Repeat a trace back to back in time until it has ``n_jobs`` jobs, scaling job widths by ``width``."""
    copies = -(-n_jobs // len(df))
    span = int(df["submit"].iat[-1] - df["submit"].iat[0]) + 1
    base = df[list(jobtable.COLUMNS)]
    parts = []
    for c in range(copies):
        part = base.copy()
        part["submit"] = part["submit"] - base["submit"].iat[0] + c * span
        part["job_id"] = part["job_id"] + c * 10_000_000
        parts.append(part)
    out = pd.concat(parts, ignore_index=True).iloc[:n_jobs].copy()
    out["nodes"] = np.minimum(np.ceil(out["nodes"].to_numpy() * width).astype(np.int64), max_nodes)
    return out.reset_index(drop=True)


def main() -> None:
    """Run the benchmark and print a table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big-jobs", type=int, default=2_000_000)
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--traces", nargs="+", default=["lublin-256", "sdsc-sp2", "hpc2n"])
    ap.add_argument("--predictors", nargs="*", default=["last2", "median5", "learned"],
                    help="runtime predictors measured next to the walltimes (none: walltimes only)")
    ap.add_argument("--learned-parts", action="store_true",
                    help="only split the learned predictor's FCFS+EASY cost into its parts, per trace")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.learned_parts:
        for name in args.traces:
            df = traces.load(name)
            rows = learned_parts(df, machines.get(df.attrs["machine"]).nodes, name, args.repeat)
            for part, rate in rows:
                print(f"{name:12} FCFS+EASY {part:42} {rate:12,.0f} jobs/CPU-s {1e6 / rate:6.3f} us/job "
                      f"{rows[0][1] / rate:5.2f}x", flush=True)
        return
    head = "".join(f" {p + ' jobs/CPU-s':>20} {'x':>5}" for p in args.predictors)
    print(f"{'trace':12} {'jobs':>8} {'policy':7} {'backfill':12} {'jobs/CPU-s':>12}{head}")
    for name in args.traces:
        df = traces.load(name)
        nodes = machines.get(df.attrs["machine"]).nodes
        for policy, backfill in [(FCFS, "none"), (FCFS, "easy"), (SJF, "easy"), (WFP3, "easy"),
                                 (FCFS, "conservative"), (FCFS, "rlscheduler")]:
            rate = cpu_rate(df, nodes, policy, backfill, args.repeat)
            cells = ""
            for predictor in args.predictors:
                other = cpu_rate(df, nodes, policy, backfill, args.repeat, predictor)
                cells += f" {other:20,.0f} {rate / other:5.2f}"
            print(f"{name:12} {len(df):8d} {policy.name:7} {backfill:12} {rate:12,.0f}{cells}", flush=True)
    if args.skip_big:
        return
    trinity = machines.get("trinity")
    hpc2n = traces.load("hpc2n")
    big = tile(hpc2n, args.big_jobs, trinity.nodes / machines.get("hpc2n").nodes, trinity.nodes)
    start_times(big.iloc[:1000], trinity.nodes, FCFS, "easy")  # warm-up (compilation)
    t0, c0 = time.perf_counter(), time.process_time()
    start = start_times(big, trinity.nodes, FCFS, "easy")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wait = float(np.mean(start - big["submit"].to_numpy()))
    print(f"\n{len(big):,} jobs (HPC2N tiled, widths x{trinity.nodes / 120:.1f}) on trinity ({trinity.nodes} nodes), "
          f"FCFS+EASY: {wall:.2f} s wall, {cpu:.2f} s CPU ({len(big) / cpu:,.0f} jobs/CPU-s), "
          f"peak RSS {peak_mb:,.0f} MB, mean wait {wait:,.0f} s")


if __name__ == "__main__":
    main()
