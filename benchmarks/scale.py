"""Traces at scale: reading speed, and the whole ``baselines.run`` process next to a plain-Python EASY script.

Usage::

    python benchmarks/scale.py                      # bundled SWF traces, CEA-Curie, and CEA-Curie x 8 (2.5 M jobs)
    python benchmarks/scale.py --copies 8 80        # ... and CEA-Curie x 80 (25 M jobs; about 2.3 GB of text)

The large traces repeat CEA-Curie (``shared/traces`` beside the checkout) with submit times shifted past the
previous copy's last one and job ids renumbered, written unzipped into a temporary folder (``--tmp``; never the
repository). For each trace it reports, each measured in a fresh process:

- **read**: ``traces.read(path, compact=True)``, twice: the first read's seconds (numba loads its cache then), the
  second's in data lines per second, and the process's peak memory;
- **info**: ``python -m hpcgym.traces info PATH``, which streams an SWF file in chunks: wall and CPU time, peak
  memory;
- **hpcgym**: ``python -m baselines.run --trace PATH --policy fcfs --backfill easy --quiet``: wall and CPU time
  and peak memory (``/usr/bin/time``), and the peak per job;
- **plain**: ``benchmarks/plain_easy.py``, which parses the SWF file itself and schedules FCFS + EASY with ``heapq``
  (skipped above ``--plain-max`` jobs: at 25 M jobs it needs hours and tens of GB);
- the speed-up of hpcgym over the plain script, and whether both found the same mean wait (they must);
- with ``--baseline DIR``, the same reader and ``baselines.run`` from another checkout (the code before a change).

Reading speed is given per wall second and per CPU second of the reading process: on a shared machine the CPU
time is the one that measures the code.

It also times the start-up of a CLI: the imports of ``baselines.run``, numba's registries, and the first simulation
of a tiny trace, which is numba loading its cache of compiled code; and the floor: the CPU time of processes that
only import python, numpy, pandas and numba.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hpcgym import machines, traces

ROOT = Path(__file__).resolve().parents[1]
#: Where CEA-Curie may be: the shared folder beside the checkout, or above the worktrees.
CURIES = [p / "shared" / "traces" / "CEA-Curie-2011-2.1-cln.swf.gz" for p in (ROOT.parent, ROOT.parents[1], ROOT)]
#: Bundled SWF traces and the machine their file's header describes (what baselines.run uses for a file).
BUNDLED = ("lublin-256", "theta-2022", "sdsc-sp2", "hpc2n")
#: Read twice: the first read includes numba loading its cache (once per process), the second is the reader alone.
_READ = ("import sys, time, warnings; warnings.simplefilter('ignore'); from hpcgym import traces; "
         "kw = {'compact': True} if sys.argv[2] == 'compact' else {}; "
         "t0 = time.perf_counter(); traces.read(sys.argv[1], **kw); t1 = time.perf_counter(); "
         "c1 = time.process_time(); df = traces.read(sys.argv[1], **kw); "
         "print(t1 - t0, time.perf_counter() - t1, time.process_time() - c1, len(df))")
#: The start-up of a CLI: its imports, numba's registries (cli.load_jit, what numba's first compiled call of a
#: process would load), the engine's first call on a tiny trace (loading its cache), the reader's first read.
_STARTUP = ("import time; t0 = time.perf_counter(); import baselines.run; t1 = time.perf_counter(); "
            "from hpcgym import cli, traces; cli.load_jit(); t2 = time.perf_counter(); "
            "from hpcgym.sim import start_times; import pandas as pd; "
            "jobs = pd.DataFrame({'submit': [0, 1], 'run': [5, 5], 'walltime': [9, 9], 'nodes': [1, 2], "
            "'user': [1, 1]}); "
            "t3 = time.perf_counter(); start_times(jobs, 2, 'fcfs', 'easy'); t4 = time.perf_counter(); "
            "traces.read_swf(traces.path_of('lublin-256')); t5 = time.perf_counter(); "
            "print(t1 - t0, t2 - t1, t4 - t3, t5 - t4)")
#: What any process that imports the stack pays before its first line of work (the floor of a CLI's start-up).
_FLOOR = {"python": "pass", "numpy": "import numpy", "numpy + pandas": "import numpy, pandas",
          "numpy + pandas + numba": "import numpy, pandas, numba"}


def timed(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[float, float, str, float]:
    """Run ``cmd`` under ``/usr/bin/time`` (from ``cwd``): (wall seconds, peak resident MB, stdout, CPU seconds)."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", *cmd], capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    wall, kb, user, system = out.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kb) / 1024, out.stdout, float(user) + float(system)


def repeat_trace(source: Path, copies: int, out: Path) -> int:
    """Write ``copies`` copies of an SWF file, each shifted past the last; return the data lines written."""
    header, rows = [], []
    with gzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb") as fh:
        for line in fh:
            if line.lstrip().startswith(b";"):
                header.append(line)
            elif line.strip():
                job, submit, rest = line.split(None, 2)
                rows.append((int(job), int(submit), rest))
    span = max(r[1] for r in rows) + 1
    ids = max(r[0] for r in rows) + 1
    with open(out, "wb") as fh:
        fh.writelines(header)
        for k in range(copies):
            fh.write(b"".join(b"%d %d %s" % (job + k * ids, submit + k * span, rest) for job, submit, rest in rows))
    return copies * len(rows)


def data_lines(path: Path) -> int:
    """The data lines of an SWF file (the lines a reader parses)."""
    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip() and not line.lstrip().startswith(b";"))


def machine_of(path: Path) -> tuple[int, int]:
    """Nodes and cores per node of the machine baselines.run builds from the file's header."""
    mach = machines.from_swf_header(traces.read_header(path))
    return mach.nodes, mach.cores_per_node


def measure(name: str, path: Path, lines: int, plain_max: int, baseline: Path | None) -> dict[str, object]:
    """One row of the table (and the baseline checkout's reader and baselines.run, when given)."""
    _, read_mb, text, _ = timed([sys.executable, "-c", _READ, str(path), "compact"])
    first, secs, read_cpu, jobs = (float(v) for v in text.split())
    wall, mb, text, cpu = timed([sys.executable, "-m", "baselines.run", "--trace", str(path), "--policy", "fcfs",
                                 "--backfill", "easy", "--quiet"])
    ours = float(re.search(r"easy\s+[\d,.]+\s+[\d,.]+\s+([\d,.]+)", text).group(1).replace(",", ""))
    iwall, imb, _, icpu = timed([sys.executable, "-m", "hpcgym.traces", "info", str(path)])
    row = {"trace": name, "lines": lines, "jobs": int(jobs), "first read s": first, "read s": secs,
           "lines/s": lines / secs, "lines/CPU s": lines / read_cpu,
           "read MB": read_mb, "info s": iwall, "info CPU s": icpu, "info MB": imb,
           "hpcgym s": wall, "hpcgym CPU s": cpu, "hpcgym MB": mb, "B/job": mb * 2**20 / jobs}
    if jobs <= plain_max:
        nodes, cores = machine_of(path)
        pwall, pmb, ptext, pcpu = timed([sys.executable, str(ROOT / "benchmarks" / "plain_easy.py"), str(path),
                                         "--nodes", str(nodes), "--cores", str(cores)])
        theirs = float(re.search(r"wait_mean ([\d.]+)", ptext).group(1))
        row |= {"plain s": pwall, "plain CPU s": pcpu, "plain MB": pmb, "speed-up": pwall / wall,
                "CPU speed-up": pcpu / cpu, "same": abs(ours - theirs) < 0.01}
    if baseline is not None:
        env = {"PYTHONPATH": str(baseline)}
        bsecs = float(timed([sys.executable, "-c", _READ, str(path), "full"], env, baseline)[2].split()[1])
        bwall, bmb, _, bcpu = timed([sys.executable, "-m", "baselines.run", "--trace", str(path), "--policy", "fcfs",
                                     "--backfill", "easy", "--quiet"], env, baseline)
        row |= {"before: lines/s": lines / bsecs, "before: hpcgym s": bwall, "before: CPU s": bcpu, "before: MB": bmb}
    return row


def print_table(rows: list[dict[str, object]]) -> None:
    """The rows as a Markdown table."""
    cols = ["trace", "jobs", "first read s", "read s", "lines/s", "lines/CPU s", "read MB", "info s", "info CPU s",
            "info MB", "hpcgym s", "hpcgym CPU s",
            "hpcgym MB", "B/job", "plain s", "plain CPU s", "plain MB", "speed-up", "CPU speed-up", "same",
            "before: lines/s", "before: hpcgym s", "before: CPU s", "before: MB"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "-")
            cells.append(f"{v:,.0f}" if isinstance(v, float) and ("lines" in c or "MB" in c or c == "B/job")
                         else f"{v:.2f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) and
                         not isinstance(v, bool) else str(v))
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    """Build the traces, measure, print."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, nargs="*", default=[8], help="CEA-Curie repeats to build (default: 8)")
    ap.add_argument("--plain-max", type=int, default=3_000_000, help="run the plain script up to this many jobs")
    ap.add_argument("--tmp", default=None, help="folder for the built traces (default: a temporary one)")
    ap.add_argument("--no-bundled", action="store_true", help="skip the bundled traces")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout (e.g. main before this change): "
                    "its reader (full tables) and baselines.run are timed on the same traces, in the same run")
    args = ap.parse_args()
    imports, registries, engine, reader = (float(v) for v in timed([sys.executable, "-c", _STARTUP])[2].split())
    print(f"start-up: imports of baselines.run {imports:.2f} s; numba's registries (cli.load_jit) {registries:.2f} s; "
          f"the engine's first call (its cache) {engine:.2f} s; the SWF reader's first read of lublin-256 "
          f"{reader:.2f} s")
    floor = {k: min(timed([sys.executable, "-c", code])[3] for _ in range(3)) for k, code in _FLOOR.items()}
    print("the floor, CPU s of a process that only imports (best of 3): "
          + ", ".join(f"{k} {v:.2f}" for k, v in floor.items()))
    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        todo = [] if args.no_bundled else [(n, traces.path_of(n)) for n in BUNDLED]
        curie = next((p for p in CURIES if p.exists()), None)
        if curie is not None:
            plain = Path(tmp) / "curie.swf"
            plain.write_bytes(gzip.decompress(curie.read_bytes()))
            todo.append(("cea-curie", plain))
            for k in args.copies:
                path = Path(tmp) / f"curie-x{k}.swf"
                repeat_trace(curie, k, path)
                todo.append((f"cea-curie x{k}", path))
        for name, path in todo:
            rows.append(measure(name, Path(path), data_lines(Path(path)), args.plain_max, args.baseline))
            print(f"measured {name}", file=sys.stderr, flush=True)
    print_table(rows)


if __name__ == "__main__":
    main()
