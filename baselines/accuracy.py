"""How good each runtime predictor is on a trace's test split: ``python -m baselines.accuracy --trace theta``.

Three tables, for the predictors ``walltime``, ``last2``, ``median5`` and ``learned`` (the trace's model, fitted on
its train split if it has none yet: :mod:`baselines.learned`):

1. **Accuracy** on every job of the test split, each estimate made at the job's arrival from the history of the
   split's FCFS+EASY schedule (:func:`baselines.learned.predictions`): the mean absolute error of log runtime, the
   share of jobs predicted shorter than they ran, the share within a factor of 2, the rank correlation of the
   estimates with the runtimes (Spearman's), and two rates of the one bit that holds most of SAF's room
   (``benchmarks/short_jobs.py``): of the jobs that run less than :data:`SHORT` seconds while asking for more than
   :data:`LONG_REQUEST`, the share estimated under :data:`SHORT` (``short_found``), and of the jobs that run
   :data:`SHORT` or more, the share estimated under it (``long_called_short``).
2. **Scheduling**: mean bounded slowdown under EASY on the evaluation's test windows (20 of 1,024 jobs, window
   seed 0, as ``experiments.evaluate``) and on the whole test split scheduled as one stream, for SAF and EASY++
   (SJBF) on each predictor's estimates, ``tuned`` and ``tuned-learned`` where their fits exist, and the
   clairvoyant row (the best classic heuristic told every runtime). ``headroom`` is a row's share of the gap
   between SAF on the walltimes and the clairvoyant row.
3. **Order or reservations**: where the clairvoyant room lies. SAF's *order* is taken from one set of estimates
   (walltime, last2, median5, learned, or the exact runtimes) while EASY *reserves and backfills* on another
   (walltime, last2, learned, exact), every pair, on the same windows and the whole split. The order's estimates are
   made at each arrival from the history of the jobs' FCFS+EASY schedule, as in table 1 (a stand-in for the
   simulation's own history, which only the estimates EASY reads come from); ``headroom`` is the share of the gap
   from SAF on the walltimes to SAF on the exact runtimes, both in order and reservations.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from baselines import learned, references, tuned
from hpcgym import cli, machines, traces
from hpcgym.io import write_table
from hpcgym.sim import KEY, PriorityPolicy, heuristics, predict, simulate
from hpcgym.sim.heuristics import SAF, SJBF

RULES = ("walltime", "last2", "median5")
#: Table 3's rows (the estimates SAF orders by) and columns (the estimates EASY reserves and backfills on).
ORDERS = (*RULES, "learned", "exact")
RESERVATIONS = ("walltime", "last2", "learned", "exact")
#: A job is short when it holds its nodes less than this (seconds)...
SHORT = 600
#: ...and a short job asking for more than this (seconds) is one that the walltimes put late.
LONG_REQUEST = 3600


def accuracy_table(test: pd.DataFrame, nodes: int, model: np.ndarray) -> pd.DataFrame:
    """Table 1 of the module docstring: one row per predictor."""
    est = learned.predictions(test, nodes, model)
    hold, wall = est["hold"].to_numpy(), est["walltime"].to_numpy()
    rows = []
    for p in (*RULES, "learned"):
        _, called, found = short_job_rates(est[p].to_numpy() < SHORT, hold, wall)
        rows.append({"predictor": p, **learned.accuracy(est[p], est["hold"]),
                     "spearman": rank_correlation(est[p], est["hold"]), "short_found": found,
                     "long_called_short": called})
    return pd.DataFrame(rows)


def short_job_rates(flag: np.ndarray, hold: np.ndarray, wall: np.ndarray,
                    short: int = SHORT) -> tuple[float, float, float]:
    """(recall, false-positive rate, recall among the short jobs asking for more than :data:`LONG_REQUEST`).

    ``flag`` says which jobs are called short; a job is short when it holds its nodes less than ``short`` seconds.
    NaN where a rate has no job to count.
    """
    is_short = hold < short

    def share(mask: np.ndarray) -> float:
        return float(flag[mask].mean()) if mask.any() else np.nan

    return share(is_short), share(~is_short), share(is_short & (wall > LONG_REQUEST))


def rank_correlation(estimate: pd.Series, hold: pd.Series) -> float:
    """Spearman's correlation of the estimates with the hold times (ties take their mean rank).

    It says how well an order by the estimates sorts the jobs by runtime.
    """
    return float(estimate.rank().corr(hold.rank()))


def policies(trace: str, backfill: str = "easy") -> list[PriorityPolicy]:
    """The scheduling table's rows (but the clairvoyant one)."""
    rows = []
    for pred in (*RULES, f"{predict.LEARNED_NAME}:{trace}"):
        short = pred.split(":")[0]
        rows.append(dataclasses.replace(SAF, name=f"saf@{short}", predictor=pred))
        rows.append(dataclasses.replace(SJBF, name=f"sjbf@{short}", predictor=pred))
    for variant in ("", tuned.LEARNED_VARIANT):
        fit = tuned.find(trace, backfill, variant=variant)
        if fit is not None:
            rows.append(fit.policy(tuned.TUNED + variant))
    return rows


def _mean_bsld(tables: Sequence[pd.DataFrame], machine: machines.Machine, pol: PriorityPolicy) -> float:
    return float(np.mean([simulate(t, machine, pol, "easy")["bsld"].mean() for t in tables]))


def scheduling_table(test: pd.DataFrame, machine: machines.Machine, trace: str, windows: int = 20,
                     length: int = 1024, seed: int = 0) -> pd.DataFrame:
    """Table 2 of the module docstring: one row per scheduler, on the windows and on the whole split."""
    starts = traces.window_starts(len(test), length, windows, seed)
    tables = [traces.window(test, length, start=s) for s in starts]
    rows = []
    for pol in policies(trace):
        rows.append({"scheduler": pol.name, "predictor": pol.predictor.split(":")[0],
                     "windows": _mean_bsld(tables, machine, pol), "whole": _mean_bsld([test], machine, pol)})
    _, which = references.clairvoyant(tables, machine, "easy")
    exact = dataclasses.replace(heuristics.get(which), name="clairvoyant", predictor="exact")
    rows.append({"scheduler": f"clairvoyant ({which})", "predictor": "exact",
                 "windows": _mean_bsld(tables, machine, exact), "whole": _mean_bsld([test], machine, exact)})
    table = pd.DataFrame(rows)
    table.insert(2, "window", length)
    for col in ("windows", "whole"):
        base, clair = table.loc[0, col], table[col].iat[-1]  # SAF on the walltimes; the clairvoyant row
        table[f"headroom_{col}"] = (base - table[col]) / (base - clair) if base > clair else np.nan
    return table


def ordered_by(estimate: np.ndarray, reserve_on: str = "walltime") -> PriorityPolicy:
    """SAF whose areas come from ``estimate`` (fixed per job) while EASY reads ``reserve_on``'s estimates."""
    return PriorityPolicy("saf-order", KEY, key=lambda jobs: estimate * jobs["nodes"].to_numpy(np.float64),
                          predictor=reserve_on)


def ordering_table(test: pd.DataFrame, machine: machines.Machine, trace: str, windows: int = 20,
                   length: int = 1024, seed: int = 0) -> pd.DataFrame:
    """Table 3 of the module docstring: a row per pair of :data:`ORDERS` x :data:`RESERVATIONS`."""
    model = predict.get(f"{predict.LEARNED_NAME}:{trace}")
    starts = traces.window_starts(len(test), length, windows, seed)
    parts = {"windows": [traces.window(test, length, start=s) for s in starts], "whole": [test]}
    estimates = {k: [learned.predictions(t, machine.nodes, model.model) for t in v] for k, v in parts.items()}
    rows = []
    for order in ORDERS:
        for reserve in RESERVATIONS:
            pred = f"{predict.LEARNED_NAME}:{trace}" if reserve == "learned" else reserve
            column = "hold" if order == "exact" else order
            row = {"order": order, "reservations": reserve}
            for part, tables in parts.items():
                row[part] = float(np.mean([
                    simulate(t, machine, ordered_by(e[column].to_numpy(np.float64), pred), "easy")["bsld"].mean()
                    for t, e in zip(tables, estimates[part], strict=True)]))
            rows.append(row)
    table = pd.DataFrame(rows)
    table.insert(2, "window", length)
    first, last = table.index[0], table.index[-1]  # walltime x walltime; exact x exact
    for col in ("windows", "whole"):
        base, clair = table.loc[first, col], table.loc[last, col]
        table[f"headroom_{col}"] = (base - table[col]) / (base - clair) if base > clair else np.nan
    return table


def parser() -> argparse.ArgumentParser:
    """The command line."""
    ap = cli.ArgumentParser(prog="python -m baselines.accuracy", description=__doc__,
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--trace", default="theta", help="bundled trace name or a trace file")
    cli.add_trace_args(ap)
    ap.add_argument("--windows", type=cli.positive_int, default=20, help="test windows")
    ap.add_argument("--window", type=cli.positive_int, default=1024, help="jobs per window")
    ap.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of the window draw")
    ap.add_argument("--out", type=Path, default=None,
                    help="folder for accuracy.csv, scheduling.csv and ordering.csv")
    ap.add_argument("--quiet", action="store_true", help="no progress bar while a model is fitted")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line."""
    args = parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jobs = traces.read(args.trace, **cli.read_options(args))
    machine = machines.get(jobs.attrs["machine"])
    name = str(jobs.attrs.get("name") or Path(args.trace).name)
    test = traces.split(jobs, "test")
    if args.window > len(test):
        raise cli.UsageError(f"--window {args.window} is longer than the test split ({len(test)} jobs): lower it")
    learned.ensure(name, jobs, machine.nodes, progress=not args.quiet)
    model = predict.get(f"{predict.LEARNED_NAME}:{name}")
    acc = accuracy_table(test, machine.nodes, model.model)
    sched = scheduling_table(test, machine, name, args.windows, args.window, args.seed)
    print(f"{name}: {len(test):,} test jobs; learned model {model.source}")
    print(acc.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"\nEASY, mean bsld on {args.windows} windows of {args.window} jobs (seed {args.seed}) and on the whole "
          "test split; headroom: share of the gap from saf@walltime to the clairvoyant row")
    print(sched.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    order = ordering_table(test, machine, name, args.windows, args.window, args.seed)
    print("\nSAF ordered by one set of estimates while EASY reserves on another (mean bsld; headroom: share of the gap "
          "from walltime x walltime to exact x exact)")
    print(order.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    if args.out is not None:
        write_table(acc, args.out / "accuracy.csv")
        write_table(sched, args.out / "scheduling.csv")
        write_table(order, args.out / "ordering.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
