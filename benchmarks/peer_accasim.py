"""Peer benchmark: AccaSim 1.1.3 and hpcgym's simulator side by side, in one run, on the same job window.

Usage: ``python benchmarks/peer_accasim.py [--jobs 1000] [--start 0] [--repeat 5]``, run with the interpreter of an
environment that holds both packages; keep AccaSim in an environment of its own, not the main one::

    python3 -m venv /work/venv-peers
    /work/venv-peers/bin/pip install -e /work/main accasim==1.1.3
    /work/venv-peers/bin/python benchmarks/peer_accasim.py --jobs 1000

What it measures. ``--jobs`` consecutive jobs of ``lublin-256`` from ``--start`` (submit times rebased to 0) with
perfect estimates (walltime = run time), on 256 nodes of one core. The window is written as SWF for AccaSim and
scheduled by

- AccaSim ``FirstInFirstOut`` + ``FirstFit`` against hpcgym ``FCFS`` with ``backfill="none"``, and
- AccaSim ``EASYBackfilling`` + ``FirstFit`` against hpcgym ``FCFS`` with ``backfill="easy"``.

The figure is CPU time of the simulation alone: for AccaSim the ``Simulator.start_simulation()`` call (which also
parses the SWF lines as it goes and writes its schedule file, in a forked child process whose CPU time is added),
for hpcgym the median of ``--repeat`` ``simulate()`` calls after a warm-up call that compiles the numba kernel.
Reported: jobs/s of each and the ratio hpcgym/AccaSim.

Schedules are compared job by job. FIFO and FCFS/none should give the same start times. AccaSim's EASYBackfilling
hands its allocator an empty list of reserved nodes, so any job that fits now starts, reservation or not (greedy
list scheduling); its agreement with hpcgym's EASY is printed for information and is not expected to be full, and
it is also checked against a plain greedy list scheduler written here (:func:`greedy_starts`).

Adaptations needed to run AccaSim 1.1.3 (none changes its scheduling):

- it does ``from collections import Mapping``, gone in Python 3.10; the ``collections.abc`` names are aliased first;
- its event manager takes a current time of 0 for "not started", so submit times are shifted by ``OFFSET`` (the
  system config's ``start_time``) and shifted back when read;
- its default schedule file writes local date-times; a custom ``SCHEDULE_OUTPUT`` writes integer seconds instead.
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import contextlib
import heapq
import io
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from baselines.priorities import FCFS
from hpcgym import traces
from hpcgym.sim import simulate

TRACE = "lublin-256"
NODES = 256
OFFSET = 1_000_000  # added to every submit time on the AccaSim side (its clock treats 0 as unset)
INSTALL = ("accasim is not importable here; install it in a separate environment: python3 -m venv /work/venv-peers "
           "&& /work/venv-peers/bin/pip install -e /work/main accasim==1.1.3, then run this script with "
           "/work/venv-peers/bin/python")
SCHEDULE_FORMAT = {  # one line per finished job: id;start;end in simulated seconds
    "format": "{job_id};{start_time};{end_time}",
    "attributes": {"job_id": ("id", "str"), "start_time": ("start_time", "int"), "end_time": ("end_time", "int")},
}
ABC_NAMES = ("Mapping", "MutableMapping", "Sequence", "MutableSequence", "Iterable", "Callable", "Set", "MutableSet")


def load_accasim() -> SimpleNamespace | None:
    """AccaSim's simulator, schedulers and allocator, or ``None`` when it is not installed."""
    for name in ABC_NAMES:  # AccaSim 1.1.3 imports these from ``collections`` (removed in Python 3.10)
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
    try:
        from accasim.base.allocator_class import FirstFit
        from accasim.base.scheduler_class import EASYBackfilling, FirstInFirstOut
        from accasim.base.simulator_class import Simulator
    except ImportError:
        return None
    return SimpleNamespace(Simulator=Simulator, FirstFit=FirstFit, FIFO=FirstInFirstOut, EASY=EASYBackfilling)


def job_window(n_jobs: int, start: int) -> pd.DataFrame:
    """``n_jobs`` consecutive jobs of the trace with perfect estimates, submit times rebased to 0."""
    window = traces.window(traces.load(TRACE), n_jobs, start=start)
    window["walltime"] = window["run"]
    window["walltime_known"] = True  # so that the SWF file carries the estimate as the requested time
    return window


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (AccaSim writes its output from a child)."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system


def run_accasim(acc: SimpleNamespace, mode: str, swf: Path, system: Path, out: Path) -> tuple[float, pd.Series]:
    """Run AccaSim on ``swf``; return the CPU seconds of the run and the start time of every job, by job id."""
    scheduler = acc.FIFO(acc.FirstFit()) if mode == "fifo" else acc.EASY(acc.FirstFit())
    out.mkdir(parents=True, exist_ok=True)
    sim = acc.Simulator(str(swf), str(system), scheduler, RESULTS_FOLDER_PATH=str(out), LOG_LEVEL="WARNING",
                        SCHEDULE_OUTPUT=SCHEDULE_FORMAT, statistics_output=False, show_statistics=False)
    with contextlib.redirect_stdout(io.StringIO()):
        t0 = cpu_seconds()
        files = sim.start_simulation()
        secs = cpu_seconds() - t0
    sched = pd.read_csv(files["sched-"], sep=";", header=None, names=["job_id", "start", "end"])
    return secs, pd.Series(sched["start"].to_numpy() - OFFSET, index=sched["job_id"].to_numpy())


def run_hpcgym(window: pd.DataFrame, backfill: str, repeat: int) -> tuple[float, pd.Series]:
    """Median CPU seconds of ``repeat`` warm ``simulate`` calls and the start time of every job, by job id."""
    simulate(window.head(50), TRACE, FCFS, backfill=backfill)  # compile (or load) the kernel outside the timing
    times, rec = [], None
    for _ in range(repeat):
        t0 = time.process_time()
        rec = simulate(window, TRACE, FCFS, backfill=backfill)
        times.append(time.process_time() - t0)
    return statistics.median(times), pd.Series(rec["start"].to_numpy(), index=rec["job_id"].to_numpy())


def greedy_starts(window: pd.DataFrame) -> pd.Series:
    """Start times under greedy list scheduling: at every event, start each queued job that fits, in FCFS order.

    A plain reference for what AccaSim's EASYBackfilling does with perfect estimates (no job is held back for the
    head's reservation).
    """
    submit, run, nodes = (window[c].to_numpy() for c in ("submit", "run", "nodes"))
    start, ends, queue, free, i = [-1] * len(submit), [], [], NODES, 0
    while i < len(submit) or queue:
        t = min(submit[i] if i < len(submit) else float("inf"), ends[0][0] if ends else float("inf"))
        while ends and ends[0][0] == t:
            free += heapq.heappop(ends)[1]
        while i < len(submit) and submit[i] == t:
            queue.append(i)
            i += 1
        waiting = []
        for j in queue:
            if nodes[j] <= free:
                free -= nodes[j]
                start[j] = t
                heapq.heappush(ends, (t + run[j], nodes[j]))
            else:
                waiting.append(j)
        queue = waiting
    return pd.Series(start, index=window["job_id"].to_numpy())


def agreement(window: pd.DataFrame, ours: pd.Series, peer: pd.Series) -> tuple[int, pd.DataFrame]:
    """How many jobs start at the same time in both schedules, and the jobs that do not."""
    both = pd.DataFrame({"submit": window["submit"].to_numpy(), "run": window["run"].to_numpy(),
                         "nodes": window["nodes"].to_numpy()}, index=window["job_id"].to_numpy())
    both.index.name = "job_id"
    both["hpcgym"] = ours.reindex(both.index)
    both["accasim"] = peer.reindex(both.index)  # NaN for a job AccaSim dropped or rejected
    same = both["hpcgym"].to_numpy() == both["accasim"].to_numpy()
    return int(same.sum()), both[~same]


def print_table(rows: list[tuple[str, str, str, int, float]]) -> None:
    """Print simulator, mode, jobs, CPU seconds, jobs/s and, on hpcgym rows, the speed ratio to AccaSim."""
    peer = {key: jobs / secs for sim, key, _, jobs, secs in rows if sim == "AccaSim" and secs > 0}
    print(f"{'simulator':<10} {'mode':<26} {'jobs':>6} {'CPU s':>9} {'jobs/s':>11} {'hpcgym/AccaSim':>15}")
    for sim, key, mode, jobs, secs in rows:
        rate = jobs / secs if secs > 0 else float("inf")
        ratio = f"{rate / peer[key]:,.0f}x" if sim == "hpcgym" and key in peer else ""
        print(f"{sim:<10} {mode:<26} {jobs:>6} {secs:>9.4f} {rate:>11,.0f} {ratio:>15}")


def report_agreement(label: str, n: int, same: int, diff: pd.DataFrame) -> None:
    """Print the agreement count and the first jobs that differ."""
    print(f"{label}: {same}/{n} jobs start at the same time")
    if len(diff):
        later = int((diff["accasim"] > diff["hpcgym"]).sum())
        print(f"  {len(diff)} differ ({later} later in AccaSim); first ones:")
        print(diff.head(5).to_string())


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1000, help="window size (default 1000)")
    ap.add_argument("--start", type=int, default=0, help="index of the first job in the trace (default 0)")
    ap.add_argument("--repeat", type=int, default=5, help="hpcgym runs to take the median of (default 5)")
    ap.add_argument("--no-easy", action="store_true", help="skip the backfilling pair")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    acc = load_accasim()
    if acc is None:
        print(INSTALL)
        sys.exit(0)
    window = job_window(args.jobs, args.start)
    modes = [("fifo", "none")] + ([] if args.no_easy else [("easy", "easy")])
    rows, checks = [], []
    with tempfile.TemporaryDirectory(prefix="peer_accasim_") as tmp:
        swf, system = Path(tmp) / f"{TRACE}-w{args.start}-{args.jobs}.swf", Path(tmp) / "system.json"
        traces.write_swf(window, swf, machine=TRACE)
        system.write_text(json.dumps({"groups": {"node": {"core": 1}}, "resources": {"node": NODES},
                                      "start_time": OFFSET}))
        for acc_mode, backfill in modes:
            name = "FirstInFirstOut+FirstFit" if acc_mode == "fifo" else "EASYBackfilling+FirstFit"
            try:
                acc_secs, acc_start = run_accasim(acc, acc_mode, swf, system, Path(tmp) / acc_mode)
            except Exception as exc:  # a failing peer mode is reported, not fatal
                print(f"AccaSim {name} failed: {exc!r}")
                continue
            our_secs, our_start = run_hpcgym(window, backfill, args.repeat)
            rows += [("AccaSim", acc_mode, name, len(acc_start), acc_secs),
                     ("hpcgym", acc_mode, f"FCFS backfill={backfill}", len(our_start), our_secs)]
            checks.append((f"AccaSim {name} vs hpcgym FCFS/{backfill}", *agreement(window, our_start, acc_start)))
            if acc_mode == "easy":
                checks.append((f"AccaSim {name} vs greedy list scheduling (reference in this script)",
                               *agreement(window, greedy_starts(window), acc_start)))
    print(f"{TRACE}, jobs {args.start}..{args.start + args.jobs - 1}, perfect estimates, {NODES} nodes; "
          f"CPU time (hpcgym: median of {args.repeat} warm runs)")
    print_table(rows)
    print()
    for label, same, diff in checks:
        report_agreement(label, args.jobs, same, diff)
    if len(checks) > 1:
        print("(AccaSim's EASYBackfilling does not keep backfilled jobs off the head's reserved nodes: it is greedy "
              "list scheduling, so it is not expected to agree with hpcgym's EASY.)")


if __name__ == "__main__":
    main()
