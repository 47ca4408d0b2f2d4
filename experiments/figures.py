"""Paper-size figures of evaluation results: the plotting behind ``experiments/notebooks/compare_slowdown.ipynb``.

``python -m experiments.plots`` is the command line over this module.

Reads a results folder as ``experiments.evaluate`` / ``experiments.train`` write it (``per_window.csv``,
``per_job.csv``, ``summary.csv``, ``summary.md``) and draws four figures:

1. :func:`figure_per_window`: mean bounded slowdown of every test window for the rows that matter (the agent, its
   start, the strongest references, FCFS+EASY: :func:`rows_that_matter`), with the mean and its bootstrap CI;
2. :func:`figure_paired`: the agent's and its start's bsld minus the reference's, window by window, with the
   paired ratio and its block-bootstrap CI, as the summary table has them (:func:`experiments.tables.paired_ci`);
3. :func:`figure_survival`: the tail ``P(bsld > x)`` of per-job bounded slowdown, log axes;
4. :func:`figure_wait`: the mean wait over the course of a window (jobs in submit order, deciles).

The last two draw the rows that matter in colour (:func:`focus_rows`: the agent, its start, the reference, the
baseline and the upper bound) over every other row, faint. One colour per heuristic family,
no two families alike (:func:`family_colours`; EASY backfilling filled / solid, none hollow / dashed; Paul Tol's
muted palette first), agents in strong Okabe-Ito colours (the start as a thin line on top of the agent's thick one,
which it often equals), FCFS+EASY (the baseline) always in black, the upper bound dotted.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from experiments import runs, tables
from experiments.results import AGENT, NETWORKS, REFERENCES, Windows
from experiments.runs import BASELINE
from hpcgym import io as hpcgym_io

#: Muted colours of the heuristic families (Paul Tol's muted scheme; FCFS, the baseline's family, in black).
FAMILY_COLOURS = {"fcfs": "#000000", "sjf": "#332288", "wfp3": "#88CCEE", "unicep": "#44AA99", "f1": "#999933",
                  "ljf": "#AA4499", "saf": "#117733", "tuned": "#882255", "clairvoyant": "#6699CC"}
#: Colours for the other families (those on runtime predictions, installed packages'), each given once per figure:
#: no two families share a colour (nor one with :data:`FAMILY_COLOURS` or an agent).
OTHER_COLOURS = ("#DDCC77", "#661100", "#888888", "#CC6677", "#997700", "#4477AA", "#228833", "#EE7733", "#AA3377",
                 "#66CCEE", "#BBBBBB", "#EE3377", "#009988", "#CC3311", "#0077BB", "#555555")
#: Strong colours for the agent rows (Okabe-Ito), in the order agent, cloned, untrained (then more runs).
AGENT_COLOURS = ("#D55E00", "#0072B2", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442")
KIND_ORDER = {kind: i for i, kind in enumerate(NETWORKS)}
FIGURES = ("bsld_per_window", "bsld_paired", "bsld_survival", "wait_over_window")
#: implementable rows shown beside the agents in the per-window figure (the strongest, by mean bsld)
STRONGEST = 2
#: the rows outside the focus (:func:`focus_rows`) in the survival and wait figures: thin, pale, behind
FAINT = {"color": "#c4c4c4", "lw": 0.7, "alpha": 0.8, "zorder": 1}
RC = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8, "xtick.labelsize": 8,
      "ytick.labelsize": 8, "figure.titlesize": 10, "axes.spines.top": False, "axes.spines.right": False,
      "savefig.dpi": 200}


@contextmanager
def _style() -> Iterator[None]:
    """Apply :data:`RC`, then restore those keys only.

    ``plt.rc_context`` would also restore ``interactive``, which the notebook's inline backend switches on with the
    first figure: the later figures would then not be shown.
    """
    old = {key: matplotlib.rcParams[key] for key in RC}
    matplotlib.rcParams.update(RC)
    try:
        yield
    finally:
        matplotlib.rcParams.update(old)


# ---------------------------------------------------------------------------------------------- finding the results
def repo_root(start: Path | None = None) -> Path | None:
    """The nearest folder at or above ``start`` (default: the current directory) that holds ``pyproject.toml``."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    return None


def make_heuristic_results(out: Path, trace: str = "theta", windows: int = 5, length: int = 256,
                           seed: int = 0) -> Path:
    """Evaluate the heuristics only (a few seconds) and write a results folder to ``out``; return ``out``."""
    import warnings

    with warnings.catch_warnings():  # tqdm.auto warns in a kernel without ipywidgets
        warnings.simplefilter("ignore")
        from experiments import evaluation as evaluate

    per_window, per_job = evaluate.evaluate_on_test(trace, {}, windows=windows, length=length, seed=seed,
                                                    progress=False)
    evaluate.write_results(out, per_window, per_job, evaluate.describe(trace, windows, length, seed))
    return out


def find_results(root: Path | None = None, env: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """The results folder to plot, and how it was chosen.

    ``HPCGYM_RESULTS`` if set; else the newest ``runs/*/eval`` under the repository root (found from the current
    directory); else a heuristics-only evaluation made now in ``runs/heuristics-theta/eval``.
    """
    env = os.environ if env is None else env
    if env.get("HPCGYM_RESULTS"):
        folder = Path(env["HPCGYM_RESULTS"]).expanduser().resolve()
        if not (folder / runs.PER_WINDOW).is_file():
            raise FileNotFoundError(f"HPCGYM_RESULTS={env['HPCGYM_RESULTS']} holds no per_window.csv")
        return folder, "the environment variable HPCGYM_RESULTS"
    base = root or repo_root() or Path.cwd()
    found = runs.evaluated_runs(base / runs.RUNS_DIR)
    if found:
        return found[-1].eval, f"the newest of {len(found)} results folder(s) under {base / runs.RUNS_DIR}"
    out = runs.RunFolder(base / runs.RUNS_DIR / "heuristics-theta").eval
    return make_heuristic_results(out), "no results found under runs/: made now (heuristics only, theta)"


# ----------------------------------------------------------------------------------------------------- the results
@dataclass
class Results:
    """A results folder, read."""

    folder: Path
    per_window: pd.DataFrame
    per_job: pd.DataFrame
    summary: pd.DataFrame
    description: str
    run: str
    trace: str

    @property
    def data_line(self) -> str:
        """What was measured, up to the first ``;`` of summary.md's line saying it (trace, split, windows)."""
        return self.description.split(";")[0].strip() or f"{self.trace}, test split"


def _summary(per_window: pd.DataFrame, per_job: pd.DataFrame | None = None) -> pd.DataFrame:
    from experiments import evaluation as evaluate

    return evaluate.summary(per_window, per_job=per_job)


def _measured(summary_md: str) -> str:
    from experiments import evaluation as evaluate

    return evaluate.measured(summary_md)


def load(folder: Path) -> Results:
    """Read ``per_window.csv``, ``per_job.csv``, ``summary.csv`` (or compute it) and what summary.md says was run."""
    folder = Path(folder)
    per_window = Windows.read(folder / runs.PER_WINDOW).table
    per_job = pd.read_csv(folder / runs.PER_JOB)
    summary_csv = folder / runs.SUMMARY
    summary = pd.read_csv(summary_csv) if summary_csv.is_file() else _summary(per_window, per_job)
    md = folder / runs.SUMMARY_MD
    description = _measured(md.read_text()) if md.is_file() else ""
    run = folder.parent.name if folder == runs.RunFolder(folder.parent).eval else folder.name
    trace = description.split(",")[0].strip() if description else "trace not recorded"
    return Results(folder, per_window, per_job, summary, description, run, trace)


def from_per_window(per_window: pd.DataFrame, trace: str, description: str, run: str = "results/") -> Results:
    """Results from per-window scores alone, e.g. the committed summaries of ``experiments.report``.

    Without per-job records, only :func:`figure_per_window` and :func:`figure_paired` can be drawn.
    """
    per_window = per_window.assign(**{c: np.nan for c in ("wait", "utilization") if c not in per_window})
    return Results(Path("."), per_window, pd.DataFrame(), _summary(per_window), description, run, trace)


# ---------------------------------------------------------------------------------------------------------- styles
@dataclass
class Style:
    """How one scheduler is drawn."""

    label: str
    colour: str
    filled: bool
    linestyle: str
    linewidth: float
    marker: str
    size: float
    zorder: int
    agent: bool
    backfill: str
    alpha: float = 0.85


def _display_name(scheduler: str, kind: str, run: str) -> str:
    if kind in REFERENCES:
        return scheduler.upper()
    if scheduler.startswith(run):
        return ("agent" + scheduler[len(run):]).strip()
    return scheduler


def styles(res: Results) -> dict[str, Style]:
    """Scheduler -> :class:`Style`, for every scheduler in the results."""
    rows = res.per_window.groupby("scheduler", sort=False).agg(kind=("kind", "first"), backfill=("backfill", "first"),
                                                                bsld=("bsld", "mean")).reset_index()
    out: dict[str, Style] = {}
    reference = rows["kind"].isin(REFERENCES)
    agents = rows[~reference].copy()
    agents["order"] = agents["kind"].map(KIND_ORDER).fillna(len(KIND_ORDER))
    for i, r in enumerate(agents.sort_values(["order", "bsld"]).itertuples()):
        start = r.kind == "cloned"  # often equal to the agent: a thin line drawn on top of the agent's thick one
        out[r.scheduler] = Style(_display_name(r.scheduler, r.kind, res.run), AGENT_COLOURS[i % len(AGENT_COLOURS)],
                                 r.backfill != "none", "-" if r.backfill != "none" else "--", 1.3 if start else 3.0,
                                 "D", 30, 10 if start else 9 - min(i, 3), True, r.backfill, 1.0)
    colours = family_colours([s.split("+")[0] for s in rows.loc[reference, "scheduler"]])
    for r in rows[reference].itertuples():
        colour = colours[r.scheduler.split("+")[0]]
        ref = r.scheduler == BASELINE
        easy = r.backfill != "none"
        out[r.scheduler] = Style(r.scheduler.upper() + (" (baseline)" if ref else ""), colour, easy,
                                 "-" if easy else "--", 2.0 if ref else 1.3, "o", 22 if ref else 16, 5 if ref else 3,
                                 False, r.backfill, 1.0 if ref else 0.85)
    return out


def family_colours(families: list[str]) -> dict[str, str]:
    """One colour per heuristic family, never the same for two.

    A family's own (:data:`FAMILY_COLOURS`), else the first free one of :data:`OTHER_COLOURS`, then of matplotlib's
    ``tab20`` and of 64 hues (past those, about a hundred families, colours come round again).
    """
    hues = matplotlib.colormaps["hsv"](np.linspace(0, 1, 64, endpoint=False))
    spare = [*OTHER_COLOURS, *map(matplotlib.colors.to_hex, [*matplotlib.colormaps["tab20"].colors, *hues])]
    out: dict[str, str] = {}
    for i, family in enumerate(dict.fromkeys(families)):
        taken = {*out.values(), *FAMILY_COLOURS.values(), *AGENT_COLOURS}
        out[family] = FAMILY_COLOURS.get(family) or next((c for c in spare if c not in taken), spare[i % len(spare)])
    return out


def _title(fig: Figure, measure: str, res: Results, note: str = "") -> None:
    """A bold title (measure, trace, run) and a grey subtitle (what summary.md says was measured), above the layout."""
    sub = textwrap.wrap(f"{res.data_line}" + (f"; {note}" if note else ""), 115)
    height = fig.get_figheight()
    header = 0.12 + 0.24 + 0.15 * len(sub)  # inches: margin, title line, subtitle lines
    fig.get_layout_engine().set(rect=(0, 0, 1, 1 - header / height))
    fig.text(0.01, 1 - 0.06 / height, f"{measure} — {res.trace}, run {res.run}", ha="left", va="top",
             fontsize=10, fontweight="bold")
    fig.text(0.01, 1 - 0.33 / height, "\n".join(sub), ha="left", va="top", fontsize=8, color="#444444",
             linespacing=1.25)


# --------------------------------------------------------------------------------------------------------- figures
def figure_per_window(res: Results) -> Figure:
    """Mean bsld of every window (dots), the mean over windows and its 95% CI (bar), one row per scheduler."""
    st = styles(res)
    table = res.summary.set_index("scheduler")
    order = [s for s in table.sort_values("bsld").index if s in st and s in rows_that_matter(res)]
    with _style():
        fig, ax = plt.subplots(figsize=(7.0, 0.27 * len(order) + 1.9), layout="constrained")
        windows = sorted(res.per_window["window"].unique())
        jitter = {w: j for w, j in zip(windows, np.linspace(-0.22, 0.22, len(windows)), strict=True)}
        for y, name in enumerate(order):
            s = st[name]
            g = Windows(res.per_window).rows(name)
            ys = y + g["window"].map(jitter).to_numpy()
            ax.scatter(g["bsld"], ys, s=s.size * 0.7, marker=s.marker, facecolors=s.colour if s.filled else "white",
                       edgecolors=s.colour, linewidths=0.9, alpha=0.75, zorder=s.zorder)
            row = table.loc[name]
            ax.plot([row["ci_low"], row["ci_high"]], [y, y], color=s.colour, lw=2.2 if s.agent else 1.6,
                    solid_capstyle="butt", zorder=s.zorder + 1)
            ax.plot([row["bsld"]], [y], marker="|", ms=14, mew=2.4, color=s.colour, zorder=s.zorder + 2)
            if s.agent:
                ax.axhspan(y - 0.45, y + 0.45, color=s.colour, alpha=0.08, lw=0, zorder=0)
        if BASELINE in table.index:
            ax.axvline(table.loc[BASELINE, "bsld"], color="black", ls=":", lw=1.0, zorder=1)
        ax.set_yticks(range(len(order)), [st[n].label for n in order])
        for tick, name in zip(ax.get_yticklabels(), order, strict=True):
            if st[name].agent or name == BASELINE:
                tick.set_color(st[name].colour)
                tick.set_fontweight("bold")
        ax.set_ylim(len(order) - 0.5, -0.5)
        ax.set_xscale("log")
        ax.set_xlabel("mean bounded slowdown of a window (log scale; lower is better)")
        ax.grid(axis="x", which="major", color="#dddddd", lw=0.6)
        ax.grid(axis="x", which="minor", color="#f0f0f0", lw=0.4)
        ax.set_axisbelow(True)
        grey = "#555555"
        handles = [Line2D([], [], ls="", marker="o", mfc=grey, mec=grey, label="one window, EASY backfilling"),
                   Line2D([], [], ls="", marker="o", mfc="white", mec="#555555", label="one window, no backfilling"),
                   Line2D([], [], color="#555555", lw=2, marker="|", ms=12, mew=2.4,
                          label="mean over windows, 95% bootstrap CI"),
                   Line2D([], [], color="black", ls=":", lw=1, label="FCFS+EASY mean (baseline)")]
        if any(s.agent for s in st.values()):
            handles.append(Line2D([], [], ls="", marker="D", mfc=AGENT_COLOURS[0], mec=AGENT_COLOURS[0],
                                  label="agents (strong colours, shaded rows)"))
        fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False)
        _title(fig, "Mean bounded slowdown per test window", res, "rows sorted by the mean; the agent, its start, "
               f"the {STRONGEST} strongest implementable rows and the baseline")
    return fig


def rows_that_matter(res: Results) -> list[str]:
    """The agent and its start, the :data:`STRONGEST` strongest implementable rows and FCFS+EASY (the baseline)."""
    table = res.summary.sort_values("bsld")
    agents = table.loc[table["kind"].isin([AGENT, "cloned"]), "scheduler"]
    implementable = table.loc[table["kind"] == tables.HEURISTIC, "scheduler"].head(STRONGEST)
    names = [*agents, *implementable, BASELINE]
    return [n for i, n in enumerate(names) if n in set(table["scheduler"]) and n not in names[:i]]


def figure_paired(res: Results) -> Figure:
    """The agent's (and its start's) bsld minus the reference's on each window, with the paired ratio and its CI.

    The ratio and its CI are the summary table's (:func:`experiments.tables.paired_ci`). Without agents, the other
    rows that matter take their place. Windows are in the order of their start.
    """
    st = styles(res)
    results = Windows(res.per_window)
    reference = results.reference()
    shown = [n for n in rows_that_matter(res) if n not in (reference, BASELINE)]
    agents = [n for n in shown if st[n].agent]
    shown = agents or shown
    ratios, blocks = tables.paired_ci(res.per_window, reference, res.per_job) if reference else (None, "")
    ratios = ratios.set_index("scheduler") if ratios is not None else None
    key = "start" if "start" in res.per_window else "window"
    ref = results.bsld(reference) if reference else pd.Series(dtype=float)
    with _style():
        fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
        width = 0.8 / max(len(shown), 1)
        for i, name in enumerate(shown):
            g = results.rows(name).sort_values([key, "window"])
            diff = g["bsld"].to_numpy() - ref.reindex(g["window"]).to_numpy()
            label = f"{st[name].label}: {tables.ratio_text(*ratios.loc[name])} x reference" if ratios is not None \
                else st[name].label
            ax.bar(np.arange(len(g)) + (i - (len(shown) - 1) / 2) * width, diff, width, color=st[name].colour,
                   alpha=max(st[name].alpha, 0.6), label=label, zorder=st[name].zorder)
        ax.axhline(0, color="black", lw=0.8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("test window (in the order of its start in the split)")
        ax.set_ylabel(f"bsld minus {reference}'s\n(below 0: better)")
        ax.grid(axis="y", color="#e4e4e4", lw=0.6)
        fig.legend(loc="outside lower center", ncol=1, frameon=False)
        _title(fig, f"Paired difference from the reference ({reference}) per test window", res,
               f"ratio of means with a 95% block-bootstrap CI ({blocks}), as in summary.md")
    return fig


def survival(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points ``(x, P(X > x))`` of the empirical survival function, where it is positive.

    >>> survival(np.array([1.0, 1.0, 2.0, 4.0]))
    (array([1., 2.]), array([0.5 , 0.25]))
    """
    v = np.sort(np.asarray(values, dtype=np.float64))
    x = np.unique(v)
    p = 1.0 - np.searchsorted(v, x, side="right") / len(v)
    keep = p > 0
    return x[keep], p[keep]


def focus_rows(res: Results) -> list[str]:
    """The rows the survival and wait figures draw in colour.

    The agent, its start, the reference, the baseline and the upper bound (the clairvoyant row with the agent's
    backfilling). Without agents: the :data:`STRONGEST` strongest implementable rows, the baseline and the bound
    (EASY's).
    """
    matter = rows_that_matter(res)
    st = styles(res)
    agents = [n for n in matter if st[n].agent]
    bound = f"{tables.CLAIRVOYANT}+{st[agents[0]].backfill if agents else 'easy'}"
    names = [*agents, Windows(res.per_window).reference(), BASELINE, bound] if agents else [*matter, bound]
    return [n for i, n in enumerate(names) if n in st and n not in names[:i]]


def _labels(res: Results, st: dict[str, Style], names: list[str]) -> dict[str, str]:
    """The legend's names: roles spelled out, and a start that equals the agent on every job said so."""
    reference = Windows(res.per_window).reference()
    agent = next((n for n in names if st[n].agent), None)
    out = {}
    for name in names:
        label = st[name].label if st[name].agent else name.upper()
        if name == reference:
            label += " (reference)"
        elif name == BASELINE:
            label += " (baseline)"
        elif name.startswith(tables.CLAIRVOYANT):
            label += " (upper bound)"
        elif agent and name != agent and st[name].agent and _same_jobs(res.per_job, name, agent):
            label += ": the same as the agent on every job (drawn thin on top)"
        out[name] = label
    return out


def _same_jobs(per_job: pd.DataFrame, a: str, b: str) -> bool:
    """Whether two rows gave every job the same bounded slowdown."""
    rows = [per_job.loc[per_job["scheduler"] == n].sort_values(["window", "job_id"])["bsld"].to_numpy() for n in (a, b)]
    return len(rows[0]) == len(rows[1]) and bool(np.array_equal(rows[0], rows[1]))


def _focus_legend(fig: Figure, res: Results, st: dict[str, Style], focus: list[str], faint: int) -> None:
    """The focus rows one by one, then the faint rest as one entry; below the axes."""
    labels = _labels(res, st, focus)
    handles = [Line2D([], [], color=st[n].colour, ls=st[n].linestyle, lw=st[n].linewidth + 0.4, label=labels[n])
               for n in focus]
    if faint:
        handles.append(Line2D([], [], color=FAINT["color"], lw=1.2,
                              label=f"the {faint} other rows (solid: EASY backfilling, dashed: none)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False, handlelength=2.6)


def _focus_style(st: dict[str, Style], name: str) -> Style:
    """A focus row's style in the line figures: the upper bound dotted, every other row as :func:`styles` has it."""
    return replace(st[name], linestyle=":", linewidth=1.8) if name.startswith(tables.CLAIRVOYANT) else st[name]


def _line_figure(res: Results, draw: Any, ylabel: str, xlabel: str, measure: str, note: str) -> tuple[Figure, Any]:
    """One panel: every row outside the focus faint, behind; the focus rows (:func:`focus_rows`) in colour."""
    st = styles(res)
    focus = focus_rows(res)
    st.update({n: _focus_style(st, n) for n in focus})
    rest = [n for n in st if n not in focus]
    with _style():
        fig, ax = plt.subplots(figsize=(7.0, 5.0), layout="constrained")
        for name in rest:
            draw(ax, name, {**FAINT, "ls": st[name].linestyle})
        for name in focus:
            s = st[name]
            draw(ax, name, {"color": s.colour, "ls": s.linestyle, "lw": s.linewidth, "zorder": s.zorder,
                            "alpha": s.alpha})
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_yscale("log")
        ax.grid(which="major", color="#e4e4e4", lw=0.6)
        _focus_legend(fig, res, st, focus, len(rest))
        _title(fig, measure, res, note)
    return fig, ax


def figure_survival(res: Results) -> Figure:
    """``P(bsld > x)`` of per-job bounded slowdown over all windows, log-log: the focus rows over the rest."""
    lowest = [1.0]

    def draw(ax: Any, name: str, kw: dict[str, Any]) -> None:
        x, p = survival(res.per_job.loc[res.per_job["scheduler"] == name, "bsld"].to_numpy())
        if len(x):
            ax.step(x, p, where="post", **kw)
            lowest[0] = min(lowest[0], p.min())

    fig, ax = _line_figure(res, draw, "share of jobs with bsld > x (log scale)", "bounded slowdown x (log scale)",
                           "Tail of per-job bounded slowdown", "all windows pooled; jobs with bsld = 1 (never "
                           "slowed) are the gap below 1 at the left edge")
    ax.set_xscale("log")
    ax.set_xlim(left=1.0)
    ax.set_ylim(lowest[0] / 1.5, 1.05)
    return fig


def wait_by_position(per_job: pd.DataFrame, bins: int = 10) -> pd.DataFrame:
    """Mean wait (hours) per scheduler and position of a job in its window (submit order, ``bins`` equal parts)."""
    df = per_job[["scheduler", "window", "submit", "wait"]].copy()
    df["rank"] = df.groupby(["scheduler", "window"])["submit"].rank(method="first", pct=True)
    df["bin"] = np.minimum((df["rank"] * bins).apply(np.ceil).astype(int), bins)
    out = df.groupby(["scheduler", "bin"])["wait"].mean().div(3600).rename("wait_h").reset_index()
    out["position"] = (out["bin"] - 0.5) / bins * 100
    return out


def figure_wait(res: Results, bins: int = 10) -> Figure:
    """Mean wait by the position of a job in its window (submit order, deciles), averaged over windows."""
    table = wait_by_position(res.per_job, bins)
    st = styles(res)

    def draw(ax: Any, name: str, kw: dict[str, Any]) -> None:
        g = table[table["scheduler"] == name]
        mark = {"marker": st[name].marker, "ms": 3.0, "mfc": kw["color"] if st[name].filled else "white"} \
            if kw.get("zorder", 1) > 1 else {}
        ax.plot(g["position"], g["wait_h"].clip(lower=1 / 60), **kw, **mark)

    fig, ax = _line_figure(res, draw, "mean wait (hours, log scale)", "jobs of the window submitted so far (%)",
                           "Wait over the course of a window", f"jobs in submit order, {bins} equal parts, mean over "
                           "windows (waits under 1 min drawn at 1 min)")
    ax.set_xlim(0, 100)
    return fig


def all_figures(res: Results) -> dict[str, Figure]:
    """The four figures, by file stem."""
    return dict(zip(FIGURES, (figure_per_window(res), figure_paired(res), figure_survival(res), figure_wait(res)),
                    strict=True))


def save(figures: Mapping[str, Figure], folder: Path) -> list[Path]:
    """Write every figure as ``<folder>/<name>.png``; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figures.items():
        path = folder / f"{name}.png"
        with _style():
            hpcgym_io.write_figure(fig, path, bbox_inches="tight", facecolor="white")
        paths.append(path)
    return paths


def noise_floor(reference: float, draws: np.ndarray, runs: pd.DataFrame, title: str, path: Path) -> None:
    """``experiments.noise_floor``'s figure: the near-copies' histogram, ``tuned``, the runs' networks as ticks."""
    fig = Figure(figsize=(7, 3.5))  # outside pyplot: no backend switch, nothing left open
    ax = fig.subplots()
    ax.hist(draws, bins=min(30, max(5, len(draws) // 2)), color="0.75", label="near-copies of tuned")
    ax.axvline(reference, color="k", lw=2, label="tuned")
    for kind, colour in (("agent", "tab:red"), ("cloned", "tab:blue")):
        v = runs.loc[runs["kind"] == kind, "bsld"]
        if len(v):
            ax.plot(v, np.zeros(len(v)), "|", ms=25, mew=2, color=colour, label=f"{kind} (one tick per run)")
    ax.set_xlabel("mean bounded slowdown over the test windows (lower is better)")
    ax.set_ylabel("near-copies")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    hpcgym_io.write_figure(fig, path, dpi=120)
