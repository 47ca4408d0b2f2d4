"""The learned runtime predictor's variants, judged on the train split only, and what refitting per window does.

Usage: ``python benchmarks/learned_cv.py --trace theta [--trees 20] [--leaves 31] [--rate 0.3] [--refit]``.

1. **Cross-validation** (``baselines.learned.fit`` with the boosting given): the loss chosen and the mean bsld of
   SAF+EASY on each candidate's out-of-fold predictions, next to SAF+EASY on ``walltime``, ``last2`` and
   ``median5`` over the *same* validation windows (four per block of the five-block cut of the train split).
2. **Cost**: a whole-trace FCFS+EASY run on this fit's predictions against the same run on the walltimes (CPU
   time, best of three after a warm-up).
3. With ``--refit``, on the evaluation's 20 test windows of 1,024 jobs: SAF and ``tuned-learned`` on the trace's
   bundled model against the same on a model refitted before each window on every job whose log end came by then
   (the trace's chosen loss). This reads the test split: it measures, it chooses nothing.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from baselines import learned, tuned
from hpcgym import machines, metrics, traces
from hpcgym.sim import hold_times, predict, simulate, start_times


def _bsld(window, nodes: int, predictor) -> float:
    start = start_times(window, nodes, "saf", "easy", predictor=predictor)
    return float(metrics.bounded_slowdown(start - window["submit"].to_numpy(), hold_times(window)).mean())


def cv_windows(train, folds: int = 5, windows: int = 20, seed: int = 0) -> list:
    """The validation windows ``baselines.learned.fit`` scores on."""
    edges = np.linspace(0, len(train), folds + 1).astype(int)
    out = []
    for b in range(folds):
        block = train.iloc[edges[b]:edges[b + 1]]
        length = min(learned.WINDOW, len(block))
        out += [traces.window(block, length, start=s)
                for s in traces.window_starts(len(block), length, max(1, windows // folds), seed + b)]
    return out


def cpu_seconds(jobs, nodes: int, predictor) -> float:
    """Best of three CPU times of a whole-trace FCFS+EASY run, after a warm-up."""
    start_times(jobs, nodes, "fcfs", "easy", predictor=predictor)
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        start_times(jobs, nodes, "fcfs", "easy", predictor=predictor)
        best = min(best, time.process_time() - t)
    return best


def refit_rows(jobs, nodes: int, name: str, machine) -> dict[str, float]:
    """Part 3 of the module docstring."""
    test = traces.split(jobs, "test")
    first = len(jobs) - len(test)
    loss = learned.about(predict.model_path(name))["loss"]
    ends = (jobs["submit"] + jobs["wait"].clip(lower=0) + hold_times(jobs)).to_numpy()
    fit = tuned.find(name, "easy", variant=tuned.LEARNED_VARIANT)
    rows: dict[str, list[float]] = {"saf bundled": [], "saf refitted": [], "tuned-learned bundled": [],
                                    "tuned-learned refitted": []}
    for s in traces.window_starts(len(test), 1024, 20, 0):
        window = traces.window(test, 1024, start=s)
        t0 = jobs["submit"].iat[first + s]
        past = jobs.iloc[:first + s]
        x, y = learned.training_rows(past[ends[:first + s] <= t0], nodes)
        refitted = predict.Predictor(predict.LEARNED_NAME, predict.LEARNED, predict.learned.K,
                                     model=learned.fit_model(x, y, loss, 0, 2 * learned.MAX_ROWS))
        bundled = predict.get(f"learned:{name}")
        for label, pred in (("bundled", bundled), ("refitted", refitted)):
            rows[f"saf {label}"].append(simulate(window, machine, "saf", "easy", predictor=pred)["bsld"].mean())
            if fit is not None:
                rows[f"tuned-learned {label}"].append(
                    simulate(window, machine, fit.policy(), "easy", predictor=pred)["bsld"].mean())
    return {k: float(np.mean(v)) for k, v in rows.items() if v}


def main() -> None:
    """Run the benchmark and print its lines."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trace", default="theta")
    ap.add_argument("--trees", type=int, default=learned.BOOSTING["max_iter"])
    ap.add_argument("--leaves", type=int, default=learned.BOOSTING["max_leaf_nodes"])
    ap.add_argument("--rate", type=float, default=learned.BOOSTING["learning_rate"])
    ap.add_argument("--refit", action="store_true", help="also part 3 (reads the test split)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    jobs = traces.load(args.trace)
    machine = machines.get(jobs.attrs["machine"])
    train = traces.split(jobs, "train")
    learned.BOOSTING.update(max_iter=args.trees, max_leaf_nodes=args.leaves, learning_rate=args.rate)
    packed, info = learned.fit(train, machine.nodes, progress=False)
    wins = cv_windows(train)
    rules = {p: float(np.mean([_bsld(w, machine.nodes, p) for w in wins])) for p in ("walltime", "last2", "median5")}
    print(f"{args.trace}: {args.trees} trees x {args.leaves} leaves, rate {args.rate}: loss {info.loss}, fit "
          f"{info.seconds:.1f} s; SAF+EASY on the {len(wins)} cross-validation windows: "
          + ", ".join(f"learned ({k}) {v:.2f}" for k, v in info.validation.items())
          + "; " + ", ".join(f"{k} {v:.2f}" for k, v in rules.items()))
    pred = predict.Predictor(predict.LEARNED_NAME, predict.LEARNED, predict.learned.K, model=packed)
    ratio = cpu_seconds(jobs, machine.nodes, pred) / cpu_seconds(jobs, machine.nodes, "walltime")
    print(f"  whole-trace FCFS+EASY on these predictions: {ratio:.2f}x the walltimes' CPU time")
    if args.refit:
        print("  test windows: " + ", ".join(f"{k} {v:.2f}"
                                             for k, v in refit_rows(jobs, machine.nodes, args.trace, machine).items()))


if __name__ == "__main__":
    main()
