"""Which estimates give SAF its best order, on a development split of the train split and on the test split.

Usage: ``python benchmarks/predictor_order.py --trace theta [--windows 20] [--window 1024] [--dev 0.4]``.

Almost all of the clairvoyant room is in the queue's order, not in EASY's reservations (``baselines.accuracy``'s
third table). This benchmark asks which estimates order best when the model is fitted on the past only:

- **dev**: the learned model (the trace's bundled loss, ``baselines.learned.fit_model``) fitted on the first
  ``1 - dev`` of the train split, and scored on windows of its last ``dev`` share;
- **test**: the model fitted on the whole train split, scored on the evaluation's test windows (window seed 0).

On each window SAF is ordered by fixed keys (estimate x nodes, the estimates made at each arrival from the history
of the window's FCFS+EASY schedule, as ``baselines.accuracy`` makes them) while EASY reserves on the walltimes, for
the estimates of ``walltime``, ``last2``, ``median5``, ``learned``, and ``learned`` corrected per user (the learned
estimate times the median ratio of runtime to learned estimate over the user's last five finished jobs, capped by the
walltime). Each row: the mean bsld and the paired ratio to ``median5`` with a 95% bootstrap CI over the windows.
The dev rows may choose; the test rows only measure.
"""

from __future__ import annotations

import argparse
import warnings
from collections import defaultdict, deque

import numpy as np
import pandas as pd

from baselines import learned
from baselines.accuracy import ordered_by
from hpcgym import machines, metrics, traces
from hpcgym.sim import hold_times, predict, simulate, start_times

ORDERS = ("walltime", "last2", "median5", "learned", "learned, corrected per user")


def corrected(window: pd.DataFrame, nodes: int, estimate: np.ndarray, k: int = 5) -> np.ndarray:
    """``estimate`` times the median ratio of runtime to estimate over the user's last ``k`` finished jobs."""
    hold = hold_times(window)
    end = start_times(window, nodes, "fcfs", "easy") + hold
    submit, user = window["submit"].to_numpy(), window["user"].to_numpy()
    wall = window["walltime"].to_numpy()
    order, e = np.argsort(end, kind="stable"), 0
    ratios: dict[int, deque] = defaultdict(lambda: deque(maxlen=k))
    out = estimate.astype(np.float64).copy()
    for j in range(len(window)):
        while e < len(window) and end[order[e]] <= submit[j]:
            g = order[e]
            ratios[user[g]].append(np.log(max(hold[g], 1) / estimate[g]))
            e += 1
        if user[j] >= 0 and ratios[user[j]]:
            out[j] = min(wall[j], max(1.0, np.ceil(estimate[j] * np.exp(np.median(ratios[user[j]])))))
    return out


def scores(windows: list[pd.DataFrame], machine: machines.Machine, packed: np.ndarray) -> dict[str, list[float]]:
    """Each order's mean bsld on each window."""
    out: dict[str, list[float]] = {name: [] for name in ORDERS}
    for w in windows:
        est = learned.predictions(w, machine.nodes, packed)
        keys = {name: est[name].to_numpy(np.float64) for name in ORDERS[:4]}
        keys[ORDERS[4]] = corrected(w, machine.nodes, est["learned"].to_numpy())
        for name, key in keys.items():
            out[name].append(float(simulate(w, machine, ordered_by(key), "easy")["bsld"].mean()))
    return out


def table(trace: str, windows: int, length: int, dev: float) -> pd.DataFrame:
    """The rows of one trace: dev, then test."""
    jobs = traces.load(trace)
    machine = machines.get(jobs.attrs["machine"])
    train, test = traces.split(jobs, "train"), traces.split(jobs, "test")
    loss = learned.about(predict.get(f"{predict.LEARNED_NAME}:{trace}").source)["loss"]
    cut = int(len(train) * (1 - dev))
    rows = []
    for part, fitted, scored, seed in (("dev", train.iloc[:cut], train.iloc[cut:], 1), ("test", train, test, 0)):
        x, y = learned.training_rows(fitted, machine.nodes)
        packed = learned.fit_model(x, y, loss, 0, 2 * learned.MAX_ROWS)
        starts = traces.window_starts(len(scored), length, windows, seed)
        got = scores([traces.window(scored, length, start=s) for s in starts], machine, packed)
        for name, values in got.items():
            ratio, low, high = metrics.paired_ratio_ci(values, got["median5"])
            rows.append({"trace": trace, "part": part, "order": name, "bsld": float(np.mean(values)),
                         "vs_median5": ratio, "low": low, "high": high})
    return pd.DataFrame(rows)


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", nargs="+", default=["theta", "sdsc-sp2", "hpc2n"])
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--dev", type=float, default=0.4, help="the share of the train split held out as dev")
    ap.add_argument("--out", default=None, help="a CSV file for the rows")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    out = pd.concat([table(t, args.windows, args.window, args.dev) for t in args.trace], ignore_index=True)
    print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        out.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
