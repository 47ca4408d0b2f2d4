"""The README's and the docs' results tables, built from the committed summaries in ``results/``.

The library of ``python -m experiments.report``, whose docstring says which file holds what.
"""


from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments import tables
from experiments.results import Windows
from experiments.runs import BASELINE
from experiments.stream import FILE as STREAM
from hpcgym import io as hpcgym_io

ROOT = Path(__file__).resolve().parents[1]
RESULTS = "results"
MANIFEST, SEEDS, BENCHMARKS = "manifest.csv", "seeds.csv", "benchmarks.csv"
#: the page of each table
PAGES = {"results": "docs/results.md",
         "seeds": "docs/results.md", "benchmarks": "docs/benchmarks.md",
         "predictions-accuracy": "docs/predictions.md", "predictions-scheduling": "docs/predictions.md",
         "predictions-ordering": "docs/predictions.md", "predictions-order-dev": "docs/predictions.md",
         "predictions-short-jobs": "docs/predictions.md", "predictions-reestimate": "docs/predictions.md",
         "readme-bench": "README.md", "results-bench": "docs/results.md", "traces-catalog": "docs/traces.md",
         "predictions-bench": "docs/predictions.md", "bench-cost": "docs/bench.md", "readme-study": "README.md",
         "study-suite": "docs/study.md", "study-correlation": "docs/study.md", "results-agents": "docs/results.md",
         "study-agents": "docs/study.md"}
#: ``results/study_suite/``: what ``python -m experiments.study --suite`` wrote (``answer.csv``,
#: ``fidelity_vs_usefulness.csv``, ``study.json``: the command, the day, the logs and the time)
STUDY = "study_suite"
#: ``results/study_suite_agents/``: the same command with ``--agents`` (``answer_agents.csv``, ``study.json``)
STUDY_AGENTS = "study_suite_agents"
#: ``results/bench/<name>/``: what ``python -m experiments.bench --out`` writes (``pooled.csv``, ``logs.csv``,
#: ``bench.json``); ``suite`` is the leaderboard's run
BENCH, SUITE = "bench", "suite"
#: the leaderboard's rows (the README shows these against each of its references)
LEADERBOARD_ROWS = ("fcfs+easy", "sjf+easy", "saf+easy", "tuned+easy", "saf-learned+easy", "tuned-learned+easy",
                    "clairvoyant+easy")
LEADERBOARD_REFERENCES = ("saf+easy", "tuned+easy")
#: the rows and references that answer whether learned predictions beat walltimes, last2 and median5
PREDICTION_ROWS = ("saf-learned+easy", "tuned-learned+easy", "sjbf-learned+easy")
#: ``results/accuracy/<trace>/``: what ``python -m baselines.accuracy --trace <trace> --out`` writes
ACCURACY = "accuracy"
#: ``results/predictor_order/order.csv``: what ``python benchmarks/predictor_order.py --out`` writes
ORDER_DEV = "predictor_order/order.csv"
#: ``results/short_jobs/short_jobs.csv``: what ``python benchmarks/short_jobs.py --out`` writes
SHORT_JOBS = "short_jobs/short_jobs.csv"
#: ``results/reestimate/reestimate.csv``: what ``python benchmarks/reestimate.py --out`` writes
REESTIMATE = "reestimate/reestimate.csv"
#: ``results/streams/<file>``: the whole test split scheduled as one stream, beside the per-window ``<file>``
STREAMS = "streams"
STREAM_COLUMNS = ["scheduler", "kind", "backfill", "jobs", "bsld", "vs_reference", "vs_reference_low",
                  "vs_reference_high", "reference"]
#: the README's figure: the per-window comparison of this trace's agent with the reference
FIGURE_TRACE, FIGURE = "theta", "docs/figures/bsld_per_window.png"
#: the README's figure: the suite's forest plot against SAF+EASY
BENCH_FIGURE, BENCH_FIGURE_REFERENCE = "docs/figures/bench_forest.png", "saf+easy"
PER_WINDOW_COLUMNS = ["scheduler", "kind", "backfill", "window", "start", "block", "bsld"]
AGENT_KINDS = ("agent", "cloned", "untrained")


def read(root: Path = ROOT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The manifest joined with every per-window file (one row per trace x scheduler x window), and the manifest.

    A scheduler that two files of one trace hold (the heuristics, on the same windows) is kept from the first.
    """
    manifest = pd.read_csv(root / RESULTS / MANIFEST, dtype=str)
    parts = [Windows.read(root / RESULTS / row.file).table.assign(trace=row.trace, date=row.date, seeds=row.seeds)
             for row in manifest.itertuples()]
    windows = pd.concat(parts, ignore_index=True).drop_duplicates(["trace", "scheduler", "window"])
    windows.loc[~windows["kind"].isin(AGENT_KINDS), "seeds"] = "-"  # heuristics do not depend on a seed
    return windows, manifest


def read_streams(manifest: pd.DataFrame, root: Path = ROOT) -> pd.DataFrame:
    """The whole-split rows of the evaluations that have them (``results/streams/<file>``).

    One row per trace x scheduler (the first file's, as :func:`read`); an empty table if no evaluation has one.
    """
    parts = [pd.read_csv(root / RESULTS / STREAMS / row.file).assign(trace=row.trace)
             for row in manifest.itertuples() if (root / RESULTS / STREAMS / row.file).is_file()]
    if not parts:
        return pd.DataFrame(columns=[*STREAM_COLUMNS, "trace"])
    return pd.concat(parts, ignore_index=True).drop_duplicates(["trace", "scheduler"])


def trace_table(windows: pd.DataFrame) -> pd.DataFrame:
    """One trace's rows: mean bsld, the paired ratio to the reference; implementable first, upper bounds last."""
    reference = tables.strongest_reference(windows)
    means = windows.groupby("scheduler", sort=False).agg(kind=("kind", "first"), backfill=("backfill", "first"),
                                                         seeds=("seeds", "first"), date=("date", "first"),
                                                         windows=("window", "nunique"), bsld=("bsld", "mean"))
    table = means.reset_index().merge(tables.paired(windows, reference), on="scheduler", how="left")
    table["reference"] = reference
    table["upper"] = table["kind"] == tables.CLAIRVOYANT
    return table.sort_values(["upper", "bsld"]).drop(columns="upper").reset_index(drop=True)


def readme_rows(table: pd.DataFrame, backfill: str = "easy") -> pd.DataFrame:
    """The rows that matter (``backfill``'s).

    The baseline, SAF, the reference, every agent and its warm start (the cloned network), the clairvoyant bound.
    """
    named = {BASELINE, f"saf+{backfill}", f"tuned+{backfill}", f"{tables.CLAIRVOYANT}+{backfill}",
             table["reference"].iat[0]}
    return table[table["scheduler"].isin(named) | table["kind"].isin(("agent", "cloned"))]


def with_streams(table: pd.DataFrame, streams: pd.DataFrame) -> pd.DataFrame:
    """``table`` (one trace's rows) with its schedulers' whole-split bsld and paired ratio (NaN where none)."""
    cols = {"bsld": "whole", "vs_reference": "whole_vs", "vs_reference_low": "whole_vs_low",
            "vs_reference_high": "whole_vs_high", "reference": "whole_reference"}
    mine = streams.loc[streams["trace"] == table["trace"].iat[0], ["scheduler", *cols]].rename(columns=cols)
    return table.merge(mine, on="scheduler", how="left")


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    """A trace table as printed: names (upper bounds marked), seeds, windows, bsld, the paired ratio, the date."""
    return pd.DataFrame({
        "trace": table["trace"],
        "scheduler": [f"{s} (upper bound)" if k == tables.CLAIRVOYANT else s
                      for s, k in zip(table["scheduler"], table["kind"], strict=True)],
        "kind": table["kind"], "seeds": table["seeds"], "windows": table["windows"].astype(int),
        "bsld": table["bsld"],
        "vs reference (95% CI)": [tables.ratio_text(*r) for r in table[["vs_reference", "vs_reference_low",
                                                                         "vs_reference_high"]].itertuples(index=False)],
        "whole split": table["whole"],
        "whole vs its reference (95% CI)": [tables.ratio_text(*r) for r in table[
            ["whole_vs", "whole_vs_low", "whole_vs_high"]].itertuples(index=False)],
        "date": table["date"]})


def evaluation_tables(windows: pd.DataFrame, rows: str, streams: pd.DataFrame) -> pd.DataFrame:
    """Every trace's table (``rows``: ``readme`` for the rows that matter, ``all`` for every EASY row).

    With the whole-split columns of ``streams`` (:func:`read_streams`) where a scheduler has them.
    """
    out = []
    for trace, group in windows.groupby("trace", sort=False):
        table = with_streams(trace_table(group).assign(trace=trace), streams)
        table = readme_rows(table) if rows == "readme" else table[table["backfill"] == "easy"]
        out.append(table)
    return pd.concat(out, ignore_index=True)


def _references(windows: pd.DataFrame) -> str:
    """``theta: tuned+easy, ...``: each trace's reference."""
    return ", ".join(f"{t}: {tables.strongest_reference(g)}" for t, g in windows.groupby("trace", sort=False))


def _stream_references(streams: pd.DataFrame) -> str:
    """``theta: saf-last2+easy, ...``: each trace's whole-split reference (``-`` if no trace has a stream)."""
    return ", ".join(f"{t}: {g['reference'].iat[0]}" for t, g in streams.groupby("trace", sort=False)) or "-"


def seeds_table(root: Path = ROOT) -> str:
    """The journal's medians across seeds (no per-window scores: no paired CI)."""
    seeds = pd.read_csv(root / RESULTS / SEEDS, dtype={"seeds": str})
    return tables.markdown(seeds[["trace", "scheduler", "kind", "seeds", "bsld", "worst_seed", "date"]], digits=2)


def benchmarks_table(root: Path = ROOT) -> str:
    """The benchmark figures, one row each, with their command."""
    bench = pd.read_csv(root / RESULTS / BENCHMARKS, dtype={"value": str})
    bench["command"] = [f"`{c}`" for c in bench["command"]]
    return tables.markdown(bench[["benchmark", "measure", "value", "unit", "date", "command"]])


def predictions_tables(root: Path = ROOT) -> dict[str, str]:
    """The runtime predictors' tables: every trace of ``results/accuracy/`` in one each, and the order benchmark."""
    folders = sorted(p for p in (root / RESULTS / ACCURACY).iterdir() if p.is_dir())
    acc = pd.concat([pd.read_csv(f / "accuracy.csv").assign(trace=f.name) for f in folders], ignore_index=True)
    sched = pd.concat([pd.read_csv(f / "scheduling.csv").assign(trace=f.name) for f in folders], ignore_index=True)
    acc = acc[["trace", "predictor", "mae_log", "under", "within_2x", "spearman", "short_found", "long_called_short"]]
    sched = sched[["trace", "scheduler", "predictor", "window", "windows", "headroom_windows", "whole",
                   "headroom_whole"]]
    percent = {c: (lambda v: "-" if pd.isna(v) else f"{v:.0%}") for c in ("headroom_windows", "headroom_whole")}
    order = pd.concat([pd.read_csv(f / "ordering.csv").assign(trace=f.name) for f in folders], ignore_index=True)
    order = order[["trace", "order", "reservations", "window", "windows", "headroom_windows", "whole",
                   "headroom_whole"]]
    dev = pd.read_csv(root / RESULTS / ORDER_DEV)
    dev["vs median5 (95% CI)"] = [tables.ratio_text(*r) for r in dev[["vs_median5", "low", "high"]].itertuples(
        index=False)]
    return {"predictions-accuracy": tables.markdown(acc, digits=3),
            "predictions-scheduling": tables.markdown(sched, percent, digits=2),
            "predictions-ordering": tables.markdown(order, percent, digits=2),
            "predictions-order-dev": tables.markdown(
                dev[["trace", "part", "order", "bsld", "vs median5 (95% CI)", "windows_for_5pct"]].rename(
                    columns={"windows_for_5pct": "windows for a ±5% CI"}),
                {"windows for a ±5% CI": lambda v: "-" if pd.isna(v) else f"{v:,.0f}"}, digits=2),
            "predictions-short-jobs": short_jobs_table(pd.read_csv(root / RESULTS / SHORT_JOBS)),
            "predictions-reestimate": reestimate_table(pd.read_csv(root / RESULTS / REESTIMATE))}


def short_jobs_table(rows: pd.DataFrame) -> str:
    """``benchmarks/short_jobs.py``'s rows as Markdown: the rates and the room's share in percent."""
    rows = rows.rename(columns={"false_positive_rate": "false positives",
                                "recall_asking_over_1h": "recall, asking > 1 h", "headroom": "share of the room"})
    formats = {c: (lambda v: "-" if pd.isna(v) else f"{v if abs(v) >= 0.005 else 0.0:.0%}")
               for c in ("recall", "false positives", "recall, asking > 1 h", "share of the room")}
    formats["threshold"] = lambda v: "-" if pd.isna(v) else f"{v:g}"
    formats["cutoff"] = lambda v: f"{int(v):,} s"
    return tables.markdown(rows, formats, digits=2)


def reestimate_table(rows: pd.DataFrame) -> str:
    """``benchmarks/reestimate.py``'s rows as Markdown: one row per trace, part and predictor, a column per mode."""
    rows = rows[rows["predictor"].isin(["last2", "median5", "learned"])]
    out = []
    for (trace, part, predictor), g in rows.groupby(["trace", "part", "predictor"], sort=False):
        by = g.set_index("reestimate")
        row = {"trace": trace, "part": part, "predictor": predictor,
               "at arrival": _bsld_and_share(by.loc["none"])}
        for mode, name in (("user", "again at the user's ends"), ("walltime", "same walltime only")):
            r = by.loc[mode]
            row[name] = f"{_bsld_and_share(r)}; {tables.ratio_text(r['vs_none'], r['low'], r['high'])}"
        out.append(row)
    return tables.markdown(pd.DataFrame(out), digits=2)


def _bsld_and_share(row: pd.Series) -> str:
    share = "" if pd.isna(row["headroom"]) else f" ({row['headroom']:.0%})"
    return f"{row['bsld']:.2f}{share}"


def bench_folder(name: str = SUITE, root: Path = ROOT) -> Path:
    """A committed bench run's folder (``results/bench/<name>``)."""
    return root / RESULTS / BENCH / name


def bench_table(folder: Path, rows: Sequence[str] | None = None, references: Sequence[str] | None = None,
                short: bool = False) -> str:
    """A bench run's pooled rows as Markdown (each against each reference), with the command and the day.

    ``short``: the note under it names the run only (the README links to docs/bench.md for the definitions).
    """
    table = pd.read_csv(folder / "pooled.csv")
    about = json.loads((folder / "bench.json").read_text())
    if references is not None:
        table = table[table["reference"].isin(references)]
    if rows is not None:
        table = table[table["scheduler"].isin(rows) & (table["scheduler"] != table["reference"])]
    ci = lambda r, lo, hi: "-" if pd.isna(r) else f"{r:.3f} ({lo:.3f}-{hi:.3f})"  # noqa: E731
    shown = pd.DataFrame({
        "reference": table["reference"],
        "scheduler": [f"{s} (upper bound)" if s.startswith("clairvoyant") else s for s in table["scheduler"]],
        "vs reference, this suite (95% CI)": [ci(*r) for r in table[["ratio", "lo", "hi"]].itertuples(index=False)],
        "logs resampled": [f"{lo:.3f}-{hi:.3f}" for lo, hi in table[["lo_logs", "hi_logs"]].itertuples(index=False)],
        "noise floor": ["-" if pd.isna(f) else f"±{f:.1%}" for f in table["noise_floor"]],
        "logs": table["logs"], "windows": table["windows"],
        "wins/ties/losses": [f"{w}/{t}/{lo}" for w, t, lo in table[["wins", "ties", "losses"]].itertuples(index=False)],
        "headroom (median; pooled)": ["-" if pd.isna(h) else f"{h:.0%}; {g:.0%}" for h, g in
                                      table[["headroom", "headroom_pooled"]].itertuples(index=False)],
        "whole split, this suite (95% CI)": [ci(*r) for r in table[["stream_ratio", "stream_lo", "stream_hi"]]
                                             .itertuples(index=False)],
        "whole split floor": ["-" if pd.isna(f) else f"±{f:.1%}" for f in table["stream_noise_floor"]],
        "verdict (windows; whole split)": [f"{v.split(':')[0]}; {w.split(':')[0]}" for v, w in
                                           table[["verdict", "stream_verdict"]].itertuples(index=False)]})
    if short:
        return tables.markdown(shown, digits=2) + (f"\n\n{about['logs']} logs, {about['windows']:,} disjoint test "
                                                   f"windows; `results/bench/suite/` ({about['date']}).")
    note = (f"{about['logs']} logs, {about['windows']:,} disjoint test windows of 1,024 jobs; "
            f"`{about['command']}` ({about['date']}). Per log: the paired ratio of mean bsld to the reference on the "
            "same windows; pooled: their geometric mean, 95% CIs by bootstrap (this suite: windows resampled within "
            "each log; logs resampled: the logs too). Noise floor: the farthest any of 20 near-copies of the "
            "reference (each job's runtime estimate x exp(0.05 N(0,1)) in its priority) gets from 1 over the same "
            "logs; a ratio inside it is noise. Wins/ties/losses over logs (a win: the log's CI below 1, outside its "
            "floor). Headroom: the share of the way from FCFS+EASY to the clairvoyant row that the row takes, the "
            "median over logs; pooled: on the geometric scale, mean log(FCFS / row) over mean log(FCFS / "
            "clairvoyant). Whole split: the same on each log's test split as one stream (blocks of 1,024 jobs "
            "resampled), with its own noise floor.")
    return tables.markdown(shown, digits=2) + "\n\n" + note


def agents_table(root: Path = ROOT) -> str:
    """The trained agents on the logs they trained for: per recipe, each seed against ``tuned`` and its own start.

    From ``results/bench/agents/`` (``pooled.csv`` for the ratio to ``tuned+easy``; ``per_window.csv`` for the
    ratio to the start, pooled the same way: :func:`experiments.pooled.pool`).
    """
    from experiments import pooled
    from experiments.results import Windows

    folder = bench_folder("agents", root)
    table = pd.read_csv(folder / "pooled.csv")
    table = table[table["reference"] == "tuned+easy"].set_index("scheduler")
    windows = Windows.read(folder).table
    about = json.loads((folder / "bench.json").read_text())
    agents = [s for s in table.index if "-s" in s and not s.endswith(")")]
    rows = []
    for name in agents:
        start = f"{name} (cloned, no RL)"
        mine, ref = [], []
        for _, g in windows.groupby("log", sort=False):
            both = g.pivot_table(index="window", columns="scheduler", values="bsld")
            if name in both and start in both:
                mine.append(both[name].to_numpy())
                ref.append(both[start].to_numpy())
        vs_start = pooled.pool(mine, ref, seed=0) if mine else None
        r = table.loc[name]
        rows.append({"recipe": name.rsplit("-s", 1)[0], "seed": name.rsplit("-s", 1)[1], "logs": int(r["logs"]),
                     "windows": int(r["windows"]),
                     "vs tuned+easy (95% CI)": f"{r['ratio']:.3f} ({r['lo']:.3f}-{r['hi']:.3f})",
                     "noise floor": f"±{r['noise_floor']:.1%}", "verdict": r["verdict"].split(":")[0],
                     "vs its start (95% CI)": "-" if vs_start is None else
                     f"{vs_start.ratio:.3f} ({vs_start.lo:.3f}-{vs_start.hi:.3f})", "_ratio": r["ratio"]})
    shown = pd.DataFrame(rows).sort_values(["recipe", "seed"], kind="stable")
    summary = shown.groupby("recipe", sort=False)["_ratio"].agg(["median", "max", "size"])
    lines = [f"{recipe}: median over {int(s['size'])} seeds {s['median']:.3f} of tuned+easy, worst seed {s['max']:.3f}"
             for recipe, s in summary.iterrows()]
    return (tables.markdown(shown.drop(columns="_ratio")) + "\n\n" + "; ".join(lines) +
            f". `{about['command'].split(' --model')[0]} --model ...` ({about['date']}; the runs are listed in "
            "`results/bench/agents/bench.json`).")


def catalog_table(root: Path = ROOT) -> str:
    """Every catalogued log: its machine, jobs, what it records, and whether the suite holds it (and why)."""
    from hpcgym import traces

    logs = pd.read_csv(bench_folder(root=root) / "logs.csv").set_index("log")
    yes = lambda v: "yes" if v else "no"  # noqa: E731
    rows = []
    for name, info in traces.BUNDLED.items():
        log = logs.loc[name]
        rows.append({"name": f"`{name}`", "machine": log["machine"], "description": info.description,
                     "jobs kept / in file": f"{int(log['jobs']):,} / {int(log['jobs'] + log['dropped']):,}",
                     "requested times": yes(info.requested_times), "waits": yes(info.wait_times),
                     "users": yes(info.user_ids),
                     "suite": "yes" if log["status"] == "suite" else f"no: {log['reason']}",
                     "test windows": int(log["windows"]),
                     "notes": "; ".join(n for n in (info.notes, info.cleaning and f"dropped: {info.cleaning}") if n)})
    about = json.loads((bench_folder(root=root) / "bench.json").read_text())
    return (tables.markdown(pd.DataFrame(rows)) + f"\n\nSuite status as measured by `{about['command']}` "
            f"({about['date']}): a log enters the suite when FCFS+EASY's mean bsld over its disjoint test windows "
            "is at least 1.1 (its windows queue; docs/bench.md).")


def _ci(ratio: float, lo: float, hi: float) -> str:
    return "-" if pd.isna(ratio) else f"{ratio:.3f} ({lo:.3f}-{hi:.3f})"


def _answer_columns(table: pd.DataFrame) -> pd.DataFrame:
    """An ``answer.csv``'s shown columns: the pooled ratio to real with both CIs, the noise floor, the answer."""
    return pd.DataFrame({
        "learner": table["learner"], "trained on": table["source"],
        "vs trained on real, this suite (95% CI)": [_ci(*r) for r in table[["ratio", "lo", "hi"]]
                                                    .itertuples(index=False)],
        "logs resampled": [f"{lo:.3f}-{hi:.3f}" for lo, hi in table[["lo_logs", "hi_logs"]].itertuples(index=False)],
        "noise floor": ["-" if pd.isna(f) else f"±{f:.1%}" for f in table["noise_floor"]],
        "logs": table["logs"], "windows": table["windows"], "answer": table["answer"]})


def study_table(root: Path = ROOT, full: bool = False) -> str:
    """The suite study's answer: per learner and source, the pooled ratio to the same learner trained on real."""
    folder = root / RESULTS / STUDY
    table = pd.read_csv(folder / "answer.csv")
    about = json.loads((folder / "study.json").read_text())
    shown = _answer_columns(table)
    if not full:
        return tables.markdown(shown, digits=3) + f"\n\n`{about['command']}` ({about['date']}; `results/study_suite/`)."
    shown["whole split (95% CI)"] = [_ci(*r) for r in table[["stream_ratio", "stream_lo", "stream_hi"]]
                                     .itertuples(index=False)]
    shown["whole split answer"] = table["stream_answer"].fillna("-")
    note = (f"`{about['command']}` ({about['date']}; {about['logs']} logs, {about['wall']}). The learner trained on "
            "the source over the same learner trained on the real train split, on every disjoint test window of "
            "each log; pooled: the geometric mean over the logs, 95% CIs (this suite: windows resampled within each "
            "log; logs resampled too). Noise floor: the real row's (its jittered near-copies). Answer: as good as "
            "real where the CI lies inside [0.95, 1.05], worse above 1, better below, can't tell otherwise.")
    return tables.markdown(shown, digits=3) + "\n\n" + note


def study_agents_table(root: Path = ROOT) -> str:
    """The suite study's RL answer: the residual agents trained on a generator's sample over those trained on real."""
    folder = root / RESULTS / STUDY_AGENTS
    table = pd.read_csv(folder / "answer_agents.csv")
    about = json.loads((folder / "study.json").read_text())
    shown = _answer_columns(table)
    shown.insert(2, "seeds", table["seeds"])
    shown.insert(5, "seeds paired (median; worst)", [f"{m:.3f}; {w:.3f}" for m, w in
                                                     table[["median_seed", "worst_seed"]].itertuples(index=False)])
    note = (f"`{about['command']}` ({about['date']}; {about['logs']} logs; `results/study_suite_agents/`). Each "
            "window's score is the mean over the seeds on each side; the seeds' own pooled ratios pair seed k with "
            "real seed k. Noise floor: the real `tuned`'s, which the agents start from.")
    return tables.markdown(shown, digits=3) + "\n\n" + note


def correlation_table(root: Path = ROOT, top: int = 5) -> str:
    """Per learner, the fidelity metrics that best and worst predict usefulness (Spearman, with its CI)."""
    table = pd.read_csv(root / RESULTS / STUDY / "fidelity_vs_usefulness.csv")
    rows = []
    for _, g in table.groupby("learner", sort=False):
        g = g.dropna(subset=["rho_oriented"])
        rows.append(pd.concat([g.head(top), g.tail(2)]).drop_duplicates())
    shown = pd.concat(rows, ignore_index=True) if rows else table
    shown = shown.assign(rho=[f"{r:+.2f} ({lo:+.2f} to {hi:+.2f})" for r, lo, hi in
                              shown[["rho_oriented", "lo", "hi"]].itertuples(index=False)])
    return tables.markdown(shown[["learner", "metric", "section", "pairs", "logs", "rho"]])


def bench_cost_table(root: Path = ROOT) -> str:
    """The bench's cost rows of ``results/benchmarks.csv``."""
    bench = pd.read_csv(root / RESULTS / BENCHMARKS, dtype={"value": str})
    bench = bench[bench["benchmark"] == "bench"]
    bench["command"] = [f"`{c}`" for c in bench["command"]]
    return tables.markdown(bench[["measure", "value", "unit", "date", "command"]])


def build(root: Path = ROOT) -> dict[str, str]:
    """Each table's Markdown, by name (:data:`PAGES`' keys)."""
    windows, manifest = read(root)
    streams = read_streams(manifest, root)
    commands = "; ".join(f"{r.trace}: `{r.command}`" for r in manifest.itertuples())
    note = (f"Mean bsld over the windows (lower is better). vs reference: the paired ratio to each trace's strongest "
            f"implementable row ({_references(windows)}) on the same windows, with a 95% block-bootstrap CI (blocks "
            f"of consecutive jobs; \"better\"/\"worse\" where the CI excludes 1). Whole split: the mean bsld of the "
            f"whole test split scheduled as one stream, and the paired ratio to the strongest implementable row there "
            f"({_stream_references(streams)}; CI by blocks of 1,024 consecutive jobs). Commands: {commands}.")
    return {"results": tables.markdown(_shown(evaluation_tables(windows, "all", streams)), digits=2) + "\n\n" + note,
            "seeds": seeds_table(root), "benchmarks": benchmarks_table(root),
            **predictions_tables(root),
            "readme-bench": bench_table(bench_folder(root=root), LEADERBOARD_ROWS, LEADERBOARD_REFERENCES, short=True),
            "results-bench": bench_table(bench_folder(root=root)),
            "traces-catalog": catalog_table(root),
            "predictions-bench": bench_table(bench_folder(root=root), PREDICTION_ROWS),
            "bench-cost": bench_cost_table(root),
            "readme-study": study_table(root), "study-suite": study_table(root, full=True),
            "study-agents": study_agents_table(root),
            "study-correlation": correlation_table(root), "results-agents": agents_table(root)}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- report:{name} -->)(.*?)(<!-- /report:{name} -->)", flags=re.S)


def pages(root: Path = ROOT) -> dict[Path, str]:
    """Every page with its tables rebuilt (the text between each table's markers replaced)."""
    built = build(root)
    out: dict[Path, str] = {}
    for name, text in built.items():
        path = root / PAGES[name]
        page = out.get(path, path.read_text(encoding="utf-8"))
        if not _block(name).search(page):
            raise ValueError(f"{path} has no <!-- report:{name} --> ... <!-- /report:{name} --> block")
        out[path] = _block(name).sub(lambda m, t=text: f"{m.group(1)}\n{t}\n{m.group(3)}", page)
    return out


def differences(root: Path = ROOT) -> list[str]:
    """The pages whose tables differ from what :func:`build` makes of the committed summaries."""
    return [str(path.relative_to(root)) for path, text in pages(root).items()
            if path.read_text(encoding="utf-8") != text]


def add(folder: Path, trace: str, date: str, seeds: str, command: str, backfill: str = "easy",
        root: Path = ROOT) -> Path:
    """Copy an evaluation's per-window scores (rows with ``backfill``) into ``results/``, listed in the manifest.

    Its whole-split scores (``stream.csv``), if it has them, go to ``results/streams/`` under the same name.

    Returns:
        The file written.
    """
    per_window = Windows.read(folder).table
    per_window = per_window.loc[per_window["backfill"] == backfill, PER_WINDOW_COLUMNS].round({"bsld": 6})
    name = f"{folder.parent.name if folder.name == 'eval' else folder.name}.csv"
    hpcgym_io.write_table(per_window, root / RESULTS / name)
    if (folder / STREAM).is_file():  # the whole split as one stream (evaluate's default)
        stream = pd.read_csv(folder / STREAM)
        stream = stream.loc[stream["backfill"] == backfill, STREAM_COLUMNS].round(6)
        hpcgym_io.write_table(stream, root / RESULTS / STREAMS / name)
    manifest = pd.read_csv(root / RESULTS / MANIFEST, dtype=str)
    row = pd.DataFrame([{"file": name, "trace": trace, "date": date, "seeds": seeds, "command": command}])
    hpcgym_io.write_table(pd.concat([manifest[manifest["file"] != name], row], ignore_index=True),
                          root / RESULTS / MANIFEST)
    return root / RESULTS / name


def bench_figure(root: Path = ROOT) -> Path:
    """Redraw the README's forest plot (:data:`BENCH_FIGURE`) from the committed suite run's tables."""
    from experiments import bench_report

    folder = bench_folder(root=root)
    return bench_report.forest(pd.read_csv(folder / "per_log.csv"), pd.read_csv(folder / "pooled.csv"),
                               BENCH_FIGURE_REFERENCE, root / BENCH_FIGURE, rows=LEADERBOARD_ROWS)


def figure(root: Path = ROOT) -> Path:
    """Redraw the results page's figure (:data:`FIGURE`) from the per-window scores of :data:`FIGURE_TRACE`."""
    import matplotlib

    matplotlib.use("Agg")
    from experiments import plots

    windows, manifest = read(root)
    mine = windows[windows["trace"] == FIGURE_TRACE].drop(columns=["trace", "date", "seeds"])
    run = Path(manifest.loc[manifest["trace"] == FIGURE_TRACE, "file"].iat[0]).stem
    res = plots.from_per_window(mine, FIGURE_TRACE, f"{FIGURE_TRACE}, test split (last 30%), "
                                f"{mine['window'].nunique()} windows x 1024 jobs", run)
    fig = plots.figure_per_window(res)
    return hpcgym_io.atomic_write(root / FIGURE, lambda tmp: fig.savefig(tmp, bbox_inches="tight", facecolor="white"))
