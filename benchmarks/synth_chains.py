"""Would users who wait for their big jobs make ``arrivals`` samples queue like the data? Measured, load held.

Usage: ``python benchmarks/synth_chains.py --trace mustang-2012-02 [--big 0.25] [--samples 12] [--q 0 0.8 1]
[--min-compression 0.5] [--fit-seed 0] [--memorizer] [--out rows.csv]``.

On the two bundled Mustang weeks of 2012, ``arrivals`` samples queue more than the data under FCFS + EASY (issue 25's
wait-KS criterion). In the data one user runs most of the machine's work as a chain of big jobs (600-768 nodes,
hours each), each submitted after the last one ended; the samples draw the same requests at arrival-process times,
so a burst of big jobs queues behind itself and blocks the rest. This script tests the obvious repair on the samples
themselves: after the fact, a *big* job (at least ``--big`` of the machine's nodes) whose user's previous big job
still runs at its submit waits, with probability ``q``, for that job's end plus a think time drawn from the data's
(the big jobs of the train split submitted after their user's previous big job ended, the time between). Deferred
jobs push the span out, so the load falls; the load is held by compressing every gap of the sample by a factor
``c`` (bisected, at least ``--min-compression``), so that its offered load is the undeferred sample's again.

Per sample (the arrivals model fitted on the train split, seed ``--fit-seed``; samples of the test split's length,
seeds 0, 1, ...) and ``q``: the compression, the offered load, the share of jobs that start on arrival and the
whole-trace wait KS against the test split (FCFS + EASY, as the fidelity report's scheduling rows). With
``--memorizer``, the same for as many day-block bootstraps of the train split (:func:`synth.bootstrap.day_bootstrap`,
seeds 0, 1, ...: whole training days handed back, the fidelity report's memorizer), source ``bootstrap``. A few
seconds per sample and ``q`` on 2 cores. Results: ``docs/benchmarks.md``, "Users who wait for their big jobs".
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import machines, traces
from hpcgym.jobs import offered_load
from synth.bootstrap import day_bootstrap
from synth.distances import ks_statistic
from synth.fit import fit_model
from synth.replay import replay

BISECTION_STEPS = 30  # steps of the compression's bisection (to within 2^-30 of its range)


def think_times(jobs: pd.DataFrame, big: int) -> np.ndarray:
    """Seconds from a big job's end to the next big job of the same user, where that one came after it ended."""
    out = []
    table = jobs[jobs["nodes"] >= big].sort_values("submit", kind="stable")
    for _, mine in table.groupby("user", sort=False):
        ends = np.maximum.accumulate((mine["submit"] + mine["run"]).to_numpy(np.int64))
        gaps = mine["submit"].to_numpy(np.int64)[1:] - ends[:-1]
        out.extend(gaps[gaps >= 0].tolist())
    return np.asarray(out, np.float64)


def chained(jobs: pd.DataFrame, big: int, q: float, think: np.ndarray, compression: float,
            rng: np.random.Generator) -> pd.DataFrame:
    """``jobs`` with every gap times ``compression``, then big jobs deferred behind their user's running big job.

    Walking the compressed submits in order, a job of at least ``big`` nodes whose user's last big job ends after
    it (its possibly deferred submit plus its run) moves, with probability ``q``, to that end plus a think time
    drawn from ``think`` (none: 0). Other jobs keep their compressed submit. The table is sorted by submit again.
    """
    submit = jobs["submit"].to_numpy(np.float64)
    moved = submit[0] + compression * (submit - submit[0])
    coin = rng.random(len(jobs))
    pause = think[rng.integers(0, len(think), len(jobs))] if len(think) else np.zeros(len(jobs))
    is_big, user = jobs["nodes"].to_numpy() >= big, jobs["user"].to_numpy()
    run = jobs["run"].to_numpy(np.float64)
    last_end: dict[int, float] = {}
    for i in np.argsort(moved, kind="stable").tolist():
        if not is_big[i]:
            continue
        end = last_end.get(int(user[i]), -np.inf)
        if end > moved[i] and coin[i] < q:
            moved[i] = end + pause[i]
        last_end[int(user[i])] = max(end, moved[i] + run[i])
    out = jobs.copy()
    out["submit"] = np.round(moved).astype(np.int64)
    return out.sort_values("submit", kind="stable").reset_index(drop=True)


def held(jobs: pd.DataFrame, nodes: int, big: int, q: float, think: np.ndarray, min_compression: float,
         seed: int) -> tuple[pd.DataFrame, float]:
    """:func:`chained` with the largest compression in ``[min_compression, 1]`` whose load is ``jobs``' at least.

    Every try draws the same random numbers (``seed``), so the load is a function of the compression alone; where
    even ``min_compression`` leaves the load below the target, that is what is returned.
    """
    if q == 0:
        return jobs, 1.0
    target = offered_load(jobs, nodes)

    def attempt(c: float) -> pd.DataFrame:
        return chained(jobs, big, q, think, c, np.random.default_rng(seed))

    lo, hi = min_compression, 1.0
    if offered_load(attempt(hi), nodes) >= target:
        return attempt(hi), hi
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if offered_load(attempt(mid), nodes) >= target:
            lo = mid
        else:
            hi = mid
    return attempt(lo), lo


def _row(source: str, s: int, q: float, c: float, table: pd.DataFrame, before: pd.DataFrame,
         machine: machines.Machine, reference: np.ndarray) -> dict:
    """One measured row: ``table`` (from ``before``, the undeferred table) replayed against the ``reference`` waits."""
    wait = replay(table, machine)["records"]["wait"].to_numpy()
    return {"source": source, "sample": s, "q": q, "compression": c, "load": offered_load(table, machine.nodes),
            "load_undeferred": offered_load(before, machine.nodes), "no_wait": float(np.mean(wait < 1)),
            "wait_ks": ks_statistic(wait, reference)}


def measure(trace: str, big_share: float, samples: int, qs: Sequence[float], min_compression: float,
            fit_seed: int = 0, memorizer: bool = False) -> pd.DataFrame:
    """One row per source, sample and ``q``.

    Columns ``source, sample, q, compression, load, load_undeferred, no_wait, wait_ks``; ``source`` is ``arrivals``,
    or ``bootstrap`` (with ``memorizer``: a day-block bootstrap per sample seed, as a row of ``q = 0``).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = traces.read(trace)
    machine = machines.get(real.attrs["machine"])
    test = traces.split(real, "test")
    model, train = fit_model(trace, "arrivals", seed=fit_seed)
    big = max(1, int(round(machine.nodes * big_share)))
    think = think_times(train, big)
    reference = replay(test, machine)["records"]["wait"].to_numpy()
    rows = []
    for s in range(samples):
        sample = model.sample(len(test), seed=s)
        for q in qs:
            table, c = held(sample, machine.nodes, big, q, think, min_compression, 1000 + s)
            rows.append(_row("arrivals", s, q, c, table, sample, machine, reference))
        if memorizer:
            copy = day_bootstrap(train, len(test), seed=s)
            rows.append(_row("bootstrap", s, 0.0, 1.0, copy, copy, machine, reference))
    return pd.DataFrame(rows)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per source and ``q``: the wait KS of samples 0-2 (the fidelity criterion's three) and of all, means beside."""
    keys = ["source", "q"]
    first = rows[rows["sample"] < 3].groupby(keys, sort=False)["wait_ks"].mean().rename("wait_ks_0_2")
    out = rows.groupby(keys, sort=False).agg(samples=("sample", "size"), wait_ks=("wait_ks", "mean"),
                                wait_ks_min=("wait_ks", "min"), wait_ks_max=("wait_ks", "max"),
                                no_wait=("no_wait", "mean"), load=("load", "mean"),
                                load_undeferred=("load_undeferred", "mean"), compression=("compression", "mean"),
                                compression_min=("compression", "min"))
    return pd.concat([first, out], axis=1).reset_index()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(prog="python benchmarks/synth_chains.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default="mustang-2012-02", help="bundled trace name (default: mustang-2012-02)")
    ap.add_argument("--big", type=float, default=0.25, help="a big job asks for at least this share of the "
                                                            "machine's nodes (default 0.25)")
    ap.add_argument("--samples", type=int, default=12, help="samples of the test split's length (default 12)")
    ap.add_argument("--q", type=float, nargs="+", default=[0.0, 0.8, 1.0],
                    help="probabilities that a big job waits for its user's running one (default 0 0.8 1)")
    ap.add_argument("--min-compression", type=float, default=0.5,
                    help="the gaps are compressed at most to this share to hold the load (default 0.5)")
    ap.add_argument("--fit-seed", type=int, default=0, help="seed of the arrivals fit (default 0)")
    ap.add_argument("--memorizer", action="store_true",
                    help="also day-block bootstraps of the train split, as many as --samples (source bootstrap)")
    ap.add_argument("--out", type=Path, default=None, help="CSV of every sample and q (default: printed only)")
    args = ap.parse_args(argv)
    if args.samples < 1 or not 0 < args.big <= 1 or not 0 < args.min_compression <= 1:
        ap.error("--samples must be at least 1, --big and --min-compression in (0, 1]")
    if any(not 0 <= q <= 1 for q in args.q):
        ap.error(f"every --q must be in [0, 1], not {args.q}")
    rows = measure(args.trace, args.big, args.samples, args.q, args.min_compression, args.fit_seed, args.memorizer)
    if args.out is not None:
        rows.to_csv(args.out, index=False)
    print(f"{args.trace}: arrivals samples (fit {args.fit_seed}), big jobs chained per user, load held; wait KS "
          f"against the test split under FCFS + EASY")
    print(summary(rows).to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
