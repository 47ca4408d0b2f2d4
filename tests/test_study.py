"""The synthetic-vs-real study: the quick preset end to end (all nine sources, two seeds), resumability, Ray, the
report's tables and figures, the fidelity stage's graceful failure, and the study notebook."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments import study, study_report
from experiments.runs import RunFolder
from experiments.training import study as stages
from hpcgym import cli
from synth.base import Synthesizer

REPO = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"
SEEDS = [0, 1]
WINDOWS = 2  # the quick preset's test windows


def run(cmd, timeout=600):
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def study_cmd(out, *extra):
    return [sys.executable, "-m", "experiments.study", "--quick", "--seeds", *map(str, SEEDS), "--out", str(out),
            *extra]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick study over all nine sources and two seeds, run once for the tests below."""
    out = tmp_path_factory.mktemp("study") / "theta"
    done = run(study_cmd(out, "--workers", "2"))
    return out, done.stdout


@pytest.mark.slow
def test_quick_study_writes_every_row_table_and_figure(quick):
    out, stdout = quick
    for stage in study.STAGES:
        assert f"[{stage}]" in stdout  # a progress line per stage
    rows = pd.read_csv(out / "study.csv")
    assert len(rows) == len(study.SOURCES) * len(SEEDS) * WINDOWS
    assert set(rows["source"]) == set(study.SOURCES) and sorted(rows["seed"].unique()) == SEEDS
    assert not rows.duplicated(["source", "seed", "window"]).any()
    assert rows[["bsld", "wait", "utilization", "fcfs+easy_bsld"]].notna().all().all()
    for run in rows["run"].unique():  # each run keeps its verdict, as experiments.train's do
        summary_md = (out / "runs" / run / "eval" / "summary.md").read_text()
        assert summary_md.startswith("verdict: ") and (out / "runs" / run / "eval" / "verdict.json").is_file()
    heuristics = pd.read_csv(out / "heuristics.csv")
    assert {"fcfs+easy", "fcfs+none", "sjf+easy", "wfp3+easy", "saf+none"} <= set(heuristics["scheduler"])
    sources = pd.read_csv(out / "sources.csv").set_index("source")
    assert sources.loc["real", "share_of_real_improvement"] == pytest.approx(1.0) or \
        np.isnan(sources.loc["real", "share_of_real_improvement"])  # NaN when real did not beat FCFS+EASY
    fidelity = pd.read_csv(out / "fidelity.csv")
    assert set(study.GENERATORS) <= set(fidelity.columns) and {"floor", "bootstrap", "better"} <= set(fidelity)
    report = (out / "report.md").read_text()
    for name in study_report.FIGURES:
        assert (out / "figures" / f"{name}.png").read_bytes()[:8] == PNG
        assert f"(figures/{name}.png)" in report
    assert "## Wall time" in report and "Best predictor" in report and "## Failures" not in report
    assert "Between sources or between seeds?" in report and "RL against its start." in report
    begun = pd.read_csv(out / "starts.csv")  # what RL added: one row per run that has a learning curve
    assert list(begun.columns) == study_report.STARTS and len(begun) == len(study.SOURCES) * len(SEEDS)
    assert set(begun["start"]) <= {"untrained", "cloned", "prior"}
    assert {"start_median_bsld", "rl_beat_start_test"} <= set(sources.columns)
    timing = {t["stage"]: t for t in json.loads((out / "timing.json").read_text())}
    assert set(timing) == set(study.STAGES) and timing["train"]["done"] == len(study.SOURCES) * len(SEEDS)
    fits = [p for p in (out.parent / "synth-cache").iterdir() if (p / "manifest.json").exists()]
    assert len(fits) == len(study.GENERATORS)  # one fit per generator, shared by both seeds


@pytest.mark.slow
def test_second_run_skips_everything_and_a_lost_evaluation_is_redone(quick):
    out, _ = quick
    models = sorted(out.glob("runs/*/model.zip"))
    before = {p: p.stat().st_mtime_ns for p in models}
    stdout = run(study_cmd(out, "--workers", "2")).stdout
    for stage in ("fit", "train", "evaluate"):
        assert f"[{stage}] 0 to do" in stdout
    assert "[fidelity] 0 to do" in stdout and "in the cache" in stdout
    assert {p: p.stat().st_mtime_ns for p in models} == before
    # what a kill during the evaluation leaves: the run is trained, its evaluation is not recorded
    marker = RunFolder(out / "runs" / "tvae-s1").study_record
    record = json.loads(marker.read_text())
    marker.write_text(json.dumps({"train_s": record["train_s"]}))
    stdout = run(study_cmd(out)).stdout
    assert "[train] 0 to do" in stdout and "[evaluate] 1 to do" in stdout and "tvae-s1" in stdout
    assert len(pd.read_csv(out / "study.csv")) == len(study.SOURCES) * len(SEEDS) * WINDOWS


@pytest.mark.slow
def test_interrupted_run_resumes_and_other_settings_are_refused(quick, tmp_path):
    out, _ = quick
    copy = tmp_path / "theta"
    import shutil

    shutil.copytree(out, copy)
    RunFolder(copy / "runs" / "real-s0").study_record.unlink()  # killed during training
    stdout = run(study_cmd(copy, "--sources", "real", "--cache", str(out.parent / "synth-cache"))).stdout
    assert "real-s0: continuing an interrupted run" in stdout and "[train] 1 to do" in stdout
    done = subprocess.run(study_cmd(copy, "--sources", "real", "--timesteps", "300"), capture_output=True,
                          text=True, cwd=REPO)
    assert done.returncode == 2 and "other settings" in done.stderr


@pytest.mark.slow
def test_a_run_trained_on_another_fit_of_its_generator_is_refused_then_redone(quick, tmp_path):
    """A generator's new revision or a refit changes its cache key; runs trained on the old fit's samples are not
    reused silently (the report would pair them with the new fit's fidelity)."""
    out, _ = quick
    copy = tmp_path / "theta"
    import shutil

    shutil.copytree(out, copy)
    cache = out.parent / "synth-cache"
    marker = RunFolder(copy / "runs" / "lublin-s0").study_record
    record = json.loads(marker.read_text())
    current = Path(record["synthesizer_dir"]).name
    record["synthesizer_dir"] = str(cache / "theta-lublin-0000000000000000")  # an older fit's folder
    marker.write_text(json.dumps(record))
    cmd = study_cmd(copy, "--sources", "lublin", "--cache", str(cache))
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and "another fit of lublin (theta-lublin-0000000000000000" in done.stderr
    stdout = run([*cmd, "--overwrite"]).stdout
    assert "[train] 1 to do" in stdout and "lublin-s0" in stdout and "[evaluate] 1 to do" in stdout
    assert Path(json.loads(marker.read_text())["synthesizer_dir"]).name == current


@pytest.mark.slow
def test_the_quick_study_gives_the_numbers_of_before(quick):
    """Its real and arrivals runs of seed 0 score as they did before the recipe became one object (the golden files
    of tests/test_recipe.py, made by a study of those two sources alone: a run does not depend on the others)."""
    from test_recipe import _same_as_before

    out, _ = quick
    for source in ("real", "arrivals"):
        _same_as_before(out / "runs" / f"{source}-s0", f"study_{source}")


@pytest.mark.slow
def test_quick_study_on_local_ray(tmp_path):
    # four sources (real, a generator fitted in seconds, a trained SDV model, mixed) to keep the test short
    out = tmp_path / "ray"
    stdout = run(study_cmd(out, "--backend", "ray", "--workers", "2", "--sources",
                           "real,lublin,gaussiancopula,mixed")).stdout
    assert "[train] 8 to do" in stdout
    rows = pd.read_csv(out / "study.csv")
    assert len(rows) == 4 * len(SEEDS) * WINDOWS
    assert (out / "figures" / "bsld_by_source.png").read_bytes()[:8] == PNG


@pytest.mark.slow
def test_study_notebook_draws_the_slowdown_curves(quick, tmp_path):
    out, _ = quick
    executed = tmp_path / "executed.ipynb"
    notebook = REPO / "experiments" / "notebooks" / "study_slowdown.ipynb"
    jupyter = Path(sys.executable).parent / "jupyter"
    cmd = [str(jupyter)] if jupyter.exists() else [sys.executable, "-m", "jupyter"]
    env = {**os.environ, "HPCGYM_STUDY": str(out)}
    env.pop("MPLBACKEND", None)
    done = subprocess.run([*cmd, "nbconvert", "--to", "notebook", "--execute", "--output", str(executed),
                           str(notebook)], cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "figures" / "slowdown.png").read_bytes()[:8] == PNG
    nb = json.loads(executed.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)


# ---- fast checks -------------------------------------------------------------------------------------------------
def test_quick_preset_yields_to_explicit_flags():
    args = study.parse_args(["--quick", "--eval-windows", "3", "--", "--envs", "2"])
    assert args.eval_windows == 3 and args.timesteps == study.QUICK["timesteps"] and args.train_flags == ["--envs",
                                                                                                          "2"]
    recipe = stages.train_args(args, "mixed", 1)
    assert [recipe.get(k) for k in ("envs", "workload", "synthesizer", "seed", "run_name")] == [2, "mixed", "arrivals",
                                                                                                1, "mixed-s1"]
    assert stages.fit_params(args)["ctgan"]["epochs"] == 1 and not stages.fit_params(args)["ctgan"]["enable_gpu"]
    full = study.parse_args(["--full", "--fit-params", 'tvae={"epochs": 7}', "--device", "cuda"])
    params = stages.fit_params(full)
    assert params["tvae"]["epochs"] == 7 and params["ctgan"]["epochs"] == 300 and params["ctgan"]["enable_gpu"]
    assert params["realtabformer"]["device"] == "cuda"


@pytest.mark.parametrize("argv", [["--sources", "real,gans"], ["--fit-params", "ctgan:3"],
                                  ["--backend", "slurm"], ["--mixed-with", "real"]])
def test_bad_flags_are_one_line_errors(argv):
    from hpcgym import cli

    with pytest.raises(cli.UsageError):
        study.parse_args(argv)


def test_help_documents_every_flag():
    text = subprocess.run([sys.executable, "-m", "experiments.study", "--help"], capture_output=True, text=True,
                          cwd=REPO).stdout
    import dataclasses

    for f in dataclasses.fields(study.Args):
        if f.name != "train_flags":
            assert "--" + f.name.replace("_", "-") in text
    assert "10 minutes on 2 CPU cores" in text and "epochs" in text


def test_fit_key_depends_on_table_model_settings_and_seed():
    from hpcgym import traces
    from synth.base import fit_key

    table = traces.split(traces.load("lublin-256"), "train").iloc[:500]
    key = fit_key(table, "ctgan", {"epochs": 1}, 0)
    assert key == fit_key(table.copy(), "ctgan", {"epochs": 1}, 0)
    others = {fit_key(table.iloc[:400], "ctgan", {"epochs": 1}, 0), fit_key(table, "tvae", {"epochs": 1},
              0), fit_key(table, "ctgan", {"epochs": 2}, 0), fit_key(table, "ctgan", {"epochs": 1}, 1)}
    assert key not in others and len(others) == 4


def test_a_failing_fidelity_report_is_reported_not_raised(monkeypatch):
    from synth import fidelity

    def broken(*a, **k):
        raise RuntimeError("v2 in flux")

    monkeypatch.setattr(fidelity, "prepare", broken)
    out = stages.fidelity_tables(pd.DataFrame(), pd.DataFrame(), {"ctgan": pd.DataFrame(), "tvae": None})
    assert set(out) == {"ctgan", "tvae"} and all("v2 in flux" in v for v in out.values())


def test_predictors_orient_the_metrics():
    sources = pd.DataFrame({"source": list("abcd"), "median_bsld": [1.0, 2.0, 3.0, 4.0]})
    fid = pd.DataFrame({"source": list("abcd") * 2, "metric": ["ks"] * 4 + ["quality"] * 4,
                        "better": ["lower"] * 4 + ["higher"] * 4, "value": [0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7, 0.6]})
    preds = study_report.predictors(fid, sources).set_index("metric")
    assert preds.loc["ks", "rho"] == pytest.approx(-1.0) and preds.loc["ks", "rho_oriented"] == pytest.approx(1.0)
    assert preds.loc["quality", "rho_oriented"] == pytest.approx(1.0)


class IdleSynthesizer(Synthesizer):
    """One 1-node job of 60 s (walltime 120 s) an hour: no job ever waits, so no window needs a decision."""

    name = "idle"

    def _fit(self, table, jobs, rng):
        pass

    def _sample(self, n, rng):
        return pd.DataFrame({"interarrival": np.full(n, 3600), "nodes": 1, "run": 60, "walltime": 120, "user": -1,
                             "status": "unknown", "hour": 0, "dow": 0})


@pytest.fixture
def idle_synthesizer():
    import synth

    synth.register("idle", IdleSynthesizer)  # this process only: the study below runs its tasks in-process
    yield "idle"
    synth.MODELS.pop("idle", None)


def test_a_source_without_decisions_is_a_result_not_a_crash(idle_synthesizer, tmp_path, capsys):
    out = tmp_path / "study"
    argv = ["--quick", "--trace", "sdsc-sp2", "--sources", "real,idle", "--seeds", "0", "--out", str(out),
            "--timesteps", "64", "--", "--clone-episodes", "1", "--val-windows", "1"]
    assert study.main(argv) == 0  # the other source goes on, and an untrainable source is no failure
    said = capsys.readouterr().out
    assert "idle-s0: untrainable: --workload synthetic --synthesizer idle: 100 windows" in said
    sources = pd.read_csv(out / "sources.csv").set_index("source")
    assert sources.loc["real", "status"] == "trained" and sources.loc["real", "seeds"] == 1
    assert sources.loc["real", "decisions_per_window"] > 0
    idle = sources.loc["idle"]
    assert idle["status"] == study_report.UNTRAINABLE_STATUS and idle["seeds"] == 0
    assert idle["decisions_per_window"] == 0 and np.isnan(idle["mean_bsld"])  # no agent, no score
    # the windows it drew: 256 jobs (the warm start's windows) x 1 node x 60 s over 255 hours on 128 nodes
    assert idle["window_load"] == pytest.approx(256 * 60 / (128 * 255 * 3600)) and np.isnan(sources.loc["real",
                                                                                                      "window_load"])
    # its fidelity sample (1,000 jobs): 1,000 x 1 node x 60 s over 999 hours of submits on 128 nodes
    assert idle["offered_load"] == pytest.approx(1000 * 60 / (128 * 999 * 3600))
    assert set(pd.read_csv(out / "study.csv")["source"]) == {"real"}
    report = (out / "report.md").read_text()
    assert f"| idle | {study_report.UNTRAINABLE_STATUS} |" in report and "## Failures" not in report
    assert study.main(argv) == 0  # a second run skips it
    assert "idle-s0: untrainable (its samples make no decisions), skipped" in capsys.readouterr().out


def test_train_on_a_source_without_decisions_is_a_one_line_error(idle_synthesizer, tmp_path, capsys):
    from experiments import train
    from hpcgym import cli

    argv = ["--trace", "sdsc-sp2", "--workload", "synthetic", "--synthesizer", "idle", "--timesteps", "64",
            "--window", "64", "--clone-episodes", "1", "--val-windows", "1", "--runs-dir", str(tmp_path), "--quiet"]
    assert cli.run(train.main, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --workload synthetic --synthesizer idle: 100 windows of")
    assert "no decision" in err[0] and "--window" in err[0]


# ---- between sources or between seeds ---------------------------------------------------------------------------
def per_seed_table(values: dict[str, list[float]]) -> pd.DataFrame:
    """A study table with one window per (source, seed), whose bsld is ``exp(value)`` (the effect reads logs)."""
    return pd.DataFrame([{"source": src, "seed": i, "window": 0, "bsld": float(np.exp(v))}
                         for src, vs in values.items() for i, v in enumerate(vs)])


def test_source_effect_is_the_anova_f_and_an_exact_permutation_p():
    from scipy.stats import f_oneway

    values = {"a": [0.0, 0.1], "b": [1.0, 1.2], "c": [2.0, 2.05], "one-seed": [9.0]}
    effect = study_report.source_effect(per_seed_table(values))
    assert effect["sources"] == 3 and effect["runs"] == 6  # a source with one seed has no within-source spread
    f = f_oneway([0.0, 0.1], [1.0, 1.2], [2.0, 2.05]).statistic
    assert effect["F"] == pytest.approx(f, rel=1e-9)
    assert effect["between_share"] == pytest.approx((f - 1) / (f + 1), rel=1e-9)  # ICC(1) with two seeds each
    # Perfectly separated: of the 720 orders of the six values, those that keep the three pairs together (3! orders
    # of the pairs, 2! inside each) give the same F, and no other order reaches it: p = 48 / 720.
    assert (effect["p_value"], effect["relabellings"]) == (pytest.approx(48 / 720), 720)


def test_source_effect_when_seeds_differ_more_than_sources():
    effect = study_report.source_effect(per_seed_table({"a": [0.0, 2.0], "b": [0.1, 1.9], "c": [0.05, 2.1]}))
    assert effect["F"] < 1 and effect["between_share"] < 0 and effect["p_value"] > 0.5
    sampled = study_report.source_effect(per_seed_table({"a": [0.0, 2.0], "b": [0.1, 1.9], "c": [0.05, 2.1]}),
                                         permutations=200, seed=3)  # 720 > 200: random relabellings
    assert sampled["relabellings"] == 200 and sampled["p_value"] > 0.5
    assert np.isnan(study_report.source_effect(per_seed_table({"a": [0.0, 1.0]}))["p_value"])  # one source: no test


def test_quick_fits_its_windows_to_a_small_trace_and_a_full_study_refuses_early(tmp_path):
    quick = study.Study(study.parse_args(["--trace", "mustang-2012-02", "--quick", "--seeds", "0", "--sources", "real",
                                          "--out", str(tmp_path / "q")]))
    assert quick.base.selection.val_length == len(quick.data.validation) == 69  # the preset's 256 did not fit
    assert quick.args.eval_length == quick.data.test_jobs < 256
    refused = "--val-window 1024 is longer than the trace's validation part \\(69 jobs\\)"
    with pytest.raises(cli.UsageError, match=refused):
        study.Study(study.parse_args(["--trace", "mustang-2012-02", "--seeds", "0", "--sources", "real",
                                      "--out", str(tmp_path / "full")]))
    assert not (tmp_path / "full" / "runs").exists()  # nothing trained, nothing fitted


def test_quick_fits_its_validation_window_to_the_shortest_period(tmp_path):
    quick = study.Study(study.parse_args(["--trace", "mustang-2012-02", "--quick", "--seeds", "0", "--sources", "real",
                                          "--out", str(tmp_path / "q"), "--", "--val-periods", "2"]))
    lengths = [hi - lo for lo, hi in quick.data.val_periods]
    assert len(lengths) == 2 and quick.base.selection.val_length == min(lengths) < len(quick.data.validation)


def test_start_summary_counts_what_rl_added_against_hand_values():
    from scipy.stats import f_oneway

    nan = float("nan")
    table = pd.DataFrame([  # source, seed, start, val_start, val_kept, test_start, test_kept
        ("a", 0, "cloned", 10.0, 9.0, 5.0, 4.0),      # moved on validation, better on test
        ("a", 1, "untrained", 10.0, 10.0, 6.0, 6.0),  # never moved: the agent is its start
        ("a", 2, "prior", 10.0, 8.0, nan, 7.0),       # a taught residual's prior, not kept: no test score
        ("b", 0, "cloned", 3.0, 2.0, 2.0, 3.0),       # better on validation, worse on test
        ("b", 1, "cloned", 3.0, 2.5, 2.5, 2.0),
    ], columns=study_report.STARTS)
    summary = study_report.start_summary(table).set_index("source")
    assert summary.loc["a", "start_median_bsld"] == 5.5 and summary.loc["b", "start_median_bsld"] == 2.25
    assert summary.loc["a", "rl_beat_start_validation"] == 2 and summary.loc["b", "rl_beat_start_validation"] == 2
    assert summary.loc["a", "rl_beat_start_test"] == "1 of 2" and summary.loc["b", "rl_beat_start_test"] == "1 of 2"
    effect = study_report.start_effect(table)  # the starts' test scores alone, the unscored start left out
    assert effect["runs"] == 4 and effect["sources"] == 2
    assert effect["F"] == pytest.approx(f_oneway(np.log([5.0, 6.0]), np.log([2.0, 2.5])).statistic)
