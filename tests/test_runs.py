"""The experiments' shared pieces: run names, the run folder's resume rules, the Args command lines, the fan-out."""

from __future__ import annotations

import json
import math
import time

import pytest

from experiments import arguments, runs, study, train
from experiments.fanout import Executor
from experiments.recipe import Recipe
from experiments.training import many
from experiments.training import study as stages
from hpcgym import cli


# ---- names ---------------------------------------------------------------------------------------------------
def _recipe(**settings) -> Recipe:
    return Recipe.from_settings(settings)


def test_a_trace_given_as_a_path_names_the_run_by_its_file():
    recipe = _recipe(trace="/data/logs/lublin_256.swf.gz", workload="real", algo="dqn", seed=3)
    assert recipe.name == "lublin_256-real-dqn-s3"  # no slashes: one folder under --runs-dir
    assert _recipe(trace="sdsc-sp2").name == "sdsc-sp2-synthetic-ppo-s0"
    assert _recipe(run_name="mine", seed=4).name == "mine"  # --run-name as given for one run


def test_the_seeds_of_a_setting_share_a_base_name(monkeypatch):
    recipe = _recipe(trace="/data/logs/lublin_256.swf.gz", workload="real", eval_windows=0, runs_dir="out")
    per_seed = many.seeds_of(recipe, [0, 2])
    assert [r.folder.as_posix() for r in per_seed] == ["out/lublin_256-real-ppo-s0", "out/lublin_256-real-ppo-s2"]
    assert [r.run.seed for r in per_seed] == [0, 2]
    monkeypatch.setattr(many, "run_all", lambda recipes, **kw: [str(r.folder) for r in recipes])
    dirs, table = many.run_seeds(recipe, [0, 2])
    assert [d.as_posix() for d in dirs] == ["out/lublin_256-real-ppo-s0", "out/lublin_256-real-ppo-s2"]
    assert table is None  # no test windows, no table
    mine = many.seeds_of(_recipe(run_name="mine", eval_windows=0), [1])
    assert [r.name for r in mine] == ["mine-s1"]


def test_seed_names_and_their_base():
    assert runs.run_name("theta-real-ppo", 12) == "theta-real-ppo-s12"
    assert runs.base_of("theta-real-ppo-s12") == "theta-real-ppo"
    assert runs.base_of("real-s0") == "real"
    assert runs.seeds_folder("out", "theta-real-ppo").as_posix() == "out/theta-real-ppo-seeds"
    assert runs.BASELINE == "fcfs+easy"


# ---- resume --------------------------------------------------------------------------------------------------
def _saved_run(tmp_path, **changes):
    recipe = _recipe(trace="lublin-256", workload="real", runs_dir=str(tmp_path), run_name="r", **changes)
    folder = runs.RunFolder(tmp_path / "r")
    folder.path.mkdir()
    folder.args_json.write_text(json.dumps({**recipe.settings(), "timesteps": 300}))
    return folder


def test_resume_takes_the_saved_settings_and_the_resumable_flags(tmp_path):
    _saved_run(tmp_path, envs=4)
    asked = _recipe(runs_dir=str(tmp_path), run_name="r", resume=True, timesteps=900)
    back = runs.resumed(asked, {"runs_dir", "run_name", "resume", "timesteps"})
    assert (back.source.trace, back.source.workload, back.environment.envs, back.run.timesteps, back.run.resume) == (
        "lublin-256", "real", 4, 900, True)


def test_resume_refuses_contradicting_flags_and_names_close_runs(tmp_path):
    _saved_run(tmp_path)
    with pytest.raises(cli.UsageError, match="contradict.*--trace 'theta'"):
        runs.resumed(_recipe(runs_dir=str(tmp_path), run_name="r", resume=True, trace="theta"),
                     {"runs_dir", "run_name", "resume", "trace"})
    with pytest.raises(cli.UsageError, match="did you mean r"):
        runs.resumed(_recipe(runs_dir=str(tmp_path), run_name="rr", resume=True), {"run_name", "resume"})


def test_a_run_folder_is_held_by_one_process(tmp_path):
    folder = runs.RunFolder(tmp_path / "r")
    with folder.owned(resume=False, overwrite=False):
        assert folder.lock.read_text().strip().isdigit()
        (folder.path / "x").write_text("written")
    assert not folder.lock.exists()
    with pytest.raises(cli.UsageError, match="not empty"):
        with folder.owned(resume=False, overwrite=False):
            pass
    with folder.owned(resume=False, overwrite=True):
        assert not (folder.path / "x").exists()  # emptied first


# ---- command lines -------------------------------------------------------------------------------------------
def test_trace_flags_are_checked_but_kept_as_text():
    args = train.parse_args(["--trace", "lublin-256", "--machine", "120x2", "--columns", "run=run_time"])
    source = args.recipe.source
    assert (source.machine, source.columns, source.format) == ("120x2", "run=run_time", "")
    assert source.read_kwargs() == {"format": None, "machine": "120x2", "columns": "run=run_time", "round": None,
                                    "on_duplicate": "warn"}
    with pytest.raises(cli.UsageError, match="machine"):
        train.parse_args(["--machine", "0x0"])
    with pytest.raises(cli.UsageError, match="format"):
        train.parse_args(["--format", "xls"])


def test_parse_reports_the_fields_given_explicitly():
    ap = train.parser()
    args, given = arguments.parse(train.Args, ap, ["--envs", "16", "--seeds", "1", "2", "--quiet"])
    assert given == {"envs", "seeds", "quiet"} and args.recipe.environment.envs == 16 and args.seeds == [1, 2]
    again, _ = arguments.parse(train.Args, ap, [])
    assert again.seeds == [] and not again.recipe.run.quiet  # probing left the parser's defaults alone


def test_a_trace_flag_without_a_field_is_refused(monkeypatch):
    original = cli.add_trace_args

    def more(parser, as_text=False):
        original(parser, as_text)
        parser.add_argument("--unmapped", default=None)

    monkeypatch.setattr(cli, "add_trace_args", more)
    with pytest.raises(TypeError, match="unmapped"):
        train.parser()


def test_the_study_builds_each_run_from_the_shared_settings():
    args = study.parse_args(["--quick", "--trace", "lublin-256", "--machine", "256", "--", "--envs", "2",
                             "--learning-rate", "1e-4"])
    real, synthetic = stages.train_args(args, "real", 0), stages.train_args(args, "tvae", 1)
    get = Recipe.get
    assert [get(real, k) for k in ("envs", "learning_rate", "window", "machine")] == [2, 1e-4, 64, "256"]  # flags,
    assert [get(real, k) for k in ("workload", "sample_pool", "run_name", "quiet")] == ["real", 0, "real-s0", True]
    assert [get(synthetic, k) for k in ("workload", "synthesizer", "sample_pool")] == ["synthetic", "tvae", 2048]
    assert synthetic.run.runs_dir == str(args.out_dir / "runs")  # then the preset, then the study's own
    with pytest.raises(cli.UsageError, match="sample-pool"):
        stages.train_args(study.parse_args(["--sample-pool", "10"]), "tvae", 0)


# ---- fan-out -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("jobs", [1, 2])
def test_executor_returns_results_in_order_and_reports_each(jobs):
    seen = []
    with Executor(math.sqrt, jobs=jobs) as executor:
        out = executor.map([16.0, 1.0, 9.0, 4.0], lambda i, r: seen.append((i, r)))
    assert out == [4.0, 1.0, 3.0, 2.0] and sorted(seen) == [(0, 4.0), (1, 1.0), (2, 3.0), (3, 2.0)]


def test_in_a_pool_a_failing_task_lets_the_others_finish():
    seen = []
    started = time.perf_counter()
    with Executor(math.sqrt, jobs=2) as executor, pytest.raises(ValueError, match="math domain error"):
        executor.map([4.0, -1.0, 9.0], lambda i, r: seen.append(i))
    assert sorted(seen) == [0, 2] and time.perf_counter() - started < 60
