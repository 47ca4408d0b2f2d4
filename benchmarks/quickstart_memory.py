"""Peak memory and wall time of the README's first command, and which stage holds the peak.

Usage: ``python benchmarks/quickstart_memory.py [--repo PATH ...] [--warm]``.

Runs ``python -m experiments.train --workload synthetic`` (the README's quick start) in a fresh temporary folder,
with the code of ``--repo`` (default: this checkout) first on the path and, unless ``--warm``, an empty compile cache
(``XDG_CACHE_HOME`` pointed at a new folder), as a fresh clone would. While it runs, the resident memory of the
command's process tree is sampled every 0.2 s beside the last line it printed (tqdm's bars name the stage).
Prints one line per stage (its peak), then the peak resident memory as ``/usr/bin/time`` reports it (the largest
``ru_maxrss`` of the command's processes), the wall time, and whether the run's ``eval/per_window.csv`` holds the
rows of ``results/theta-synthetic-ppo-s0.csv`` (the numbers must not change). Several ``--repo`` run in turn, e.g.
a before/after pair under the same load: an export of the old commit (``git archive f3bee14 | tar -x -C /tmp/old``)
and this checkout.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
COMMAND = ["-m", "experiments.train", "--workload", "synthetic"]
RESULT = "results/theta-synthetic-ppo-s0.csv"
KEYS = ["scheduler", "kind", "backfill", "window", "start", "block"]


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants (from /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) * 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, AttributeError):
            continue
    return total


def run(repo: Path, warm: bool) -> tuple[list[tuple[float, int, str]], float, int, Path]:
    """Run the command; (samples of (seconds, tree RSS, last line), wall seconds, rusage peak bytes, run folder)."""
    work = Path(tempfile.mkdtemp(prefix="quickstart-"))
    env = dict(os.environ, PYTHONPATH=str(repo), PYTHONUNBUFFERED="1")
    if not warm:
        env["XDG_CACHE_HOME"] = str(work / "cache")
    env.pop("NUMBA_CACHE_DIR", None)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *COMMAND], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    last = ["start"]

    def reader() -> None:
        buf = b""
        for chunk in iter(lambda: proc.stdout.read1(4096), b""):
            buf += chunk
            *done, buf = re.split(rb"[\r\n]", buf)
            text = [d.decode(errors="replace").strip() for d in done if d.strip()]
            if text:
                last[0] = text[-1]

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    samples = []
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        samples.append((time.perf_counter() - started, tree_rss(proc.pid), last[0]))
        time.sleep(0.2)
    thread.join()
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"the command failed (rc {proc.returncode}); last line: {last[0]}")
    # ru_maxrss of this child (and the children it waited for), in KiB: what /usr/bin/time reports
    return samples, wall, usage.ru_maxrss * 1024, next(p.parent for p in work.glob("runs/*/eval"))


def stage(line: str) -> str:
    """The stage a printed line belongs to: a tqdm bar's description, else the line's first words."""
    m = re.match(r"^([^:|]{1,40}):\s+\d+%", line)
    return m.group(1).strip() if m else " ".join(line.split()[:4])[:40]


def report(repo: Path, warm: bool) -> None:
    """Run the command with ``repo``'s code and print its figures."""
    samples, wall, peak, folder = run(repo, warm)
    by_stage: dict[str, tuple[int, float]] = {}
    for t, rss, line in samples:
        key = stage(line)
        if rss > by_stage.get(key, (0, 0.0))[0]:
            by_stage[key] = (rss, t)
    print(f"{repo}:")
    for key, (rss, t) in sorted(by_stage.items(), key=lambda kv: kv[1][1]):
        print(f"  {rss / 2**20:7.0f} MiB at {t:6.0f} s  {key}")
    top = max(samples, key=lambda s: s[1])
    new = pd.read_csv(folder / "eval" / "per_window.csv")
    old = pd.read_csv(REPO / RESULT)
    both = old.merge(new, on=KEYS, how="left", suffixes=("", "_now"))  # the file holds the EASY rows, to 6 digits
    same = bool(np.isclose(both["bsld"], both["bsld_now"], rtol=1e-6, atol=1e-6).all())
    print(f"  peak RSS {peak / 2**20:.0f} MiB (ru_maxrss; process tree sampled: {top[1] / 2**20:.0f} MiB at "
          f"{top[0]:.0f} s, during '{stage(top[2])}'), wall {wall:.0f} s, per-window rows "
          f"{'identical to' if same else 'DIFFERENT from'} {RESULT} ({'warm' if warm else 'empty'} compile cache; "
          f"load {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs)", flush=True)


def main() -> None:
    """Run the command once per ``--repo``, one after the other, and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, nargs="+", default=[REPO], help="the checkouts whose code runs, in turn "
                    "(default: this one)")
    ap.add_argument("--warm", action="store_true", help="keep the user's compile cache (default: an empty one)")
    args = ap.parse_args()
    for repo in args.repo:
        report(repo.resolve(), args.warm)


if __name__ == "__main__":
    main()
