"""Fidelity of every synthesizer on Theta: one table of all models against the real-vs-real noise floor.

Usage: ``python benchmarks/synth_fidelity.py [--trace theta] [--models ...] [--seed 0] [--out results.md]``.

Each model is fitted on the chronological train split (first 70%) and samples as many jobs as that split holds;
:func:`synth.fidelity.fidelity_table` compares the sample with the train split (and the privacy rows with the test
split). The noise-floor column is the train split's first half against its second half. Fit and sample times are
wall seconds on this machine. The neural models run with their CPU defaults (see their module docstrings); with
all seven models this takes about half an hour on 2 cores.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pandas as pd

import synth
from hpcgym import machines, traces
from synth import fidelity

ORDER = ["arrivals", "lublin", "gaussiancopula", "ctgan", "tvae", "copulagan", "realtabformer"]


def run_model(name: str, train: pd.DataFrame, test: pd.DataFrame, machine, seed: int) -> tuple[pd.Series, dict]:
    """Fit, sample and score one model; return its metric column and its timings."""
    t0 = time.perf_counter()
    model = synth.get(name, max_nodes=machine.nodes).fit(train, seed=seed)
    t1 = time.perf_counter()
    fake = model.sample(len(train), seed=seed)
    t2 = time.perf_counter()
    table = fidelity.fidelity_table(train, fake, machine, seed=seed, holdout=test)
    return table.set_index("metric")["synthetic_vs_real"], {"fit_s": t1 - t0, "sample_s": t2 - t1}, table


def markdown(table: pd.DataFrame) -> str:
    """A markdown table with 3-decimal numbers."""
    cell = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| metric | " + " | ".join(table.columns) + " |", "|---|" + "---:|" * len(table.columns)]
    lines += [f"| {idx} | " + " | ".join(cell(v) for v in row) + " |" for idx, row in table.iterrows()]
    return "\n".join(lines)


def main() -> None:
    """Run the benchmark and print (and optionally save) the markdown table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trace", default="theta")
    ap.add_argument("--models", nargs="+", default=ORDER, choices=sorted(synth.MODELS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    real = traces.load(args.trace)
    machine = machines.get(real.attrs["machine"])
    train, test = traces.split(real, "train"), traces.split(real, "test")
    columns, timings, floor = {}, {}, None
    for name in args.models:
        print(f"... {name}", flush=True)
        try:
            columns[name], timings[name], table = run_model(name, train, test, machine, args.seed)
        except Exception as exc:  # report a broken backend as such, and go on with the others
            print(f"{name} failed: {type(exc).__name__}: {exc}")
            continue
        floor = table.set_index("metric")["real_vs_real"] if floor is None else floor
    wide = pd.DataFrame({"noise floor": floor, **columns})
    for key in ("fit_s", "sample_s"):
        wide.loc[key] = [float("nan")] + [timings[m][key] for m in columns]
    text = f"{args.trace}: train {len(train)} jobs, test {len(test)}, seed {args.seed}\n\n" + markdown(wide)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
