"""The fidelity report's files: a result of :func:`synth.fidelity.evaluate` drawn as ``report.md`` and PNG plots.

This module draws; it computes no metric and imports none of the metric modules, so rendering never feeds back
into scoring. It reads a metric's value through its record (:mod:`synth.metrics`: where the value is, defined once)
and everything else from the result dict: ``table``, ``floor``/``bootstrap``/``synthetic`` (each with
``sections``, ``validity``, ``privacy``), ``meta``, ``tables`` and ``timing``. A candidate without sections (an
empty or all-invalid sample) is drawn as missing, never as an error. Files are written atomically.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import numpy as np  # noqa: E402

from hpcgym.io import atomic_write  # noqa: E402
from synth import metrics  # noqa: E402  (records only: where each metric's value is)
from synth.metrics import Metric  # noqa: E402

NUMERIC = ("interarrival", "nodes", "run", "walltime")
#: candidate key -> (column title, colour)
SIDES = {"floor": ("train (floor)", "tab:green"), "bootstrap": ("bootstrap of train", "tab:gray"),
         "synthetic": ("synthetic", "tab:orange")}
TEST_COLOR = "tab:blue"
IMAGES = {"marginals": "marginals.png", "correlation": "correlation.png", "hourly": "hourly.png",
          "scheduling": "scheduling.png"}
MISSING = "-"


# ---- helpers -------------------------------------------------------------------------------------------------
def _save(fig: Any, path: Path) -> Path:
    """Save a figure as PNG through a temporary file and a rename, then close it."""
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return path


def _ecdf(ax: Any, values: np.ndarray, label: str, color: str, style: str = "-") -> None:
    x = np.sort(np.asarray(values, np.float64))
    if x.size:
        ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=label, color=color, lw=1.3, ls=style)


def _section(results: dict[str, Any], side: str, name: str) -> Any:
    """A candidate's section result, or ``None`` when it was not computed (no valid rows)."""
    return results[side]["sections"].get(name)


def fmt(value: Any) -> str:
    """A number for the report: thousands separators above 100, three significant digits below, ``-`` for NaN.

    Args:
        value: a number (or anything else, returned as text).

    Returns:
        The text.
    """
    if value is None:
        return MISSING
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        v = float(value)
        if math.isnan(v):
            return MISSING
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return str(value).replace("|", "\\|")  # a pipe would end a markdown table cell


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return lines + [""]


def _cells(results: dict[str, Any], name: str, pick: Any) -> list[Any]:
    """``pick(section result)`` for floor, bootstrap and synthetic (``None`` where a section is missing)."""
    out = []
    for side in SIDES:
        s = _section(results, side, name)
        out.append(None if s is None else pick(s))
    return out


def _metric_cells(results: dict[str, Any], metric: Metric) -> list[Any]:
    """A metric's value for floor, bootstrap and synthetic (``None`` where the candidate has no sections)."""
    return [metric.value(results[side]) if results[side]["sections"] else None for side in SIDES]


HEAD = ["train vs test (floor)", "bootstrap vs test", "synthetic vs test"]


# ---- plots ---------------------------------------------------------------------------------------------------
def plot_marginals(results: dict[str, Any], path: Path) -> Path:
    """Four CDF panels (log x) of the numeric training columns: test, train, bootstrap and synthetic.

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    tables = results["tables"]
    units = {"interarrival": " [s]", "nodes": "", "run": " [s]", "walltime": " [s]"}
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, col in zip(axes.ravel(), NUMERIC, strict=True):
        shift = 1 if col == "interarrival" else 0  # the only column with zeros
        _ecdf(ax, shift + tables["test"][col].to_numpy(), "test (reference)", TEST_COLOR)
        for side, style in (("floor", ":"), ("bootstrap", "--"), ("synthetic", "-")):
            key = "train" if side == "floor" else side
            _ecdf(ax, shift + tables[key][col].to_numpy(), SIDES[side][0], SIDES[side][1], style)
        ks = _metric_cells(results, metrics.KS[col])
        ax.set_xscale("log")
        ax.set_xlabel(f"{'1 + ' if shift else ''}{col}{units[col]}")
        ax.set_ylabel("CDF")
        ax.set_title(f"{col}: KS synthetic {fmt(ks[2])} (floor {fmt(ks[0])}, bootstrap {fmt(ks[1])})", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="lower right", fontsize=8)
    fig.suptitle("Marginal distributions against the test split")
    fig.tight_layout()
    return _save(fig, path)


def plot_correlations(results: dict[str, Any], path: Path) -> Path:
    """Spearman heatmaps, test split and synthetic side by side, annotated (test alone when synthetic is missing).

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    corr = _section(results, "synthetic", "correlation") or {"real": _section(results, "floor", "correlation")["real"]}
    panels = [("real", "test (reference)"), ("synthetic", "synthetic")]
    panels = [(k, t) for k, t in panels if k in corr]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.8), squeeze=False)
    image = None
    for ax, (key, title) in zip(axes[0], panels, strict=True):
        m = corr[key]
        image = ax.imshow(m.to_numpy(), vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(len(m)), m.columns, rotation=35, ha="right")
        ax.set_yticks(range(len(m)), m.index if key == "real" else [])
        for (i, j), v in np.ndenumerate(m.to_numpy()):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="white" if abs(v) > 0.6 else "k")
        ax.set_title(title)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.85, label="Spearman correlation")
    mad = _metric_cells(results, metrics.CORRELATION_MAD)
    fig.suptitle(f"Spearman correlations: mean |difference| synthetic {fmt(mad[2])} (floor {fmt(mad[0])}, "
                 f"bootstrap {fmt(mad[1])})")
    return _save(fig, path)


def plot_hourly(results: dict[str, Any], path: Path) -> Path:
    """Hour-of-day profile (share of submits per hour, UTC on the trace clock): test, bootstrap, synthetic.

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    hours = np.arange(24)
    fig, ax = plt.subplots(figsize=(8, 4))
    floor = _section(results, "floor", "arrivals")
    ax.bar(hours - 0.27, floor["hourly_real"], width=0.27, color=TEST_COLOR, label="test (reference)")
    for offset, side in ((0.0, "bootstrap"), (0.27, "synthetic")):
        arr = _section(results, side, "arrivals")
        if arr is not None:
            ax.bar(hours + offset, arr["hourly_synthetic"], width=0.27, color=SIDES[side][1], label=SIDES[side][0])
    ax.set_xticks(hours)
    ax.set_xlabel("hour of day (UTC, trace clock)")
    ax.set_ylabel("share of submits")
    tv = _metric_cells(results, metrics.HOUR_TV)
    ax.set_title(f"Hour-of-day profile: TV distance synthetic {fmt(tv[2])} (floor {fmt(tv[0])}, bootstrap "
                 f"{fmt(tv[1])})", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return _save(fig, path)


def plot_scheduling(results: dict[str, Any], path: Path) -> Path:
    """CDFs (log x) of wait and bounded slowdown on whole-trace FCFS + EASY replays, every side.

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    floor = _section(results, "floor", "scheduling")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, col, label in zip(axes, ("wait", "bsld"), ("1 + wait [s]", "bounded slowdown"), strict=True):
        shift = 1 if col == "wait" else 0
        _ecdf(ax, shift + floor["real"]["records"][col].to_numpy(), "test (reference)", TEST_COLOR)
        for side, style in (("floor", ":"), ("bootstrap", "--"), ("synthetic", "-")):
            sched = _section(results, side, "scheduling")
            if sched is not None:
                _ecdf(ax, shift + sched["synthetic"]["records"][col].to_numpy(), SIDES[side][0], SIDES[side][1],
                      style)
        ks = _metric_cells(results, {"wait": metrics.KS_WAIT, "bsld": metrics.KS_BSLD}[col])
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("CDF")
        ax.set_title(f"{col}: KS synthetic {fmt(ks[2])} (floor {fmt(ks[0])}, bootstrap {fmt(ks[1])})", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"FCFS + EASY on {results['meta']['machine']}, whole-trace replays")
    fig.tight_layout()
    return _save(fig, path)


# ---- markdown ------------------------------------------------------------------------------------------------
def _verdict(row: Any) -> str:
    a, b = float(row.synthetic), float(row.bootstrap)
    if row.better.startswith("="):  # a value judged by its closeness to the train split's (floor) or the test's
        ref = float(row.test) if row.better == "= test" else float(row.floor)
        a, b = abs(a - ref), abs(b - ref)
    if math.isnan(a) or math.isnan(b):
        return MISSING
    if a == b:
        return "tie"
    return "yes" if (a < b) == (row.better != "higher") else "no"


def _header(results: dict[str, Any]) -> list[str]:
    m = results["meta"]
    post = ", ".join(f"{k}: {v}" for k, v in m["postprocess"].items()) or "none recorded"
    return [
        f"# Fidelity report (v2): synthetic vs `{m['real']}`", "",
        f"- **Reference**: the held-out **test split** of `{m['real']}` (chronological last 30%, "
        f"{m['jobs_test']:,} of {m['jobs_real']:,} jobs) on `{m['machine']}` ({m['machine_nodes']:,} nodes). "
        "Every pairwise metric compares a candidate with it.",
        f"- **Floor**: the train split ({m['jobs_train']:,} jobs; real data from the earlier period) vs test: "
        "sampling noise plus drift over time.",
        f"- **Bootstrap of train** ({m['jobs_bootstrap']:,} jobs): whole days of the train split drawn with "
        "replacement onto a calendar (same day of the week), each keeping its jobs' times of day and every column. "
        "A perfect memorizer: a generator is only interesting where it beats it, and it must not match it on "
        "privacy.",
        f"- **Synthetic**: {m['synthetic']}; {m['jobs_synthetic']:,} rows handed over, {m['jobs_synthetic_valid']:,} "
        f"valid after the validity check. Post-processing while sampling: {post}.",
        *([f"- **{m['samples']} samples**: the summary and the targets hold the mean over the samples (and their "
           "range); the sections after them show the first sample."] if m.get("samples", 1) > 1 else []),
        f"- Seed {m['seed']}; computed in {results['timing']['total']:.1f} s.", "",
    ]


def _summary(results: dict[str, Any]) -> list[str]:
    several = results["meta"].get("samples", 1) > 1
    rows = []
    for r in results["table"].itertuples(index=False):
        span = ([f"{fmt(results['ranges'].at[r.metric, 'min'])} to {fmt(results['ranges'].at[r.metric, 'max'])}"]
                if several else [])
        rows.append([r.metric, r.better, r.target, r.floor, r.bootstrap, r.synthetic, *span, _verdict(r), r.test,
                     r.note or ""])
    synthetic = [f"synthetic (mean of {results['meta']['samples']})", "range"] if several else ["synthetic"]
    return ["## Summary", "",
            "One row per metric; `better` says which direction is better (`= train`: the closer to the train "
            "split's own value, the floor column, the better; `= test`: the closer to the test split's value, the "
            "last column) and `target` what ideal is. The history rows are `-` (n/a) for a table without user "
            "ids. Pairwise "
            "rows compare each column with the test split; rows named `... gap` hold the absolute difference "
            "`abs(candidate - test)` of a per-trace statistic (the test split's own value in the last column). "
            "Privacy rows are measured against the train split, and their floor is the test split's own value. An "
            "empty or all-invalid sample gets the worst value of every row.", "",
            *_table(["metric", "better", "target", "floor (train vs test)", "bootstrap of train", *synthetic,
                     "synthetic beats bootstrap", "test value", "note"], rows)]


def _targets_section(results: dict[str, Any]) -> list[str]:
    table = results.get("targets")
    if table is None:
        return []
    missed = [r.target for r in table.itertuples(index=False) if not r.met]
    rows = [[r.target, r.metric, r.bar, r.value, "met" if r.met else "**missed**"]
            for r in table.itertuples(index=False)]
    verdict = (f"All {len(table)} targets are met." if not missed else
               f"{len(table) - len(missed)} of {len(table)} targets are met; missed: {'; '.join(missed)}.")
    return ["## Targets", "",
            "What a generator must reach to be useful and safe: at least as private as unseen real data (the test "
            "split, against train), and as close to the test split as the train split is, within the stated "
            f"allowance (the floor column of the summary). {verdict}", "",
            *_table(["target", "metric", "bar", "synthetic", "verdict"], rows)]


def _marginals_section(results: dict[str, Any]) -> list[str]:
    rows = [[c, *_metric_cells(results, metrics.KS[c]), *_metric_cells(results, metrics.W1[c])] for c in NUMERIC]
    return ["## 1. Marginals", "", "Two-sample KS statistic and Wasserstein-1 distance on `log1p` of each column, "
            "each against the test split. Lower is better.", "",
            *_table(["column", *[f"KS {h}" for h in HEAD], *[f"W1 {h}" for h in HEAD]], rows),
            f"![marginal CDFs]({IMAGES['marginals']})", ""]


def _correlation_section(results: dict[str, Any]) -> list[str]:
    mad = _metric_cells(results, metrics.CORRELATION_MAD)
    return ["## 2. Correlations", "",
            "Spearman correlations over interarrival, nodes, run, walltime and hour; mean absolute difference of "
            "the off-diagonal entries from the test split's matrix (lower is better).", "",
            *_table(HEAD, [mad]), f"![correlation heatmaps]({IMAGES['correlation']})", ""]


def _sdmetrics_section(results: dict[str, Any]) -> list[str]:
    cells = _cells(results, "sdmetrics", lambda s: s["score"] if s["status"] == "ok" else s["status"])
    return ["## 3. SDMetrics quality score", "",
            "SDMetrics `QualityReport` overall score against the test split (higher is better). Reported, not "
            "trusted: it averages per-column shapes and per-pair trends, so it is blind to the order of jobs, to "
            "interactions of more than two columns and to what a scheduler sees.", "", *_table(HEAD, [cells])]


def _c2st_section(results: dict[str, Any]) -> list[str]:
    rows = [["ROC AUC", *_metric_cells(results, metrics.C2ST_AUC)],
            ["std over folds", *_cells(results, "c2st", lambda c: c["auc_std"])],
            ["rows per class", *_cells(results, "c2st", lambda c: c["rows_per_class"])]]
    return ["## 4. Classifier two-sample test", "",
            "A gradient-boosting classifier learns to tell test rows from candidate rows on `log1p` inter-arrival, "
            "nodes, run, walltime, hour, day of week and one-hot status (ids left out); balanced subsamples, 5-fold "
            "cross-validated ROC AUC, identical rows kept in one fold. 0.5 = indistinguishable; lower is better. "
            "The floor is above 0.5 when the workload drifts from the train to the test period; the bootstrap "
            "of train is expected near the floor, and a generator fitted on train can only beat the floor by "
            "chance or by learning something train alone does not show.", "", *_table(["", *HEAD], rows)]


def _shape_section(results: dict[str, Any]) -> list[str]:
    test = _section(results, "floor", "shape")
    rows = [["power-of-two node counts", test["pow2_reference"],
             *_cells(results, "shape", lambda s: s["pow2_candidate"])],
            ["walltime on the test split's menu", test["menu_reference"],
             *_cells(results, "shape", lambda s: s["menu_candidate"])]]
    menu = ", ".join(f"{w:,}" for w in results["meta"].get("menu", []))
    return ["## 5. Shape of the job mix", "", f"Shares of jobs. The menu is the test split's 10 most common walltime "
            f"requests ({menu} s).", "", *_table(["share", "test", "train", "bootstrap", "synthetic"], rows)]


def _validity_section(results: dict[str, Any]) -> list[str]:
    keys = ["raw_rows", "valid_rows", "dropped", "repaired", "dropped_share", "repaired_share", "invalid_share"]
    sides = [results[s]["validity"] for s in SIDES]
    rows = [[k, *[v[k] for v in sides]] for k in keys]
    reasons = results["synthetic"]["validity"]["reasons"]
    text = "; ".join(f"{k}: {v:,}" for k, v in reasons.items()) or "none"
    return ["## 6. Validity", "",
            "Rows of the raw sample that had to be dropped (missing values, run <= 0, walltime <= 0, nodes <= 0, "
            "more nodes than the machine; also rows the sampler rejected and redrew, from "
            "`attrs[\"postprocess\"]`, and rows a trace reader dropped) or repaired (non-integer values rounded, "
            "negative gaps set to 0, submits out of order sorted), counted before anything else is scored. Lower is "
            "better. The floor column is the real trace's reader: the jobs it dropped over all jobs read.", "",
            *_table(["", "real trace (floor)", "bootstrap", "synthetic"], rows),
            f"Synthetic, by reason: {text}.", ""]


def _arrivals_section(results: dict[str, Any]) -> list[str]:
    names = {"cv": "inter-arrival CV", "lag1_acf": "lag-1 ACF of log1p inter-arrival",
             "dispersion": "hourly index of dispersion", "spectral_24h": "24 h spectral peak"}
    test = _section(results, "floor", "arrivals")["real"]
    rows = [[label, test[k], *_cells(results, "arrivals", lambda a, k=k: a["synthetic"][k])]
            for k, label in names.items()]
    rows.append(["hour-of-day TV distance to test", 0.0, *_metric_cells(results, metrics.HOUR_TV)])
    return ["## 7. Arrivals", "",
            "CV = std/mean of inter-arrival times (1 for Poisson). Lag-1 ACF of `log1p(inter-arrival)`. Index of "
            "dispersion = variance/mean of submits per hour over the whole trace (1 for Poisson). 24 h spectral "
            "peak = periodogram power at 24 h over the mean power (7-day segments). Closer to the test value is "
            "better.", "", *_table(["statistic", "test", "train", "bootstrap", "synthetic"], rows),
            f"![hour-of-day profile]({IMAGES['hourly']})", ""]


def _ci(ci: Any, key: str) -> str:
    mean, low, high = (ci.at[key, c] for c in ("mean", "low", "high"))
    return f"{fmt(mean)} [{fmt(low)}, {fmt(high)}]"


def _scheduling_section(results: dict[str, Any]) -> list[str]:
    test = _section(results, "floor", "scheduling")
    keys = ["offered_load", "busy_load", "load_spread", "utilization", "wait_mean", "wait_median", "wait_p95",
            "bsld_mean", "bsld_median", "bsld_p95", "jobs", "dropped"]
    rows = [[k, test["summary"].at[k, "real"], *_cells(results, "scheduling", lambda s, k=k: s["summary"].at[k,
            "synthetic"])] for k in keys]
    rows += [["KS wait vs test", 0.0, *_metric_cells(results, metrics.KS_WAIT)],
             ["KS bsld vs test", 0.0, *_metric_cells(results, metrics.KS_BSLD)]]
    wrows = [[k, _ci(test["ci_real"], k), *_cells(results, "scheduling", lambda s, k=k: _ci(s["ci_synthetic"], k))]
             for k in ("offered_load", "utilization", "wait_mean", "bsld_mean")]
    wrows += [["KS wait (pooled windows)", 0.0, *_metric_cells(results, metrics.KS_WAIT_WINDOWS)],
              ["KS bsld (pooled windows)", 0.0, *_metric_cells(results, metrics.KS_BSLD_WINDOWS)]]
    m = results["meta"]
    return ["## 8. Scheduling outcome", "",
            f"FCFS + EASY backfilling on `{m['machine']}`, jobs killed at their walltime. **Whole trace**: every "
            "table is replayed from its first to its last job (the synthetic and bootstrap traces have as many jobs "
            "as the test split), so a generator that overloads the machine shows it. `busy_load` is the offered "
            f"load between outages (gaps counted at most {m.get('outage', 43200) / 3600:.0f} h). `load_spread` is "
            "how much the "
            f"offered load of consecutive {m['load_window']:,}-job windows varies (interquartile range over median). "
            "Waits in seconds; closer to the test column is better (for the loads, a generator aims at the train "
            "column: the load of the data it learned).", "",
            *_table(["quantity", "test", "train", "bootstrap", "synthetic"], rows),
            f"**Windows**: up to {m['n_windows']} windows of {m['window']:,} consecutive jobs per table "
            "(`hpcgym.traces.window_starts`, the same seed for every table; a table no longer than a window is one "
            "window), each replayed from an empty machine: mean over windows [95% bootstrap CI]. Windows per table: "
            f"test {test['windows_real']['windows']}, "
            + ", ".join(f"{SIDES[side][0]} {fmt(w)}" for side, w in zip(SIDES, _cells(
                results, "scheduling", lambda s: s["windows_synthetic"]["windows"]), strict=True)) + ".", "",
            *_table(["per window", "test", "train", "bootstrap", "synthetic"], wrows),
            f"![wait and bsld CDFs]({IMAGES['scheduling']})", ""]


def _privacy_section(results: dict[str, Any]) -> list[str]:
    boot, synth = results["bootstrap"], results["synthetic"]

    def row(label: str, metric: Metric) -> list[Any]:  # the test split's own value (the floor), then each candidate
        return [label, metric.better, metric.value(boot, floor=True), metric.value(boot), metric.value(synth)]

    d = [x["privacy"]["dcr"] for x in (boot, synth)]
    rows = [row("DCR median", metrics.DCR_MEDIAN), row("DCR 5th percentile", metrics.DCR_P5),
            row("share DCR < test's 5th percentile", metrics.DCR_BELOW_P5),
            ["share at distance 0", "lower", d[0]["zero_holdout"], d[0]["zero_synthetic"], d[1]["zero_synthetic"]],
            row("exact (nodes, run, walltime) copies of a train job", metrics.EXACT_COPIES),
            row("user id found in train", metrics.USER_REUSE), row("group id found in train", metrics.GROUP_REUSE)]
    return ["## 9. Privacy", "",
            "Everything is measured against the **train split** (the rows a model learned from). The floor is the "
            "test split's own value: real jobs of a later period, which no model saw. A synthetic trace should be "
            f"no closer to train than that. DCR: Euclidean distance to the nearest train row on standardized "
            f"`log1p` inter-arrival, nodes, run and walltime ({results['meta']['dcr_rows']:,}-row subsamples). "
            "Ids are compared as strings; `-1` (unknown) never counts. Real users return from one period to the "
            "next, so the test split's id reuse is high; a generator should not hand out real ids at all.", "",
            *_table(["", "better", "test split (floor)", "bootstrap of train", "synthetic"], rows)]


def _prediction_section(results: dict[str, Any]) -> list[str]:
    """Section 11: a runtime predictor fitted on each table, scored on the test split (nothing when not computed)."""
    scored = [results[side].get("prediction") for side in SIDES]
    if all(p is None for p in scored):
        return []
    keys = ("mae_log", "under", "within_2x", "bsld", "loss")
    rows = [[key, *(MISSING if p is None else p.get(key, MISSING) for p in scored)] for key in keys]
    return ["## 10. Runtime predictor: trained on each table, tested on real", "",
            "A runtime predictor fitted on each table as its training data, then used on the **test split**: the "
            "mean absolute error of log runtime, the share under-predicted and the share within a factor of 2 of "
            "its estimates, and SAF+EASY's mean bounded slowdown on them over test windows (lower is better, except "
            "within 2x: higher). A generator whose users keep their habits trains a predictor close to the floor's; "
            "`-` where the table has no user ids.", "",
            *_table(["", *HEAD], rows)]


def _timing_section(results: dict[str, Any]) -> list[str]:
    rows = [[k, v] for k, v in results["timing"].items()]
    return ["## Timing", "", "Seconds per section for the synthetic candidate; `references` is the floor and the "
            "bootstrap together.", "", *_table(["section", "seconds"], rows)]


def render_markdown(results: dict[str, Any]) -> str:
    """The report as markdown (images referenced by the file names of :data:`IMAGES`).

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.

    Returns:
        The markdown text.
    """
    parts = [_header, _summary, _targets_section, _marginals_section, _correlation_section, _sdmetrics_section,
             _c2st_section, _shape_section, _validity_section, _arrivals_section, _scheduling_section, _privacy_section,
             _prediction_section, _timing_section]
    return "\n".join(line for part in parts for line in part(results))


def write_report(results: dict[str, Any], out_dir: str | Path) -> Path:
    """Write ``report.md`` and the PNG plots into ``out_dir`` (each file through a temporary file and a rename).

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.
        out_dir: the directory (created if missing).

    Returns:
        The path of ``report.md``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plot_marginals(results, out / IMAGES["marginals"])
    plot_correlations(results, out / IMAGES["correlation"])
    plot_hourly(results, out / IMAGES["hourly"])
    plot_scheduling(results, out / IMAGES["scheduling"])
    path = out / "report.md"
    text = render_markdown(results)
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return path
