"""How much of the clairvoyant room one bit per job holds, and how much of it a learned classifier of that bit takes.

Usage: ``python benchmarks/short_jobs.py [--trace theta sdsc-sp2 hpc2n] [--windows 20] [--window 1024] [--out CSV]``.

Almost all of the clairvoyant room is in the queue's order (``baselines.accuracy``'s ordering table). This benchmark
asks how little of the exact runtimes that order needs, on the evaluation's test windows (window seed 0), with SAF
ordered by fixed keys (estimate x nodes) while EASY reserves on the walltimes (``baselines.accuracy.ordered_by``):

- **the bit, told** (``flags = exact``): each job is flagged when it runs less than ``cutoff`` seconds; a flagged job's
  estimate is ``min(walltime, cutoff)``, every other job's its walltime. Cutoffs: 60 s, 10 min, 1 h;
- **the bit, learned** (``flags = learned``): a gradient-boosted classifier of ``runtime < 10 min``
  (scikit-learn's ``HistGradientBoostingClassifier`` with the learned runtime model's settings,
  ``baselines.learned.BOOSTING``), fitted on the train split's rows of the runtime model
  (``baselines.learned.training_rows``: its features at each arrival), flags a job when its probability is above
  ``threshold`` (0.3, 0.5, 0.7);
- **the bit, with errors at random** (``flags = random``): the told bit with the learned one's recall and
  false-positive rate on each window, its errors drawn at random (seeded by the window).

Each row gives the flags' recall (of the jobs that run less than the cutoff), their false-positive rate, the recall
among the short jobs that ask for more than an hour (those that the walltimes put late, where the bit is worth the
most), the mean bsld, and the share of the room taken: from SAF on the walltimes to SAF on the exact runtimes, both
with walltime reservations.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from baselines import learned
from baselines.accuracy import LONG_REQUEST, SHORT, ordered_by
from baselines.accuracy import short_job_rates as rates
from hpcgym import machines, traces
from hpcgym.sim import hold_times, simulate

CUTOFFS = (60, SHORT, LONG_REQUEST)
#: The cutoff the classifier learns (seconds).
LEARNED_CUTOFF = SHORT
THRESHOLDS = (0.3, 0.5, 0.7)


def keys(flag: np.ndarray, wall: np.ndarray, cutoff: int) -> np.ndarray:
    """The estimates of flagged jobs cut to ``cutoff``; the others' walltimes."""
    return np.where(flag, np.minimum(wall, cutoff), wall).astype(np.float64)


def random_flags(hold: np.ndarray, recall: float, false_positive: float, cutoff: int, seed: int) -> np.ndarray:
    """Flags with the given rates, their errors at random."""
    u = np.random.default_rng(seed).random(len(hold))
    return np.where(hold < cutoff, u < recall, u < false_positive)


def classifier(train: pd.DataFrame, nodes: int, cutoff: int = LEARNED_CUTOFF, seed: int = 0):
    """The classifier of ``runtime < cutoff``, fitted on the runtime model's training rows of ``train``."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    x, y = learned.training_rows(train, nodes)
    keep = np.random.default_rng(seed).permutation(len(y))[:2 * learned.MAX_ROWS]
    model = HistGradientBoostingClassifier(random_state=seed, **learned.BOOSTING)
    with threadpool_limits(1, "openmp"):
        return model.fit(x[keep], np.exp(y[keep]) < cutoff)


def table(trace: str, windows: int, length: int) -> pd.DataFrame:
    """The rows of one trace."""
    jobs = traces.load(trace)
    machine = machines.get(jobs.attrs["machine"])
    train, test = traces.split(jobs, "train"), traces.split(jobs, "test")
    model = classifier(train, machine.nodes)
    scored: dict[tuple, list] = {}

    def add(row: tuple, flag: np.ndarray, w: pd.DataFrame, hold: np.ndarray, wall: np.ndarray, cutoff: int) -> None:
        bsld = float(simulate(w, machine, ordered_by(keys(flag, wall, cutoff)), "easy")["bsld"].mean())
        scored.setdefault(row, []).append((*rates(flag, hold, wall, cutoff), bsld))

    ends = []
    for i, s in enumerate(traces.window_starts(len(test), length, windows, 0)):
        w = traces.window(test, length, start=s)
        hold, wall = hold_times(w).astype(np.float64), w["walltime"].to_numpy(np.float64)
        ends.append([float(simulate(w, machine, ordered_by(k), "easy")["bsld"].mean()) for k in (wall, hold)])
        for cutoff in CUTOFFS:
            add(("exact", cutoff, np.nan), hold < cutoff, w, hold, wall, cutoff)
        x = learned.arrival_features(w, machine.nodes)
        p = model.predict_proba(x)[:, 1]
        for threshold in THRESHOLDS:
            flag = p > threshold
            add(("learned", LEARNED_CUTOFF, threshold), flag, w, hold, wall, LEARNED_CUTOFF)
            recall, false_positive, _ = rates(flag, hold, wall, LEARNED_CUTOFF)
            fake = random_flags(hold, np.nan_to_num(recall), false_positive, LEARNED_CUTOFF, seed=i)
            add(("random", LEARNED_CUTOFF, threshold), fake, w, hold, wall, LEARNED_CUTOFF)
    walltime, exact = np.mean(ends, axis=0)
    rows = []
    for (flags, cutoff, threshold), values in scored.items():
        recall, false_positive, hidden, bsld = np.nanmean(np.array(values, np.float64), axis=0)
        rows.append({"trace": trace, "flags": flags, "cutoff": cutoff, "threshold": threshold, "recall": recall,
                     "false_positive_rate": false_positive, "recall_asking_over_1h": hidden, "bsld": bsld,
                     "headroom": (walltime - bsld) / (walltime - exact) if walltime > exact else np.nan})
    return pd.DataFrame(rows)


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", nargs="+", default=["theta", "sdsc-sp2", "hpc2n"])
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--out", default=None, help="a CSV file for the rows")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    out = pd.concat([table(t, args.windows, args.window) for t in args.trace], ignore_index=True)
    print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        out.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
