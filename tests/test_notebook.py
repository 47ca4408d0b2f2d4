"""The notebook run the way a user runs it: ``jupyter nbconvert --execute``, from the repository root and from its
own folder, on a small results folder; it must exit 0, show no error and save its three figures."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import evaluate, plots

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "experiments" / "notebooks" / "compare_slowdown.ipynb"

try:  # never skip: the [dev] extra installs nbconvert, so its absence is a broken setup
    import nbconvert  # noqa: F401
except ImportError as exc:  # pragma: no cover - a broken setup
    raise ImportError("the notebook test runs jupyter nbconvert: pip install -e '.[dev]'") from exc


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results") / "lublin-run" / "eval"
    per_window, per_job = evaluate.evaluate_on_test("lublin-256", {}, windows=3, length=128, seed=0, progress=False)
    evaluate.write_results(out, per_window, per_job, evaluate.describe("lublin-256", 3, 128, 0))
    return out


@pytest.fixture(scope="module")
def suite_study_folder(tmp_path_factory):
    """A small suite study (the notebook's section 5 draws it), made once for both runs of the notebook."""
    from experiments import suite_study

    out = tmp_path_factory.mktemp("suite") / "s"
    assert suite_study.main([*suite_study.SMALL, "--out", str(out), "--cache", str(out.parent / "cache")]) == 0
    return out


def jupyter():
    """The ``jupyter`` command of this interpreter's environment."""
    local = Path(sys.executable).parent / "jupyter"
    return [str(local)] if local.exists() else [sys.executable, "-m", "jupyter"]


@pytest.mark.parametrize("where", ["root", "notebook folder"])
def test_notebook_executes_with_nbconvert(results, suite_study_folder, tmp_path, where):
    shutil.rmtree(results / "figures", ignore_errors=True)
    cwd = REPO if where == "root" else NOTEBOOK.parent
    executed = tmp_path / "executed.ipynb"
    env = {**os.environ, "HPCGYM_RESULTS": str(results), "HPCGYM_SUITE_STUDY": str(suite_study_folder)}
    env.pop("MPLBACKEND", None)  # the kernel's own inline backend, as for a user
    done = subprocess.run([*jupyter(), "nbconvert", "--to", "notebook", "--execute", "--output", str(executed),
                           os.path.relpath(NOTEBOOK, cwd)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in plots.FIGURES:
        png = results / "figures" / f"{name}.png"
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    nb = json.loads(executed.read_text())
    outputs = [o for cell in nb["cells"] if cell["cell_type"] == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == len(plots.FIGURES) + 2  # every figure is shown, not only saved; +2: the suite view
    assert (results / "figures" / "suite_tails.png").is_file() and (results / "figures" / "suite_forest.png").is_file()
    assert str(results) in json.dumps(nb)  # the notebook says which results folder it used


def test_find_results_prefers_the_environment_then_the_newest_run(results, tmp_path):
    assert plots.find_results(tmp_path, {"HPCGYM_RESULTS": str(results)})[0] == results.resolve()
    with pytest.raises(FileNotFoundError):
        plots.find_results(tmp_path, {"HPCGYM_RESULTS": str(tmp_path / "nothing")})
    for age, run in enumerate(("new", "old")):
        shutil.copytree(results, tmp_path / "runs" / run / "eval", ignore=shutil.ignore_patterns("figures"))
        when = 1_700_000_000 - 3600 * age
        os.utime(tmp_path / "runs" / run / "eval" / "per_window.csv", (when, when))
    assert plots.find_results(tmp_path, {})[0] == tmp_path / "runs" / "new" / "eval"
    (tmp_path / "pyproject.toml").touch()
    assert plots.repo_root(tmp_path / "runs" / "new") == tmp_path


def test_titles_name_the_trace_the_run_and_the_measure(results):
    res = plots.load(results)
    assert res.trace == "lublin-256" and res.run == "lublin-run"
    for fig in plots.all_figures(res).values():
        text = " ".join(t.get_text() for t in fig.texts)
        assert "lublin-256" in text and "lublin-run" in text and "3 windows x 128 jobs" in text
    styles = plots.styles(res)
    assert styles[plots.BASELINE].colour == "#000000"
    assert styles["saf+easy"].colour == styles["saf+none"].colour != styles["sjf+easy"].colour
    assert styles["saf+easy"].filled and not styles["saf+none"].filled


def test_the_suite_view_finds_its_study(suite_study_folder, tmp_path):
    from experiments import suite_study

    assert suite_study.find(tmp_path, {"HPCGYM_SUITE_STUDY": str(suite_study_folder)})[0] == suite_study_folder
    with pytest.raises(FileNotFoundError, match="answer.csv"):
        suite_study.find(tmp_path, {"HPCGYM_SUITE_STUDY": str(tmp_path)})
    (tmp_path / "studies" / "suite").mkdir(parents=True)
    (tmp_path / "studies" / "suite" / "answer.csv").write_text("learner\n")
    assert suite_study.find(tmp_path, {})[0] == tmp_path / "studies" / "suite"
    tails = suite_study.slowdown_tails(suite_study_folder, "theta")
    assert list(tails) == ["fcfs+easy (baseline)", "real", "lublin"] and len(tails["real"]) == 6 * 1024
