"""What a new user meets first (issue 56), one section per item of the issue (item 2: tests/test_readme.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from experiments import evaluation
from experiments.runs import BASELINE, RunFolder
from experiments.training import verdict

REPO = Path(__file__).resolve().parents[1]

# ---- 1. the verdict is saved ---------------------------------------------------------------------------------------
# Four test windows; the agent kept its cloned start (the same scores), and is below tuned+easy on every window.
AGENT = "r-s0"
SCORES = {AGENT: ("agent", [3, 4, 6, 7]), f"{AGENT} (cloned, no RL)": ("cloned", [3, 4, 6, 7]),
          "tuned+easy": ("heuristic", [4, 5, 8, 8]), "saf+easy": ("heuristic", [5, 6, 7, 8]),
          BASELINE: ("heuristic", [10, 12, 14, 16])}
CURVE = [(0, 9.0, "untrained (not kept)"), (0, 8.0, "cloned"), (20, 8.5, "ppo"), (40, 8.25, "ppo")]


def _evaluated_run(root: Path) -> tuple[RunFolder, pd.DataFrame]:
    run = RunFolder(root / AGENT)
    run.eval.mkdir(parents=True)
    pd.DataFrame(CURVE, columns=["timesteps", "val_bsld", "network"]).to_csv(run.curve, index=False)
    run.warm_start.write_text(json.dumps({"chosen": "cloned"}))
    per_window = pd.DataFrame([{"scheduler": s, "kind": k, "backfill": "easy", "window": w, "bsld": float(b),
                                "wait": 60.0, "utilization": 0.5}
                               for s, (k, bs) in SCORES.items() for w, b in enumerate(bs)])
    per_job = per_window[["scheduler", "kind", "backfill", "window", "bsld"]]
    return run, evaluation.write_results(run.eval, per_window, per_job, "lublin-256, test split, 4 windows")


def test_the_verdict_is_the_first_line_of_summary_md_and_in_verdict_json(tmp_path):
    run, table = _evaluated_run(tmp_path)
    line = verdict.save(run, table)
    text = run.summary_md.read_text()
    assert text.splitlines()[0] == line and line.startswith("verdict: kept the cloned start: RL did not improve")
    # then the table (under the line naming the reference), then what was measured
    paragraphs = text.split("\n\n")
    assert paragraphs[1].startswith("Reference: tuned+easy") and paragraphs[2].startswith("| scheduler |")
    assert paragraphs[3].startswith("lublin-256, test split, 4 windows")
    saved = json.loads(run.verdict.read_text())
    assert saved["verdict"] == line and saved["agent"] == AGENT
    assert saved["bsld"] == pytest.approx(5.0)  # (3 + 4 + 6 + 7) / 4
    assert "best RL checkpoint 8.25 at step 40, start 8.00" in saved["kept"]
    ref = saved["vs_reference"]
    assert ref["reference"] == "tuned+easy" and ref["reference_bsld"] == pytest.approx(6.25)
    assert ref["ratio"] == pytest.approx(5.0 / 6.25) and ref["ci_high"] < 1 and ref["outcome"] == "better"
    start = saved["vs_start"]  # the kept start plays as the agent: a ratio of exactly 1 on every resample
    assert (start["start"], start["ratio"], start["ci_low"], start["ci_high"], start["outcome"]) == \
        ("cloned", 1.0, 1.0, 1.0, "a tie")
    assert verdict.save(run, table) == line and run.summary_md.read_text() == text  # saved again: not stacked
    from experiments import figures

    assert figures.load(run.eval).description == "lublin-256, test split, 4 windows"  # the figures' subtitle


def test_a_new_evaluation_of_the_run_drops_the_old_verdict(tmp_path):
    run, table = _evaluated_run(tmp_path)
    verdict.save(run, table)
    evaluation.write_results(run.eval, pd.read_csv(run.per_window), pd.read_csv(run.per_job), "again")
    assert not run.verdict.exists() and not run.summary_md.read_text().startswith("verdict:")


# ---- 3. one CI method in the table and the figure ------------------------------------------------------------------
@pytest.fixture(scope="module")
def heuristics_run(tmp_path_factory):
    """Six windows of 256 jobs of lublin-256's test split (3,000 jobs): two of them overlap."""
    out = tmp_path_factory.mktemp("front") / "lublin-run" / "eval"
    per_window, per_job = evaluation.evaluate_on_test("lublin-256", {}, windows=6, length=256, seed=0,
                                                      progress=False)
    evaluation.write_results(out, per_window, per_job, evaluation.describe("lublin-256", 6, 256, 0))
    return out


def test_the_paired_figure_shows_the_summary_tables_ratio_and_ci(heuristics_run):
    from experiments import figures, tables

    res = figures.load(heuristics_run)
    summary = pd.read_csv(heuristics_run / "summary.csv").set_index("scheduler")
    fig = figures.figure_paired(res)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend  # one entry per row shown, each with the summary's ratio and CI, to the digit
    for entry in legend:
        name = next(n for n in summary.index if entry.startswith(f"{figures.styles(res)[n].label}: "))
        row = summary.loc[name, ["vs_reference", "vs_reference_low", "vs_reference_high"]]
        assert f": {tables.ratio_text(*row)} x reference" in entry, (entry, tuple(row))
    assert "blocks of 256 consecutive jobs" in " ".join(t.get_text() for t in fig.texts)  # the subtitle says which


# ---- 4. the notebooks speak the project's vocabulary, and run from a fresh clone ----------------------------------
NOTEBOOKS = sorted(p for p in (REPO / "experiments" / "notebooks").glob("*.ipynb") if ".nbconvert." not in p.name)
#: meanings docs/definitions.md retired: FCFS+EASY is the baseline, and the test windows overlap
RETIRED = [r"windows are independent", r"nothing joins them"]
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _cells(path: Path, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def retired_meanings(markdown: str) -> list[str]:
    """Sentences of ``markdown`` that use a word in a meaning docs/definitions.md does not give it."""
    found = []
    for sentence in re.split(r"(?<=[.:;])\s+", " ".join(markdown.split())):
        # FCFS+EASY is the baseline (the reference is the strongest implementable row); the windows overlap
        if ("FCFS" in sentence and re.search(r"\bthe reference\b", sentence) and "baseline" not in sentence) or \
                any(re.search(pattern, sentence) for pattern in RETIRED):
            found.append(sentence)
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_notebooks_use_the_words_as_docs_definitions_does(notebook):
    markdown = "\n\n".join(_cells(notebook, "markdown"))
    assert not retired_meanings(markdown), retired_meanings(markdown)
    promised = re.findall(r"draws (\w+) (?:paper-size )?figures", markdown)
    drawn = sum(len(re.findall(r"^figures\[\"\w+\"\] = ", code, flags=re.M)) for code in _cells(notebook, "code"))
    assert [NUMBERS[w] for w in promised] == ([drawn] if promised else []), (promised, drawn)


def test_the_retired_meanings_are_found_and_the_definitions_define_the_words():
    old = ("the dotted line is the mean of FCFS+EASY, the reference. Each dot is one window (windows are "
           "independent draws from the test split, so nothing joins them).")
    assert retired_meanings(old) == ["the dotted line is the mean of FCFS+EASY, the reference.",
                                     "Each dot is one window (windows are independent draws from the test split, so "
                                     "nothing joins them)."]
    assert not retired_meanings("The windows overlap, so they are not independent draws. FCFS+EASY is the baseline, "
                                "never the reference.")
    words = (REPO / "docs" / "definitions.md").read_text().split("### The words of a results table", 1)[1]
    for word, meaning in (("reference", "the strongest implementable row"), ("baseline", "FCFS+EASY"),
                          ("upper bound", "the clairvoyant row"), ("test windows", "They overlap")):
        assert re.search(rf"^\| {word} \| [^\n]*{re.escape(meaning)}", words, flags=re.M), word


@pytest.mark.slow
def test_the_study_notebook_runs_where_there_is_no_study(tmp_path):
    """A checkout with no ``studies/``: the notebook makes the small study itself, then draws it."""
    import os

    (tmp_path / "pyproject.toml").write_text("")  # the notebook's root: as a fresh clone's, without studies/
    notebook = tmp_path / "notebooks" / "study_slowdown.ipynb"
    notebook.parent.mkdir()
    notebook.write_text((REPO / "experiments" / "notebooks" / notebook.name).read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("HPCGYM_STUDY", "MPLBACKEND")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    jupyter = Path(sys.executable).parent / "jupyter"
    done = subprocess.run([str(jupyter) if jupyter.exists() else sys.executable, *([] if jupyter.exists() else
                           ["-m", "jupyter"]), "nbconvert", "--to", "notebook", "--execute", "--output",
                           str(tmp_path / "executed.ipynb"), notebook.name], cwd=notebook.parent, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    small = tmp_path / "studies" / "small"
    assert len(pd.read_csv(small / "study.csv")) and (small / "figures" / "slowdown.png").is_file()
    outputs = json.dumps(json.loads((tmp_path / "executed.ipynb").read_text())["cells"][1]["outputs"])
    assert "a small one made now" in outputs


# ---- 5. no leftovers in the tree -----------------------------------------------------------------------------------
ROOT_FILES = {".gitignore", "README.md", "mkdocs.yml", "pyproject.toml"}


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def test_the_tree_holds_only_the_projects_files():
    tracked = _git("ls-files").stdout.split()
    assert tracked, "not a git checkout: this test reads the tracked files"
    assert {p for p in tracked if "/" not in p} <= ROOT_FILES  # e.g. a stray watcher.pid
    assert not [p for p in tracked if p.endswith((".pid", ".nbconvert.ipynb"))]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_what_the_documented_notebook_command_writes_is_ignored(notebook):
    written = notebook.with_name(f"{notebook.stem}.nbconvert.ipynb")  # jupyter nbconvert --to notebook --execute
    assert _git("check-ignore", "-q", str(written.relative_to(REPO))).returncode == 0


# ---- 7. the project's deprecation warnings stay out of its tests ---------------------------------------------------
OLD_NAMES = re.compile(r"hpcgym\.sim\.engine|hpcgym\.sim\.core|hpcgym\.render\b|sim import (?:engine|core)\b|"
                       r"policy\.score\b|protocol\.heuristic\(|--val-length|--eval-length")
#: the one test of each old name (it expects the warning)
OLD_NAME_TESTS = {"test_step_path.py", "test_resolve.py", "test_vocabulary.py", Path(__file__).name}


def test_collecting_the_doctests_imports_no_deprecated_alias():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                           "-W", r"error:hpcgym\.:DeprecationWarning", "hpcgym", "baselines"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "is renamed" not in done.stdout + done.stderr, done.stdout[-3000:]


def test_a_deprecation_warning_of_the_project_fails_a_test():
    with pytest.raises(DeprecationWarning, match="is renamed"):
        warnings.warn("hpcgym.sim.engine is renamed hpcgym.sim.simulator", DeprecationWarning, stacklevel=1)
    with pytest.raises(DeprecationWarning, match="is deprecated"):
        warnings.warn("experiments.protocol.heuristic(name, settings) is deprecated", DeprecationWarning, stacklevel=1)


def test_the_tests_and_docs_use_the_new_names():
    pages = [p for p in (REPO / "docs").rglob("*.md") if "journal" not in p.parts]
    sources = [p for p in (REPO / "tests").glob("*.py") if p.name not in OLD_NAME_TESTS]
    sources += [*(REPO / "examples").glob("*.py"), *(REPO / "benchmarks").glob("*.py"), *NOTEBOOKS, REPO / "README.md"]
    found = []
    for path in pages + sources:
        # a paragraph about the old names themselves (deprecated aliases, "[formerly ...]") may name them
        for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
            if path in pages and re.search(r"deprecated|formerly|alias", paragraph):
                continue
            found += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in OLD_NAMES.finditer(paragraph)]
    assert not found, found


# ---- 6. figures: the rows that matter, no colour twice, one name for the start not kept ----------------------------
def test_no_two_heuristic_families_share_a_colour(heuristics_run):
    from experiments import figures

    st = figures.styles(figures.load(heuristics_run))
    families = {name.split("+")[0]: s.colour for name, s in st.items()}
    assert len(families) >= 14  # lublin-256: the classic, last2, learned, tuned and clairvoyant families
    assert len(set(families.values())) == len(families), families
    many = figures.family_colours([f"plugin{i}" for i in range(60)])
    assert len(set(many.values())) == 60


def _agent_results(tmp_path: Path):
    from experiments import figures

    jobs = pd.DataFrame({"job_id": range(8), "submit": range(8), "wait": [0, 60, 0, 600, 30, 0, 0, 900],
                         "bsld": [1.0, 2.0, 1.0, 8.0, 1.5, 1.0, 1.0, 12.0]})
    rows = {"run": ("agent", 1.0), "run (cloned, no RL)": ("cloned", 1.0), "tuned+easy": ("heuristic", 1.2),
            "saf+easy": ("heuristic", 1.3), BASELINE: ("heuristic", 2.0), "sjf+none": ("heuristic", 3.0),
            "clairvoyant+easy": ("clairvoyant", 0.5)}
    per_job = pd.concat([jobs.assign(scheduler=s, kind=k, backfill="none" if s.endswith("none") else "easy",
                                     window=w, bsld=jobs["bsld"] * f) for s, (k, f) in rows.items() for w in (0, 1)])
    per_window = per_job.groupby(["scheduler", "kind", "backfill", "window"], as_index=False, sort=False).agg(
        bsld=("bsld", "mean"), wait=("wait", "mean")).assign(utilization=0.5)
    return figures.Results(tmp_path, per_window, per_job, evaluation.summary(per_window), "toy, 2 windows", "run",
                           "toy")


@pytest.mark.parametrize("draw", ["figure_survival", "figure_wait"])
def test_the_line_figures_draw_the_rows_that_matter_over_the_rest(tmp_path, draw):
    from experiments import figures

    res = _agent_results(tmp_path)
    assert figures.focus_rows(res) == ["run", "run (cloned, no RL)", "tuned+easy", BASELINE, "clairvoyant+easy"]
    fig = getattr(figures, draw)(res)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["agent", "agent (cloned, no RL): the same as the agent on every job (drawn thin on top)",
                      "TUNED+EASY (reference)", "FCFS+EASY (baseline)", "CLAIRVOYANT+EASY (upper bound)",
                      "the 2 other rows (solid: EASY backfilling, dashed: none)"]
    colours = [h.get_color() for h in fig.legends[0].legend_handles[:5]]
    assert len(set(colours)) == 5  # no colour twice among the rows that matter
    lines = fig.axes[0].get_lines()
    faint = [ln for ln in lines if ln.get_color() == figures.FAINT["color"]]
    assert len(faint) == 2 and all(ln.get_zorder() < min(x.get_zorder() for x in lines if x not in faint)
                                   for ln in faint)
    start, agent = (next(ln for ln in lines if ln.get_color() == c) for c in colours[1::-1])
    assert start.get_zorder() > agent.get_zorder() and start.get_linewidth() < agent.get_linewidth()


def test_the_learning_curve_names_the_start_not_kept_as_the_csv_does(tmp_path):
    from agents.curves import plot_learning_curves

    curve = tmp_path / "learning_curve.csv"
    pd.DataFrame(CURVE, columns=["timesteps", "val_bsld", "network"]).to_csv(curve, index=False)
    import matplotlib.axes

    captured = {}  # the figure is closed once saved: read its legend as it is made
    real_legend = matplotlib.axes.Axes.legend

    def legend(ax, *args, **kwargs):
        captured["labels"] = ax.get_legend_handles_labels()[1]
        return real_legend(ax, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matplotlib.axes.Axes, "legend", legend)
        plot_learning_curves({"r-s0": curve}, tmp_path / "curve.png")
    assert captured["labels"] == ["r-s0", "r-s0: untrained (not kept)"]
