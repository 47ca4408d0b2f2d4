"""Trained on synthetic, tested on real: the learned runtime predictor fitted on each generator's samples.

Usage: ``python benchmarks/synth_predictor.py --trace theta [--generators ...] [--samples 3] [--out rows.csv]
[--cache DIR] [--neural-fit-rows N] [--threads 1] [--length train|test] [--jobs N]``; ``--summarize CSV...`` prints
the summary of earlier runs' rows.

The trace (a name from :data:`hpcgym.traces.BUNDLED`) is split chronologically. Each generator is fitted on the
train split as ``benchmarks/synth_fidelity.py`` fits it (same settings, same fit cache and keys, so a fit made by one
is reused by the other) and draws ``--samples`` samples (seeds ``SEED``, ``SEED + 1``, ...) of as many jobs as the
train split holds (``--length train``, the default: the learned predictor then sees as many jobs as the one fitted on
the real train split) or the test split (``--length test``: the fidelity report's samples). Each sample goes
through :func:`synth.validity.check` (what the fidelity report scores), then :class:`baselines.transfer.Target`
fits the learned predictor on it (:func:`baselines.learned.fit`: loss chosen on the sample's own validation windows)
and scores it on the real test split: accuracy (MAE of log runtime, under-prediction share, share within 2x) and
SAF+EASY's mean bounded slowdown on the evaluation's 20 test windows of 1,024 jobs. The first rows are the
references: the predictor fitted on the real train split, ``last2`` and ``walltime``.

One CSV row per (generator, sample), rewritten after every row so an interrupted run keeps what finished; a
generator that fails is recorded with its error and the others go on. The markdown summary (mean and range over the
samples) is printed at the end.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pandas as pd
from synth_fidelity import NEURAL, ORDER, cell, fit_args, fit_table, fitted

import synth
from baselines.transfer import MEASURES, RULES, Target
from hpcgym import machines, traces
from hpcgym.io import atomic_write
from hpcgym.traces.split import head
from synth import fidelity, validity

COLUMNS = ("trace", "generator", "sample", "jobs", "valid", *MEASURES, "loss", "fit_s", "model_fit_s",
           "sample_s", "score_s", "error")

#: the seconds the summary shows: the generator's fit (once, or as recorded when cached), one sample's draw, the
#: learned predictor's fit on one sample
TIMES = ("model_fit_s", "sample_s", "fit_s")


def reference_rows(target: Target, train: pd.DataFrame) -> list[dict]:
    """The rows every generator is read against: the predictor fitted on the real train split, and the rules."""
    started = time.perf_counter()
    rows = [{"generator": "real train", "jobs": len(train), "valid": len(train), **target.fitted(train),
             "score_s": time.perf_counter() - started}]
    return rows + [{"generator": name, "loss": "rule", **target.rule(name)} for name in RULES]


def generator_rows(name: str, refs: fidelity.References, target: Target, args: argparse.Namespace,
                   length: int) -> list[dict]:
    """One row per sample of ``name``: fit (or load) it, sample, clean and score each sample."""
    label = args.trace if args.jobs is None else f"{args.trace}-{args.jobs}"
    model, fit_s = fitted(name, fit_table(refs.train, name, args.neural_fit_rows), refs, args.seed, args.cache,
                          label)
    rows = []
    for k in range(args.samples):
        t1 = time.perf_counter()
        raw = model.sample(length, seed=args.seed + k)
        t2 = time.perf_counter()
        clean, _ = validity.check(raw, refs.machine.nodes)
        scored = target.fitted(clean, seed=args.seed)
        rows.append({"generator": name, "sample": args.seed + k, "jobs": len(raw), "valid": len(clean), **scored,
                     "model_fit_s": fit_s, "sample_s": t2 - t1, "score_s": time.perf_counter() - t2})
        print(f"{name} sample {args.seed + k}: {scored}", flush=True)
    return rows


def summary(rows: pd.DataFrame) -> str:
    """Markdown: one row per generator (the references first).

    Each measure's mean over the samples (its range when there are several), the losses chosen, and the mean
    seconds of :data:`TIMES`.
    """
    lines = ["| predictor fitted on | samples | " + " | ".join(MEASURES) + " | losses chosen | " + " | ".join(TIMES)
             + " |", "|---|---:|" + "---:|" * len(MEASURES) + "---|" + "---:|" * len(TIMES)]
    for name, part in rows.groupby("generator", sort=False):
        ok = part[part["error"].fillna("") == ""]
        cells = []
        for m in MEASURES:
            v = ok[m].astype(float).dropna()
            text = cell(float(v.mean())) if len(v) else "n/a"
            cells.append(text + (f" [{cell(float(v.min()))}-{cell(float(v.max()))}]" if len(v) > 1 else ""))
        losses = ", ".join(sorted(set(ok["loss"].astype(str)))) or str(part["error"].iloc[0])
        times = [cell(float(ok[t].astype(float).mean())) if t in ok and len(ok) else "-" for t in TIMES]
        lines.append(f"| {name} | {len(ok)} | " + " | ".join(cells) + f" | {losses} | " + " | ".join(times) + " |")
    return "\n".join(lines)


def write(rows: list[dict], out: Path | None, trace: str) -> pd.DataFrame:
    """The rows as a table (``COLUMNS`` first), written to ``out`` when given."""
    table = pd.DataFrame([{"trace": trace, "error": ""} | r for r in rows])
    table = table[[c for c in COLUMNS if c in table] + [c for c in table if c not in COLUMNS]]
    table = table.astype({c: "Int64" for c in ("sample", "jobs", "valid") if c in table})
    if out is not None:
        atomic_write(out, lambda tmp: table.to_csv(tmp, index=False))
    return table


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    fit_args(ap)
    ap.add_argument("--generators", nargs="+", default=ORDER, choices=synth.names(),
                    help="generators to fit (default: the seven of benchmarks/synth_fidelity.py)")
    ap.add_argument("--samples", type=int, default=3, help="samples per generator, seeds SEED, SEED+1, ... (3)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generators' fits and the first sample")
    ap.add_argument("--length", choices=("train", "test"), default="train",
                    help="jobs per sample: as many as the train split (default) or the test split")
    ap.add_argument("--out", type=Path, default=None, help="write the rows here as CSV (after every row)")
    ap.add_argument("--summarize", type=Path, nargs="+", default=None, metavar="CSV",
                    help="print the summary of rows written by earlier runs (one trace each) and stop")
    ap.add_argument("--no-references", action="store_true",
                    help="leave out the real-train, last2 and walltime rows (when another run has them)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, write the rows and print the summary."""
    args = parse_args(argv)
    if args.summarize:
        for path in args.summarize:
            rows = pd.read_csv(path, keep_default_na=False, na_values=[""])
            print(f"{rows['trace'].iloc[0]} ({path}):\n\n{summary(rows)}\n")
        return
    warnings.simplefilter("ignore")
    real = traces.load(args.trace) if args.jobs is None else head(traces.load(args.trace), args.jobs)
    machine = machines.get(real.attrs["machine"])
    refs = fidelity.References(traces.split(real, "train"), traces.split(real, "test"), machine, args.seed)
    target = Target(refs.test, machine.nodes)
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    if any(m in NEURAL for m in args.generators):
        import torch

        torch.set_num_threads(args.threads)
    rows = [] if args.no_references else reference_rows(target, refs.train)
    write(rows, args.out, args.trace)
    length = len(refs.train) if args.length == "train" else len(refs.test)
    for name in args.generators:
        print(f"... {name} (started {time.strftime('%H:%M:%S', time.gmtime())} UTC)", flush=True)
        try:
            rows += generator_rows(name, refs, target, args, length)
        except Exception as exc:  # noqa: BLE001 - report a broken backend as such, and go on with the others
            rows.append({"generator": name, "error": f"{type(exc).__name__}: {exc}"})
            print(f"{name} failed: {rows[-1]['error']}", flush=True)
        write(rows, args.out, args.trace)
    print(summary(write(rows, args.out, args.trace)))


if __name__ == "__main__":
    main()
