"""The fidelity report: a markdown page and PNG plots comparing a synthetic job trace with a real one.

Command line::

    python -m synth.report --real theta --synthetic <trace file | saved model dir | model name> --out report/

``--real`` is a bundled trace name or a trace file; the comparison uses its chronological train split (first 70%)
as the reference and its test split as the privacy holdout. ``--synthetic`` is a trace file (SWF/CSV), a directory
written by :meth:`synth.base.Synthesizer.save`, or a name from :data:`synth.MODELS` (fitted on the train split
here). The metrics are in :mod:`synth.fidelity`; this module renders them. Files are written atomically.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from hpcgym import (
    cli,
    machines,  # noqa: E402
)
from hpcgym import traces as tracelib  # noqa: E402
from hpcgym.io import atomic_write
from synth import fidelity  # noqa: E402

REAL_COLOR, SYNTH_COLOR = "tab:blue", "tab:orange"
IMAGES = {"marginals": "marginals.png", "correlation": "correlation.png", "hourly": "hourly.png",
          "scheduling": "scheduling.png"}


# ---- files ---------------------------------------------------------------------------------------------------
def _save(fig: Any, path: Path) -> Path:
    """Save a figure as PNG through a temporary file and a rename, then close it."""
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return path




def _ecdf(ax: Any, values: np.ndarray, label: str, color: str) -> None:
    x = np.sort(np.asarray(values, np.float64))
    if x.size:
        ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=label, color=color, lw=1.4)


# ---- plots ---------------------------------------------------------------------------------------------------
def plot_marginals(results: dict[str, Any], path: Path) -> Path:
    """Four CDF panels (log x) of the numeric training columns, real train split vs synthetic.

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    real, synth = results["tables"]["train"], results["tables"]["synthetic"]
    floor, ours = results["floor"]["marginals"], results["synthetic"]["marginals"]
    units = {"interarrival": " [s]", "nodes": "", "run": " [s]", "walltime": " [s]"}
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, col in zip(axes.ravel(), fidelity.NUMERIC, strict=True):
        shift = 1 if col == "interarrival" else 0  # the only column with zeros
        _ecdf(ax, shift + real[col].to_numpy(), "real (train)", REAL_COLOR)
        _ecdf(ax, shift + synth[col].to_numpy(), "synthetic", SYNTH_COLOR)
        ax.set_xscale("log")
        ax.set_xlabel(f"{'1 + ' if shift else ''}{col}{units[col]}")
        ax.set_ylabel("CDF")
        ax.set_title(f"{col}: KS {ours.at[col, 'ks']:.3f} (floor {floor.at[col, 'ks']:.3f})", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="lower right")
    fig.suptitle("Marginal distributions, real train split vs synthetic")
    fig.tight_layout()
    return _save(fig, path)


def plot_correlations(results: dict[str, Any], path: Path) -> Path:
    """Spearman heatmaps, real train split and synthetic side by side, annotated.

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    corr = results["synthetic"]["correlation"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    image = None
    for ax, key, title in zip(axes, ("real", "synthetic"), ("real (train)", "synthetic"), strict=True):
        m = corr[key]
        image = ax.imshow(m.to_numpy(), vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(len(m)), m.columns, rotation=35, ha="right")
        ax.set_yticks(range(len(m)), m.index if key == "real" else [])
        for (i, j), v in np.ndenumerate(m.to_numpy()):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="white" if abs(v) > 0.6 else "k")
        ax.set_title(title)
    fig.colorbar(image, ax=axes, shrink=0.85, label="Spearman correlation")
    floor = results["floor"]["correlation"]["mad"]
    fig.suptitle(f"Spearman correlations: mean |difference| {corr['mad']:.3f} (floor {floor:.3f})")
    return _save(fig, path)


def plot_hourly(results: dict[str, Any], path: Path) -> Path:
    """Hour-of-day profile (share of submits per hour, UTC on the trace clock), real vs synthetic.

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    arr = results["synthetic"]["arrivals"]
    hours = np.arange(24)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(hours - 0.2, arr["hourly_real"], width=0.4, color=REAL_COLOR, label="real (train)")
    ax.bar(hours + 0.2, arr["hourly_synthetic"], width=0.4, color=SYNTH_COLOR, label="synthetic")
    ax.set_xticks(hours)
    ax.set_xlabel("hour of day (UTC, trace clock)")
    ax.set_ylabel("share of submits")
    floor = results["floor"]["arrivals"]["hour_tv"]
    ax.set_title(f"Hour-of-day profile: TV distance {arr['hour_tv']:.3f} (floor {floor:.3f})")
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return _save(fig, path)


def plot_scheduling(results: dict[str, Any], path: Path) -> Path:
    """CDFs (log x) of wait and bounded slowdown under FCFS + EASY, real vs synthetic replays.

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    sched, floor = results["synthetic"]["scheduling"], results["floor"]["scheduling"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, col, label in zip(axes, ("wait", "bsld"), ("1 + wait [s]", "bounded slowdown"), strict=True):
        shift = 1 if col == "wait" else 0
        _ecdf(ax, shift + sched["real"]["records"][col].to_numpy(), "real (train)", REAL_COLOR)
        _ecdf(ax, shift + sched["synthetic"]["records"][col].to_numpy(), "synthetic", SYNTH_COLOR)
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("CDF")
        ax.set_title(f"{col}: KS {sched['ks_' + col]:.3f} (floor {floor['ks_' + col]:.3f})", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right")
    windows = sched["summary"].at["windows", "real"]
    fig.suptitle(f"FCFS + EASY on {results['meta']['machine']}, {int(windows)} window(s) of up to "
                 f"{fidelity.WINDOW} jobs per side")
    fig.tight_layout()
    return _save(fig, path)


# ---- markdown ------------------------------------------------------------------------------------------------
def fmt(value: Any) -> str:
    """A number for the report: thousands separators above 100, three significant digits below, ``-`` for NaN.

    Args:
        value: a number (or anything else, returned as text).

    Returns:
        The text.
    """
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        v = float(value)
        if math.isnan(v):
            return "-"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return lines + [""]


def _summary(results: dict[str, Any]) -> list[str]:
    rows = []
    for r in results["table"].itertuples(index=False):
        note = f" ({r.note})" if r.note else ""
        rows.append([r.metric, r.ideal, fmt(r.real_vs_real) + note, fmt(r.synthetic_vs_real) + note, r.real,
                     r.synthetic])
    return ["## Summary", "",
            "One row per metric. *real vs real* is the noise floor (first vs second half of the train split); "
            "*synthetic vs real* compares the synthetic trace with the whole train split. For per-trace "
            "statistics (rows with values in the last two columns) both columns are absolute differences: "
            "|half 1 - half 2| and |synthetic - train|. The privacy rows use the test split as the floor.", "",
            *_table(["metric", "ideal", "real vs real (noise floor)", "synthetic vs real", "real (train)",
                     "synthetic"], rows)]


def _header(results: dict[str, Any]) -> list[str]:
    m = results["meta"]
    post = ", ".join(f"{k}: {v}" for k, v in m["postprocess"].items()) or "none recorded"
    return [
        f"# Fidelity report: synthetic vs `{m['real']}`", "",
        f"- **Real**: `{m['real']}`, {m['jobs_real']:,} jobs on `{m['machine']}` ({m['machine_nodes']:,} nodes). "
        f"Reference: the chronological train split (first 70%, {m['jobs_train']:,} jobs). Noise floor: its first "
        f"half ({m['jobs_half1']:,} jobs) vs its second half ({m['jobs_half2']:,} jobs). Privacy holdout: the test "
        f"split ({m['jobs_test']:,} jobs).",
        f"- **Synthetic**: {m['synthetic']}; {m['jobs_synthetic']:,} jobs. Post-processing: {post}.",
        f"- Seed {m['seed']}; computed in {results['timing']['total']:.1f} s.", "",
        "The noise floor measures how much two stretches of the same real workload differ (sampling noise *and* "
        "drift over the months of the trace). A synthetic trace whose numbers sit at or below the floor is as close "
        "to the real workload as the real workload is to itself; one far above it is not.", "",
    ]


def _marginals_section(results: dict[str, Any]) -> list[str]:
    f, s = results["floor"]["marginals"], results["synthetic"]["marginals"]
    rows = [[c, f.at[c, "ks"], s.at[c, "ks"], f.at[c, "wasserstein_log1p"], s.at[c, "wasserstein_log1p"]]
            for c in fidelity.NUMERIC]
    return ["## 1. Marginals", "",
            "Two-sample KS statistic and Wasserstein-1 distance on `log1p` of each column.", "",
            *_table(["column", "KS floor", "KS synthetic", "W1 log1p floor", "W1 log1p synthetic"], rows),
            f"![marginal CDFs]({IMAGES['marginals']})", ""]


def _correlation_section(results: dict[str, Any]) -> list[str]:
    return ["## 2. Correlations", "",
            f"Spearman correlations over {', '.join(fidelity.CORRELATION_COLUMNS)}; mean absolute difference of "
            f"the off-diagonal entries: **{fmt(results['synthetic']['correlation']['mad'])}** "
            f"(floor {fmt(results['floor']['correlation']['mad'])}).", "",
            f"![correlation heatmaps]({IMAGES['correlation']})", ""]


def _sdmetrics_section(results: dict[str, Any]) -> list[str]:
    f, s = results["floor"]["sdmetrics"], results["synthetic"]["sdmetrics"]
    if s["status"] != "ok":
        value = f"**{s['status']}**" + (" (install `hpcgym[synth]`)" if s["status"] == "not installed" else "")
    else:
        value = f"**{fmt(s['score'])}** (floor {fmt(f['score'])})"
    return ["## 3. SDMetrics quality score", "",
            f"SDMetrics `QualityReport` overall score: {value}.", "",
            "Reported, not trusted: the score averages per-column shape and per-pair trend similarities of the "
            "training table (user ids left out), so it is blind to the order of jobs (inter-arrival "
            "autocorrelation, daily cycles), to interactions of more than two columns and to what a scheduler "
            "sees; visibly wrong traces still score well above 0.5. Judge by the other sections.", ""]


def _c2st_section(results: dict[str, Any]) -> list[str]:
    f, s = results["floor"]["c2st"], results["synthetic"]["c2st"]
    return ["## 4. Classifier two-sample test", "",
            "A gradient-boosting classifier (`HistGradientBoostingClassifier`) learns to tell real rows (label 0) "
            "from synthetic rows (label 1) on `log1p` inter-arrival, nodes, run, walltime, hour, day of week and "
            "one-hot status (user ids left out), balanced subsamples, 5-fold cross-validated ROC AUC. "
            "0.5 = indistinguishable, 1 = perfectly separable.", "",
            *_table(["comparison", "ROC AUC", "std over folds", "rows per class"],
                    [["real half 1 vs half 2 (floor)", f["auc"], f["auc_std"], f["rows_per_class"]],
                     ["real train vs synthetic", s["auc"], s["auc_std"], s["rows_per_class"]]]),
            "The floor is above 0.5 when the workload drifts between the two halves of the train split; a "
            "synthesizer that models the whole split should reach 0.5, not merely the floor.", ""]


def _validity_section(results: dict[str, Any]) -> list[str]:
    f, s = results["floor"]["validity"], results["synthetic"]["validity"]
    rows = [
        ["non-integer nodes (raw samples)", 0.0, f["non_integer_nodes"], 0.0, s["non_integer_nodes"]],
        ["power-of-two nodes", f["pow2_real"], f["pow2_synthetic"], s["pow2_real"], s["pow2_synthetic"]],
        ["walltime on the menu", f["menu_real"], f["menu_synthetic"], s["menu_real"], s["menu_synthetic"]],
        ["exact (nodes, run, walltime) copy of a reference row", "", f["exact_copy"], "", s["exact_copy"]],
    ]
    return ["## 5. Validity gates", "",
            "Shares of jobs. The menu is the reference table's 10 most common walltime requests "
            f"(train split: {', '.join(f'{w:,}' for w in results['meta'].get('menu', []))} s). The exact-copy "
            "rate counts rows whose (nodes, run, walltime) triple equals some reference row's (for the floor: "
            "second-half rows found in the first half).", "",
            *_table(["gate", "real half 1", "real half 2", "real train", "synthetic"], rows)]


def _arrivals_section(results: dict[str, Any]) -> list[str]:
    f, s = results["floor"]["arrivals"], results["synthetic"]["arrivals"]
    names = {"cv": "inter-arrival CV", "lag1_acf": "lag-1 ACF of log1p inter-arrival",
             "dispersion": "hourly index of dispersion", "spectral_24h": "24 h spectral peak"}
    rows = [[label, f["real"][k], f["synthetic"][k], s["real"][k], s["synthetic"][k]] for k, label in names.items()]
    rows.append(["hour-of-day TV distance", "", f["hour_tv"], "", s["hour_tv"]])
    return ["## 6. Arrivals", "",
            "CV = std/mean of inter-arrival times (1 for Poisson). Lag-1 ACF of `log1p(inter-arrival)` (log1p keeps "
            "the zero gaps of simultaneous submits). Index of dispersion = variance/mean of submits per hour "
            "bucket over the whole trace (1 for Poisson). 24 h spectral peak = periodogram power of hourly submit "
            f"counts at the 24 h period over the mean power (segments of {fidelity.SEGMENT_DAYS} days averaged; "
            "about 1 without a daily cycle).", "",
            *_table(["statistic", "real half 1", "real half 2", "real train", "synthetic"], rows),
            f"![hour-of-day profile]({IMAGES['hourly']})", ""]


def _scheduling_section(results: dict[str, Any]) -> list[str]:
    f, s = results["floor"]["scheduling"], results["synthetic"]["scheduling"]
    keys = ["offered_load", "utilization", "wait_mean", "wait_median", "wait_p95", "bsld_mean", "bsld_median",
            "bsld_p95", "windows", "jobs"]
    rows = [[k, f["summary"].at[k, "real"], f["summary"].at[k, "synthetic"], s["summary"].at[k, "real"],
             s["summary"].at[k, "synthetic"]] for k in keys]
    rows += [["KS wait", "", f["ks_wait"], "", s["ks_wait"]], ["KS bsld", "", f["ks_bsld"], "", s["ks_bsld"]]]
    dropped = s["synthetic"]["dropped"]
    return ["## 7. Scheduling outcome", "",
            f"FCFS + EASY backfilling on `{results['meta']['machine']}`, jobs killed at their walltime. Each side "
            f"is replayed in the same number of evenly spaced windows of {fidelity.WINDOW:,} consecutive jobs "
            "(whole tables when shorter); records are concatenated for the wait and bsld distributions; offered "
            "load and utilization are means over windows. Waits in seconds."
            + (f" {dropped} synthetic jobs could not run on the machine and were left out." if dropped else ""), "",
            *_table(["quantity", "real half 1", "real half 2", "real train", "synthetic"], rows),
            f"![wait and bsld CDFs]({IMAGES['scheduling']})", ""]


def _privacy_section(results: dict[str, Any]) -> list[str]:
    p = results["privacy"]
    rows = [["median DCR", p["median_holdout"], p["median_synthetic"]],
            ["5th percentile of holdout DCRs", p["holdout_p5"], ""],
            ["share below that 5th percentile", p["below_p5_holdout"], p["below_p5_synthetic"]],
            ["share at distance 0", p["zero_holdout"], p["zero_synthetic"]]]
    return ["## 8. Privacy: distance to closest record", "",
            "Euclidean distance of each row to its nearest train row on standardized `log1p` inter-arrival, nodes, "
            f"run and walltime ({fidelity.DCR_ROWS:,}-row subsamples). Holdout (test split) rows are real jobs the "
            "model never saw: synthetic rows much closer to the train rows than those suggest memorization.", "",
            *_table(["", "holdout (floor)", "synthetic"], rows)]


def _timing_section(results: dict[str, Any]) -> list[str]:
    rows = [[k, v] for k, v in results["timing"].items()]
    return ["## Timing", "", *_table(["section", "seconds"], rows)]


def render_markdown(results: dict[str, Any]) -> str:
    """The report as markdown (images referenced by the file names of :data:`IMAGES`).

    Args:
        results: the dict of :func:`synth.fidelity.evaluate`.

    Returns:
        The markdown text.
    """
    parts = [_header, _summary, _marginals_section, _correlation_section, _sdmetrics_section, _c2st_section,
             _validity_section, _arrivals_section, _scheduling_section, _privacy_section, _timing_section]
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


# ---- command line --------------------------------------------------------------------------------------------
def load_real(spec: str, jobs: int | None = None, **read: Any) -> pd.DataFrame:
    """The real trace: a trace file if ``spec`` is an existing path, else a bundled trace name.

    Args:
        spec: path or bundled name.
        jobs: keep only the first ``jobs`` jobs (chronological), if given.
        **read: ``format``, ``machine``, ``columns`` for :func:`hpcgym.traces.read`.

    Returns:
        The canonical job table (with ``attrs["machine"]``).
    """
    real = tracelib.read(spec, **read) if Path(spec).exists() else tracelib.load(spec)
    if jobs is not None and jobs < len(real):
        attrs = dict(real.attrs)
        real = real.iloc[:jobs].reset_index(drop=True)
        real.attrs = attrs
    return real


def load_synthetic(spec: str, train: pd.DataFrame, n: int, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """The synthetic job table from a trace file, a saved model directory or a model name.

    A trace file is read for the real machine and cut to its first ``n`` jobs when longer; a saved model
    (:meth:`synth.base.Synthesizer.load`) samples ``n`` jobs; a name from :data:`synth.MODELS` is fitted on
    ``train`` first.

    Args:
        spec: the ``--synthetic`` argument.
        train: the real train split (its machine is used, and name models are fitted on it).
        n: jobs to sample (and the cap for files).
        seed: seed of fitting and sampling.

    Returns:
        ``(table, description)``.

    Raises:
        ValueError: ``spec`` is none of the three.
    """
    import synth
    from synth.base import MANIFEST, Synthesizer

    path = Path(spec)
    if path.is_dir():
        if not (path / MANIFEST).exists():
            raise ValueError(f"--synthetic {spec}: a directory without {MANIFEST} is not a saved model")
        model = Synthesizer.load(path)
        return model.sample(n, seed), f"saved model `{path}` ({model.name}), {n:,} jobs sampled with seed {seed}"
    if path.exists():
        table = tracelib.read(path, machine=train.attrs["machine"])
        total = len(table)
        if total > n:
            attrs = dict(table.attrs)
            table = table.iloc[:n].reset_index(drop=True)
            table.attrs = attrs
        kept = f" (the first {n:,} of {total:,} jobs)" if total > n else ""
        return table, f"trace file `{path}`{kept}"
    if spec.lower() in synth.MODELS:
        model = synth.get(spec).fit(train, seed=seed)
        return model.sample(n, seed), f"model `{spec}` fitted on the train split, {n:,} jobs sampled with seed {seed}"
    raise ValueError(f"--synthetic {spec!r} is not a trace file, a saved model directory or a model name "
                     f"({', '.join(synth.MODELS)})")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        The namespace.
    """
    p = cli.ArgumentParser(prog="python -m synth.report", description=__doc__.split("\n")[0])
    p.add_argument("--real", required=True, help="bundled trace name (e.g. theta) or a trace file (read with "
                                                 "--format/--machine/--columns)")
    cli.add_trace_args(p)
    p.add_argument("--synthetic", required=True,
                   help="trace file (SWF/CSV), saved model directory, or model name from synth.MODELS")
    p.add_argument("--out", required=True, help="output directory for report.md and the PNGs")
    p.add_argument("--jobs", type=int, default=None, help="use only the first N jobs of the real trace")
    p.add_argument("--n-synthetic", type=int, default=None,
                   help="synthetic jobs to sample (and the cap for trace files); default: the train split's size")
    p.add_argument("--seed", type=int, default=0, help="seed of fitting, sampling and every subsample")
    args = p.parse_args(argv)
    if args.jobs is not None and args.jobs < 20:
        p.error("--jobs must be at least 20")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; print the path of ``report.md``.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    args = parse_args(argv)
    try:
        real = load_real(args.real, args.jobs, format=args.format, machine=args.machine, columns=args.columns)
    except (KeyError, OSError, ValueError) as exc:
        raise ValueError(f"--real {args.real!r}: {exc}") from None
    machines.get(real.attrs["machine"])  # fail early on a trace without a machine
    train = tracelib.split(real, "train")
    n = args.n_synthetic or len(train)
    try:
        synthetic, source = load_synthetic(args.synthetic, train, n, args.seed)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    results = fidelity.evaluate(real, synthetic, out_dir=args.out, seed=args.seed, progress=True, source=source)
    print(results["report"])  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
