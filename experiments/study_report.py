"""The tables, figures and ``report.md`` of a study folder written by :mod:`experiments.study`.

Everything here reads what the stages left on disk (the runs' ``eval/per_window.csv`` and ``learning_curve.csv``,
the fidelity JSONs, the fits' manifests), so a report can be redrawn from a study folder at any time. Figures use
matplotlib's Agg backend:

- ``figures/bsld_by_source.png``: (a) the mean bounded slowdown of every source's agents (one dot per seed, the
  mean over seeds, the seeds' range) with the heuristics as reference lines, and each source's share of the
  real-trained agents' improvement over FCFS+EASY with its 95% bootstrap CI over seeds;
- ``figures/fidelity_vs_usefulness.png``: (b) the Spearman rank correlation of every fidelity metric with the
  usefulness of each generator's agents, and the best metric's scatter;
- ``figures/learning_curves.png``: (c) validation bsld against training steps, one panel per source, one line
  per seed.

``starts.csv`` (:func:`starts`) says what RL added: per run, the network RL started from and the one it kept, on
validation and on the test windows; the report counts the runs where RL beat its start and runs the between-sources
test on the starts alone, so that a difference between sources can be told apart from what their priors or clones
brought (with ``--tuned workload`` each source's prior is fitted on its own jobs).

:func:`slowdown_curves` and :func:`figure_slowdown` serve ``experiments/notebooks/study_slowdown.ipynb``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments import seeds, stream
from experiments.results import AGENT, Windows
from experiments.runs import BASELINE, RunFolder

FIGURES = ("bsld_by_source", "fidelity_vs_usefulness", "learning_curves")
#: the key of a run's ``study-run.json`` that marks a source whose windows needed no decision
#: (:class:`hpcgym.errors.NoDecisionError`), and the status the tables give it
UNTRAINABLE = "untrainable"
UNTRAINABLE_STATUS = "untrainable: its samples make no decisions"
#: the fidelity row that gives a generator's offered load
LOAD_METRIC = "offered load (whole trace)"


class StudyFolder:
    """A study's folder: where ``experiments.study`` and this module put each file.

    ``study.json`` (the study's settings), ``runs/<source>-s<seed>/`` (run folders,
    :class:`experiments.runs.RunFolder`), ``fidelity/`` (one JSON per generator, fit and sample size, and the
    stage's log), ``errors/`` (the traceback of each failure), the tables ``<name>.csv``, ``figures/<name>.png``,
    ``report.md`` and ``timing.json``.
    """

    def __init__(self, path: str | Path):
        p = self.path = Path(path)
        self.settings, self.timing, self.report = p / "study.json", p / "timing.json", p / "report.md"
        self.runs, self.figures, self.errors = p / "runs", p / "figures", p / "errors"
        self.fidelity = p / "fidelity"
        self.fidelity_log = self.fidelity / "fidelity.log"

    def table(self, name: str) -> Path:
        """A table of the report (``study``, ``heuristics``, ``sources``, ``fidelity``, ...)."""
        return self.path / f"{name}.csv"

    def figure(self, name: str) -> Path:
        """A figure of the report (:data:`FIGURES`)."""
        return self.figures / f"{name}.png"

    def error(self, stage: str, label: str) -> Path:
        """Where the traceback of a failed item goes."""
        return self.errors / f"{stage}-{label}.txt"

    def fidelity_json(self, generator: str, fit: Path, jobs: int) -> Path:
        """The fidelity scores of a generator's fit (its cache folder) on ``jobs`` sampled jobs."""
        return self.fidelity / f"{generator}-{fit.name.rsplit('-', 1)[-1]}-n{jobs}.json"


def _figure(**kw: Any):
    """A figure outside pyplot (no global state, no backend switch): ``savefig`` renders it with Agg."""
    from matplotlib.figure import Figure

    return Figure(**kw)


# ---- collecting ------------------------------------------------------------------------------------------------
def run_dirs(runs: Mapping[tuple[str, int], Any]) -> dict[tuple[str, int], Path]:
    """(source, seed) -> the run folder, for the runs that have an evaluation."""
    out = {}
    for key, targs in runs.items():
        path = Path(targs.runs_dir) / targs.name
        if RunFolder(path).evaluated():
            out[key] = path
    return out


def collect(dirs: Mapping[tuple[str, int], Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``study.csv`` (one row per source x seed x window) and ``heuristics.csv`` (one row per heuristic x window).

    Raises:
        ValueError: the runs were not evaluated on the same windows (:func:`experiments.compare.load_runs`).
    """
    from experiments import compare

    if not dirs:
        return pd.DataFrame(), pd.DataFrame()
    compare.load_runs(list(dirs.values()))  # refuses runs evaluated on other windows
    rows, heuristics = [], None
    for (source, seed), path in dirs.items():
        run = RunFolder(path)
        args = run.settings()
        results = Windows.read(run.per_window)
        ref = results.bsld(BASELINE)
        others = {kind: results.of_kind(kind).set_index("window")["bsld"] for kind in ("untrained", "cloned")}
        for _, r in results.agents.iterrows():
            w = int(r["window"])
            rows.append({"source": source, "seed": seed, "window": w, "run": path.name,
                         "workload": args["workload"], "synthesizer": args["synthesizer"] if source != "real" else "",
                         "backfill": r["backfill"], "bsld": r["bsld"], "wait": r["wait"],
                         "utilization": r["utilization"], f"{BASELINE}_bsld": ref.get(w, np.nan),
                         **{f"{k}_bsld": v.get(w, np.nan) for k, v in others.items()}})
        if heuristics is None:
            heuristics = results.heuristics.reset_index(drop=True)
    return pd.DataFrame(rows), heuristics


def sources_table(study: pd.DataFrame) -> pd.DataFrame:
    """One row per source: its seeds' mean bsld, win rate against FCFS+EASY and share of the real agents' gain.

    The seeds' mean bsld as mean, sd, min, max and median; the untrained and cloned networks' mean bsld; the share
    of the real-trained agents' improvement over FCFS+EASY at the seed medians, with its 95% bootstrap CI over
    seeds (:func:`experiments.compare.across_seeds`).
    """
    from experiments import compare

    if study.empty:
        return pd.DataFrame()
    per_seed = study.groupby(["source", "seed"], sort=False).agg(bsld=("bsld", "mean"), ref=(f"{BASELINE}_bsld",
                                                                                            "mean"))
    windows = study.rename(columns={"source": "trained_on", f"{BASELINE}_bsld": "reference_bsld"})
    shares = compare.across_seeds(windows).set_index("trained_on")
    rows = []
    for source, g in per_seed.groupby(level="source", sort=False):
        v = g["bsld"].to_numpy()
        s = study[study["source"] == source]
        row = {"source": source, "seeds": len(v), "mean_bsld": v.mean(), "sd_bsld": v.std(ddof=1) if len(v) > 1
               else np.nan, "min_seed": v.min(), "max_seed": v.max(), "median_bsld": np.median(v),
               f"{BASELINE}_bsld": g["ref"].mean(), "win_rate_vs_fcfs_easy": float((s["bsld"] <
                                                                                    s[f"{BASELINE}_bsld"]).mean()),
               "untrained_bsld": s["untrained_bsld"].mean(), "cloned_bsld": s.get("cloned_bsld", pd.Series(
                   dtype=float)).mean()}
        for col in ("share_of_real_improvement", "share_ci_low", "share_ci_high"):
            row[col] = shares.at[source, col] if col in shares else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def f_statistic(values: np.ndarray, labels: np.ndarray) -> float:
    """One-way analysis of variance: the between-group mean square over the within-group mean square."""
    groups = [values[labels == g] for g in np.unique(labels)]
    k, n = len(groups), len(values)
    grand = values.mean()
    between = sum(len(g) * (g.mean() - grand) ** 2 for g in groups) / (k - 1)
    within = sum(((g - g.mean()) ** 2).sum() for g in groups) / (n - k)
    return float(between / within) if within > 0 else float("inf")


def source_effect(study: pd.DataFrame, permutations: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """Is the spread *between* training sources larger than the spread *between seeds* of one source?

    One value per (source, seed): the log of its agent's mean bsld over the test windows (logs, because one
    collapsed seed can score 30x another). Returns the one-way ANOVA's ``F`` across sources, ``between_share``
    (the intra-class correlation ICC(1): the share of the variance that lies between sources; negative when sources
    differ less than seeds), and ``p_value``: the share of relabellings of the (source, seed) values among the
    sources with an ``F`` at least the observed one (every relabelling when there are at most ``permutations``,
    else that many random ones drawn with ``seed``). Sources with one seed, or fewer than two sources, give NaNs.
    """
    per_seed = study.groupby(["source", "seed"], sort=False)["bsld"].mean().reset_index()
    per_seed = per_seed[per_seed.groupby("source")["seed"].transform("size") >= 2]
    values, labels = np.log(per_seed["bsld"].to_numpy(float)), per_seed["source"].to_numpy()
    k, n = len(np.unique(labels)), len(values)
    out: dict[str, Any] = {"sources": k, "runs": n, "F": np.nan, "between_share": np.nan, "p_value": np.nan,
                           "relabellings": 0}
    if k < 2 or n <= k:
        return out
    observed = f_statistic(values, labels)
    sizes = per_seed.groupby("source").size().to_numpy()
    n0 = (n - (sizes ** 2).sum() / n) / (k - 1)  # the mean group size, for unequal seeds per source
    share = (observed - 1) / (observed + n0 - 1) if np.isfinite(observed) else 1.0  # no spread within: all between
    out.update(F=observed, between_share=float(share))
    exact = math.factorial(n) <= permutations  # every relabelling, the observed one included
    if exact:
        relabelled = (labels[list(p)] for p in itertools.permutations(range(n)))
    else:
        rng = np.random.default_rng(seed)
        relabelled = (rng.permutation(labels) for _ in range(permutations))
    scores = np.array([f_statistic(values, lab) for lab in relabelled])
    at_least = int((scores >= observed * (1 - 1e-12)).sum())
    p = at_least / len(scores) if exact else (at_least + 1) / (len(scores) + 1)
    out.update(p_value=float(p), relabellings=len(scores))
    return out


def paired(dirs: Mapping[tuple[str, int], Path]) -> pd.DataFrame:
    """Per run: its agent's paired ratio to the strongest reference on the test windows and on the whole test split.

    One row per (source, seed) with :data:`experiments.stream.PAIRED`'s columns (:func:`experiments.stream.paired_rows`
    on the run's evaluation; ``beats``: the CI's upper end below 1, on the whole split where it was evaluated).
    """
    frames = [stream.paired_rows(RunFolder(path).eval, (AGENT,)).assign(source=source, seed=seed)
              for (source, seed), path in dirs.items()]
    frames = [f for f in frames if not f.empty]
    cols = ["source", "seed", *stream.PAIRED]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def _paired_text(table: pd.DataFrame) -> list[str]:
    """The report's section on the paired comparison with the strongest reference (:func:`paired`)."""
    counts = ", ".join(f"{source}: {int(g['beats'].sum())} of {len(g)}" for source, g in table.groupby("source",
                                                                                                    sort=False))
    return ["### Paired against the strongest reference\n", _md(table.drop(columns=["kind"])),
            "Ratio of the agent's mean bsld to the reference's (the strongest implementable row) on the same jobs, "
            "95% block-bootstrap CI: on the test windows (blocks of consecutive jobs as long as a window, so that "
            "overlapping windows do not count twice) and on the whole test split scheduled as one stream (blocks of "
            f"{stream.BLOCK} consecutive jobs). `beats`: the CI's upper end is below 1 (the whole "
            f"split's; the windows' for a run evaluated without it). Seeds that beat the reference: {counts}.\n"]


STARTS = ["source", "seed", "start", "val_start", "val_kept", "test_start", "test_kept"]


def starts(dirs: Mapping[tuple[str, int], Path]) -> pd.DataFrame:
    """Per run: the network RL started from and the one it kept, their validation and test scores (mean bsld).

    Columns :data:`STARTS`: :func:`experiments.seeds.agreement` over each source's runs (``start`` is
    ``untrained``, ``cloned`` or a taught residual's ``prior``; ``test_start`` is NaN where the start has no test
    row of its own and was not kept). Runs without a learning curve (no validation windows) have no row.
    """
    by_source: dict[str, list[Path]] = {}
    for (source, _), path in dirs.items():
        by_source.setdefault(source, []).append(path)
    frames = [seeds.agreement(paths, seeds.load(paths)).assign(source=source) for source, paths in by_source.items()]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True)[STARTS] if frames else pd.DataFrame(columns=STARTS)


def start_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per source, from :func:`starts`: the seeds' median start on test and how often RL beat its start.

    Columns ``source, start_median_bsld`` (median over the seeds whose start has a test score),
    ``rl_beat_start_validation`` (seeds whose kept network scored lower than the start on validation: RL moved) and
    ``rl_beat_start_test`` (of the seeds whose start has a test score, those whose kept network scored lower on test).
    """
    rows = []
    for source, g in table.groupby("source", sort=False):
        moved, better, scored = seeds.rl_counts(g)
        median = float(scored["test_start"].median()) if len(scored) else np.nan
        rows.append({"source": source, "start_median_bsld": median, "rl_beat_start_validation": moved,
                     "rl_beat_start_test": f"{better} of {len(scored)}"})
    return pd.DataFrame(rows, columns=["source", "start_median_bsld", "rl_beat_start_validation",
                                       "rl_beat_start_test"])


def start_effect(table: pd.DataFrame, permutations: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """:func:`source_effect` on the starts' test scores: did the sources differ before RL?"""
    scored = table.dropna(subset=["test_start"])
    return source_effect(scored.assign(bsld=scored["test_start"].astype(float)), permutations, seed)


def run_status(runs: Mapping[tuple[str, int], Any]) -> pd.DataFrame:
    """One row per run: ``source, seed, status, decisions_per_window, window_load``.

    ``status``: ``trained``, :data:`UNTRAINABLE_STATUS` (its training windows needed no decision, so it has no
    agent), or ``not trained`` (failed or not run). ``decisions_per_window``: the mean decisions per training
    episode (``monitor.csv``); 0 for an untrainable run. ``window_load``: for an untrainable run, the mean offered
    load of the windows it drew before giving up; else NaN.
    """
    rows = []
    for (source, seed), targs in runs.items():
        run = RunFolder(Path(targs.runs_dir) / targs.name)
        record = json.loads(run.study_record.read_text()) if run.study_record.exists() else {}
        row = {"source": source, "seed": seed, "status": "not trained", "decisions_per_window": np.nan,
               "window_load": np.nan}
        if UNTRAINABLE in record:
            row.update(status=UNTRAINABLE_STATUS, decisions_per_window=0.0,
                       window_load=float(record[UNTRAINABLE]["offered_load"]))
        elif "train_s" in record and run.model.exists():
            episodes = pd.read_csv(run.monitor, skiprows=1) if run.monitor.exists() else pd.DataFrame({"l": []})
            row.update(status="trained", decisions_per_window=float(episodes["l"].mean()) if len(episodes)
                       else np.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=["source", "seed", "status", "decisions_per_window", "window_load"])


def add_status(sources: pd.DataFrame, status: pd.DataFrame, loads: Mapping[str, float]) -> pd.DataFrame:
    """``sources`` with each source's status, offered load and decisions per window; untrainable sources added.

    A source's status is its runs' (``trained``, :data:`UNTRAINABLE_STATUS`), or a count of each when its seeds
    differ. ``offered_load`` is ``loads[source]`` (the training part for ``real``, a generator's fidelity sample);
    ``window_load`` the mean over its untrainable runs of the windows they drew (NaN when all trained).
    """
    if status.empty:
        return sources
    rows = []
    for source, g in status.groupby("source", sort=False):
        counts = g["status"].value_counts()
        label = counts.index[0] if len(counts) == 1 else "; ".join(f"{n} of {len(g)} seeds {k}"
                                                                  for k, n in counts.items())
        rows.append({"source": source, "status": label, "offered_load": loads.get(source, np.nan),
                     "decisions_per_window": g["decisions_per_window"].mean(), "window_load": g["window_load"].mean()})
    extra = pd.DataFrame(rows)
    if sources.empty:
        return extra.assign(seeds=0)
    out = extra.merge(sources, on="source", how="left")
    out["seeds"] = out["seeds"].fillna(0).astype(int)
    return out


def fidelity_loads(fidelity: pd.DataFrame) -> dict[str, float]:
    """Each generator's offered load from its fidelity table (:data:`LOAD_METRIC`)."""
    if fidelity.empty:
        return {}
    rows = fidelity[fidelity["metric"] == LOAD_METRIC]
    return {r["source"]: float(r["value"]) for _, r in rows.iterrows()}


def fidelity_frame(paths: Mapping[str, Path]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The fidelity scores, long (``source, metric, section, better, value, floor, bootstrap``), and the errors."""
    frames, errors = [], {}
    for source, path in paths.items():
        if not path.exists():
            errors[source] = "not computed"
            continue
        body = json.loads(path.read_text())
        if "error" in body:
            errors[source] = body["error"].strip().splitlines()[-1]
            continue
        frames.append(pd.DataFrame(body["table"]).assign(source=source))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), errors


def predictors(fidelity: pd.DataFrame, sources: pd.DataFrame) -> pd.DataFrame:
    """Per fidelity metric: the Spearman rank correlation, across generators, of its score with usefulness.

    Usefulness is minus the median over seeds of the agents' mean bsld on the test windows (rank-equivalent to the
    share of the real agents' improvement, and defined without a real source). ``rho_oriented`` flips the sign of
    the metrics where lower is better, so that a positive value always means "better fidelity, more useful
    agents"; the best predictor is the metric with the highest ``rho_oriented``.
    """
    from scipy.stats import spearmanr

    if fidelity.empty or sources.empty:
        return pd.DataFrame()
    useful = -sources.set_index("source")["median_bsld"]
    rows = []
    for metric, g in fidelity.groupby("metric", sort=False):
        x = g.set_index("source")["value"].astype(float).replace([np.inf, -np.inf], np.nan)
        both = pd.concat([x, useful], axis=1, join="inner").dropna()
        rho = np.nan
        if len(both) >= 3 and both.iloc[:, 0].nunique() > 1 and both.iloc[:, 1].nunique() > 1:
            rho = float(spearmanr(both.iloc[:, 0], both.iloc[:, 1]).statistic)
        better = g["better"].iat[0] if "better" in g else None
        sign = {"lower": -1.0, "higher": 1.0}.get(better)  # a value row ("= train") has no direction
        rows.append({"metric": metric, "section": g["section"].iat[0] if "section" in g else "", "better": better,
                     "generators": len(both), "rho": rho, "rho_oriented": sign * rho if sign else np.nan})
    return pd.DataFrame(rows).sort_values("rho_oriented", ascending=False, na_position="last").reset_index(drop=True)


# ---- figures ---------------------------------------------------------------------------------------------------
def figure_bsld(study: pd.DataFrame, heuristics: pd.DataFrame, sources: pd.DataFrame, backfill: str, title: str):
    """(a) Mean bsld per source with the seeds' spread and heuristic lines; share of the real improvement."""
    fig = _figure(figsize=(12, 4.4))
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    names = list(sources["source"])
    per_seed = study.groupby(["source", "seed"], sort=False)["bsld"].mean()
    for i, s in enumerate(names):
        v = per_seed.loc[s].to_numpy()
        ax.scatter(np.full(len(v), i), v, s=14, color="#4477AA", alpha=0.7, zorder=3)
        ax.errorbar(i, v.mean(), yerr=[[v.mean() - v.min()], [v.max() - v.mean()]], fmt="D", color="#E31A1C",
                    capsize=4, zorder=4)
    from experiments.plots import FAMILY_COLOURS

    h = heuristics.groupby("scheduler")["bsld"].mean().sort_values()
    shown = [k for k in h.index if k.endswith(f"+{backfill}") or k == BASELINE]
    for k in shown:
        ax.axhline(h[k], ls="-" if k == BASELINE else "--", lw=1.2 if k == BASELINE else 0.9,
                   color=FAMILY_COLOURS.get(k.split("+")[0], "grey"), label=f"{k} {h[k]:,.2f}")
    if shown:
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="heuristics", title_fontsize=7)
    values = list(per_seed.to_numpy()) + [h[k] for k in shown if k in h.index]
    if values and min(values) > 0 and max(values) / min(values) > 20:
        ax.set_yscale("log")
    ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
    ax.set_ylabel("mean bounded slowdown (test windows)")
    ax.set_title("agents per training source (dots: seeds; diamond: mean, bar: range)", fontsize=9)
    share = sources["share_of_real_improvement"].to_numpy(dtype=float)
    lo = share - sources["share_ci_low"].to_numpy(dtype=float)
    hi = sources["share_ci_high"].to_numpy(dtype=float) - share
    bx.errorbar(range(len(names)), share, yerr=[np.nan_to_num(lo), np.nan_to_num(hi)], fmt="o", color="#228833",
                capsize=4)
    if np.isnan(share).all():
        bx.text(0.5, 0.5, f"no share: the real agents did not beat {BASELINE}\n(or no 'real' source)",
                ha="center", va="center", fontsize=8, transform=bx.transAxes)
    bx.axhline(1.0, color="#4477AA", lw=0.8, ls=":")
    bx.axhline(0.0, color="black", lw=0.8)
    bx.set_xticks(range(len(names)), names, rotation=35, ha="right")
    bx.set_ylabel(f"share of the real agents' gain over {BASELINE}")
    bx.set_title("share at the seed medians, 95% bootstrap CI over seeds", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def figure_fidelity(fidelity: pd.DataFrame, preds: pd.DataFrame, sources: pd.DataFrame, title: str):
    """(b) Rank correlation of each fidelity metric with usefulness; the best metric against usefulness."""
    fig = _figure(figsize=(11, max(4.0, 0.18 * len(preds) + 1)))
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    p = preds.dropna(subset=["rho_oriented"]) if "rho_oriented" in preds else pd.DataFrame()
    if p.empty:
        ax.text(0.5, 0.5, "no fidelity scores to correlate", ha="center", transform=ax.transAxes)
        bx.axis("off")
    else:
        ax.barh(range(len(p)), p["rho_oriented"], color=np.where(p["rho_oriented"] > 0, "#228833", "#CC6677"))
        ax.set_yticks(range(len(p)), p["metric"], fontsize=7)
        ax.invert_yaxis()
        ax.axvline(0, color="black", lw=0.8)
        ax.set_xlim(-1.05, 1.05)
        ax.set_xlabel("Spearman rho with usefulness (oriented: > 0 = better fidelity, better agents)")
        best = p["metric"].iat[0]
        g = fidelity[fidelity["metric"] == best].set_index("source")["value"].astype(float)
        med = sources.set_index("source")["median_bsld"]
        both = pd.concat([g, med], axis=1, join="inner").dropna()
        bx.scatter(both.iloc[:, 0], both.iloc[:, 1], color="#E31A1C")
        for name, (x, y) in both.iterrows():
            bx.annotate(name, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        bx.set_xlabel(f"{best} ({p['better'].iat[0]} is better)")
        bx.set_ylabel("median over seeds of mean bsld (lower: more useful)")
        bx.set_title(f"the best predictor (rho {p['rho_oriented'].iat[0]:+.2f}, {int(p['generators'].iat[0])} "
                     "generators)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def figure_curves(dirs: Mapping[tuple[str, int], Path], title: str):
    """(c) Validation bsld against training steps: one panel per source, one line per seed."""
    names = list(dict.fromkeys(s for s, _ in dirs))
    cols = min(3, max(len(names), 1))
    rows = max(1, -(-len(names) // cols))
    fig = _figure(figsize=(3.6 * cols, 2.6 * rows))
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    for ax, source in zip(axes.flat, names, strict=False):
        for (s, seed), path in dirs.items():
            curve = RunFolder(path).curve
            if s != source or not curve.exists():
                continue
            df = pd.read_csv(curve)
            df = df[~df["network"].astype(str).str.contains("not kept")]
            ax.plot(df["timesteps"], df["val_bsld"], marker="o", ms=2, lw=1, label=f"seed {seed}")
        ax.set_title(source, fontsize=9)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.supxlabel("training steps", fontsize=9)
    fig.supylabel("validation bsld", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def save_figure(fig: Any, path: Path) -> Path:
    """Save a figure as PNG (atomically)."""
    from hpcgym import io as hpcgym_io

    path.parent.mkdir(parents=True, exist_ok=True)
    hpcgym_io.atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    return path


# ---- timing ----------------------------------------------------------------------------------------------------
def timing_table(out: Path, runs: Mapping[tuple[str, int], Any], fits: Mapping[str, Path],
                 timing: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Per stage: this invocation's wall time, items done and skipped, and the items' seconds over all invocations."""
    items: dict[str, float] = {s: 0.0 for s in ("fit", "train", "evaluate", "fidelity")}
    from synth.base import MANIFEST

    for path in fits.values():
        manifest = path / MANIFEST
        if manifest.exists():
            items["fit"] += float(json.loads(manifest.read_text()).get("fit_seconds") or 0.0)
    for targs in runs.values():
        marker = RunFolder(Path(targs.runs_dir) / targs.name).study_record
        if marker.exists():
            record = json.loads(marker.read_text())
            items["train"] += record.get("train_s", 0.0)
            items["evaluate"] += record.get("evaluate_s", 0.0)
    for path in StudyFolder(out).fidelity.glob("*.json"):
        items["fidelity"] += float(json.loads(path.read_text()).get("seconds", 0.0))
    rows = [{"stage": stage, "wall_s": t.get("wall_s", np.nan), "done": t.get("done", 0),
             "skipped": t.get("skipped", 0), "item_seconds_all_runs": items.get(stage, np.nan)}
            for stage, t in timing.items()]
    return pd.DataFrame(rows)


# ---- the report ------------------------------------------------------------------------------------------------
def _md(df: pd.DataFrame, digits: int = 3) -> str:
    if df.empty:
        return "(none)\n"
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = [f"{v:,.{digits}f}" if isinstance(v, float) else str(v) for v in r]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write(out: Path, args: Any, runs: Mapping[tuple[str, int], Any], fits: Mapping[str, Path],
          fidelity_files: Mapping[str, Path], timing: Mapping[str, Mapping[str, Any]], failures: list[str],
          loads: Mapping[str, float] | None = None) -> Path:
    """Write the tables, the figures and ``report.md`` to ``out``; return the report's path.

    ``runs``: (source, seed) -> the run's ``experiments.train`` settings; ``fits``: generator -> its cache folder;
    ``fidelity_files``: generator -> its fidelity JSON; ``loads``: source -> the offered load of its training jobs
    where known beyond the fidelity reports (the real training part).
    """
    from hpcgym import io as hpcgym_io

    folder = StudyFolder(out)
    dirs = run_dirs(runs)
    study, heuristics = collect(dirs)
    fid, fid_errors = (pd.DataFrame(), {}) if args.no_fidelity else fidelity_frame(fidelity_files)
    sources = add_status(sources_table(study), run_status(runs), {**fidelity_loads(fid), **(loads or {})})
    begun = starts(dirs)
    if not sources.empty:
        sources = sources.merge(start_summary(begun), on="source", how="left")
    versus = paired(dirs)
    for name, df in (("study", study), ("heuristics", heuristics), ("sources", sources), ("starts", begun),
                     ("paired", versus)):
        hpcgym_io.write_table(df, folder.table(name))
    agents = sources[sources["seeds"] > 0] if "seeds" in sources else sources
    preds = predictors(fid, agents)
    if not fid.empty:
        wide = fid.pivot_table(index="metric", columns="source", values="value", sort=False).reset_index()
        refs = fid.drop_duplicates("metric").set_index("metric")
        for col in ("better", "floor", "bootstrap"):
            if col in refs:
                wide.insert(1, col, wide["metric"].map(refs[col]))
        hpcgym_io.write_table(wide, folder.table("fidelity"))
    hpcgym_io.write_table(preds, folder.table("fidelity_vs_usefulness"))
    seed_list = sorted({s for _, s in dirs})
    label = (f"{args.trace}, backfill {args.backfill}, {len(seed_list)} seeds {seed_list}, {args.eval_windows} test "
             f"windows x {args.eval_length} jobs")
    figures = {}
    if not study.empty:
        figures["bsld_by_source"] = save_figure(figure_bsld(study, heuristics, agents, args.backfill, label),
                                                folder.figure("bsld_by_source"))
        figures["fidelity_vs_usefulness"] = save_figure(figure_fidelity(fid, preds, agents, label),
                                                        folder.figure("fidelity_vs_usefulness"))
        figures["learning_curves"] = save_figure(figure_curves(dirs, f"validation bsld per source ({label})"),
                                                 folder.figure("learning_curves"))
    text = report_text(args, study, heuristics, sources, fid, preds, fid_errors, timing_table(out, runs, fits, timing),
                       figures, failures, label, begun, versus)
    path = folder.report
    hpcgym_io.write_text(path, text)
    return path


def report_text(args: Any, study: pd.DataFrame, heuristics: pd.DataFrame, sources: pd.DataFrame, fid: pd.DataFrame,
           preds: pd.DataFrame, fid_errors: Mapping[str, str], timing: pd.DataFrame, figures: Mapping[str, Path],
           failures: list[str], label: str, begun: pd.DataFrame | None = None,
           versus: pd.DataFrame | None = None) -> str:
    """The text of ``report.md`` (``begun``: :func:`starts`; ``versus``: :func:`paired`)."""
    parts = [f"# Synthetic vs real: {args.trace}\n",
             f"{label}. Agents trained on each source and evaluated on the same held-out test windows of the real "
             f"trace (the last 30%); heuristics on the same windows. One value per seed is its agent's mean bounded "
             f"slowdown over the windows.{' Quick smoke preset: the numbers mean nothing.' if args.quick else ''}"
             + (" Fewer than five seeds: read the spread, not the ranking." if study.empty or
                study["seed"].nunique() < 5 else "") + "\n",
             "## Wall time\n", _md(timing[timing["stage"] != "report"], 1),
             "`wall_s`: this invocation; `item_seconds_all_runs`: the items' own times, earlier invocations "
             "included (fits: the manifests' fit seconds). The report's own time is in `timing.json`.\n"]
    if failures:
        parts += ["## Failures\n", "\n".join(f"- {f}" for f in failures) + "\n"]
    parts += ["## (a) Bounded slowdown per source\n"]
    if "bsld_by_source" in figures:
        parts.append("![bsld per source](figures/bsld_by_source.png)\n")
    cols = ["source", "status", "offered_load", "decisions_per_window", "window_load", "seeds", "mean_bsld",
            "sd_bsld", "min_seed", "max_seed", "median_bsld", "start_median_bsld", "rl_beat_start_test",
            "win_rate_vs_fcfs_easy", "share_of_real_improvement", "share_ci_low", "share_ci_high"]
    parts.append(_md(sources[[c for c in cols if c in sources]] if not sources.empty else sources))
    parts.append("`status`: `trained`, or untrainable when its training windows needed no decision (every job "
                 "started on arrival), so it has no agent and no score. `offered_load`: of the source's jobs (the "
                 "real training part; a generator's fidelity sample). `decisions_per_window`: the mean decisions per "
                 "training episode. `window_load`: the mean offered load of the windows an untrainable source's runs "
                 "drew before giving up. `start_median_bsld`: the seeds' median of the network RL started from (the "
                 "better on validation of the untrained and the cloned network, or the prior); `rl_beat_start_test`: "
                 "the seeds whose agent beat its start on the test windows (`starts.csv`).\n")
    effect = source_effect(study) if not study.empty else {"sources": 0}
    if effect["sources"] >= 2:
        parts.append(f"**Between sources or between seeds?** Over {effect['sources']} sources with two or more "
                     f"seeds ({effect['runs']} runs; log of each run's mean bsld): F = {effect['F']:.2f}, "
                     f"{effect['between_share']:.0%} of the variance between sources (ICC), permutation p = "
                     f"{effect['p_value']:.3f} ({effect['relabellings']:,} relabellings). A small p says the "
                     "training source matters more than the seed.\n")
    if versus is not None and not versus.empty:
        parts += _paired_text(versus)
    if begun is not None and not begun.empty:
        parts.append(_start_text(begun))
    if not heuristics.empty:
        h = heuristics.groupby("scheduler", sort=False)["bsld"].mean().sort_values().reset_index()
        parts += ["Heuristics on the same windows (mean bsld over windows):\n", _md(h)]
    parts += ["## (b) Fidelity against usefulness\n",
              f"Fidelity: `synth.fidelity` on {args.fidelity_jobs or 'as many as the test split'} sampled jobs per "
              "generator against the held-out test split (floor: the training table itself; bootstrap: a day-block "
              "bootstrap of it). Usefulness: minus the median over seeds of the agents' mean bsld. rho: Spearman "
              "rank correlation across the generators (few points: a weak test).\n"]
    if "fidelity_vs_usefulness" in figures and not preds.empty:
        parts.append("![fidelity vs usefulness](figures/fidelity_vs_usefulness.png)\n")
    good = preds.dropna(subset=["rho_oriented"]) if not preds.empty else preds
    if not good.empty:
        parts.append(f"Best predictor: **{good['metric'].iat[0]}** (oriented rho {good['rho_oriented'].iat[0]:+.2f} "
                     f"over {int(good['generators'].iat[0])} generators).\n")
    parts.append(_md(preds, 2))
    if fid_errors:
        parts.append("Fidelity not available: " + "; ".join(f"{k}: {v}" for k, v in fid_errors.items()) + "\n")
    parts += ["## (c) Learning curves\n"]
    if "learning_curves" in figures:
        parts.append("![learning curves](figures/learning_curves.png)\n")
    parts.append("Files: `study.csv` (source x seed x window), `heuristics.csv`, `sources.csv`, `paired.csv`, "
                 "`fidelity.csv`, `fidelity_vs_usefulness.csv`, `timing.json`, `runs/<source>-s<seed>/`.\n")
    return "\n".join(parts)


def _start_text(begun: pd.DataFrame) -> str:
    """The report's paragraph on what RL added to its starts (:func:`starts`)."""
    moved, better, scored = seeds.rl_counts(begun)
    text = (f"**RL against its start.** The network kept beat RL's start on validation on {moved} of {len(begun)} "
            f"runs, and on the test windows on {better} of the {len(scored)} runs whose start has a test score.")
    effect = start_effect(begun)
    if effect["sources"] >= 2:
        text += (f" The starts alone, between sources or between seeds: F = {effect['F']:.2f}, "
                 f"{effect['between_share']:.0%} of the variance between sources, permutation p = "
                 f"{effect['p_value']:.3f} (against the agents' test above: a p as small here says the sources "
                 "differed before RL, through their priors or clones).")
    return text + "\n"


# ---- the notebook's slowdown curves ----------------------------------------------------------------------------
def slowdown_curves(study_dir: Path) -> dict[str, np.ndarray]:
    """Per-job bounded slowdowns pooled over seeds and windows: one array per source, and FCFS+EASY's."""
    folder = StudyFolder(study_dir)
    study = pd.read_csv(folder.table("study"))
    out: dict[str, np.ndarray] = {}
    for source, g in study.groupby("source", sort=False):
        values = []
        for run in g["run"].unique():
            jobs = pd.read_csv(RunFolder(folder.runs / run).per_job)
            values.append(jobs.loc[jobs["kind"] == AGENT, "bsld"].to_numpy())
            if BASELINE not in out:
                out[BASELINE] = jobs.loc[jobs["scheduler"] == BASELINE, "bsld"].to_numpy()
        out[source] = np.concatenate(values)
    return out


def figure_slowdown(study_dir: Path):
    """The tail ``P(bsld > x)`` of per-job bounded slowdown, one line per source (log axes)."""
    from experiments.plots import survival

    fig = _figure(figsize=(7, 4))
    ax = fig.subplots()
    for name, values in slowdown_curves(study_dir).items():
        x, y = survival(values)
        ax.step(x, y, where="post", lw=1.8 if name == BASELINE else 1.1, label=name,
                color="black" if name == BASELINE else None, ls="--" if name == BASELINE else "-")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bounded slowdown x")
    ax.set_ylabel("P(bsld > x)")
    ax.set_title(f"{Path(study_dir).name}: per-job slowdown of each source's agents (all seeds and windows)",
                 fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
