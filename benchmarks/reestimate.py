"""What re-estimating waiting jobs when their user's jobs end would be worth, on a development split and the test split.

Usage: ``python benchmarks/reestimate.py [--trace theta sdsc-sp2 hpc2n mira] [--windows 20] [--window 1024] [--dev 0.4]
[--out CSV]``.

Every predictor in hpcgym fixes a job's estimate when the job arrives (``docs/simulation.md``). A job that waits
hours, though, may see its user's other jobs end in the meantime: a user whose job asking for four hours has just
ended after two minutes has probably queued more of the same. One bit per job, "it ends within 10 minutes", holds
most of SAF's room (``benchmarks/short_jobs.py``), and the history at arrival tells it badly for the jobs that ask
for hours. This benchmark measures the other source of that bit: the history that arrives while the job waits.

Each window is scheduled by SAF+EASY on the estimates of ``last2``, ``median5`` and ``learned`` (as the
evaluation's ``saf@PREDICTOR`` rows), each in three ways:

- ``none``: the estimate fixed at arrival (the engine's semantics);
- ``user``: whenever a job ends, every waiting job of its user is estimated again by the same rule, on the user's
  history at that moment, as if it arrived then (the learned model's "time since the user's last job ended" is then
  zero);
- ``walltime``: the same, only for the waiting jobs that ask for the same walltime as the job that ended.

A new estimate replaces the old one in SAF's order and in EASY's reservations; the correction on expiry and the kill
times are unchanged. The engine has no re-estimation: the windows are scheduled by the SimPy reference
(:mod:`hpcgym.sim.reference`), extended here with it. With ``none`` the reference gives the engine's schedules (the
tests hold it to the engine's on real windows).

- **dev**: ``learned``'s model (the trace's bundled loss) fitted on the first ``1 - dev`` of the train split;
  windows of its last ``dev`` share (window seed 1);
- **test**: the bundled model; the evaluation's test windows (window seed 0).

Each row: the mean bsld, its share of the room from SAF on the walltimes to SAF on the exact runtimes (none where
that room is under :data:`ROOM` of the first), and (for
``user`` and ``walltime``) the paired ratio to ``none`` with a 95% block-bootstrap CI (blocks of ``--window``
consecutive jobs, :func:`hpcgym.metrics.window_blocks`). The dev rows may choose; the test rows only measure.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from collections.abc import Callable, Generator

import numpy as np
import pandas as pd
from tqdm import tqdm

from baselines import learned
from hpcgym import machines, metrics, traces
from hpcgym.sim import hold_times, predict, reference
from hpcgym.sim import learned as features

PREDICTORS = ("last2", "median5", "learned")
#: When a job ends, whose waiting jobs are estimated again: nobody's, its user's, or its user's with its walltime.
MODES = ("none", "user", "walltime")
#: A part whose room (SAF on the walltimes less SAF on the exact runtimes) is under this share of the first has no
#: meaningful share of it (Theta's dev windows: 6.03 against 5.99).
ROOM = 0.05


class Reestimating(reference._ReferenceSim):
    """The SimPy reference, with the waiting jobs of a user estimated again when one of the user's jobs ends."""

    def __init__(self, *args, mode: str = "none", **kwargs):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        super().__init__(*args, **kwargs)
        self.mode = mode

    def _hold(self, job: reference._Job) -> Generator:
        yield from super()._hold(job)
        if self.mode == "none" or job.user < 0:
            return
        past = self.finished.get(job.user, [])
        for waiting in self.queue:
            if waiting.user == job.user and (self.mode == "user" or waiting.walltime == job.walltime):
                now = dataclasses.replace(waiting, submit=int(self.env.now))  # as if it arrived now
                waiting.estimate = reference.predict_runtime(self.predictor, now, self._hold_time(waiting), past,
                                                             self.learned, self.walltimes)


def start_times(jobs: pd.DataFrame, nodes: int, predictor: str, mode: str = "none",
                model: Callable[[list[float]], float] | None = None) -> np.ndarray:
    """SAF+EASY's start times of ``jobs`` on ``predictor``'s estimates, re-estimated as ``mode`` says.

    ``model`` maps a feature row to the log runtime (``predictor="learned"`` only), as in
    :func:`hpcgym.sim.reference.simulate_reference`.
    """
    sim = Reestimating(reference.job_rows(jobs), int(nodes), "saf", "easy", True, predictor, None,
                       model if predictor == "learned" else None, mode=mode)
    return sim.run()


def model_of(packed: np.ndarray) -> Callable[[list[float]], float]:
    """A packed learned model as the reference's ``learned`` callable."""
    return lambda row: features.raw_value(packed, tuple(float(v) for v in row))


def bsld(jobs: pd.DataFrame, start: np.ndarray) -> float:
    """The mean bounded slowdown of a schedule."""
    return float(metrics.bounded_slowdown(start - jobs["submit"].to_numpy(np.int64), hold_times(jobs)).mean())


def scores(windows: list[pd.DataFrame], nodes: int, model: Callable[[list[float]], float],
           label: str = "") -> dict[tuple[str, str], list[float]]:
    """Each (predictor, mode)'s mean bsld on each window, with ``("walltime", "none")`` and ``("exact", "none")``."""
    out: dict[tuple[str, str], list[float]] = {}
    for w in tqdm(windows, desc=label, leave=False):
        for predictor in ("walltime", "exact", *PREDICTORS):
            for mode in MODES if predictor in PREDICTORS else ("none",):
                out.setdefault((predictor, mode), []).append(bsld(w, start_times(w, nodes, predictor, mode, model)))
    return out


def table(trace: str, windows: int, length: int, dev: float) -> pd.DataFrame:
    """The rows of one trace: dev, then test."""
    jobs = traces.load(trace)
    nodes = machines.get(jobs.attrs["machine"]).nodes
    train, test = traces.split(jobs, "train"), traces.split(jobs, "test")
    bundled = predict.get(f"{predict.LEARNED_NAME}:{trace}")
    loss = learned.about(bundled.source)["loss"]
    cut = int(len(train) * (1 - dev))
    dev_packed = learned.fit_model(*learned.training_rows(train.iloc[:cut], nodes), loss, 0, 2 * learned.MAX_ROWS)
    rows = []
    for part, scored, packed, seed in (("dev", train.iloc[cut:], dev_packed, 1), ("test", test, bundled.model, 0)):
        starts = traces.window_starts(len(scored), length, windows, seed)
        got = scores([traces.window(scored, length, start=s) for s in starts], nodes, model_of(packed),
                     f"{trace} {part}")
        blocks = metrics.window_blocks(starts, length)
        walltime, exact = np.mean(got["walltime", "none"]), np.mean(got["exact", "none"])
        room = walltime - exact if walltime - exact >= ROOM * walltime else 0.0
        for (predictor, mode), values in got.items():
            ratio = low = high = np.nan
            if mode != "none":
                ratio, low, high = metrics.paired_ratio_ci(values, got[predictor, "none"], blocks)
            mean = float(np.mean(values))
            rows.append({"trace": trace, "part": part, "predictor": predictor, "reestimate": mode, "bsld": mean,
                         "headroom": (walltime - mean) / room if room > 0 else np.nan,
                         "vs_none": ratio, "low": low, "high": high})
    return pd.DataFrame(rows)


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", nargs="+", default=["theta", "sdsc-sp2", "hpc2n", "mira"])
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
