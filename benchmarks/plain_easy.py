"""A plain-Python FCFS + EASY scheduler that parses an SWF file itself: the reference the scale benchmark times.

Usage: ``python benchmarks/plain_easy.py TRACE.swf[.gz] --nodes 5544 --cores 16``. It is what a researcher writes
in an afternoon (the standard library only: ``heapq``, ``bisect``), with hpcgym's semantics (docs/simulation.md):
nodes = ceil(requested processors, else allocated, / cores); a job holds its nodes for min(run, walltime); at one
timestamp, ends are released, then arrivals queued, then one pass starts the FCFS head while it fits; a blocked
head reserves the shadow time, and later jobs start when they fit now and end by the shadow time or use only the
extra nodes. It prints the job count, the mean wait and the mean bounded slowdown, which must equal
``python -m baselines.run --trace TRACE --policy fcfs --backfill easy``'s.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import heapq
import math


def read_jobs(path: str, cores: int, nodes: int) -> list[tuple[int, int, int, int, int]]:
    """The valid jobs as (submit, job id, hold, walltime, nodes), sorted by submit then id."""
    opener = gzip.open if path.endswith(".gz") else open
    jobs = []
    with opener(path, "rt") as fh:
        for line in fh:
            f = line.split()
            if not f or f[0].startswith(";"):
                continue
            run = math.ceil(float(f[3]))
            procs = int(f[7]) if int(f[7]) > 0 else int(f[4])
            need = -(-procs // cores)
            wall = int(f[8]) if int(f[8]) > 0 else run
            if run > 0 and 0 < need <= nodes and int(f[1]) >= 0:
                jobs.append((int(f[1]), int(f[0]), min(run, wall), wall, need))
    jobs.sort()
    return jobs


def easy(jobs: list[tuple[int, int, int, int, int]], total: int) -> list[int]:
    """Start times of FCFS + EASY on ``total`` nodes."""
    start = [-1] * len(jobs)
    ends: list[tuple[int, int]] = []  # heap of (actual end, job)
    est: list[tuple[int, int]] = []  # sorted (estimated end, job) of the running jobs
    queue: list[int] = []
    free, nxt, n = total, 0, len(jobs)
    while nxt < n or ends:
        t = min(jobs[nxt][0] if nxt < n else math.inf, ends[0][0] if ends else math.inf)
        while ends and ends[0][0] == t:
            _, j = heapq.heappop(ends)
            free += jobs[j][4]
            est.remove((start[j] + jobs[j][3], j))
        while nxt < n and jobs[nxt][0] == t:
            queue.append(nxt)
            nxt += 1
        free = schedule(t, queue, jobs, start, ends, est, free)
    return start


def schedule(t, queue, jobs, start, ends, est, free) -> int:
    """One pass at ``t``: start heads while they fit, then backfill around the blocked head; return free nodes."""

    def run(j: int) -> None:
        start[j] = t
        heapq.heappush(ends, (t + jobs[j][2], j))
        bisect.insort(est, (t + jobs[j][3], j))

    while queue and jobs[queue[0]][4] <= free:
        free -= jobs[queue[0]][4]
        run(queue.pop(0))
    if not queue:
        return free
    head = jobs[queue[0]][4]
    avail, shadow, k = free, t, 0
    while avail < head:
        avail += jobs[est[k][1]][4]
        shadow = max(est[k][0], t)
        k += 1
    while k < len(est) and est[k][0] <= shadow:
        avail += jobs[est[k][1]][4]
        k += 1
    extra = avail - head
    for j in list(queue[1:]):
        if free == 0:
            break
        need = jobs[j][4]
        if need > free:
            continue
        if t + jobs[j][3] > shadow:
            if need > extra:
                continue
            extra -= need
        free -= need
        queue.remove(j)
        run(j)
    return free


def main() -> None:
    """Parse, schedule and print the summary."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("trace")
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--cores", type=int, default=1)
    args = ap.parse_args()
    jobs = read_jobs(args.trace, args.cores, args.nodes)
    start = easy(jobs, args.nodes)
    waits = [s - j[0] for s, j in zip(start, jobs, strict=True)]
    bsld = [max((w + j[2]) / max(j[2], 10), 1.0) for w, j in zip(waits, jobs, strict=True)]
    print(f"jobs {len(jobs)} wait_mean {sum(waits) / len(jobs):.2f} bsld_mean {sum(bsld) / len(jobs):.4f}")


if __name__ == "__main__":
    main()
