"""The noise floor of a comparison: how far near-copies of ``tuned`` score from ``tuned`` on the test windows.

Example::

    python -m experiments.noise_floor --trace sdsc-sp2 --backfill easy --out runs/noise-sdsc-sp2
    python -m experiments.noise_floor --trace sdsc-sp2 --runs runs/sdsc-sp2-real-ppo-s*   # agents' seeds beside it

An agent that scores better than the strongest reference on the test windows has found something only if a
change *of that size* is rare among schedulers no better informed than the reference. Near-copies make that bar:
``tuned`` with each of its four weights multiplied by ``exp(sd * N(0, 1))`` (``--draws`` of them, ``--seed``), run
with the same backfilling, predictor and scan order on the windows every evaluation uses (20 windows of 1,024 jobs
of the test split, window seed 0: :func:`experiments.evaluation.evaluate_on_test`). On SDSC-SP2 with EASY, most
near-copies beat ``tuned`` itself (``docs/results.md``): there a win over ``tuned`` smaller than their spread says
nothing about learning.

Writes ``draws.csv`` (one row per near-copy: its weights and mean bsld), ``summary.md`` (``tuned``, the draws'
median, quartiles and range, the share of draws better than ``tuned``; with ``--runs``, each run's agent and cloned
network and where they fall among the draws, and the runs' median of each, which the agents issue's goal compares)
and ``noise_floor.png`` (the draws' histogram with ``tuned`` and the runs marked).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments import figures
from hpcgym import cli
from hpcgym import io as hpcgym_io
from hpcgym.sim import PriorityPolicy

#: the evaluation's test windows (experiments.train's defaults): count, jobs each, the window draw's seed
WINDOWS, LENGTH, WINDOW_SEED = 20, 1024, 0


def job_noise(job_ids: np.ndarray, seed: int) -> np.ndarray:
    """One standard normal draw per job, a function of the job's id and ``seed`` only.

    The same job gets the same draw in every window and stream that holds it (a hash of the id, splitmix64, turned
    into a uniform and then a normal by the inverse CDF), so a jittered copy is one scheduler, not one per window.
    """
    from scipy.special import ndtri

    with np.errstate(over="ignore"):
        z = np.asarray(job_ids, np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ndtri(((z >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53)


@dataclass(frozen=True)
class JitteredKey:
    """A weighted priority's static key plus ``sd * N(0, 1)`` per job (:func:`job_noise`)."""

    base: Any  #: the policy's own key (a :class:`baselines.tuned.LinearKey`)
    sd: float
    seed: int

    def __call__(self, jobs: pd.DataFrame) -> np.ndarray:
        """One score per job."""
        return self.base(jobs) + self.sd * job_noise(jobs["job_id"].to_numpy(), self.seed)


def jittered(policy: PriorityPolicy, sd: float, seed: int, name: str) -> PriorityPolicy:
    """``policy`` with each job's runtime estimate, in its priority only, multiplied by ``exp(sd * N(0, 1))``.

    For SAF that is its key ``r * n`` jittered by ``sd`` (5% at 0.05); for SJF, ``r``; for a ``tuned`` fit, whose
    score divided by its weight on ``log r`` is ``log r + ...``, the same. The draw is the job's own
    (:func:`job_noise`), so ``seed`` names one scheduler. The policy must be a weighted sum
    (:func:`baselines.tuned.weights_of`: SJF, SAF and the ``tuned`` fits, on any predictor).

    Raises:
        ValueError: ``policy`` is not such a weighted sum (FCFS, WFP3, ...).
    """
    from baselines import tuned

    base = tuned.policy(tuned.weights_of(policy), policy.predictor, name)
    return dataclasses.replace(base, key=JitteredKey(base.key, sd, seed),
                               description=f"{base.description}; estimates jittered x exp({sd:g} N(0,1)), seed {seed}")


def near_copies(weights: Sequence[float], sd: float, draws: int, seed: int) -> np.ndarray:
    """``draws`` rows of ``weights``, each weight multiplied by its own ``exp(sd * N(0, 1))``."""
    rng = np.random.default_rng(seed)
    return np.asarray(weights, np.float64) * np.exp(sd * rng.standard_normal((draws, len(weights))))


def evaluation_windows(trace: str, read: dict, windows: int = WINDOWS, length: int = LENGTH) -> tuple[list, object]:
    """The evaluation's test windows of ``trace`` and its machine."""
    from experiments.evaluation import evaluation_split
    from hpcgym import traces

    _, machine, test, starts = evaluation_split(trace, read, windows, length, WINDOW_SEED)
    return [traces.window(test, length, start=s) for s in starts], machine


def scores(windows: list, machine: object, policies: list, backfill: str) -> np.ndarray:
    """Each policy's mean over the windows of the window's mean bsld (the evaluation tables' number)."""
    from baselines.grid import simulate_grid

    cells = simulate_grid(windows, machine, policies, [backfill])
    return np.array([np.mean([rec["bsld"].mean() for rec in cell.records]) for cell in cells])


def run_scores(run_dirs: Sequence[Path]) -> pd.DataFrame:
    """The agent's and the cloned network's mean bsld of each evaluated run folder (``run, kind, bsld``)."""
    from experiments.results import Windows
    from experiments.runs import RunFolder

    rows = []
    for path in run_dirs:
        results = Windows.read(RunFolder(path).check("evaluation").per_window)
        for kind in ("agent", "cloned"):
            rows += [{"run": Path(path).name, "kind": kind, "bsld": g["bsld"].mean()}
                     for _, g in results.of_kind(kind).groupby("scheduler")]
    return pd.DataFrame(rows, columns=["run", "kind", "bsld"])


def summarize(reference: float, draws: np.ndarray, runs: pd.DataFrame) -> pd.DataFrame:
    """One row for ``tuned``, one for the near-copies, one per run's network, and the runs' median per network.

    Each with its bsld and the share of near-copies that score better than it (``draws_better``).
    """
    q25, q50, q75 = np.percentile(draws, (25, 50, 75))
    rows = [{"row": "tuned", "bsld": reference, "draws_better": float(np.mean(draws < reference))},
            {"row": f"near-copies (median of {len(draws)})", "bsld": q50, "iqr_low": q25, "iqr_high": q75,
             "best": draws.min(), "worst": draws.max()}]
    rows += [{"row": f"{r.run} ({r.kind})", "bsld": r.bsld, "draws_better": float(np.mean(draws < r.bsld))}
             for r in runs.itertuples()]
    for kind, g in runs.groupby("kind", sort=False):  # the agents issue's goal compares the seeds' median
        if len(g) > 1:
            median = float(g["bsld"].median())
            rows.append({"row": f"median of {len(g)} runs ({kind})", "bsld": median,
                         "draws_better": float(np.mean(draws < median))})
    return pd.DataFrame(rows)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    ap = cli.ArgumentParser(prog="python -m experiments.noise_floor", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default="sdsc-sp2", help="bundled trace name or a trace file with a tuned fit "
                    "(default: sdsc-sp2)")
    cli.add_trace_args(ap)
    ap.add_argument("--backfill", choices=("none", "easy"), default="easy", help="backfilling (default: easy)")
    ap.add_argument("--sd", type=float, default=0.05, help="sd of each weight's log-normal factor (default: 0.05)")
    ap.add_argument("--draws", type=cli.positive_int, default=20, help="near-copies (default: 20)")
    ap.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of the draws (default: 0)")
    ap.add_argument("--runs", type=Path, nargs="*", default=[], help="evaluated run folders (experiments.train) "
                    "whose agent and cloned network to place among the draws")
    ap.add_argument("--out", type=Path, default=None, help="folder for draws.csv, summary.md and noise_floor.png")
    args = ap.parse_args(argv)
    if not args.sd >= 0:
        ap.error(f"--sd must be >= 0, not {args.sd}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI (wrapped by :func:`hpcgym.cli.run`: bad input exits 2 with one ``error:`` line)."""
    from baselines import priorities, tuned

    args = parse_args(argv)
    try:
        base = priorities.resolve("tuned", args.trace, args.backfill)
    except ValueError as exc:
        raise cli.UsageError(cli.message(exc)) from None
    runs = run_scores(args.runs)
    windows, machine = evaluation_windows(args.trace, cli.read_options(args))
    weights = near_copies(tuned.weights_of(base), args.sd, args.draws, args.seed)
    copies = [tuned.policy(w, base.predictor, name=f"near-copy {i}") for i, w in enumerate(weights)]
    reference, *draws = scores(windows, machine, [base, *copies], args.backfill)
    draws = np.asarray(draws)
    table = summarize(reference, draws, runs)
    title = (f"{Path(args.trace).name}, {args.backfill}: {args.draws} near-copies of tuned (sd {args.sd:g}, seed "
             f"{args.seed}) on {len(windows)} test windows of {LENGTH} jobs")
    text = title + "\n" + table.to_string(index=False, na_rep="", float_format=lambda v: f"{v:,.3f}")
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(weights, columns=["a", "b", "c", "d"]).assign(bsld=draws).to_csv(args.out / "draws.csv",
                                                                                      index=False)
        hpcgym_io.write_text(args.out / "summary.md", "```\n" + text + "\n```\n")
        figures.noise_floor(reference, draws, runs, title, args.out / "noise_floor.png")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
