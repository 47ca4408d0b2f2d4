"""The evaluation's library: agents and every reference row on the same held-out windows, and its tables.

:func:`evaluate` runs the rows (:func:`run_heuristics`, :func:`run_agent`) on the windows of a split and on the
whole split as one stream (:mod:`experiments.stream`); :func:`summary` turns the per-window scores (read through
:class:`experiments.results.Windows`) into the summary table; :func:`write_results` writes an evaluation folder.
:func:`cross_period` gives the jobs of one trace from the months another does not cover. ``python -m
experiments.evaluate`` is the command line over these.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from baselines import learned, references
from experiments import runs, stream, tables
from experiments.results import Windows
from experiments.runs import BASELINE, Agent, RunFolder
from hpcgym import io as hpcgym_io
from hpcgym import machines, metrics, traces

HEURISTIC_BACKFILLS = ("none", "easy")
CONFIDENCE = 0.95
#: how the summary's line naming the reference and the baseline starts
REFERENCE_LINE = "Reference: "


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
              starts: Sequence[int], length: int, split: str = "test",
              progress: Callable[[np.ndarray], None] | None = None) -> list[pd.DataFrame]:
    """Per-job records of an agent (deterministic, masked) on every window of the trace's ``split``.

    ``progress``: called after each step of the windows (:func:`agents.rollout.play_windows`).
    """
    from agents.rollout import play_windows

    infos = play_windows(agent.model, starts, progress=progress, **_env_of(agent, machine, trace, length, split))
    return _records(label, agent, infos, "the test windows")


def _env_of(agent: Agent, machine: machines.Machine, trace: str | pd.DataFrame, length: int,
            split: str) -> dict[str, Any]:
    """The environment an agent plays windows of ``length`` jobs of ``trace``'s ``split`` in."""
    return {**agent.env, "machine": machine, "workload": trace, "backfill": agent.backfill, "window": length,
            "slots": agent.slots, "split": split, "order": agent.order, "time_scale": agent.time_scale}


def _records(label: str, agent: Agent, infos: list[dict[str, Any]], where: str) -> list[pd.DataFrame]:
    """An agent's per-job records, one frame per episode (``window`` its index), with a warning for empty slots."""
    invalid = sum(int(info.get("invalid_actions", 0)) for info in infos)
    if invalid:
        warnings.warn(f"{label} chose an empty slot {invalid} times on {where} (its predict takes no "
                      "action_masks); each such action was mapped to a valid slot (invalid_action='wrap')",
                      stacklevel=3)
    return [pd.DataFrame(info["records"]).assign(scheduler=label, kind=agent.kind, window=w, backfill=agent.backfill)
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


def summary(per_window: pd.DataFrame, baseline: str = BASELINE, per_job: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean bsld with a bootstrap CI over windows, the paired ratio to the reference and the win rate on ``baseline``.

    The reference is the strongest implementable row (:func:`experiments.tables.strongest_reference`; its name is
    in ``attrs["reference"]``). Implementable rows come first, by mean bsld; the clairvoyant rows (upper bounds) last.
    With ``per_job`` (and the windows' ``start``), the paired ratio's CI resamples blocks of jobs as long as a window
    (:func:`experiments.tables.paired_by_jobs`: jobs shared by overlapping windows are drawn together); without, blocks
    of windows (:func:`experiments.tables.paired`).
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
        ratios = tables.paired_ci(per_window, reference, per_job)[0]
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
            "strongest implementable row on the same windows, 95% block-bootstrap CI (blocks of consecutive jobs of "
            "the split as long as a window; the jobs that overlapping windows share are drawn together); headroom: "
            "the share of the gap between the best "
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


def write_results(out: Path, per_window: pd.DataFrame, per_job: pd.DataFrame, description: str = "",
                  whole: pd.DataFrame | None = None) -> pd.DataFrame:
    """Write ``per_window.csv``, ``per_job.csv``, ``summary.csv`` and ``summary.md`` to ``out``; return the summary.

    With ``whole`` (the stream's per-job records, :func:`experiments.stream.run`), also ``stream.csv``, and the
    summary gains the stream's columns. A training run's verdict in ``out`` (``verdict.json``) judged the evaluation
    this one replaces: it is removed (``experiments.train`` writes the new one after, :mod:`.training.verdict`).
    """
    (out / runs.VERDICT).unlink(missing_ok=True)
    table = summary(per_window, per_job=per_job)
    if whole is not None:
        streamed = stream.table(whole)
        write_csv(streamed, out / stream.FILE)
        table = stream.beside(table, streamed)
        description = f"{description}; {stream.DESCRIPTION}" if description else stream.DESCRIPTION
    for name, df in ((runs.PER_WINDOW, per_window), (runs.PER_JOB, per_job), (runs.SUMMARY, table)):
        write_csv(df, out / name)
    notes = [f"{label}: {text}" for label, text in per_window.attrs.get("notes", {}).items()]
    notes += identical_rows(per_window)
    description = "\n".join([description, *(f"Note: {n}" for n in notes)]) if notes else description
    table.attrs["description"] = description
    hpcgym_io.write_text(out / runs.SUMMARY_MD, format_summary(table, description, measured_last=True) + "\n")
    return table


def format_summary(table: pd.DataFrame, description: str = "", measured_last: bool = False) -> str:
    """The summary as a Markdown table (implementable rows first, upper bounds marked), under what it measured.

    With ``measured_last`` (``summary.md``), what it measured and the notes come after the table instead.
    """
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
    if "stream_vs_reference" in table:
        shown["whole split vs reference (95% CI)"] = [
            tables.ratio_text(*r) for r in table[["stream_vs_reference", "stream_vs_reference_low",
                                                  "stream_vs_reference_high"]].itertuples(index=False)]
    shown["headroom"] = table["headroom"]
    shown["wait (h)"] = table["wait"] / 3600
    shown["utilization"] = table["utilization"]
    for c in table:
        if c.startswith("win_rate_vs_"):
            shown[c.replace("win_rate_vs_", "wins vs ")] = table[c]
    reference = table.attrs.get("reference") or _reference_of(table)
    measured = [description] if description else []
    head = [] if measured_last else measured
    if reference:
        on_stream = table.attrs.get("stream_reference")
        whole = f" on the windows, {on_stream} on the whole split" if on_stream and on_stream != reference else ""
        head.append(f"{REFERENCE_LINE}{reference} (the strongest implementable row){whole}; baseline: {BASELINE}.")
    return "\n\n".join([*head, tables.markdown(shown, digits=2), *(measured if measured_last else [])])


def measured(summary_md: str) -> str:
    """What a ``summary.md`` says was measured (:func:`describe`'s line; ``""``: nothing).

    That is its first line that is not the verdict, the reference line, the table or a note.
    """
    for line in map(str.strip, summary_md.splitlines()):
        if line and not line.startswith(("verdict: ", REFERENCE_LINE, "|", "Note: ")):
            return line
    return ""


def _reference_of(table: pd.DataFrame) -> str | None:
    """The row whose ratio to the reference is exactly 1 (a summary read back from its CSV)."""
    if "vs_reference" not in table:
        return None
    exact = table.loc[(table["vs_reference"] == 1) & (table["vs_reference_low"] == 1), "scheduler"]
    return str(exact.iat[0]) if len(exact) else None


@dataclasses.dataclass
class Evaluation:
    """What an evaluation measured: per-window scores, per-job records, and the stream's records where it ran."""

    per_window: pd.DataFrame
    per_job: pd.DataFrame
    #: per-job records of every row on the whole split as one episode (:mod:`experiments.stream`), or None
    stream: pd.DataFrame | None = None
    #: what was measured (:func:`describe`), under the table of ``summary.md`` (:func:`measured` reads it back)
    description: str = ""


def evaluation_split(trace: str, read: dict[str, Any] | None = None, windows: int = 20, length: int = 1024,
                     seed: int = 0) -> tuple[pd.DataFrame, machines.Machine, pd.DataFrame, Sequence[int]]:
    """The trace (read quietly), its machine, its test split and the evaluation's window starts in that split."""
    real = _read(trace, read)
    test = traces.split(real, "test")
    return real, machines.get(real.attrs["machine"]), test, traces.window_starts(len(test), length, windows, seed)


def _read(trace: str, read: dict[str, Any] | None) -> pd.DataFrame:
    """A trace read quietly (its dropped-job warnings belong to training, not to every evaluation)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traces.read(trace, **(read or {}))


def evaluate(trace: str, agents: dict[str, Any], windows: int = 20, length: int = 1024, seed: int = 0,
             progress: bool = True, read: dict[str, Any] | None = None, whole: bool = True) -> Evaluation:
    """Agents and every reference row on the same test windows, and (``whole``) on the whole test split as one stream.

    ``agents`` maps a row label to an :class:`~experiments.runs.Agent` or any :class:`~experiments.runs.AgentModel`
    (the agent protocol). ``read`` holds ``format``, ``machine`` and ``columns`` for :func:`hpcgym.traces.read`.
    """
    real, machine, test, starts = evaluation_split(trace, read, windows, length, seed)
    learned.ensure_quietly(str(test.attrs.get("name", "")), real, machine.nodes, progress)
    done = evaluate_split(real, test, "test", agents, starts, length, progress, whole)
    return dataclasses.replace(done, description=describe(trace, windows, length, seed))


def evaluate_split(real: pd.DataFrame, part: pd.DataFrame, split: str, agents: dict[str, Any],
                   starts: Sequence[int], length: int, progress: bool = True, whole: bool = True) -> Evaluation:
    """Every row on the windows at ``starts`` of ``part`` (the ``split`` of ``real`` the agents' environment reads)."""
    machine = machines.get(real.attrs["machine"])
    played = {k: runs.as_agent(a) for k, a in agents.items()}
    notes: dict[str, str] = {}
    recs = run_heuristics(part, machine, starts, length, notes=notes)
    spent = 0.0  # the agents' time stepping the windows: steps x a step's median time (set-up and warm-up left out)
    for label, agent in tqdm(played.items(), desc="agents", disable=not progress):
        ticks: list[float] = []
        recs += run_agent(agent, label, real, machine, starts, length, split,
                          progress=lambda clocks, ticks=ticks: ticks.append(time.perf_counter()))
        spent += float(np.median(np.diff(ticks))) * len(ticks) if len(ticks) > 1 else 0.0
    per_job = pd.concat(recs, ignore_index=True)
    del recs  # the windows' frames, copied into per_job: not kept through the stream
    per_window = per_window_table(per_job, machine.nodes)
    per_window["start"] = per_window["window"].map(dict(enumerate(starts))).astype("int64")
    per_window["block"] = metrics.window_blocks(per_window["start"], length)
    per_window.attrs["notes"] = notes
    whole_split = None
    if whole:
        if progress and played:
            print(stream_note(len(part), len(played), spent, len(starts), length), flush=True)
        whole_split = run_stream(real, part, machine, played, split, progress=progress)
    return Evaluation(per_window, per_job, whole_split)


def stream_note(jobs: int, networks: int, seconds: float, windows: int, length: int) -> str:
    """What the whole split will take, said before it starts: the networks' time on the windows, scaled.

    A window batch (up to :data:`agents.rollout.BATCH` windows at once) costs about what as many decisions of one
    stream do, so the stream takes about ``seconds x jobs / (length x batches)``.
    """
    from agents.rollout import BATCH

    expected = seconds * jobs / (length * -(-windows // BATCH))
    when = f"{expected / 60:.0f} min" if expected >= 90 else f"{expected:.0f} s"
    return (f"whole split: {jobs:,} jobs as one episode for {networks} network{'s' * (networks != 1)}, about {when} "
            "(from their time on the windows), and every reference row; --no-whole-split skips it")


def run_stream(real: pd.DataFrame, part: pd.DataFrame, machine: machines.Machine, agents: dict[str, Agent],
               split: str = "test", notes: dict[str, str] | None = None, progress: bool = False) -> pd.DataFrame:
    """Per-job records of every reference row and every agent on the whole of ``part`` as one episode.

    ``part`` is the ``split`` of ``real`` (the trace the agents' environment reads); the rows are those of the
    windows (:func:`run_heuristics`, :func:`run_agent`), on one window that is the whole part (:mod:`.stream`).
    Agents that play in the same environment play together, a copy each of one vector environment
    (:func:`agents.rollout.play_together`). ``progress``: a bar over the jobs that have arrived in each stream.
    """
    from agents.rollout import play_together

    recs = run_heuristics(part, machine, [0], len(part), notes=notes)
    arrivals = np.sort(part["submit"].to_numpy()) - int(part["submit"].min())
    bar = tqdm(total=len(part) * len(agents), desc="whole split", unit="job", disable=not progress or not agents)
    played: dict[str, list[pd.DataFrame]] = {}
    for labels, env in _same_environments(agents, machine, real, len(part), split):
        before = bar.n

        def moved(clocks: np.ndarray, before: int = before) -> None:
            bar.update(before + int(np.searchsorted(arrivals, clocks, side="right").sum()) - bar.n)

        infos = play_together([agents[label].model for label in labels], 0, progress=moved, **env)
        played.update({label: _records(label, agents[label], [info], "the whole split")
                       for label, info in zip(labels, infos, strict=True)})
    bar.close()
    return pd.concat(recs + [r for label in agents for r in played[label]], ignore_index=True)


def _same_environments(agents: dict[str, Agent], machine: machines.Machine, trace: pd.DataFrame, length: int,
                       split: str) -> list[tuple[list[str], dict[str, Any]]]:
    """The agents grouped by the environment they play in (a run's networks share one), in order of appearance."""
    groups: list[tuple[list[str], dict[str, Any]]] = []
    for label, agent in agents.items():
        env = _env_of(agent, machine, trace, length, split)
        same = next((g for g in groups if _same(g[1], env)), None)
        if same is None:
            groups.append(([label], env))
        else:
            same[0].append(label)
    return groups


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two environments' arguments are the same (the workload compared by identity)."""
    return a.keys() == b.keys() and all(a[k] is b[k] if k == "workload" else a[k] == b[k] for k in a)


def evaluate_on_test(trace: str, agents: dict[str, Any], windows: int = 20, length: int = 1024,
                     seed: int = 0, progress: bool = True, read: dict[str, Any] | None = None,
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`evaluate` on the windows alone: the ``(per_window, per_job)`` tables."""
    done = evaluate(trace, agents, windows, length, seed, progress, read, whole=False)
    return done.per_window, done.per_job


def evaluate_run(run: RunFolder, trace: str, read: dict[str, Any], windows: int, length: int,
                 progress: bool = True, whole: bool = True) -> pd.DataFrame:
    """A run's networks and every heuristic on the test windows (seed 0) and (``whole``) the whole test split.

    Writes ``eval/``; returns the summary.
    """
    done = evaluate(trace, run.agents(), windows, length, seed=0, read=read, progress=progress, whole=whole)
    return write(run.eval, done)


def write(out: Path, done: Evaluation) -> pd.DataFrame:
    """:func:`write_results` of an :class:`Evaluation`."""
    return write_results(out, done.per_window, done.per_job, done.description, done.stream)


def cross_period(trained_on: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """The jobs of ``other`` submitted in the months ``trained_on`` does not cover, as a table of its own.

    Both tables carry their absolute start (``attrs["unix_start_time"]``, seconds) and the same machine. The part is
    the longer of ``other``'s stretches before ``trained_on``'s first submit and after its last, its submit times
    rebased to its first job. It is named after ``trained_on``, so that the references a trace's fits define
    (``tuned``, the learned predictions) are the ones fitted on the agents' own training trace.

    Raises:
        ValueError: a table has no absolute start, the machines differ, or ``other`` has no uncovered job.
    """
    missing = [t.attrs.get("name", "?") for t in (trained_on, other) if "unix_start_time" not in t.attrs]
    if missing:
        raise ValueError(f"{missing} record no absolute start time (attrs['unix_start_time']): their periods cannot "
                         "be compared; read them with a reader that keeps it (SWF's UnixStartTime, Theta's CSV)")
    if trained_on.attrs["machine"].name != other.attrs["machine"].name:
        raise ValueError(f"{trained_on.attrs['name']} and {other.attrs['name']} ran on different machines "
                         f"({trained_on.attrs['machine'].name}, {other.attrs['machine'].name}): no cross-period check")
    begin = int(trained_on.attrs["unix_start_time"]) + int(trained_on["submit"].min())
    end = int(trained_on.attrs["unix_start_time"]) + int(trained_on["submit"].max())
    when = int(other.attrs["unix_start_time"]) + other["submit"].to_numpy(np.int64)
    before, after = other[when < begin], other[when > end]
    part = (before if len(before) >= len(after) else after).reset_index(drop=True)
    if part.empty:
        raise ValueError(f"{trained_on.attrs['name']} covers every month of {other.attrs['name']}: nothing to test on")
    first = int(part["submit"].iat[0])
    part["submit"] -= first
    part.attrs = dict(other.attrs, name=trained_on.attrs["name"], source_trace=other.attrs.get("name"),
                      unix_start_time=int(other.attrs["unix_start_time"]) + first)
    return part


def evaluate_cross_period(trace: str, other: str, agents: dict[str, Any], windows: int = 20, length: int = 1024,
                          seed: int = 0, progress: bool = True, read: dict[str, Any] | None = None,
                          whole: bool = True) -> Evaluation:
    """Agents trained on ``trace`` and every reference row on ``other``'s months that ``trace`` does not cover.

    The windows are drawn from that whole part (:func:`cross_period`), and the stream is the whole part.
    """
    trained_on = _read(trace, read)
    part = cross_period(trained_on, _read(other, None))
    learned.ensure_quietly(str(trained_on.attrs.get("name", "")), trained_on, part.attrs["machine"].nodes, progress)
    starts = traces.window_starts(len(part), length, windows, seed)
    done = evaluate_split(part, part, "all", agents, starts, length, progress, whole)
    return dataclasses.replace(done, description=describe_cross_period(part, trace, windows, length, seed))


def describe_cross_period(part: pd.DataFrame, trace: str, windows: int, length: int, seed: int) -> str:
    """:func:`describe` for :func:`evaluate_cross_period`: which months of which trace the windows come from."""
    first = pd.Timestamp(int(part.attrs["unix_start_time"]), unit="s")
    last = first + pd.Timedelta(seconds=int(part["submit"].iat[-1]))
    where = (f"{part.attrs['source_trace']}, the months {trace} does not cover ({first:%Y-%m-%d} to {last:%Y-%m-%d}, "
             f"{len(part):,} jobs)")
    return where + describe(trace, windows, length, seed).split(", test split (last 30%)", 1)[1]
