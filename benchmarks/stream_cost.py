"""What the whole-split stream of an evaluation costs on each bundled trace, before and after playing it lean.

Usage: ``python benchmarks/stream_cost.py [--traces theta sdsc-sp2 ...] [--networks 3] [--jobs N]
[--evaluate RUN --repo OLD NEW]``.

Part one, in this process, per trace: the test split as one episode (``experiments.evaluate``'s stream) for
``--networks`` untrained networks of the default recipe (the job scorer with its queue ranks, EASY with the SAF scan
order; a run's agent, untrained and cloned networks play alike), two ways on the same decisions:

- *one by one*: each network alone, asked through SB3's ``predict`` at every decision (how ``f3bee14`` played it);
- *together*: :func:`agents.rollout.play_together`, one vector environment with a copy per network, each network
  asked through its policy's ``_predict`` (:func:`agents.rollout.chooser`), as ``run_stream`` plays it now.

It prints the jobs, the decisions per network, the seconds of each way and their ratio, the milliseconds per
decision, the share of the lean way's time spent in the networks (the rest: the environment), and the seconds of the
reference rows' stream (every heuristic, computed once). ``--jobs`` cuts each split to its first N jobs.

Part two (``--evaluate RUN``): the wall time of ``python -m experiments.evaluate --model RUN --trace TRACE
--windows 2 --window 128`` (the issue's command; ``--trace`` from the run's settings) with the code of each
``--repo``, in turn, and the same with ``--no-whole-split``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

TRACES = ("theta", "theta-2022", "mira", "sdsc-sp2", "hpc2n", "lublin-256", "mustang")


class Predicting:
    """A model asked through its own ``predict`` at every decision (the one-by-one way)."""

    def __init__(self, model):
        self.model = model

    def predict(self, obs, action_masks=None, deterministic=True):
        """SB3's predict, as before."""
        return self.model.predict(obs, action_masks=action_masks, deterministic=deterministic)


def untrained(seed: int):
    """The default recipe's job scorer, untrained (its queue ranks: walltime, nodes, area)."""
    from sb3_contrib import MaskablePPO

    import hpcgym
    from agents.policies import ScorerPolicy
    from experiments.recipe import rank_columns

    return MaskablePPO(ScorerPolicy, hpcgym.make("lublin-256-v0", backfill="easy"), seed=seed, device="cpu",
                       policy_kwargs={"ranks": rank_columns("walltime,nodes,area")})


def one_trace(name: str, networks: int, jobs: int | None) -> dict[str, float]:
    """Part one on one trace."""
    from agents import rollout
    from experiments import evaluation
    from hpcgym import machines, traces
    from hpcgym.sim import heuristics

    real = evaluation._read(name, None)
    test = traces.split(real, "test")
    length = min(jobs or len(test), len(test))
    machine = machines.get(real.attrs["machine"])
    env = {"machine": machine, "workload": real, "backfill": "easy", "window": length, "split": "test",
           "order": heuristics.resolve("saf", name, "easy")}
    models = [untrained(seed) for seed in range(networks)]
    t = time.perf_counter()
    apart = [rollout.play_windows(Predicting(m), [0], **env)[0] for m in models]
    one_by_one = time.perf_counter() - t
    asked = {"seconds": 0.0}

    chooser = rollout.chooser

    def timed(model):
        choose = chooser(model)

        def call(obs, masks):
            t0 = time.perf_counter()
            out = choose(obs, masks)
            asked["seconds"] += time.perf_counter() - t0
            return out
        return call

    rollout.chooser = timed
    try:
        t = time.perf_counter()
        together = rollout.play_together(models, 0, **env)
        lean = time.perf_counter() - t
    finally:
        rollout.chooser = chooser
    same = all(np.array_equal(a["records"]["start"], b["records"]["start"])
               for a, b in zip(apart, together, strict=True))
    t = time.perf_counter()
    evaluation.run_heuristics(test.iloc[:length], machine, [0], length)
    refs = time.perf_counter() - t
    decisions = [int(i["decisions"]) for i in together]
    return {"jobs": length, "decisions": float(np.mean(decisions)), "one_by_one": one_by_one, "together": lean,
            "network_share": asked["seconds"] / lean, "references": refs, "same": same}


def part_one(args: argparse.Namespace) -> None:
    """Print part one's table."""
    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print(f"{args.networks} untrained network(s) per stream; load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    print(f"{'trace':12} {'jobs':>7} {'decisions':>9} {'one by one':>11} {'together':>9} {'ratio':>6} "
          f"{'ms/dec before':>13} {'ms/dec now':>10} {'in network':>10} {'references':>10}  same schedules")
    for name in args.traces:
        r = one_trace(name, args.networks, args.jobs)
        per = r["decisions"] * args.networks / 1000
        print(f"{name:12} {r['jobs']:7,} {r['decisions']:9,.0f} {r['one_by_one']:10.1f}s {r['together']:8.1f}s "
              f"{r['one_by_one'] / r['together']:6.2f} {r['one_by_one'] / per:13.2f} {r['together'] / per:10.2f} "
              f"{r['network_share']:10.0%} {r['references']:9.1f}s  {r['same']}", flush=True)


def part_two(args: argparse.Namespace) -> None:
    """Time the issue's command with each ``--repo``'s code."""
    trace = json.loads((Path(args.evaluate) / "args.json").read_text())["trace"]
    for repo in args.repo:
        for extra in ([], ["--no-whole-split"]):
            out = Path(tempfile.mkdtemp(prefix="stream-cost-"))
            cmd = [sys.executable, "-m", "experiments.evaluate", "--model", str(args.evaluate), "--trace", trace,
                   "--windows", "2", "--window", "128", "--out", str(out), *extra]
            t = time.perf_counter()
            done = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=str(Path(repo).resolve())), cwd=out,
                                  capture_output=True, text=True)
            wall = time.perf_counter() - t
            said = [line for line in done.stdout.splitlines() if line.startswith("whole split:")]
            print(f"{repo}: {' '.join(cmd[2:])}: {wall:.0f} s (rc {done.returncode}; load "
                  f"{os.getloadavg()[0]:.1f}){' -- ' + said[0] if said else ''}", flush=True)


def main() -> None:
    """Run the parts asked for."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", nargs="*", default=list(TRACES))
    ap.add_argument("--networks", type=int, default=3, help="networks per stream (a run has 3: agent, untrained, "
                                                            "cloned)")
    ap.add_argument("--jobs", type=int, default=None, help="only the first N jobs of each test split")
    ap.add_argument("--evaluate", default=None, help="a run folder: time the issue's evaluate command on it")
    ap.add_argument("--repo", nargs="*", default=[str(Path(__file__).resolve().parents[1])],
                    help="checkouts whose code runs part two, in turn")
    args = ap.parse_args()
    if args.traces:
        part_one(args)
    if args.evaluate:
        part_two(args)


if __name__ == "__main__":
    main()
