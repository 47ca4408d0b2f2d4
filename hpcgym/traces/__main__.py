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
from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import cli, machines, traces
from hpcgym.errors import EmptyTraceError
from hpcgym.jobs import offered_load
from hpcgym.traces import formats
from hpcgym.traces._io import spooled
from hpcgym.traces.chunks import merge_counts
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
    return _lines(df.attrs, mach, len(df), span, offered_load(df, mach.nodes), int(df["user"].nunique()),
                  (int(np.median(df["nodes"])), int(df["nodes"].max())), int(np.median(df["run"])),
                  float(df["walltime_known"].mean()))


def _lines(attrs: dict, mach: machines.Machine, n: int, span: int, load: float, users: int,
           nodes: tuple[int, int], run: int, known: float) -> dict[str, object]:
    """The figures as ``info`` prints them."""
    start = attrs.get("unix_start_time", 0)
    return {
        "trace": attrs.get("name", "?"),
        **({"catalogued as": f"{attrs['catalog']}: the bundled trace's file, read with its catalog entry"}
           if attrs.get("catalog") and attrs.get("source") != str(traces.path_of(attrs["catalog"])) else {}),
        "machine": f"{mach.name} ({mach.nodes:,} nodes x {mach.cores_per_node} cores)",
        "jobs": n,
        "span": f"{span / 86400:.1f} days" + (f" from {pd.Timestamp(start, unit='s')} UTC" if start else ""),
        "offered load": round(load, 3) if np.isfinite(load) else
        "n/a (one job)" if n < 2 else "n/a (every job submitted at the same second)",
        "users": users,
        "nodes (median / max)": f"{nodes[0]} / {nodes[1]}",
        "runtime median (s)": run,
        "walltime known": f"{known:.1%}",
        "invalid jobs dropped": _dropped(attrs),
        "values rounded": attrs.get("repaired") or "none",
    } | _duplicates(attrs) | _machine_note(attrs, mach)


class Tally:
    """The figures of ``info`` gathered from a trace's chunks (:func:`hpcgym.traces.read_chunks`), in bounded memory.

    Distinct values are counted (users, node counts, runtimes), so the medians and counts are the whole table's.
    """

    def __init__(self) -> None:
        self.n = self.known = 0
        self.low, self.high, self.work = np.inf, -np.inf, 0.0
        self.users = self.nodes = self.run = (np.empty(0, np.int64), np.empty(0, np.int64))
        self.attrs: dict = {}

    def add(self, df: pd.DataFrame) -> None:
        """Count one chunk in."""
        first, last = self.attrs, df.attrs
        starts = [s for s in (first.get("unix_start_time", 0), last["unix_start_time"]) if s]
        invalid = merge_counts(first.get("invalid", {}), last["invalid"])
        duplicates = first.get("duplicate_ids", 0) + last["duplicate_ids"]
        self.attrs = {**last, "unix_start_time": min(starts, default=0), "invalid": invalid,
                      "duplicate_ids": duplicates}
        if not len(df):
            return
        submit = df["submit"].to_numpy(np.int64)
        self.n += len(df)
        self.low, self.high = min(self.low, submit.min()), max(self.high, submit.max())
        self.work += float(np.dot(df["nodes"].to_numpy(np.float64), df["run"].to_numpy(np.float64)))
        self.users = _count(self.users, df["user"])
        self.nodes, self.run = _count(self.nodes, df["nodes"]), _count(self.run, df["run"])
        self.known += int(df["walltime_known"].sum())

    def summary(self) -> dict[str, object]:
        """The figures, as :func:`summary` gives them for the whole table."""
        if self.n == 0:
            raise EmptyTraceError(self.attrs.get("source", "?"), self.attrs.get("invalid"), need="to summarize")
        mach = machines.get(self.attrs["machine"])
        span = int(self.high - self.low)
        load = float("nan") if self.n < 2 else self.work / (mach.nodes * span) if span > 0 else float("inf")
        return _lines(self.attrs, mach, self.n, span, load, len(self.users[0]),
                      (int(_median(*self.nodes)), int(self.nodes[0][-1])), int(_median(*self.run)),
                      self.known / self.n)


def _count(counts: tuple[np.ndarray, np.ndarray], values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, their counts) with ``values`` added."""
    values = values.to_numpy(np.int64)
    low = values.min()
    if values.max() - low <= 4 * len(values):  # a small range (node counts, user ids): counted without a sort
        c = np.bincount(values - low)
        v = np.flatnonzero(c)
        v, c = v + low, c[v]
    else:
        v, c = np.unique(values, return_counts=True)
    merged, at = np.unique(np.concatenate([counts[0], v]), return_inverse=True)
    return merged, np.bincount(at, np.concatenate([counts[1], c]).astype(np.float64)).astype(np.int64)


def _median(values: np.ndarray, counts: np.ndarray) -> float:
    """The median of ``values`` repeated ``counts`` times (as ``np.median``: the mean of the middle two)."""
    ends = np.cumsum(counts)
    n = int(ends[-1])
    low, high = values[np.searchsorted(ends, [(n - 1) // 2, n // 2], side="right")]
    return (float(low) + float(high)) / 2


def _dropped(attrs: dict) -> str:
    """The invalid jobs dropped, by reason, and whether they are the catalog's known cleaning of the trace."""
    counts = attrs.get("invalid") or {}
    if not counts:
        return "none"
    note = traces.known_cleaning(attrs)
    return f"{counts}: {note}" if note else str(counts)


def _duplicates(attrs: dict) -> dict[str, object]:
    """A "duplicate job ids" line when some jobs share an id (the reader kept them)."""
    count = attrs.get("duplicate_ids") or 0
    return {"duplicate job ids": f"{count} jobs repeat an earlier job's id (kept)"} if count else {}


def _machine_note(attrs: dict, mach: machines.Machine) -> dict[str, object]:
    """A "machine note" line when the reader sized the machine from the jobs, or took it from an SWF header.

    The first is a Slurm or PBS log read without ``--machine``; the second an SWF file that is no bundled trace's
    (:func:`hpcgym.traces.recognise`), which says why, and how mixed node sizes were mapped when its ``MaxProcs`` is
    not a multiple of ``MaxNodes``.
    """
    if attrs.get("machine_note"):
        return {"machine note": attrs["machine_note"]}
    if mach.source != "SWF header":
        return {}
    note = machines.mixed_node_note(attrs.get("header"))
    return {"machine note": note or "from the file's header (MaxNodes, MaxProcs): no bundled trace has this file's "
            "content; pass --machine to map it onto another machine"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI (wrapped by :func:`hpcgym.cli.run`: bad input exits 2 with one ``error:`` line)."""
    parser = cli.ArgumentParser(prog="python -m hpcgym.traces", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="summarize a trace file or a bundled trace name")
    info.add_argument("trace", help="a path (SWF, ALCF CSV, Mustang CSV, any CSV with --columns, sacct output, a PBS "
                      "log or a directory of them) or a bundled name such as 'theta'")
    cli.add_trace_args(info)
    info.add_argument("--rows", type=cli.positive_int, default=traces.ROWS, help="an SWF trace is read in chunks of "
                      f"this many lines, in bounded memory (default: {traces.ROWS:,}); other formats are read whole")
    conv = sub.add_parser("convert", help="write a trace (Slurm, PBS, CSV, SWF) as SWF, users and groups anonymised")
    conv.add_argument("trace", help="a path (a sacct file, a PBS log or a directory of them, a CSV, an SWF file) or a "
                      "bundled name")
    conv.add_argument("--out", required=True, type=cli.out_file,
                      help="the SWF file to write (.swf, or .swf.gz to gzip it)")
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
            dropped = ", ".join(f"{n:,} {r}" for r, n in (t.dropped or {}).items())
            cleaning = f" Dropped on reading: {dropped} ({t.cleaning})." if dropped else ""
            print(f"{name:16} {t.machine:11} {t.description}.{cleaning}  [{t.citation}]")
        return 0
    for key, value in _info(args).items():
        print(f"{key:22} {value}")
    return 0


def _info(args: argparse.Namespace) -> dict[str, object]:
    """``info``'s figures: an SWF trace streamed in chunks (bounded memory), another format read whole."""
    options = cli.read_options(args)
    with warnings.catch_warnings(), spooled(args.trace) as local:  # a pipe is read once: sniffing would eat it
        warnings.simplefilter("ignore")  # the drops are reported in the summary
        trace = str(local) if local.exists() else args.trace  # a bundled name stays a name
        if _is_swf(trace, options):
            tally = Tally()
            for chunk in traces.read_chunks(trace, args.rows, **options):
                tally.add(chunk)
            return tally.summary()
        return summary(traces.read(trace, compact=True, **options))


def _is_swf(trace: str, options: dict[str, object]) -> bool:
    """Whether ``trace`` (a bundled name or a file) is read as SWF."""
    if options["format"] is not None or options["columns"] is not None:
        return options["format"] == "swf" and options["columns"] is None
    if not Path(trace).exists():
        key = trace.lower()
        return key in traces.BUNDLED and traces.BUNDLED[key].format == "swf"
    return traces.detect_format(trace) == "swf"


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
