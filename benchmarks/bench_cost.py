"""What the bench costs: the issue's command from nothing (no cache, kernels not compiled), then again from its cache.

Usage::

    python benchmarks/bench_cost.py                     # the acceptance command, one worker
    python benchmarks/bench_cost.py --workers 2 --out results/bench_cost.csv

Each run is ``python -m experiments.bench`` in a subprocess, with a fresh cache folder and a fresh numba cache
(``XDG_CACHE_HOME`` in a scratch folder: the kernels compile, as on a fresh clone); the second run reuses both. The
fits are the shipped ones. Wall time comes from the clock, peak memory from ``getrusage(RUSAGE_CHILDREN)`` (the
largest resident set of the command or of any worker it waited for), CPU time from the same call.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

SCHEDULERS = ["fcfs+easy", "saf+easy", "sjf+easy", "tuned+easy", "saf-learned+easy", "tuned-learned+easy"]


def measured(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run ``cmd``; its wall seconds, CPU seconds and peak resident memory (MiB) of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "peak_mib": after.ru_maxrss / 1024}


def main() -> None:
    """Run the command twice and print (or write) what each run cost."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="a CSV for the two rows")
    ap.add_argument("--traces", nargs="*", default=[], help="only these logs (default: every catalogued one)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "xdg")}
        cmd = [sys.executable, "-m", "experiments.bench", "--schedulers", *SCHEDULERS, "--out", str(Path(tmp) / "b"),
               "--workers", str(args.workers), "--quiet", *(["--traces", *args.traces] if args.traces else [])]
        for run in ("first (nothing cached, kernels compiled)", "again (cache and kernels kept)"):
            rows.append({"run": run, "workers": args.workers, **measured(cmd, env)})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.1f}"))
    print(f"command: python -m experiments.bench --schedulers {' '.join(SCHEDULERS)} --out bench/ "
          f"--workers {args.workers}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    if args.out:
        table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
