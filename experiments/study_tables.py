"""The numbers of a study folder written by :mod:`experiments.study`: its tables, read from what the stages left.

Everything here reads the disk (the runs' evaluations through :class:`experiments.results.Windows`, their
``learning_curve.csv``, the fidelity JSONs), so the tables can be rebuilt from a study folder at any time:
``study.csv`` and ``heuristics.csv`` (:func:`collect`), ``sources.csv`` (:func:`sources_table`, :func:`add_status`),
``starts.csv`` (:func:`starts`: what RL added to the network it started from), ``paired.csv`` (:func:`paired`: each
run's agent against the strongest reference, on the windows and on the whole test split), the between-sources test
(:func:`source_effect`) and the fidelity metrics against usefulness (:func:`predictors`). :mod:`.study_report`
draws the figures and writes ``report.md`` from them.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from experiments import seed_tables as seeds
from experiments import stream
from experiments.results import AGENT, Windows
from experiments.runs import BASELINE, RunFolder

if TYPE_CHECKING:
    from experiments.recipe import Recipe

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


# ---- collecting ------------------------------------------------------------------------------------------------
def run_dirs(runs: Mapping[tuple[str, int], Recipe]) -> dict[tuple[str, int], Path]:
    """(source, seed) -> the run folder, for the runs (their recipes) that have an evaluation."""
    return {key: recipe.folder for key, recipe in runs.items() if RunFolder(recipe.folder).evaluated()}


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
    for (name, seed), path in dirs.items():
        run = RunFolder(path)
        source = run.recipe().source
        results = Windows.read(run.per_window)
        ref = results.bsld(BASELINE)
        others = {kind: results.of_kind(kind).set_index("window")["bsld"] for kind in ("untrained", "cloned")}
        for _, r in results.agents.iterrows():
            w = int(r["window"])
            rows.append({"source": name, "seed": seed, "window": w, "run": path.name,
                         "workload": source.workload, "synthesizer": source.synthesizer if name != "real" else "",
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


STARTS = ["source", "seed", "start", "val_start", "val_kept", "test_start", "test_kept"]


def starts(dirs: Mapping[tuple[str, int], Path]) -> pd.DataFrame:
    """Per run: the network RL started from and the one it kept, their validation and test scores (mean bsld).

    Columns :data:`STARTS`: :func:`experiments.seed_tables.agreement` over each source's runs (``start`` is
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


def run_status(runs: Mapping[tuple[str, int], Recipe]) -> pd.DataFrame:
    """One row per run: ``source, seed, status, decisions_per_window, window_load``.

    ``status``: ``trained``, :data:`UNTRAINABLE_STATUS` (its training windows needed no decision, so it has no
    agent), or ``not trained`` (failed or not run). ``decisions_per_window``: the mean decisions per training
    episode (``monitor.csv``); 0 for an untrainable run. ``window_load``: for an untrainable run, the mean offered
    load of the windows it drew before giving up; else NaN.
    """
    rows = []
    for (source, seed), recipe in runs.items():
        run = RunFolder(recipe.folder)
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
