"""The figures and ``report.md`` of a study folder written by :mod:`experiments.study` (tables: :mod:`.study_tables`).

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

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from experiments import seed_tables as seeds
from experiments import stream, study_tables
from experiments.runs import BASELINE, RunFolder
from experiments.study_tables import (
    StudyFolder,
    add_status,
    collect,
    fidelity_frame,
    fidelity_loads,
    paired,
    predictors,
    run_dirs,
    run_status,
    slowdown_curves,
    source_effect,
    sources_table,
    start_effect,
    start_summary,
    starts,
)

if TYPE_CHECKING:
    from experiments.recipe import Recipe

FIGURES = ("bsld_by_source", "fidelity_vs_usefulness", "learning_curves")


def __getattr__(name: str) -> Any:
    """The tables' names (``StudyFolder``, ``STARTS``, ...), which lived here before :mod:`.study_tables`."""
    return getattr(study_tables, name)


def _figure(**kw: Any):
    """A figure outside pyplot (no global state, no backend switch): ``savefig`` renders it with Agg."""
    from matplotlib.figure import Figure

    return Figure(**kw)


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
            df = RunFolder(path).learning_curve(kept=True)
            if s != source or df.empty:
                continue
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


class StudySettings(Protocol):
    """The study's settings the report reads (:class:`experiments.training.study.Args` has them)."""

    trace: str
    backfill: str
    eval_windows: int
    eval_length: int
    quick: bool
    no_fidelity: bool
    fidelity_jobs: int


# ---- timing ----------------------------------------------------------------------------------------------------
def timing_table(out: Path, runs: Mapping[tuple[str, int], Recipe], fits: Mapping[str, Path],
                 timing: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Per stage: this invocation's wall time, items done and skipped, and the items' seconds over all invocations."""
    items: dict[str, float] = {s: 0.0 for s in ("fit", "train", "evaluate", "fidelity")}
    from synth.base import MANIFEST

    for path in fits.values():
        manifest = path / MANIFEST
        if manifest.exists():
            items["fit"] += float(json.loads(manifest.read_text()).get("fit_seconds") or 0.0)
    for recipe in runs.values():
        marker = RunFolder(recipe.folder).study_record
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


def write(out: Path, args: StudySettings, runs: Mapping[tuple[str, int], Recipe], fits: Mapping[str, Path],
          fidelity_files: Mapping[str, Path], timing: Mapping[str, Mapping[str, Any]], failures: list[str],
          loads: Mapping[str, float] | None = None) -> Path:
    """Write the tables, the figures and ``report.md`` to ``out``; return the report's path.

    ``args``: the study's flags; ``runs``: (source, seed) -> the run's recipe; ``fits``: generator -> its cache folder;
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


def report_text(args: StudySettings, study: pd.DataFrame, heuristics: pd.DataFrame, sources: pd.DataFrame,
                fid: pd.DataFrame, preds: pd.DataFrame, fid_errors: Mapping[str, str], timing: pd.DataFrame,
                figures: Mapping[str, Path], failures: list[str], label: str, begun: pd.DataFrame | None = None,
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


def _paired_text(table: pd.DataFrame) -> list[str]:
    """The report's section on the paired comparison with the strongest reference (:func:`paired`)."""
    counts = " ".join(f"{source}: {stream.verdict(g)}" for source, g in table.groupby("source", sort=False))
    return ["### Paired against the strongest reference\n", _md(table.drop(columns=["kind"])),
            "Ratio of the agent's mean bsld to the reference's (the strongest implementable row) on the same jobs, "
            "95% block-bootstrap CI: on the test windows (blocks of consecutive jobs as long as a window, so that "
            "overlapping windows do not count twice) and on the whole test split scheduled as one stream (blocks of "
            f"{stream.BLOCK} consecutive jobs). `beats`: the CI's upper end is below 1 (the whole "
            f"split's; the windows' for a run evaluated without it). Per source: {counts}\n"]


def figure_slowdown(study_dir: Path):
    """The tail ``P(bsld > x)`` of per-job bounded slowdown, one line per source (log axes)."""
    from experiments.figures import survival

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
