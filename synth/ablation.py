"""What in a real trace makes it schedule as it does: the trace replayed with one of its structures shuffled away.

Command line::

    python -m synth.ablation --trace theta-2022 [--shuffles 2] [--seed 0] [--out rows.csv]

A generator reproduces a trace's schedule only if it keeps the structure the schedule depends on. This measures
which structure that is, on the data itself: the train split (what a generator is fitted on) is replayed under
FCFS + EASY (:func:`synth.replay.replay`) as it is, and with one structure destroyed and everything else kept; each
replay's waits are compared with the test split's (the whole-trace wait KS of the fidelity report's scheduling
rows), beside the share of jobs that start on arrival and the mean wait. The rows (:data:`ABLATIONS`):

- ``none``: the train split itself (the floor the fidelity report's bar is built on);
- ``runtimes | request``: each job's runtime swapped among the jobs of the same request (nodes, walltime);
- ``jobs | week x context``, ``jobs | day x context``, ``jobs | context``: whole jobs (every column but the submit
  time) permuted among the jobs of the same calendar week (day) and arrival context, or of the same context alone.
  The context is :mod:`synth.arrivals`' (the bin of the gap before the job x the quarter of the day x weekday or
  weekend), so ``jobs | context`` keeps what a generator drawing each job from its context keeps;
- ``jobs | all``: whole jobs permuted over the whole split, the arrival times kept;
- ``blocks of N``: runs of ``N`` consecutive jobs put in a random order, each job keeping the gap before it.

Each shuffled row is drawn ``--shuffles`` times (seeds ``--seed``, ``--seed + 1``, ...). Measured on Theta 2022:
``docs/benchmarks.md``, "Why Theta 2022's samples queue more".
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import cli
from synth.arrivals import arrival_context
from synth.distances import ks_statistic
from synth.features import to_training
from synth.replay import replay

DAY, WEEK = 86_400, 7 * 86_400


def permute_within(keys: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A permutation of the rows that moves each row only among the rows of its own key (``new[i] = old[p[i]]``)."""
    perm = np.arange(len(keys))
    order = np.argsort(keys, kind="stable")
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    for group in np.split(order, bounds):
        perm[group] = rng.permutation(group)
    return perm


def context(jobs: pd.DataFrame) -> np.ndarray:
    """Each job's arrival context in :mod:`synth.arrivals`: the gap before it (its bin) x its period of the day."""
    table = to_training(jobs)
    return arrival_context(table["hour"].to_numpy(), table["dow"].to_numpy(),
                           np.log1p(table["interarrival"].to_numpy(np.float64)))


def moved_jobs(jobs: pd.DataFrame, perm: np.ndarray, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """``jobs`` with ``columns`` (default: all but ``submit``) of row ``perm[i]`` put in row ``i``."""
    out = jobs.copy()
    for c in columns if columns is not None else [c for c in jobs.columns if c != "submit"]:
        out[c] = jobs[c].to_numpy()[perm]
    return out


def reordered_blocks(jobs: pd.DataFrame, size: int, rng: np.random.Generator) -> pd.DataFrame:
    """Runs of ``size`` consecutive jobs in a random order; each job keeps the gap before it, the first submit stays.

    The data's first job has no gap before it: it gets the median gap (so that, placed inside the sequence, it
    does not arrive with the job before it).
    """
    submit = jobs["submit"].to_numpy(np.int64)
    gaps = np.diff(submit, prepend=submit[0])
    gaps[0] = int(np.median(gaps[1:])) if len(gaps) > 1 else 0
    blocks = np.array_split(np.arange(len(jobs)), np.arange(size, len(jobs), size))
    perm = np.concatenate([blocks[i] for i in rng.permutation(len(blocks))])
    out = jobs.iloc[perm].reset_index(drop=True)
    out["submit"] = submit[0] + np.cumsum(gaps[perm]) - gaps[perm][0]
    out.attrs = jobs.attrs
    return out


def _calendar_key(jobs: pd.DataFrame, span: int) -> np.ndarray:
    submit = jobs["submit"].to_numpy(np.int64)
    return (submit - submit[0]) // span


def _within(key: Callable[[pd.DataFrame], np.ndarray]) -> Callable[[pd.DataFrame, np.random.Generator], pd.DataFrame]:
    return lambda jobs, rng: moved_jobs(jobs, permute_within(key(jobs), rng))


def _request(jobs: pd.DataFrame) -> np.ndarray:
    return np.unique(jobs[["nodes", "walltime"]].to_numpy(np.int64), axis=0, return_inverse=True)[1].ravel()


#: name -> how a table is shuffled (``None``: the table as it is)
ABLATIONS: dict[str, Callable[[pd.DataFrame, np.random.Generator], pd.DataFrame] | None] = {
    "none": None,
    "runtimes | request": lambda jobs, rng: moved_jobs(jobs, permute_within(_request(jobs), rng), ["run"]),
    "jobs | week x context": _within(lambda j: _calendar_key(j, WEEK) * 1000 + context(j)),
    "jobs | day x context": _within(lambda j: _calendar_key(j, DAY) * 1000 + context(j)),
    "jobs | context": _within(context),
    "jobs | all": _within(lambda j: np.zeros(len(j), np.int64)),
    "blocks of 10": lambda jobs, rng: reordered_blocks(jobs, 10, rng),
    "blocks of 100": lambda jobs, rng: reordered_blocks(jobs, 100, rng),
    "blocks of 1000": lambda jobs, rng: reordered_blocks(jobs, 1000, rng),
}


def ablate(train: pd.DataFrame, test: pd.DataFrame, machine: object, shuffles: int = 2, seed: int = 0,
           names: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per ablation and draw: ``ablation, draw, wait_ks, no_wait, mean_wait`` (waits of FCFS + EASY)."""
    reference = replay(test, machine)["records"]["wait"].to_numpy()
    rows = []
    for name in names or list(ABLATIONS):
        shuffle = ABLATIONS[name]
        for draw in range(1 if shuffle is None else shuffles):
            table = train if shuffle is None else shuffle(train, np.random.default_rng(seed + draw))
            wait = replay(table, machine)["records"]["wait"].to_numpy()
            rows.append({"ablation": name, "draw": draw, "wait_ks": ks_statistic(wait, reference),
                         "no_wait": float(np.mean(wait < 1)), "mean_wait": float(wait.mean())})
    return pd.DataFrame(rows)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per ablation (in the order measured): the draws' mean and range of each measure."""
    out = rows.groupby("ablation", sort=False).agg(draws=("draw", "size"), wait_ks=("wait_ks", "mean"),
                                                   wait_ks_min=("wait_ks", "min"), wait_ks_max=("wait_ks", "max"),
                                                   no_wait=("no_wait", "mean"), mean_wait=("mean_wait", "mean"))
    return out.reset_index()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    from hpcgym import machines, traces

    ap = cli.ArgumentParser(prog="python -m synth.ablation", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default="theta-2022", help="bundled trace name or trace file (its train split is "
                                                          "shuffled, its test split the reference; default "
                                                          "theta-2022)")
    cli.add_trace_args(ap)
    ap.add_argument("--shuffles", type=int, default=2, help="draws of each shuffled row (default 2)")
    ap.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of the first draw (default 0)")
    ap.add_argument("--only", nargs="+", choices=list(ABLATIONS), metavar="NAME",
                    help=f"these rows only (default: all of {', '.join(ABLATIONS)})")
    ap.add_argument("--out", type=Path, default=None, help="CSV of every draw (default: none, printed only)")
    args = ap.parse_args(argv)
    if args.shuffles < 1:
        raise cli.UsageError(f"--shuffles must be at least 1, not {args.shuffles}")
    real = traces.read(args.trace, **cli.read_options(args))
    rows = ablate(traces.split(real, "train"), traces.split(real, "test"), machines.get(real.attrs["machine"]),
                  args.shuffles, args.seed, args.only)
    if args.out is not None:
        from hpcgym.io import write_table

        write_table(rows, args.out)
    print(f"{args.trace}: train split replayed under FCFS + EASY with one structure shuffled; wait KS against the "
          f"test split")
    print(summary(rows).to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
