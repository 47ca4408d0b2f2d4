"""Time reading every shipped trace (and CEA-Curie from ../shared/traces when present), and Slurm and PBS logs.

Usage: ``python benchmarks/read_speed.py [--repeat 3] [--extra PATH ...] [--accounting 100000]``. Prints the best
wall time of ``--repeat`` runs per trace; the acceptance targets are CEA-Curie (312,826 jobs) in under 3 s and a
100,000-job sacct log in under 5 s. The accounting logs are the first ``--accounting`` jobs of the bundled HPC2N
trace, written as ``sacct --parsable2`` output and as a PBS accounting file (:mod:`hpcgym.testing`) into a temporary
folder, so nothing big is committed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

from hpcgym import testing, traces

CURIE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "CEA-Curie-2011-2.1-cln.swf.gz"


def best_time(fn, repeat: int) -> tuple[float, int]:
    """Best wall time of ``repeat`` calls, and the job count of the last."""
    best, n = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = len(fn())
        best = min(best, time.perf_counter() - t0)
    return best, n


def accounting_rows(jobs: int, repeat: int) -> list[tuple[str, int, float]]:
    """Write the first ``jobs`` jobs of HPC2N as a sacct log and a PBS log, and time reading each back."""
    src = traces.load("hpc2n").iloc[:jobs].reset_index(drop=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, writer in (("slurm", testing.write_sacct), ("pbs", testing.write_pbs)):
            path = Path(tmp) / f"hpc2n.{fmt}"
            writer(src, path)
            secs, n = best_time(lambda: traces.read(path, format=fmt, machine="hpc2n"), repeat)  # noqa: B023
            rows.append((f"hpc2n as {fmt} ({path.stat().st_size / 2**20:.0f} MB)", n, secs))
    return rows


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--extra", nargs="*", default=[str(CURIE)], help="more SWF files (default: CEA-Curie)")
    ap.add_argument("--accounting", type=int, default=100_000, help="jobs in the Slurm and PBS logs (0: none)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for name, info in traces.BUNDLED.items():
        reader = {"swf": traces.read_swf, "alcf": traces.read_alcf, "mustang": traces.read_mustang}[info.format]
        secs, n = best_time(lambda: reader(traces.path_of(name), machine=info.machine), args.repeat)  # noqa: B023
        rows.append((name, n, secs))
    for path in args.extra:
        if not Path(path).exists():
            print(f"(skipped {path}: not found)")
            continue
        secs, n = best_time(lambda: traces.read(path, machine="cea-curie"), args.repeat)  # noqa: B023
        rows.append((Path(path).name, n, secs))
    if args.accounting:
        rows += accounting_rows(args.accounting, args.repeat)
    print(f"{'trace':34} {'jobs':>8} {'seconds':>8} {'jobs/s':>10}")
    for name, n, secs in rows:
        print(f"{name:34} {n:8d} {secs:8.3f} {n / secs:10,.0f}")


if __name__ == "__main__":
    main()
