"""The fidelity report, v2: is a synthetic trace close to *unseen* real data, and does it leak the training data?

**Reference.** Every pairwise metric compares a candidate with the held-out **test split** (the chronological last
30% of the real trace, :func:`hpcgym.traces.split`), which no model saw. Three candidates sit side by side:

- ``floor``: the **train split** itself, real data from an earlier period. It is the noise floor: sampling noise
  plus the drift over time that no model fitted on train can know either.
- ``bootstrap``: a day-block **bootstrap of the train rows** (:func:`synth.bootstrap.day_bootstrap`), a perfect
  memorizer. A generator is only interesting where it beats it on fidelity, and it must stay far from it on
  privacy.
- ``synthetic``: the generated trace, as many jobs as the test split (so whole-trace replays have the same length).

**Sections** (each computed by the module named after its job; this module only orchestrates):

1. marginals, 2. correlations, 3. SDMetrics, 4. C2ST, 5. shape (powers of two, walltime menu), 6. arrivals:
   :mod:`synth.distances`;
7. validity (the share of generated rows dropped or repaired before scoring): :mod:`synth.validity`;
8. scheduling outcome (whole-trace FCFS + EASY replays, plus windows with bootstrap CIs): :mod:`synth.replay`;
9. history (is a user's past worth reading: the last-two runtime predictor's accuracy, the correlation of a
   user's consecutive runtimes; values judged by their closeness to the test split's, n/a without user ids):
   :func:`synth.distances.history`;
10. privacy (DCR, exact copies, reuse of user and group ids, all against train; floor: the test split's own
    values): :mod:`synth.privacy`;
11. prediction (trained on synthetic, tested on real: a runtime predictor fitted on the candidate, scored on the
    test split; floor: the one fitted on the train split): only when :func:`prepare` is given a ``predictor``
    (:data:`PredictorScore`; ``baselines.transfer.Target`` is the learned predictor's), n/a otherwise and for a
    table without user ids. This package cannot import ``baselines`` (they stand on one layer,
    ``docs/architecture.md``), so the caller hands the function in.

Every metric states which direction is better (:data:`METRICS`). :func:`targets` judges a candidate against the
generator targets (:data:`TARGETS`: privacy at least the test split's, fidelity within an allowance of the floor),
and every report says which it misses. A sample that is empty, or has no valid row,
scores the worst value on every metric; a metric a small sample cannot compute (NaN where the floor has a value)
scores the worst value too.

**The API.** :func:`prepare` computes the references of a train and test split once (the floor and the bootstrap,
the expensive part), :func:`score` scores one raw sample against them, and :func:`make_table` lays any number of
scored samples out as one row per metric; the study and the benchmark use these three. :func:`evaluate` runs them
for one sample and adds everything the report of :mod:`synth.report_writer` draws (imported only when ``out_dir``
is given; it never imports this module).

The metrics and targets are records of :mod:`synth.metrics` (each defined once, with where its value is read);
:data:`METRICS` and :data:`TARGETS` here are the same objects.

Import direction: ``distances``, ``validity``, ``privacy``, ``replay``, ``bootstrap``, ``metrics`` <- ``fidelity`` <-
``report`` (the CLI) -> ``report_writer`` -> ``metrics``; ``fidelity`` -> ``report_writer`` lazily. No cycle.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import machines
from hpcgym import traces as tracelib
from hpcgym.machines import Machine
from synth import bootstrap, validity
from synth import metrics as metric_records
from synth.distances import (  # noqa: F401  (re-exported: the public names of the v1 module)
    C2ST_ROWS,
    CORRELATION_COLUMNS,
    MENU_SIZE,
    NUMERIC,
    SEGMENT_DAYS,
    arrival_stats,
    arrivals,
    c2st,
    c2st_features,
    correlation_matrix,
    correlations,
    history,
    history_stats,
    hourly_counts,
    hourly_profile,
    ks_statistic,
    marginals,
    sdmetrics_quality,
    shape,
    spectral_peak_24h,
    training,
    walltime_menu,
    wasserstein,
)
from synth.privacy import DCR_ROWS, dcr, exact_copy_share, identifier_reuse, privacy  # noqa: F401
from synth.replay import LOAD_WINDOW, N_WINDOWS, OUTAGE, WINDOW, replay, scheduling, window_ci  # noqa: F401

INF = float("inf")
NAN = float("nan")
#: a sample with fewer valid rows than this scores the worst value everywhere, without computing anything
MIN_ROWS = 2

#: the metrics (name -> :class:`synth.metrics.Metric`) and the generator targets, defined once in :mod:`synth.metrics`
METRICS = metric_records.METRICS
TARGETS = metric_records.TARGETS
TABLE_COLUMNS = ("metric", "section", "better", "target", "floor", "bootstrap", "synthetic", "test", "note")
#: the pairwise sections, in report order (validity, privacy and prediction are computed apart)
SECTIONS = ("marginals", "correlation", "sdmetrics", "c2st", "shape", "arrivals", "scheduling", "history")
#: fits a runtime predictor on a job table and scores it on the test split the caller bound it to: ``mae_log``
#: (mean absolute error of log runtime) and ``bsld`` (SAF+EASY's mean bounded slowdown on its estimates), NaN where
#: it cannot learn (no user ids), and ``loss`` (what was fitted, or why nothing was)
PredictorScore = Callable[[pd.DataFrame], dict[str, Any]]


# ---- helpers -------------------------------------------------------------------------------------------------
def worst(metric: str) -> float:
    """The worst value of a metric (what an empty or all-invalid sample scores).

    Args:
        metric: a key of :data:`METRICS`.

    Returns:
        The value.
    """
    return METRICS[metric].worst


def beats(value: float, other: float, better: str) -> bool:
    """Whether ``value`` is strictly better than ``other`` in the direction ``better`` (NaN never beats).

    Args:
        value: the candidate's value.
        other: the value to beat.
        better: ``"lower"`` or ``"higher"``; a row judged by its closeness to a reference value (``"= train"``)
            has no direction, and nothing beats on it here.

    Returns:
        The verdict.
    """
    if np.isnan(value) or np.isnan(other) or better not in ("lower", "higher"):
        return False
    return value < other if better == "lower" else value > other


def _sections(machine: Machine, seed: int) -> dict[str, Callable[[pd.DataFrame, pd.DataFrame], Any]]:
    """Section name -> ``f(reference, candidate)``."""
    return {
        "marginals": marginals,
        "correlation": correlations,
        "sdmetrics": lambda a, b: sdmetrics_quality(a, b, seed=seed),
        "c2st": lambda a, b: c2st(a, b, seed=seed),
        "shape": shape,
        "arrivals": arrivals,
        "scheduling": lambda a, b: scheduling(a, b, machine, seed=seed),
        "history": history,
    }


def compare(reference: pd.DataFrame, candidate: pd.DataFrame, machine: Machine, seed: int = 0,
            timing: dict[str, float] | None = None, bar: Any = None) -> dict[str, Any]:
    """Every pairwise section of a candidate against the reference (the test split).

    Args:
        reference: the test split.
        candidate: a clean candidate table (see :func:`synth.validity.check`).
        machine: the real machine.
        seed: seed of every subsample and classifier.
        timing: if given, seconds per section are added to it.
        bar: a tqdm bar to advance once per section.

    Returns:
        Section name -> its result (see the functions of :mod:`synth.distances` and :func:`synth.replay.scheduling`);
        an empty dict when the candidate has fewer than :data:`MIN_ROWS` rows (nothing is computed).
    """
    if len(candidate) < MIN_ROWS:
        return {}
    out = {}
    for name, fn in _sections(machine, seed).items():
        if bar is not None:
            bar.set_postfix_str(name)
        started = time.perf_counter()
        out[name] = fn(reference, candidate)
        if timing is not None:
            timing[name] = timing.get(name, 0.0) + time.perf_counter() - started
        if bar is not None:
            bar.update(1)
    return out


# ---- metric values -------------------------------------------------------------------------------------------
def metric_values(scored: dict[str, Any]) -> dict[str, float]:
    """Metric -> value of one scored candidate (see :func:`score`), worst values filled in where missing.

    Args:
        scored: the dict of :func:`score`.

    Returns:
        One value per key of :data:`METRICS`.
    """
    if not scored["sections"]:  # no valid row (or too few to score): the worst value everywhere
        return {m: worst(m) for m in METRICS}
    values = {name: m.value(scored) for name, m in METRICS.items()}
    return {name: (v if not np.isnan(v) else METRICS[name].worst) for name, v in values.items()}


def targets(values: dict[str, float], floor: dict[str, float]) -> pd.DataFrame:
    """The generator targets (:data:`TARGETS`), each with its bar, the candidate's value and whether it is met.

    Args:
        values: the candidate's metric values (:func:`metric_values`).
        floor: the floor's metric values (``References.floor["values"]``).

    Returns:
        Columns ``target, metric, bar, value, met``; a target whose bar cannot be computed (no floor value) is
        not met.
    """
    rows = []
    for target in TARGETS:
        name = target.metric.name
        value = float(values[name])
        bar, met = target.judge(value, float(floor.get(name, np.nan)))
        rows.append({"target": target.what, "metric": name, "bar": bar, "value": value, "met": met})
    return pd.DataFrame(rows)


# ---- references and candidates -------------------------------------------------------------------------------
@dataclass
class References:
    """What every candidate is scored against: the test split, the train floor and the bootstrap baseline."""

    train: pd.DataFrame
    test: pd.DataFrame
    machine: Machine
    seed: int
    floor: dict[str, Any] = field(default_factory=dict)
    bootstrap: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    predictor: PredictorScore | None = None  #: scores section 11 (none: its rows are n/a)


def _reader_validity(train: pd.DataFrame, test: pd.DataFrame) -> dict[str, Any]:
    """The real trace's own validity: the jobs its reader dropped (``attrs["invalid"]``) over all jobs read."""
    dropped = sum(int(v) for v in dict(train.attrs.get("invalid") or {}).values())
    raw = len(train) + len(test) + dropped
    share = dropped / raw if raw else float("nan")
    return {"raw_rows": raw, "valid_rows": raw - dropped, "dropped": dropped, "repaired": 0, "dropped_share": share,
            "repaired_share": 0.0, "invalid_share": share, "reasons": dict(train.attrs.get("invalid") or {})}


def score(refs: References, raw: pd.DataFrame | None, bar: Any = None,
          timing: dict[str, float] | None = None) -> dict[str, Any]:
    """Score one raw candidate sample: validity first (on the raw rows), then every section on the clean rows.

    Args:
        refs: the references (see :func:`prepare`).
        raw: the sample as generated (may be empty, ``None``, invalid or out of order).
        bar: a tqdm bar advanced once per section.
        timing: seconds per section are added to it.

    Returns:
        ``validity`` (:func:`synth.validity.check`), ``sections`` (:func:`compare`), ``privacy``
        (:func:`synth.privacy.privacy`), ``clean`` (the clean table) and ``values`` (:func:`metric_values`).
    """
    clean, val = validity.check(raw, refs.machine.nodes)
    sections = compare(refs.test, clean, refs.machine, refs.seed, timing=timing, bar=bar)
    started = time.perf_counter()
    priv = privacy(refs.train, clean, refs.test, seed=refs.seed)
    if timing is not None:
        timing["privacy"] = timing.get("privacy", 0.0) + time.perf_counter() - started
    out = {"validity": val, "sections": sections, "privacy": priv, "clean": clean}
    if refs.predictor is not None and sections:
        started = time.perf_counter()
        out["prediction"] = refs.predictor(clean)
        if timing is not None:
            timing["prediction"] = timing.get("prediction", 0.0) + time.perf_counter() - started
    out["values"] = metric_values(out)
    return out


def prepare(train: pd.DataFrame, test: pd.DataFrame, machine: Machine | str | None = None, seed: int = 0,
            bar: Any = None, predictor: PredictorScore | None = None) -> References:
    """Compute the floor (train vs test) and the bootstrap baseline (a day-block bootstrap of train vs test).

    Args:
        train: the train split (what models are fitted on).
        test: the test split (the reference).
        machine: the real machine; default ``train.attrs["machine"]``.
        seed: seed of the bootstrap and of every subsample and classifier.
        bar: a tqdm bar advanced once per section.
        predictor: fits a runtime predictor on a table and scores it on ``test`` (section 11, e.g.
            ``baselines.transfer.Target(test, nodes)``); none: the prediction rows are n/a.

    Returns:
        The :class:`References`; ``floor`` and ``bootstrap`` hold ``sections``, ``validity``, ``privacy`` and
        ``values`` like :func:`score`'s result (the floor's privacy values are the test split's own).
    """
    machine = machines.get(machine if machine is not None else train.attrs["machine"])
    refs = References(train, test, machine, seed, predictor=predictor)
    started = time.perf_counter()
    refs.bootstrap = score(refs, bootstrap.day_bootstrap(train, len(test), seed), bar=bar)
    refs.bootstrap["clean"].attrs["name"] = "bootstrap of train"
    floor_sections = compare(test, train, machine, seed, bar=bar)
    floor = {"sections": floor_sections, "validity": _reader_validity(train, test),
             "privacy": refs.bootstrap["privacy"]}
    if predictor is not None:
        floor["prediction"] = predictor(train)
    floor["values"] = {name: m.value(floor, floor=True) for name, m in METRICS.items()}
    floor["test_values"] = {name: m.test_value(floor_sections) for name, m in METRICS.items()
                            if m.test_read is not None}
    refs.floor = floor
    refs.timing["references"] = time.perf_counter() - started
    return refs


def make_table(refs: References, candidates: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per metric: the floor, the bootstrap, then one column per scored candidate.

    Args:
        refs: the references.
        candidates: column name -> :func:`score` result.

    Returns:
        Columns ``metric, section, better, target, floor, bootstrap, <candidates...>, test, note``. ``test`` is
        the test split's own value of a per-trace statistic (the rows named ``... gap``, which hold
        ``|candidate - test|``); ``note`` flags
        SDMetrics problems and candidates with no valid row.
    """
    rows = []
    for m, metric in METRICS.items():
        section = metric.section
        row = {"metric": m, "section": section, "better": metric.better, "target": metric.target,
               "floor": refs.floor["values"][m], "bootstrap": refs.bootstrap["values"][m]}
        row |= {name: c["values"][m] for name, c in candidates.items()}
        row["test"] = refs.floor["test_values"].get(m, np.nan)
        notes = [f"{name}: no valid rows, worst value" for name, c in candidates.items() if not c["sections"]]
        if section == "history":
            notes += [f"{name}: n/a (no user ids)" for name, c in candidates.items()
                      if c["sections"] and np.isnan(c["values"][m])]
        if section == "prediction":
            notes += [f"{name}: {_not_predicted(c)}" for name, c in candidates.items()
                      if c["sections"] and np.isnan(c["values"][m])]
        if section == "sdmetrics":
            notes += [f"{name}: {c['sections']['sdmetrics']['status']}" for name, c in candidates.items()
                      if c["sections"] and c["sections"]["sdmetrics"]["status"] != "ok"]
        row["note"] = "; ".join(notes)
        rows.append(row)
    return pd.DataFrame(rows)


def _not_predicted(scored: dict[str, Any]) -> str:
    """Why a candidate's prediction rows are n/a."""
    if "prediction" not in scored:
        return "n/a (no predictor given)"
    return str(scored["prediction"].get("loss", "n/a"))


def pool(scored: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several scored samples of one generator as one candidate: every metric's mean over the samples.

    One sample is too noisy to judge a generator by (the whole-trace wait KS of one ``arrivals`` fit on Theta was
    0.037, 0.101 and 0.060 for three seeds), so the report, the benchmark and the targets use the mean.

    Args:
        scored: :func:`score` results of the samples, at least one.

    Returns:
        The first sample's result (its sections, validity, privacy and clean table, which the report's details and
        plots show) with ``values`` the mean over the samples of each metric and ``samples`` the per-sample values
        (a list of dicts, in the order given).
    """
    out = dict(scored[0])
    out["samples"] = [dict(s["values"]) for s in scored]
    out["values"] = {m: float(np.mean([v[m] for v in out["samples"]])) for m in scored[0]["values"]}
    return out


def _as_samples(synthetic: pd.DataFrame | Sequence[pd.DataFrame] | None) -> list[pd.DataFrame | None]:
    if isinstance(synthetic, (list, tuple)):
        if not synthetic:
            raise ValueError("no synthetic sample to score")
        return list(synthetic)
    return [synthetic]


def evaluate(real: pd.DataFrame, synthetic_jobs: pd.DataFrame | Sequence[pd.DataFrame] | None,
             out_dir: str | Path | None = None, seed: int = 0, progress: bool = False, source: str | None = None,
             refs: References | None = None, predictor: PredictorScore | None = None) -> dict[str, Any]:
    """Compute the whole fidelity report for a real trace and one or several (raw) synthetic job tables.

    The real trace is split chronologically (:func:`hpcgym.traces.split`): the test split (last 30%) is the
    reference, the train split the floor and the source of the bootstrap baseline. Several samples (of one
    generator) are scored one by one and pooled (:func:`pool`): the summary table and the targets hold the mean over
    the samples, ``ranges`` their smallest and largest value, and the report's sections show the first sample.

    Args:
        real: the whole real trace (a canonical job table with ``attrs["machine"]``).
        synthetic_jobs: the synthetic job table as generated (may be empty or invalid; it is scored, not raised),
            or a list of such tables (samples of one generator).
        out_dir: if given, write ``report.md`` and the PNG plots there (:func:`synth.report_writer.write_report`).
        seed: seed of the bootstrap, every subsample and classifier.
        progress: show a progress bar (tqdm, on stderr) over the sections.
        source: how the synthetic trace was made, for the report's header.
        refs: references already computed by :func:`prepare` for this trace's train and test splits (to score
            several samples against one trace without recomputing the floor and the bootstrap).
        predictor: the prediction section's scorer (see :func:`prepare`); used only when ``refs`` is not given.

    Returns:
        ``table`` (:data:`TABLE_COLUMNS`; the synthetic column the mean over samples),
        ``floor``/``bootstrap``/``synthetic`` (each with ``sections``, ``validity``, ``privacy``, ``values``;
        the synthetic one of the first sample, with the pooled ``values`` and the per-sample ``samples``),
        ``ranges`` (a DataFrame indexed by metric: ``min`` and ``max`` over the samples), ``targets``
        (:func:`targets`, on the means), ``timing`` (seconds per synthetic section summed over the samples,
        ``references`` and ``total``), ``meta`` (sizes, names, seed, ``samples``), ``tables`` (training views for
        the plots) and ``report`` (the path of ``report.md``, or ``None``).
    """
    from tqdm.auto import tqdm

    started = time.perf_counter()
    samples = _as_samples(synthetic_jobs)
    machine = machines.get(real.attrs["machine"])
    bar = tqdm(total=(len(samples) + (0 if refs else 2)) * len(SECTIONS) + (out_dir is not None),
               desc="fidelity report", disable=not progress)
    if refs is None:
        refs = prepare(tracelib.split(real, "train"), tracelib.split(real, "test"), machine, seed, bar=bar,
                       predictor=predictor)
    train, test = refs.train, refs.test
    timing: dict[str, float] = {}
    synth = pool([score(refs, sample, bar=bar, timing=timing) for sample in samples])
    first = pd.DataFrame() if samples[0] is None else samples[0]
    table = make_table(refs, {"synthetic": synth})[list(TABLE_COLUMNS)]
    timing["references"] = refs.timing["references"]
    timing["total"] = time.perf_counter() - started
    per_sample = pd.DataFrame(synth["samples"])
    out: dict[str, Any] = {"table": table, "floor": refs.floor, "bootstrap": refs.bootstrap, "synthetic": synth,
                           "ranges": pd.DataFrame({"min": per_sample.min(), "max": per_sample.max()}),
                           "targets": targets(synth["values"], refs.floor["values"]), "timing": timing,
                           "report": None}
    out["meta"] = {
        "real": str(real.attrs.get("name", "real")), "machine": machine.name, "machine_nodes": machine.nodes,
        "jobs_real": len(real), "jobs_train": len(train), "jobs_test": len(test),
        "jobs_bootstrap": len(refs.bootstrap["clean"]), "jobs_synthetic": len(first),
        "jobs_synthetic_valid": len(synth["clean"]), "seed": seed, "samples": len(samples),
        "synthetic": source or str(first.attrs.get("name", "synthetic")),
        "postprocess": dict(first.attrs.get("postprocess", {}) or {}),
        "menu": [int(w) for w in walltime_menu(test)], "window": WINDOW, "n_windows": N_WINDOWS, "dcr_rows": DCR_ROWS,
        "load_window": LOAD_WINDOW, "outage": OUTAGE,
    }
    out["tables"] = {"test": training(test), "train": training(train),
                     "bootstrap": training(refs.bootstrap["clean"]), "synthetic": training(synth["clean"])}
    if out_dir is not None:
        from synth import report_writer

        bar.set_postfix_str("writing the report")
        out["report"] = report_writer.write_report(out, out_dir)
        bar.update(1)
    bar.close()
    return out
