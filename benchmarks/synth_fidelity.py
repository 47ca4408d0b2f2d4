"""Fidelity of every synthesizer on one real trace: one table, floor and bootstrap next to every model.

Usage: ``python benchmarks/synth_fidelity.py --trace theta [--models ...] [--seed 0] [--jobs N] [--out results.md]``.

The trace (a name from :data:`hpcgym.traces.BUNDLED`) is split chronologically. Each model is fitted on the train
split (first 70%) with the real machine's size (``max_nodes=machine.nodes``) and samples as many jobs as the test
split holds; :func:`synth.fidelity.score` compares the raw sample with the **test split** (validity is scored on the
raw sample, before invalid rows are dropped). Columns: ``floor`` (the train split vs test), ``bootstrap`` (a
day-block bootstrap of the train rows, :mod:`synth.bootstrap`: the memorizer a model must beat) and one per model.
``better`` says which direction is better; ``test`` is the test split's own value of a per-trace statistic (the
rows named ``... gap`` hold ``abs(candidate - test)``). The last rows are wall seconds on this machine: fitting,
sampling and scoring. A model that fails is reported as failed and the others go on. The table is rewritten after
every model, so an interrupted run keeps what finished. The neural models run with their CPU defaults (see their module
docstrings); all seven take about half an hour or more per trace on 2 cores.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

import synth
from hpcgym import machines, traces
from hpcgym.io import atomic_write
from synth import fidelity
from synth.report import head

ORDER = ["arrivals", "lublin", "gaussiancopula", "ctgan", "tvae", "copulagan", "realtabformer"]


def run_model(name: str, refs: fidelity.References, seed: int) -> tuple[dict[str, Any], dict[str, float]]:
    """Fit, sample and score one model; return its :func:`synth.fidelity.score` result and its timings."""
    t0 = time.perf_counter()
    model = synth.get(name, max_nodes=refs.machine.nodes).fit(refs.train, seed=seed)
    t1 = time.perf_counter()
    try:
        raw = model.sample(len(refs.test), seed=seed)
    except RuntimeError:  # too few valid rows even after redraws: scored as an all-invalid sample
        raw = None
    t2 = time.perf_counter()
    scored = fidelity.score(refs, raw)
    return scored, {"fit_s": t1 - t0, "sample_s": t2 - t1, "score_s": time.perf_counter() - t2}


def cell(value: Any) -> str:
    """A table cell: 3 decimals below 100, whole numbers above, text as is (pipes escaped)."""
    if isinstance(value, float):
        if value != value:
            return "-"
        return f"{value:,.0f}" if abs(value) >= 100 and value != float("inf") else f"{value:.3f}"
    return str(value).replace("|", "\\|")


def markdown(table: pd.DataFrame) -> str:
    """A markdown table: one row per metric, its direction, the numeric columns, the test split's own value."""
    cols = [c for c in table.columns if c not in ("metric", "section", "target", "test", "note")] + ["test"]
    lines = ["| metric | " + " | ".join(cols) + " |", "|---|" + "|".join("---:" for _ in cols) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in [row["metric"], *[row[c] for c in cols]]) + " |"
              for _, row in table.iterrows()]
    return "\n".join(lines)


def wide_table(refs: fidelity.References, scored: dict[str, dict[str, Any]],
               timings: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The metric table, the raw whole-trace load and utilization (gaps hide the sign), then seconds per model."""
    table = fidelity.make_table(refs, scored)
    extra = []
    for key in ("offered_load", "utilization"):
        def value(result: dict[str, Any], k: str = key) -> float:
            sched = result["sections"].get("scheduling")
            return float("nan") if sched is None else float(sched["summary"].at[k, "synthetic"])

        row = {"metric": f"{key.replace('_', ' ')} (whole trace, value)", "section": "scheduling",
               "better": "= test", "floor": value(refs.floor), "bootstrap": value(refs.bootstrap),
               "test": float(refs.floor["sections"]["scheduling"]["summary"].at[key, "real"])}
        extra.append(row | {m: value(scored[m]) for m in scored})
    for key in ("fit_s", "sample_s", "score_s"):
        row = {"metric": key, "section": "time", "better": "lower", "floor": float("nan"),
               "bootstrap": float("nan")}
        extra.append(row | {m: timings[m][key] for m in scored})
    return pd.concat([table, pd.DataFrame(extra)], ignore_index=True)


def report(args: argparse.Namespace, real: pd.DataFrame, refs: fidelity.References,
           scored: dict[str, dict[str, Any]], timings: dict[str, dict[str, float]], failed: dict[str, str]) -> str:
    """The markdown text: a header line, the table, failures."""
    head = (f"{args.trace}: {len(real):,} jobs on {refs.machine.name} ({refs.machine.nodes:,} nodes); train "
            f"{len(refs.train):,} jobs, test (reference) {len(refs.test):,}, seed {args.seed}; floor = train vs "
            f"test, bootstrap = day-block bootstrap of train; floor and bootstrap took "
            f"{refs.timing['references']:.0f} s")
    text = head + "\n\n" + markdown(wide_table(refs, scored, timings))
    if failed:
        text += "\n\n" + "\n".join(f"- {m} failed: {why}" for m, why in failed.items())
    return text + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", default="theta", choices=sorted(traces.BUNDLED), help="bundled trace (default theta)")
    ap.add_argument("--models", nargs="+", default=ORDER, choices=sorted(synth.MODELS),
                    help="models to run (default: all seven)")
    ap.add_argument("--seed", type=int, default=0, help="seed of fitting, sampling, bootstrap and every subsample")
    ap.add_argument("--jobs", type=int, default=None, help="use only the first N jobs of the trace (quick runs)")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here (after every model)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print (and optionally save) the markdown table."""
    args = parse_args(argv)
    warnings.simplefilter("ignore")
    real = traces.load(args.trace)
    if args.jobs is not None:
        real = head(real, args.jobs)
    machine = machines.get(real.attrs["machine"])
    refs = fidelity.prepare(traces.split(real, "train"), traces.split(real, "test"), machine, args.seed)
    scored: dict[str, dict[str, Any]] = {}
    timings: dict[str, dict[str, float]] = {}
    failed: dict[str, str] = {}
    for name in args.models:
        print(f"... {name} (started {time.strftime('%H:%M:%S', time.gmtime())} UTC)", flush=True)
        try:
            scored[name], timings[name] = run_model(name, refs, args.seed)
        except Exception as exc:  # noqa: BLE001 - report a broken backend as such, and go on with the others
            failed[name] = f"{type(exc).__name__}: {exc}"
            print(f"{name} failed: {failed[name]}", flush=True)
        if args.out:
            text = report(args, real, refs, scored, timings, failed)
            atomic_write(args.out, lambda tmp, t=text: Path(tmp).write_text(t, encoding="utf-8"))
    print(report(args, real, refs, scored, timings, failed))


if __name__ == "__main__":
    main()
