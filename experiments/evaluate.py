"""Evaluate trained agents and every heuristic x backfill mode on identical held-out real windows.

Examples::

    python -m experiments.evaluate --model runs/theta-real-ppo-s0 --trace theta --windows 20 --window 1024
    python -m experiments.evaluate --agent mine=mypkg.agents:MyAgent --trace theta

``--agent`` plays any object that follows the agent protocol (:class:`experiments.runs.AgentModel`: SB3's
``predict``), next to the run folders' networks; in Python, pass ``{label: agent}`` to :func:`evaluate_on_test`.

Windows are drawn once (``--seed``) from the chronological *test* split (the last 30% of the trace), and every
scheduler runs on the same ones. Writes ``per_window.csv`` (one row per scheduler x window) and ``per_job.csv``
(one row per scheduler x window x job) to ``--out`` (default: ``<model dir>/eval``; ``<model dir>/eval-TRACE`` for a
``--trace`` other than the run's own, so that the run's own scores stay where ``compare`` and ``seeds`` read them),
and prints the summary table: mean bounded slowdown with a 95% bootstrap interval over windows, the paired ratio to
the reference (the strongest implementable row, e.g. ``tuned``) with a 95% block-bootstrap CI (blocks of
consecutive jobs, so that overlapping windows do not count twice), and the win rate against the baseline,
FCFS+EASY. Implementable rows come first; the clairvoyant rows are upper bounds no scheduler can reach.
"""

from __future__ import annotations

import argparse
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from baselines import learned, references
from experiments import runs, tables
from experiments.arguments import TRACE_FLAGS
from experiments.results import Windows
from experiments.runs import BASELINE, Agent, RunFolder
from hpcgym import cli, machines, metrics, traces
from hpcgym import io as hpcgym_io

HEURISTIC_BACKFILLS = ("none", "easy")
CONFIDENCE = 0.95


def run_heuristics(test: pd.DataFrame, machine: machines.Machine, starts: Sequence[int], length: int,
                   backfills: Sequence[str] = HEURISTIC_BACKFILLS,
                   notes: dict[str, str] | None = None) -> list[pd.DataFrame]:
    """Per-job records of every reference row x backfill mode on every window (window by window).

    The rows are :func:`baselines.references.reference_cells`' (the heuristics, ``tuned`` where the trace has a fit,
    the clairvoyant row); ``notes`` receives what the special rows stand for.
    """
    windows = [traces.window(test, length, start=start) for start in starts]
    cells, found = references.reference_cells(windows, machine, str(test.attrs.get("name", "")), backfills)
    if notes is not None:
        notes.update(found)
    return [c.records[w].assign(scheduler=c.label, kind=references.kind(c.policy), window=w, backfill=c.backfill)
            for w in range(len(windows)) for c in cells]


def run_agent(agent: Agent, label: str, trace: str | pd.DataFrame, machine: machines.Machine,
              starts: Sequence[int], length: int) -> list[pd.DataFrame]:
    """Per-job records of an agent (deterministic, masked) on every window of the test split."""
    from agents.rollout import play_windows

    infos = play_windows(agent.model, starts, **{**agent.env, "machine": machine, "workload": trace,
                                                 "backfill": agent.backfill, "window": length, "slots": agent.slots,
                                                 "split": "test", "order": agent.order,
                                                 "time_scale": agent.time_scale})
    invalid = sum(int(info.get("invalid_actions", 0)) for info in infos)
    if invalid:
        warnings.warn(f"{label} chose an empty slot {invalid} times on the test windows (its predict takes no "
                      "action_masks); each such action was mapped to a valid slot (invalid_action='wrap')",
                      stacklevel=2)
    return [pd.DataFrame(info["records"]).assign(scheduler=label, kind=agent.kind, window=w)
            for w, info in enumerate(infos)]


def per_window_table(per_job: pd.DataFrame, machine_nodes: int) -> pd.DataFrame:
    """One row per scheduler x window: mean bsld, mean wait, utilization."""
    rows = []
    keys = ["scheduler", "kind", "backfill", "window"]
    for (scheduler, kind, backfill, window), rec in per_job.groupby(keys, sort=False):
        s = metrics.summarize(rec, machine_nodes)
        rows.append({"scheduler": scheduler, "kind": kind, "backfill": backfill, "window": window,
                     "bsld": s["bsld_mean"], "wait": s["wait_mean"], "utilization": s["utilization"]})
    return pd.DataFrame(rows)


def summary(per_window: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Mean bsld with a bootstrap CI over windows, the paired ratio to the reference and the win rate on ``baseline``.

    The reference is the strongest implementable row (:func:`experiments.tables.strongest_reference`; its name is
    in ``attrs["reference"]``). Implementable rows come first, by mean bsld; the clairvoyant rows (upper bounds) last.
    """
    base = Windows(per_window).bsld(baseline)
    rows = []
    for scheduler, group in per_window.groupby("scheduler", sort=False):
        mean, lo, hi = metrics.bootstrap_ci(group["bsld"].to_numpy(), CONFIDENCE)
        mine = group.set_index("window")["bsld"]
        rows.append({"scheduler": scheduler, "kind": group["kind"].iat[0], "backfill": group["backfill"].iat[0],
                     "bsld": mean, "ci_low": lo,
                     "ci_high": hi, "wait": group["wait"].mean(), "utilization": group["utilization"].mean(),
                     f"win_rate_vs_{baseline}": float((mine < base.reindex(mine.index)).mean())})
    table = pd.DataFrame(rows)
    table.insert(6, "headroom", references.headroom(table))
    reference = Windows(per_window).reference()
    if reference is not None:
        ratios = tables.paired(per_window, reference)
        table = table.merge(ratios, on="scheduler", how="left")
        cols = list(table.columns)
        moved = [c for c in ratios.columns if c != "scheduler"]
        at = cols.index("ci_high") + 1
        table = table[[c for c in cols[:at] if c not in moved] + moved + [c for c in cols[at:] if c not in moved]]
    table["upper_bound"] = table["kind"] == tables.CLAIRVOYANT
    table = table.sort_values(["upper_bound", "bsld"]).drop(columns="upper_bound").reset_index(drop=True)
    table.attrs["reference"] = reference
    return table


def write_csv(df: pd.DataFrame, path: Path) -> None:
    """Write a CSV atomically (the same writer as ``baselines.run``)."""
    hpcgym_io.write_table(df, path)


def describe(trace: str, windows: int, length: int, seed: int) -> str:
    """The line that says what a result table measured."""
    return (f"{trace}, test split (last 30%), {windows} windows x {length} jobs (window seed {seed}); mean bounded "
            f"slowdown (tau 10 s) over windows, {CONFIDENCE:.0%} bootstrap CI; agents play deterministically with "
            "the backfilling they trained with (column 'backfill'); vs reference: the paired ratio of mean bsld to the "
            "strongest implementable row on the same windows, 95% block-bootstrap CI (blocks of consecutive jobs as "
            "long as a window); headroom: the share of the gap between the best "
            "classic heuristic and the clairvoyant row (same backfilling) that a row takes (docs/definitions.md)")


def identical_rows(per_window: pd.DataFrame) -> list[str]:
    """Footnotes for heuristics whose rows with and without backfilling are the same on every window."""
    notes = []
    results = Windows(per_window)
    for name in sorted({s.split("+")[0] for s in results.heuristics["scheduler"]}):
        rows = [results.rows(f"{name}+{b}").sort_values("window")["bsld"].to_numpy() for b in HEURISTIC_BACKFILLS]
        if all(len(r) for r in rows) and all(np.array_equal(rows[0], r) for r in rows[1:]):
            notes.append(f"{name}+none and {name}+easy are identical on every window: backfilling never started a "
                         f"job early under {name} here (not a copying error).")
    return notes


def write_results(out: Path, per_window: pd.DataFrame, per_job: pd.DataFrame, description: str = "") -> pd.DataFrame:
    """Write ``per_window.csv``, ``per_job.csv``, ``summary.csv`` and ``summary.md`` to ``out``; return the summary."""
    table = summary(per_window)
    for name, df in ((runs.PER_WINDOW, per_window), (runs.PER_JOB, per_job), (runs.SUMMARY, table)):
        write_csv(df, out / name)
    notes = [f"{label}: {text}" for label, text in per_window.attrs.get("notes", {}).items()]
    notes += identical_rows(per_window)
    description = "\n".join([description, *(f"Note: {n}" for n in notes)]) if notes else description
    table.attrs["description"] = description
    hpcgym_io.write_text(out / runs.SUMMARY_MD, format_summary(table, description) + "\n")
    return table


def format_summary(table: pd.DataFrame, description: str = "") -> str:
    """The summary as a Markdown table (implementable rows first, upper bounds marked), under what it measured."""
    shown = pd.DataFrame({
        "scheduler": [f"{s} (upper bound)" if k == tables.CLAIRVOYANT else s
                      for s, k in zip(table["scheduler"], table["kind"], strict=True)],
        "kind": table["kind"], "backfill": table["backfill"],
        "bsld (95% CI)": [f"{m:.2f} ({lo:.2f}-{hi:.2f})" for m, lo, hi in
                          zip(table["bsld"], table["ci_low"], table["ci_high"], strict=True)]})
    if "vs_reference" in table:
        shown["vs reference (95% CI)"] = [tables.ratio_text(*r) for r in
                                          table[["vs_reference", "vs_reference_low", "vs_reference_high"]].itertuples(
                                              index=False)]
    shown["headroom"] = table["headroom"]
    shown["wait (h)"] = table["wait"] / 3600
    shown["utilization"] = table["utilization"]
    for c in table:
        if c.startswith("win_rate_vs_"):
            shown[c.replace("win_rate_vs_", "wins vs ")] = table[c]
    reference = table.attrs.get("reference") or _reference_of(table)
    head = [description] if description else []
    if reference:
        head.append(f"Reference: {reference} (the strongest implementable row); baseline: {BASELINE}.")
    return "\n\n".join([*head, tables.markdown(shown, digits=2)])


def _reference_of(table: pd.DataFrame) -> str | None:
    """The row whose ratio to the reference is exactly 1 (a summary read back from its CSV)."""
    if "vs_reference" not in table:
        return None
    exact = table.loc[(table["vs_reference"] == 1) & (table["vs_reference_low"] == 1), "scheduler"]
    return str(exact.iat[0]) if len(exact) else None


def evaluation_split(trace: str, read: dict[str, Any] | None = None, windows: int = 20, length: int = 1024,
                       seed: int = 0) -> tuple[pd.DataFrame, machines.Machine, pd.DataFrame, Sequence[int]]:
    """The trace (read quietly), its machine, its test split and the evaluation's window starts in that split."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = traces.read(trace, **(read or {}))
    test = traces.split(real, "test")
    return real, machines.get(real.attrs["machine"]), test, traces.window_starts(len(test), length, windows, seed)


def evaluate_on_test(trace: str, agents: dict[str, Any], windows: int = 20, length: int = 1024,
                     seed: int = 0, progress: bool = True, read: dict[str, Any] | None = None,
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run agents and the heuristics on the same test windows.

    ``agents`` maps a row label to an :class:`~experiments.runs.Agent` or any :class:`~experiments.runs.AgentModel`
    (the agent protocol). ``read`` holds ``format``, ``machine`` and ``columns`` for :func:`hpcgym.traces.read`.

    Returns:
        ``(per_window, per_job)`` tables.
    """
    real, machine, test, starts = evaluation_split(trace, read, windows, length, seed)
    learned.ensure_quietly(str(test.attrs.get("name", "")), real, machine.nodes, progress)
    notes: dict[str, str] = {}
    recs = run_heuristics(test, machine, starts, length, notes=notes)
    for label, agent in tqdm({k: runs.as_agent(a) for k, a in agents.items()}.items(), desc="agents",
                             disable=not progress):
        recs += [r.assign(backfill=agent.backfill) for r in run_agent(agent, label, real, machine, starts, length)]
    per_job = pd.concat(recs, ignore_index=True)
    per_window = per_window_table(per_job, machine.nodes)
    per_window["start"] = per_window["window"].map(dict(enumerate(starts))).astype("int64")
    per_window["block"] = metrics.window_blocks(per_window["start"], length)
    per_window.attrs["notes"] = notes
    return per_window, per_job


def evaluate_run(run: RunFolder, trace: str, read: dict[str, Any], windows: int, length: int,
                 progress: bool = True) -> pd.DataFrame:
    """A run's networks and every heuristic on the same test windows (seed 0); writes ``eval/``; returns the summary."""
    per_window, per_job = evaluate_on_test(trace, run.agents(), windows, length, seed=0, read=read,
                                           progress=progress)
    return write_results(run.eval, per_window, per_job, describe(trace, windows, length, seed=0))


def _runs_trace(run_dirs: Sequence[Path], read: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The trace the runs trained on (they must agree), with how they read it; theta without runs."""
    saved = {RunFolder(run).settings().get("trace") for run in run_dirs}
    if len(saved) > 1:
        raise ValueError(f"the runs trained on different traces {sorted(saved)}: pick one with --trace")
    if not run_dirs:
        return "theta", read
    args = RunFolder(run_dirs[0]).settings()
    given = {k: v for k, v in read.items() if v is not None}
    return args["trace"], {**{k: args.get(k) or None for k in TRACE_FLAGS}, **given}


def default_out(folders: Sequence[RunFolder], trace: str | None) -> Path:
    """``<first run>/eval``; ``<first run>/eval-<trace>`` for another trace than the run's own.

    The run's own ``eval`` folder is what ``compare``, ``seeds`` and the study read as the run's test scores, under
    the trace its settings name: an evaluation on another trace written there would be reported under the wrong name.
    """
    if not folders:
        return Path("eval")
    own = folders[0].settings().get("trace")
    if trace is None or trace == own:
        return folders[0].eval
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(trace).name).strip("_") or "trace"
    return folders[0].path / f"eval-{slug}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = cli.ArgumentParser(prog="python -m experiments.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, nargs="*", default=[],
                    help="training run directories (with model.zip). A model zip holds pickles: loading one runs "
                         "code, so load only runs you trust (default: none)")
    ap.add_argument("--agent", action="append", default=[], metavar="[LABEL=]MODULE:OBJECT",
                    help="an agent of your own (experiments.runs.AgentModel: SB3's predict; or an Agent, or a "
                         "function or class that returns one), imported and played like the runs' networks; "
                         "repeatable. Importing runs the module's code (default: none)")
    ap.add_argument("--trace", default=None,
                    help="real trace whose test split is used (default: the runs' own trace, else theta)")
    cli.add_trace_args(ap)
    ap.add_argument("--windows", type=cli.positive_int, default=20, help="number of test windows (default: 20)")
    ap.add_argument("--window", type=cli.positive_int, default=1024, help="jobs per window (default: 1024) "
                    "[formerly --length]")
    cli.alias(ap, "--length", "--window")
    ap.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of the window draw (default: 0)")
    ap.add_argument("--out", type=Path, default=None, help="output directory (default: <first model>/eval, or "
                                                          "<first model>/eval-TRACE for a --trace other than the "
                                                          "run's own)")
    args = ap.parse_args(argv)
    if args.window < 2:  # the environment's own least (a window of one job has no decision)
        ap.error(f"--window must be at least 2, not {args.window}")
    folders = [RunFolder(run).check("model") for run in args.model]  # every mistake before any work
    runs.check_distinct(folders)
    out = args.out or default_out(folders, args.trace)
    if args.out is None and folders:
        folders[0].check_links()  # the results go into the run's folder: nothing may follow a link out of it
    runs.check_writable(out, "the output folder")
    own = dict(runs.load_agent(spec) for spec in args.agent)
    if len(own) < len(args.agent) or set(own) & {f.name for f in folders}:
        raise cli.UsageError("two --agent or --model rows would have the same label: name them (LABEL=MODULE:OBJECT)")
    agents: dict[str, Agent] = {}
    for folder in folders:
        agents.update(folder.agents())
    agents.update(own)
    read = cli.read_options(args)
    if args.trace is None:
        args.trace, read = _runs_trace(args.model, read)
    per_window, per_job = evaluate_on_test(args.trace, agents, args.windows, args.window, args.seed, read=read)
    table = write_results(out, per_window, per_job, describe(args.trace, args.windows, args.window, args.seed))
    print(format_summary(table, table.attrs["description"]))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
