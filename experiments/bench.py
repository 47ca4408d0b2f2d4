r"""The bench: every scheduler judged on every log of the suite at once, with CIs that can see 5% and a noise floor.

Examples::

    python -m experiments.bench --schedulers fcfs+easy saf+easy sjf+easy tuned+easy saf-learned+easy \\
        tuned-learned+easy --out bench/
    python -m experiments.bench --schedulers saf+easy --reference sjf+easy --traces sdsc-sp2 hpc2n ricc
    python -m experiments.bench --schedulers saf+easy tuned+easy --trace-file my-cluster.swf --machine 512x32
    python -m experiments.bench --schedulers tuned+easy --reference tuned+easy --model runs/theta-synthetic-ppo-s0

**Logs.** By default every catalogued log is tried (``hpcgym.traces.BUNDLED``); those that pass the suite's rule
(their test windows queue: :mod:`experiments.suite`) are judged, the others are listed in ``logs.csv`` with the
reason. ``--traces`` picks catalogued logs by name; ``--trace-file`` adds a file of your own to the suite for this
run (read with ``--format``, ``--machine`` and the other reading options, which apply to every such file). On each
log: every disjoint window of ``--window`` jobs of the test split (the last 30%), and the whole test split as one
stream (``--no-whole-split`` skips it).

**Rows.** A scheduler is ``[LABEL=]SPEC+BACKFILL``: any spelling of :func:`hpcgym.sim.heuristics.resolve` (``saf``,
``tuned``, ``tuned-learned``, ``saf-learned``, ``saf@last2``, ``tuned:FIT.json``, ``package.module:attr``) and
``none``, ``easy`` or ``conservative``; ``{log}`` in SPEC stands for each log's name (a fit file per log), and
LABEL names the row. ``tuned`` and the learned rows read each log's own fit (shipped for every suite log;
``python -m experiments.refit`` remakes them). ``--model [LABEL=]PATH`` adds a trained run (its agent and its cloned
start) or an SB3 zip; a LABEL given to several runs makes one row, each run judged on the log it trained on
(``--own-log``: every run folder on its own log only). FCFS+EASY (the baseline) and the clairvoyant row (the
headroom's top) always run.

**Verdicts.** Each row is paired with each ``--reference`` row on the same windows: per log, the ratio of mean bsld
with its one-log CI; pooled, the geometric mean over the logs where both ran, with two 95% CIs (*this suite* and
*logs like these*: :mod:`experiments.pooled`), the noise floor (``--draws`` near-copies of the reference), wins,
ties and losses over logs, and the median share of the headroom taken. "Better" needs the *this suite* CI below 1
and the ratio outside the noise floor.

**Outputs** (``--out``): ``pooled.csv`` (one row per scheduler and reference), ``per_log.csv``, ``per_window.csv``
(read by :class:`experiments.results.Windows`, with a ``log`` column), ``per_block.csv`` (the streams' bsld sums per
1,024 jobs), ``logs.csv`` (every log tried: in the suite or not, and why), ``leaderboard.md``,
``forest-<reference>.png`` and ``bench.json`` (the command, the day, the seconds each log took). Scores are cached
per log and row under ``--cache`` (default ``<out>/cache``): a row
added later costs only its own runs. ``--workers`` fans the logs out over processes, ``--backend ray`` over a Ray
cluster (``--address``).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from experiments import bench_report, suite
from experiments.arguments import flag, parse, parser
from experiments.bench_log import BASELINE, LogResult, Model, Row, Task, run_log
from experiments.fanout import Executor
from experiments.runs import PER_WINDOW
from hpcgym import cli, jit, traces
from hpcgym import io as hpcgym_io

DEFAULT_SCHEDULERS = ["fcfs+easy", "sjf+easy", "saf+easy", "tuned+easy", "saf-learned+easy", "tuned-learned+easy"]


@dataclass
class Args:
    """The bench's settings (one flag each; ``--help`` shows them)."""

    schedulers: list[str] = flag(DEFAULT_SCHEDULERS, "the rows: [LABEL=]SPEC+BACKFILL each (see above)")
    reference: list[str] = flag(["saf+easy"], "the rows every row is paired with (one table each)")
    traces: list[str] = flag([], "catalogued logs to try (default: every one; see python -m hpcgym.traces list)")
    trace_file: list[str] = flag([], "log files of your own to add to the suite for this run")
    model: list[str] = flag([], "[LABEL=]PATH: a trained run folder or SB3 zip to judge (its agent and cloned "
                                "start); loading a zip runs its pickles: only runs you trust")
    own_log: bool = flag(False, "judge each --model run folder only on the log it trained on")
    out: str = flag("bench", "output folder")
    cache: str = flag("", "cache folder (default: OUT/cache)")
    window: int = flag(suite.WINDOW, "jobs per disjoint test window")
    draws: int = flag(20, "near-copies of each reference (the noise floor; 0: none)")
    sd: float = flag(0.05, "sd of the log-normal factor on each job's runtime estimate in a near-copy's priority")
    boot: int = flag(2000, "bootstrap draws of every CI")
    seed: int = flag(0, "seed of the near-copies and the bootstraps")
    workers: int = flag(1, "logs at once (processes, or Ray CPUs)")
    backend: str = flag("local", "local or ray")
    address: str = flag("", "with --backend ray: the cluster's address (empty: a local instance)")
    no_whole_split: bool = flag(False, "skip the whole-split streams (windows only)")
    quiet: bool = flag(False, "no progress bar")
    format: str = ""  #: --format of the --trace-file logs (hpcgym.cli.add_trace_args)
    machine: str = ""
    columns: str = ""
    round: str = ""
    on_duplicate: str = "warn"


def logs_of(args: Args) -> list[suite.LogSpec]:
    """The logs to try: the named catalogued ones (default: all), then the files, each checked to read."""
    found = suite.named(args.traces) if args.traces else suite.catalog()
    read = {k: getattr(args, k) or None for k in ("format", "machine", "columns", "round", "on_duplicate")}
    for path in args.trace_file:
        spec = suite.from_file(path, **read)
        if spec.name in {s.name for s in found}:
            raise cli.UsageError(f"{path}: its name {spec.name!r} is a log's of the run already; rename the file")
        try:
            spec.load()
        except Exception as exc:  # any reader error: one line naming the file, before the work starts
            raise cli.UsageError(f"--trace-file {path} cannot be read: {cli.message(exc)}") from None
        found.append(spec)
    return found


def models_of(specs: Sequence[str], own_log: bool = False) -> tuple[Model, ...]:
    """``[LABEL=]PATH`` specs as models.

    A label given to several runs, or any run with ``own_log``, is judged on the log its run trained on only.
    """
    from experiments.runs import RunFolder

    pairs = [(s.split("=", 1) if "=" in s else (Path(s.rstrip("/")).name.removesuffix(".zip"), s)) for s in specs]
    labels = [label for label, _ in pairs]
    out = []
    for label, path in pairs:
        if not Path(path).exists():
            raise cli.UsageError(f"--model {path}: no such run folder or zip")
        own = ()
        if labels.count(label) > 1 or (own_log and Path(path).is_dir()):
            if not Path(path).is_dir():
                raise cli.UsageError(f"--model {label}={path}: several runs share a label only as run folders (each "
                                     "is judged on the log it trained on)")
            own = (traces.name_of(RunFolder(path).recipe().source.trace),)
        out.append(Model(label, path, own))
    return tuple(out)


def rows_of(args: Args) -> tuple[tuple[Row, ...], tuple[Row, ...]]:
    """The rows and the references; a reference is a row's label or spec, or a row of its own (then added).

    Raises:
        ValueError: a malformed row.
    """
    rows = [Row.parse(s) for s in args.schedulers]
    references = []
    for text in args.reference:
        found = next((r for r in rows if text in (r.label, f"{r.spec}+{r.backfill}")), None)
        if found is None:
            found = Row.parse(text)
            if found.label != BASELINE:  # FCFS+EASY always runs
                rows.append(found)
        references.append(found)
    return tuple(rows), tuple(references)


def tasks_of(args: Args) -> list[Task]:
    """One task per log."""
    rows, references = rows_of(args)
    cache = args.cache or str(Path(args.out) / "cache")
    models = models_of(args.model, args.own_log)
    return [Task(log, rows, references, models, args.window, args.draws, args.sd, args.seed,
                 not args.no_whole_split, cache) for log in logs_of(args)]


def logs_table(results: Sequence[LogResult]) -> pd.DataFrame:
    """``logs.csv``: every log tried, whether it is in the suite and why, and what its jobs record."""
    rows = []
    for r in results:
        info = traces.BUNDLED.get(r.name)
        rows.append({"log": r.name, "status": r.admission.status, "reason": r.admission.reason,
                     "windows": r.admission.windows, "fcfs_bsld": r.admission.fcfs_bsld, "machine": r.machine,
                     "jobs": r.jobs, "dropped": r.dropped,
                     "requested_times": r.requested_times,
                     "wait_times": info.wait_times if info else None, "user_ids": info.user_ids if info else None,
                     "kind": info.kind if info else "file", "notes": info.notes if info else "", "seconds": r.seconds})
    return pd.DataFrame(rows)


def run(args: Args, command: str = "") -> pd.DataFrame:
    """Run the bench; write its files to ``args.out``; return ``pooled.csv``'s table."""
    tasks = tasks_of(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[LogResult | None] = [None] * len(tasks)
    with tqdm(total=len(tasks), desc="logs", unit="log", disable=args.quiet) as bar, \
            Executor(run_log, args.backend, args.workers, args.address) as ex:
        def done(i: int, result: LogResult) -> None:
            results[i] = result
            bar.set_postfix_str(f"{result.name}: {result.admission.status}")
            bar.update()

        ex.map(tasks, done)
    finished = [r for r in results if r is not None]
    logs = logs_table(finished)
    in_suite = [r.name for r in finished if r.admission.status == suite.IN_SUITE]
    if not in_suite:
        raise cli.UsageError("no log passed the suite's rule (its test windows must queue): nothing to judge; see "
                             f"{out / 'logs.csv'}")
    per_window = pd.concat([r.windows for r in finished if not r.windows.empty], ignore_index=True)
    blocks = [r.blocks for r in finished if not r.blocks.empty]
    per_block = pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame()
    skipped = {r.name: r.skipped for r in finished if r.name in in_suite}
    references = [r.label for r in rows_of(args)[1]]
    per_log, pooled_table = bench_report.tables(per_window, per_block, in_suite, references, args.boot, args.seed,
                                                skipped)
    for name, table in (("logs.csv", logs), (PER_WINDOW, per_window), ("per_block.csv", per_block),
                        ("per_log.csv", per_log), ("pooled.csv", pooled_table)):
        hpcgym_io.write_table(table, out / name)
    hpcgym_io.write_text(out / "leaderboard.md", bench_report.leaderboard(pooled_table, logs, skipped, command))
    about = {"command": command, "date": time.strftime("%Y-%m-%d"), "simulator": jit.sources_hash(),
             "logs": len(in_suite), "windows": int(logs.loc[logs["status"] == suite.IN_SUITE, "windows"].sum()),
             "seconds_per_log": {r.name: round(r.seconds, 2) for r in finished}}
    hpcgym_io.write_text(out / "bench.json", json.dumps(about, indent=2) + "\n")
    for reference in pooled_table["reference"].unique():
        bench_report.forest(per_log, pooled_table, reference, out / f"forest-{_slug(reference)}.png")
    return pooled_table


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "+-._" else "_" for c in text)


def summary_text(pooled_table: pd.DataFrame, logs: pd.DataFrame) -> str:
    """What the bench prints: the logs judged, then each row's verdict against each reference."""
    judged = logs[logs["status"] == suite.IN_SUITE]
    out = [f"{len(judged)} logs in the suite ({int(judged['windows'].sum()):,} disjoint test windows); "
           f"{len(logs) - len(judged)} left out: "
           + "; ".join(f"{r.log} ({r.reason})" for r in logs[logs["status"] != suite.IN_SUITE].itertuples())]
    for reference, table in pooled_table.groupby("reference", sort=False):
        floor = table["noise_floor"].dropna()
        out.append(f"against {reference} (noise floor ±{floor.iat[0]:.1%} over the suite):" if len(floor) else
                   f"against {reference} (no noise floor: {reference} is not a weighted sum of log estimate, log "
                   "nodes, log walltime and wait):")
        out += [f"  {r.scheduler}: {r.verdict} [{r.logs} logs, {r.windows} windows; wins/ties/losses "
                f"{r.wins}/{r.ties}/{r.losses}]" for r in table.itertuples() if r.scheduler != reference]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line."""
    ap = parser(Args, "python -m experiments.bench", __doc__)
    args, _ = parse(Args, ap, argv)
    if args.backend not in ("local", "ray"):
        raise cli.UsageError(f"--backend must be local or ray, not {args.backend!r}")
    if args.window < 2 or args.workers < 1 or args.draws < 0 or args.boot < 100 or not args.sd >= 0:
        raise cli.UsageError("--window >= 2, --workers >= 1, --draws >= 0, --boot >= 100 and --sd >= 0, please")
    rows_of(args)  # a malformed row fails before any work
    cli.load_jit()
    began = time.perf_counter()
    command = "python -m experiments.bench " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    pooled_table = run(args, command)
    logs = pd.read_csv(Path(args.out) / "logs.csv")
    print(summary_text(pooled_table, logs))
    print(f"done in {time.perf_counter() - began:.0f} s: {args.out}/pooled.csv, per_log.csv, per_window.csv, "
          "leaderboard.md, forest-*.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
