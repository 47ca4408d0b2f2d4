"""Command line: ``python -m hpcgym.traces info|convert <file-or-name>``, ``python -m hpcgym.traces list|formats``.

Examples::

    python -m hpcgym.traces info sdsc-sp2
    python -m hpcgym.traces info my.sacct --format slurm
    python -m hpcgym.traces convert my.sacct --format slurm --out my.swf    # users and groups anonymised
    python -m hpcgym.traces info jobs.csv --machine 120x2 --columns interarrival=interval,run=run_time,nodes=node_num
    python -m hpcgym.traces info CEA-Curie-2011-2.1-cln.swf.gz --machine 5544x16
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hpcgym import cli, machines, traces
from hpcgym.errors import EmptyTraceError
from hpcgym.jobs import offered_load
from hpcgym.traces import formats
from hpcgym.traces.convert import convert


def summary(df: pd.DataFrame) -> dict[str, object]:
    """The figures ``info`` prints, as a dict.

    Raises:
        EmptyTraceError: the table has no jobs (all dropped, or none in the file).
    """
    if len(df) == 0:
        raise EmptyTraceError(df.attrs.get("source", df.attrs.get("name", "?")), df.attrs.get("invalid"),
                              need="to summarize")
    mach = machines.get(df.attrs["machine"])
    span = int(df["submit"].iat[-1] - df["submit"].iat[0]) if len(df) else 0
    start = df.attrs.get("unix_start_time", 0)
    return {
        "trace": df.attrs.get("name", "?"),
        "machine": f"{mach.name} ({mach.nodes:,} nodes x {mach.cores_per_node} cores)",
        "jobs": len(df),
        "span": f"{span / 86400:.1f} days" + (f" from {pd.Timestamp(start, unit='s')} UTC" if start else ""),
        "offered load": round(offered_load(df, mach.nodes), 3),
        "users": int(df["user"].nunique()),
        "nodes (median / max)": f"{int(np.median(df['nodes']))} / {int(df['nodes'].max())}",
        "runtime median (s)": int(np.median(df["run"])),
        "walltime known": f"{df['walltime_known'].mean():.1%}",
        "invalid jobs dropped": df.attrs.get("invalid") or "none",
        "values rounded": df.attrs.get("repaired") or "none",
    } | _duplicates(df) | _machine_note(df, mach)


def _duplicates(df: pd.DataFrame) -> dict[str, object]:
    """A "duplicate job ids" line when some jobs share an id (the reader kept them)."""
    count = df.attrs.get("duplicate_ids") or 0
    return {"duplicate job ids": f"{count} jobs repeat an earlier job's id (kept)"} if count else {}


def _machine_note(df: pd.DataFrame, mach: machines.Machine) -> dict[str, object]:
    """A "machine note" line when the reader sized the machine from the jobs, or mixed SWF node sizes were mapped.

    The first is a Slurm or PBS log read without ``--machine``; the second, an SWF header's machine whose
    ``MaxProcs`` is not a multiple of ``MaxNodes``.
    """
    if df.attrs.get("machine_note"):
        return {"machine note": df.attrs["machine_note"]}
    note = machines.mixed_node_note(df.attrs.get("header"))
    return {"machine note": note} if note and mach.source == "SWF header" else {}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI (wrapped by :func:`hpcgym.cli.run`: bad input exits 2 with one ``error:`` line)."""
    parser = cli.ArgumentParser(prog="python -m hpcgym.traces", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="summarize a trace file or a bundled trace name")
    info.add_argument("trace", help="a path (SWF, ALCF CSV, Mustang CSV, any CSV with --columns, sacct output, a PBS "
                      "log or a directory of them) or a bundled name such as 'theta'")
    cli.add_trace_args(info)
    conv = sub.add_parser("convert", help="write a trace (Slurm, PBS, CSV, SWF) as SWF, users and groups anonymised")
    conv.add_argument("trace", help="a path (a sacct file, a PBS log or a directory of them, a CSV, an SWF file) or a "
                      "bundled name")
    conv.add_argument("--out", required=True, help="the SWF file to write (.swf, or .swf.gz to gzip it)")
    conv.add_argument("--keep-ids", action="store_true", help="keep user and group ids as read (default: renumber "
                      "them 1, 2, ... in order of first appearance, so that the file can be shared)")
    cli.add_trace_args(conv)
    sub.add_parser("list", help="list the bundled traces")
    sub.add_parser("formats", help="list the trace formats --format takes (with those of installed packages)")
    args = parser.parse_args(argv)
    if args.command in ("info", "convert"):
        cli.load_jit()  # both read (the SWF reader is compiled)
    if args.command == "convert":
        return _convert(args)
    if args.command == "formats":
        added = formats.added()
        for name in formats.names():
            fmt = added.get(name)
            print(f"{name:10} {'built in' if fmt is None else fmt.description or 'added by an installed package'}")
        return 0
    if args.command == "list":
        for name, t in traces.BUNDLED.items():
            print(f"{name:16} {t.machine:11} {t.description}  [{t.citation}]")
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the drops are reported in the summary below
        df = traces.read(args.trace, compact=True, **cli.read_options(args))
    for key, value in summary(df).items():
        print(f"{key:22} {value}")
    return 0


def _convert(args: argparse.Namespace) -> int:
    """``convert``: write the SWF file, then one line for what was written and one per warning of the reader."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = convert(args.trace, args.out, anonymize_ids=not args.keep_ids, **cli.read_options(args))
    for w in caught:
        sys.stderr.write(f"warning: {' '.join(str(w.message).split())}\n")
    mach = df.attrs["machine"]
    print(f"wrote {len(df):,} jobs to {args.out} (machine {mach.nodes:,} nodes x {mach.cores_per_node} cores; "
          f"user and group ids {'kept' if args.keep_ids else 'anonymised'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
