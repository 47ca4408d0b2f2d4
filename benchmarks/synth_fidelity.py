"""Fidelity of every synthesizer on one real trace: one table, floor and bootstrap next to every model.

Usage: ``python benchmarks/synth_fidelity.py --trace theta [--models ...] [--seed 0] [--jobs N] [--out results.md]
[--cache DIR] [--neural-fit-rows N] [--threads 1]``.

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

``--cache DIR`` saves every fit there (``<trace>-<model>-<key>``, :class:`synth.cache.FitCache`, keyed by
:func:`synth.base.fit_key`: the training table's hash, the model, its settings, the seed and its code revision) and
reuses it on a later run, so a table can be rebuilt after one model changes without refitting the others; a fit
saved by another code revision is fitted again.
The prediction rows (trained on synthetic, tested on real) fit the learned runtime predictor on each candidate and
score it on the test split (:class:`baselines.transfer.Target`: the evaluation's 20 test windows of 1,024 jobs, fewer
and shorter on a short test split); ``--no-predictor`` leaves them n/a (a few seconds per candidate saved).
``--neural-fit-rows N`` fits the four neural models on the last N jobs of the train split (HPC2N's 142,010 would take
hours each on a CPU); the fast models and the references always use all of it, and the table's header says so.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import synth
import synth.base
from baselines.transfer import Target
from hpcgym import machines, traces
from hpcgym.io import atomic_write
from hpcgym.traces.split import head, tail
from synth import fidelity, metrics
from synth.cache import FitCache

FIT_TIME = ".fit_s.json"  # suffix of the file beside a cached fit that says how long it took
ORDER = ["arrivals", "lublin", "gaussiancopula", "ctgan", "tvae", "copulagan", "realtabformer"]


NEURAL = ("ctgan", "tvae", "copulagan", "realtabformer")


def fit_table(train: pd.DataFrame, name: str, neural_rows: int) -> pd.DataFrame:
    """What ``name`` learns: the train split, or its last ``neural_rows`` jobs for a neural model."""
    return tail(train, neural_rows) if name in NEURAL else train


def fitted(name: str, table: pd.DataFrame, refs: fidelity.References, seed: int,
           cache: Path | None, label: str) -> tuple[synth.base.Synthesizer, float]:
    """The model fitted on ``table`` (from the cache when it holds this fit) and the seconds its fit took."""
    fits = FitCache(cache) if cache else None
    where = fits.folder(label, name, table, {}, seed) if fits else None
    model = fits.load(where) if fits else None
    if model is not None:
        try:
            return model, float(json.loads(Path(f"{where}{FIT_TIME}").read_text())["fit_s"])
        except (OSError, KeyError) as exc:  # the fit's time was not recorded: fit again
            print(f"{name}: cached fit not used ({exc})", flush=True)
    refused = fits is not None and fits.holds(where)
    started = time.perf_counter()
    model = synth.get(name, max_nodes=refs.machine.nodes).fit(table, seed=seed)
    fit_s = time.perf_counter() - started
    if fits is not None:
        fits.save(model, where, replace=refused)
        atomic_write(f"{where}{FIT_TIME}", lambda tmp: Path(tmp).write_text(json.dumps({"fit_s": fit_s})))
    return model, fit_s


def run_model(name: str, refs: fidelity.References, seed: int, cache: Path | None = None, label: str = "",
              neural_rows: int = 0, samples: int = 1) -> tuple[dict[str, Any], dict[str, float]]:
    """Fit (or load) one model, then sample and score it ``samples`` times (seeds ``seed``, ``seed + 1``, ...).

    Returns:
        The samples pooled by :func:`synth.fidelity.pool` (``values`` averaged over the samples, ``samples`` each
        one's) with ``load`` (the whole-trace offered load and utilization, averaged), and the timings: ``fit_s``
        (of the fit itself, also when the model came from the cache: recorded at fit time), ``sample_s`` and
        ``score_s`` per sample.
    """
    model, fit_s = fitted(name, fit_table(refs.train, name, neural_rows), refs, seed, cache, label)
    results, sample_s, score_s = [], 0.0, 0.0
    for k in range(samples):
        t1 = time.perf_counter()
        try:
            raw = model.sample(len(refs.test), seed=seed + k)
        except RuntimeError:  # too few valid rows even after redraws: scored as an all-invalid sample
            raw = None
        t2 = time.perf_counter()
        results.append(fidelity.score(refs, raw))
        sample_s, score_s = sample_s + t2 - t1, score_s + time.perf_counter() - t2
    out = fidelity.pool(results)
    out["load"] = {key: float(np.mean([_load(r, key) for r in results])) for key in ("offered_load", "utilization")}
    return out, {"fit_s": fit_s, "sample_s": sample_s / samples, "score_s": score_s / samples}


def _load(result: dict[str, Any], key: str) -> float:
    """The whole-trace replay's ``offered_load`` or ``utilization`` of a scored candidate (NaN without one)."""
    if "load" in result:
        return result["load"][key]
    sched = result["sections"].get("scheduling")
    return float("nan") if sched is None else float(sched["summary"].at[key, "synthetic"])


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
    """The metric table, the raw whole-trace utilization (its gap hides the sign), then seconds per model."""
    table = fidelity.make_table(refs, scored)
    extra = []
    for key in ("utilization",):
        row = {"metric": f"{key.replace('_', ' ')} (whole trace, value)", "section": "scheduling",
               "better": "= test", "floor": _load(refs.floor, key), "bootstrap": _load(refs.bootstrap, key),
               "test": float(refs.floor["sections"]["scheduling"]["summary"].at[key, "real"])}
        extra.append(row | {m: _load(scored[m], key) for m in scored})
    for key in ("fit_s", "sample_s", "score_s"):
        row = {"metric": key, "section": "time", "better": "lower", "floor": float("nan"),
               "bootstrap": float("nan")}
        extra.append(row | {m: timings[m][key] for m in scored})
    return pd.concat([table, pd.DataFrame(extra)], ignore_index=True)


#: two values closer than this count as a tie (the tables print 3 decimals)
TIE = 0.001
HEADLINE = (metrics.C2ST_AUC.name, metrics.KS_WAIT.name)


def _private_enough(row: pd.Series, value: float) -> bool:
    """Whether a privacy row's value is at least as private as the test split's own (ids: never reused)."""
    if row["metric"] in (metrics.USER_REUSE.name, metrics.GROUP_REUSE.name):
        return value <= 0.0
    return not fidelity.beats(row["floor"], value, row["better"])  # strict, as synth.fidelity.targets


def _versus(rows: pd.DataFrame, ours: str, other: str) -> str:
    """``ours`` against ``other`` on the fidelity rows: better / tied / worse counts."""
    diff = [(r[ours], r[other], r["better"]) for _, r in rows.iterrows()]
    tied = sum(abs(a - b) < TIE or (np.isinf(a) and np.isinf(b)) for a, b, _ in diff)
    won = sum(fidelity.beats(a, b, better) and not abs(a - b) < TIE for a, b, better in diff)
    return f"{won} / {tied} / {len(diff) - won - tied}"


def _loads(values: list[float], train: float) -> str:
    """Offered loads of the samples: their mean relative to train's, and their range."""
    mean = float(np.mean(values))
    text = f"{mean:.3f} ({mean / train - 1:+.1%})"
    return text + (f" [{min(values):.3f}-{max(values):.3f}]" if len(values) > 1 else "")


def scoreboard(table: pd.DataFrame, models: list[str], ours: str = "arrivals",
               loads: dict[str, list[float]] | None = None) -> str:
    """Per model: the headline rows, the samples' load, privacy against the test split, the targets, ``ours`` vs it.

    Fidelity rows are every row but privacy, the timings and the values judged by their closeness to the train
    split's (the offered load): marginals to scheduling, validity included; privacy rows pass where the value is no
    worse than the test split's own (identifiers: never reused). ``loads`` gives each model's per-sample offered
    loads (default: the table's mean alone).
    """
    fid = table[~table["section"].isin(["privacy", "time"]) & ~table["better"].str.startswith("=")]
    priv = table[table["section"] == "privacy"]
    load_row = table.set_index("metric").loc[metrics.OFFERED_LOAD.name]
    lines = [f"Scoreboard ({len(fid)} fidelity rows; ties within {TIE}):", "",
             f"| model | {' | '.join(HEADLINE)} | offered load: mean (vs train's {load_row['floor']:.3f}) [range over "
             f"the samples] | privacy rows as private as the test split | targets met | {ours} better / tied / "
             "worse on the fidelity rows |", "|---|---:|---:|---|---|---|---:|"]
    floor = dict(zip(table["metric"], table["floor"], strict=True))
    goals: dict[str, pd.DataFrame] = {}
    for m in models:
        head = [cell(float(table.loc[table["metric"] == h, m].iloc[0])) for h in HEADLINE]
        head.append(_loads((loads or {}).get(m) or [float(load_row[m])], float(load_row["floor"])))
        bad = [r["metric"] for _, r in priv.iterrows() if not _private_enough(r, float(r[m]))]
        ok = f"{len(priv) - len(bad)} of {len(priv)}" + (f" (not: {', '.join(bad)})" if bad else "")
        versus = "-" if m == ours or ours not in models else _versus(fid, ours, m)
        goals[m] = fidelity.targets(dict(zip(table["metric"], table[m], strict=True)), floor)
        met = f"{int(goals[m]['met'].sum())} of {len(goals[m])}"
        lines.append(f"| {m} | {' | '.join(head)} | {ok} | {met} | {versus} |")
    if ours in goals:
        missed = [f"{r.target} ({cell(r.value)}, bar {r.bar})" for r in goals[ours].itertuples() if not r.met]
        lines += ["", f"{ours}: targets missed: {'; '.join(missed) if missed else 'none'}."]
    return "\n".join(lines)


def report(args: argparse.Namespace, real: pd.DataFrame, refs: fidelity.References,
           scored: dict[str, dict[str, Any]], timings: dict[str, dict[str, float]], failed: dict[str, str]) -> str:
    """The markdown text: a header line, the table, the scoreboard (:func:`scoreboard`), failures."""
    head = (f"{args.trace}: {len(real):,} jobs on {refs.machine.name} ({refs.machine.nodes:,} nodes); train "
            f"{len(refs.train):,} jobs, test (reference) {len(refs.test):,}, seed {args.seed}; floor = train vs "
            f"test, bootstrap = day-block bootstrap of train; floor and bootstrap took "
            f"{refs.timing['references']:.0f} s; each model's column is the mean of {args.samples} sample(s) of one "
            f"fit (seeds {args.seed}-{args.seed + args.samples - 1})")
    if args.neural_fit_rows and args.neural_fit_rows < len(refs.train):
        neural = ", ".join(m for m in scored if m in NEURAL)
        head += f"; {neural or 'the neural models'} fitted on the last {args.neural_fit_rows:,} train jobs only"
    table = wide_table(refs, scored, timings)
    loads = {m: [v[metrics.OFFERED_LOAD.name] for v in c["samples"]] for m, c in scored.items()}
    text = head + "\n\n" + markdown(table) + "\n\n" + scoreboard(table, ["bootstrap", *scored], loads=loads)
    if failed:
        text += "\n\n" + "\n".join(f"- {m} failed: {why}" for m, why in failed.items())
    return text + "\n"


def fit_args(ap: argparse.ArgumentParser) -> None:
    """The flags of what is fitted and how (shared with ``benchmarks/synth_predictor.py``)."""
    ap.add_argument("--trace", default="theta", choices=sorted(traces.BUNDLED), help="bundled trace (default theta)")
    ap.add_argument("--jobs", type=int, default=None, help="use only the first N jobs of the trace (quick runs)")
    ap.add_argument("--cache", type=Path, default=None, help="save fits here and reuse them (default: no cache)")
    ap.add_argument("--neural-fit-rows", type=int, default=0,
                    help="fit the neural models on the last N train jobs (default 0: all of them)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the neural models (default 1)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    fit_args(ap)
    ap.add_argument("--models", nargs="+", default=ORDER, choices=synth.names(),
                    help="models to run (default: all seven)")
    ap.add_argument("--seed", type=int, default=0, help="seed of fitting, sampling, bootstrap and every subsample")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here (after every model)")
    ap.add_argument("--no-predictor", action="store_true",
                    help="leave the prediction rows n/a (no runtime predictor fitted on each candidate)")
    ap.add_argument("--samples", type=int, default=3,
                    help="samples per model, seeds SEED, SEED+1, ...; the table averages them (default 3)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print (and optionally save) the markdown table."""
    args = parse_args(argv)
    warnings.simplefilter("ignore")
    real = traces.load(args.trace)
    if args.jobs is not None:
        real = head(real, args.jobs)
    machine = machines.get(real.attrs["machine"])
    train, test = traces.split(real, "train"), traces.split(real, "test")
    predictor = None if args.no_predictor else Target(test, machine.nodes)
    refs = fidelity.prepare(train, test, machine, args.seed, predictor=predictor)
    label = args.trace if args.jobs is None else f"{args.trace}-{args.jobs}"
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    if any(m in NEURAL for m in args.models):
        import torch

        torch.set_num_threads(args.threads)
    scored: dict[str, dict[str, Any]] = {}
    timings: dict[str, dict[str, float]] = {}
    failed: dict[str, str] = {}
    for name in args.models:
        print(f"... {name} (started {time.strftime('%H:%M:%S', time.gmtime())} UTC)", flush=True)
        try:
            scored[name], timings[name] = run_model(name, refs, args.seed, args.cache, label, args.neural_fit_rows,
                                                    args.samples)
        except Exception as exc:  # noqa: BLE001 - report a broken backend as such, and go on with the others
            failed[name] = f"{type(exc).__name__}: {exc}"
            print(f"{name} failed: {failed[name]}", flush=True)
        if args.out:
            text = report(args, real, refs, scored, timings, failed)
            atomic_write(args.out, lambda tmp, t=text: Path(tmp).write_text(t, encoding="utf-8"))
    print(report(args, real, refs, scored, timings, failed))


if __name__ == "__main__":
    main()
