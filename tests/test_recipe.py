"""The training recipe: its sections, its file in the run folder (old ``args.json`` files too), its checks, and the
smoke-size runs of train, --seeds, the sweep and the study giving the numbers the code gave before the recipe
existed (tests/data/golden_19ae773: per-window bsld of runs made at 19ae773, same flags, same seeds)."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from experiments import train
from experiments.recipe import VERSION, Recipe, resolve
from hpcgym import cli

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "golden_19ae773"
TINY = ["--trace", "lublin-256", "--envs", "4", "--n-steps", "64", "--batch-size", "64", "--window", "64",
        "--slots", "32", "--eval-windows", "2", "--eval-window", "128", "--val-windows", "2", "--val-window", "256",
        "--val-every", "256", "--clone-episodes", "4", "--clone-window", "256", "--clone-epochs", "20",
        "--no-whole-split"]  # the golden files hold window scores; the whole split is most of a smoke run's time


def test_an_args_json_written_before_the_recipe_loads_as_that_runs_recipe():
    old = json.loads((GOLDEN / "args.json").read_text())
    assert "version" not in old and "seeds" in old and "attention" in old  # the old flat file, as it was written
    recipe = Recipe.from_settings(old)
    # the run's command line (README.md beside the file), read by today's parser
    then = [a for a in TINY if a != "--no-whole-split"]  # the flag came after the file
    given = train.recipe_of(train.parse_args([*then, "--workload", "real", "--timesteps", "256", "--run-name",
                                              "single", "--runs-dir", old["runs_dir"], "--quiet"]))
    assert recipe == given
    assert (recipe.environment.window, recipe.environment.slots, recipe.algorithm.n_steps) == (64, 32, 64)
    assert (recipe.source.trace, recipe.source.workload, recipe.warm_start.clone) == ("lublin-256", "real", "saf")
    assert (recipe.selection.val_length, recipe.run.eval_length, recipe.name) == (256, 128, "single")


def test_the_recipe_file_has_a_version_and_reads_back_to_the_same_recipe():
    recipe = train.recipe_of(train.parse_args([*TINY, "--workload", "real", "--backfill", "none", "--seed", "7"]))
    saved = json.loads(json.dumps(recipe.settings()))
    assert saved["version"] == VERSION == 2
    assert Recipe.from_settings(saved) == recipe
    assert saved["backfill"] == "none" and saved["seed"] == 7 and "seeds" not in saved  # flat, one run's


def test_sections_are_frozen_and_a_replace_is_checked_again():
    recipe = Recipe()
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.environment.window = 3
    assert recipe.replace(seed=4).run.seed == 4 and recipe.run.seed == 0
    with pytest.raises(cli.UsageError, match="--envs must be at least 1, not 0"):
        recipe.replace(envs=0)


def test_flags_and_recipes_pickle_for_runs_in_other_processes():
    import pickle

    args = train.parse_args(["--trace", "lublin-256", "--seed", "3"])
    assert pickle.loads(pickle.dumps(args)) == args
    assert pickle.loads(pickle.dumps(train.recipe_of(args))) == train.recipe_of(args)


def test_the_dropped_attention_flag_becomes_the_scorers_keyword():
    old = {"attention": 2, "policy_kwargs": '{"hidden": [8]}', "algo": "ppo", "clone": ""}
    recipe = Recipe.from_settings(old)
    assert json.loads(recipe.network.policy_kwargs) == {"attention": 2, "hidden": [8]}
    assert Recipe.from_settings({"attention": 0}).network.policy_kwargs == ""
    with pytest.raises(cli.UsageError, match="--attention need --algo ppo --network scorer"):
        Recipe.from_settings({"attention": 2, "algo": "dqn"})


def test_resuming_an_old_run_with_attention_keeps_it(tmp_path):
    old = json.loads((GOLDEN / "args.json").read_text())
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "args.json").write_text(json.dumps({**old, "attention": 2, "run_name": "r"}))
    args = train.parse_args(["--runs-dir", str(tmp_path), "--run-name", "r", "--resume", "--timesteps", "512"])
    recipe = args.recipe
    assert json.loads(recipe.network.policy_kwargs) == {"attention": 2}
    assert recipe.run.timesteps == 512 and recipe.environment.window == 64 and recipe.run.resume


@pytest.mark.parametrize(("settings", "message"), [
    ({"action": "guarded", "backfill": "none"}, "--action guarded chooses among EASY's backfill candidates"),
    ({"teach": "runtimes"}, "--teach fits a residual's correction"),
    ({"kl_coef": 1.0, "ent_coef": 0.01}, "--kl-coef takes the place of the entropy bonus"),
    ({"val_fraction": 1.0}, "--val-fraction must be between 0 and 1 \\(both excluded\\), not 1.0"),
    ({"prior_temperature": 0.0}, "--prior-temperature must be > 0, not 0.0"),
    ({"kl_coef": -1.0}, "--kl-coef must be >= 0, not -1.0"),
    ({"learning_rate": 0.0}, "--learning-rate must be > 0"),
    ({"gae_lambda": 1.5}, "--gae-lambda must be between 0 and 1, not 1.5"),
    ({"val_length": 1}, "--val-window must be at least 2, not 1"),
    ({"sample_pool": 10, "window": 64}, "--sample-pool \\(10\\) must be 0 or at least"),
    ({"prior": "saf", "clone": "fcfs"}, "--prior replaces the cloned warm start"),
    ({"resume": True, "overwrite": True}, "pick one"),
    ({"reward": "squared"}, "--reward must be one of"),
])
def test_each_rule_names_the_flag_to_change(settings, message):
    with pytest.raises(cli.UsageError, match=message):  # the sections' own, the rules across them, or the names'
        resolve(Recipe.from_settings({"trace": "lublin-256", **settings}))


def _bsld(per_window: Path) -> pd.DataFrame:
    d = pd.read_csv(per_window)
    d = d[d["kind"].isin(["agent", "untrained", "cloned"])]
    return pd.DataFrame({"scheduler": d["kind"], "window": d["window"], "bsld": d["bsld"]}).reset_index(drop=True)


def _same_as_before(run_dir: Path, golden: str) -> None:
    got, want = _bsld(run_dir / "eval" / "per_window.csv"), pd.read_csv(GOLDEN / f"{golden}.csv")
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-9, atol=1e-9)


def _run(cmd, timeout=900):
    done = subprocess.run([sys.executable, "-m", *cmd], capture_output=True, text=True, cwd=REPO, timeout=timeout)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def test_the_golden_check_can_fail(tmp_path):
    run = tmp_path / "r"
    (run / "eval").mkdir(parents=True)
    d = pd.read_csv(GOLDEN / "train_real.csv")
    d.insert(1, "kind", d["scheduler"])
    d.loc[0, "bsld"] *= 1 + 1e-6
    d.to_csv(run / "eval" / "per_window.csv", index=False)
    with pytest.raises(AssertionError):
        _same_as_before(run, "train_real")


@pytest.mark.slow
def test_train_gives_the_numbers_of_before(tmp_path):
    """On the real workload; tests/test_experiments.py checks the synthetic one (train_synthetic) on its own run, and
    tests/test_study.py the quick study's runs."""
    _run(["experiments.train", *TINY, "--workload", "real", "--timesteps", "256", "--run-name", "train_real",
          "--runs-dir", str(tmp_path), "--quiet"])
    _same_as_before(tmp_path / "train_real", "train_real")


@pytest.mark.slow
def test_seeds_and_the_sweep_give_the_numbers_of_before(tmp_path):
    _run(["experiments.train", *TINY, "--workload", "real", "--timesteps", "256", "--seeds", "0", "1", "--workers",
          "2", "--run-name", "multi", "--runs-dir", str(tmp_path / "seeds"), "--quiet"])
    _run(["experiments.sweep", "--seeds", "0", "1", "--workloads", "real", "--", *TINY, "--timesteps", "300",
          "--runs-dir", str(tmp_path / "sweep"), "--quiet"])
    for seed in (0, 1):
        _same_as_before(tmp_path / "seeds" / f"multi-s{seed}", f"seeds_s{seed}")
        _same_as_before(tmp_path / "sweep" / f"lublin-256-real-ppo-s{seed}", f"sweep_s{seed}")
    assert (tmp_path / "seeds" / "multi-seeds" / "summary.csv").exists()


@pytest.mark.slow
def test_the_recipe_sweep_gives_the_numbers_of_before(tmp_path):
    """Its attention variant was ``--attention 2`` then and is ``--policy-kwargs '{"attention": 2}'`` now."""
    _run(["experiments.recipe_sweep", "--seeds", "0", "--variants", "default", "tuned-residual-attn", "--workers", "1",
          "--check-windows", "1", "--out", str(tmp_path), "--", *TINY, "--workload", "real", "--timesteps", "256",
          "--quiet"])
    got, want = pd.read_csv(tmp_path / "runs.csv"), pd.read_csv(GOLDEN / "recipe_sweep_runs.csv")
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_the_sweep_on_ray_gives_the_numbers_of_before(tmp_path):
    out = _run(["experiments.sweep", "--backend", "ray", "--seeds", "0", "1", "--workloads", "real", "--", *TINY,
                "--timesteps", "300", "--runs-dir", str(tmp_path)], timeout=300).stdout
    assert "lublin-256-real-ppo-s0" in out and "lublin-256-real-ppo-s1" in out
    for seed in (0, 1):
        assert (tmp_path / f"lublin-256-real-ppo-s{seed}" / "eval" / "summary.csv").exists()
        _same_as_before(tmp_path / f"lublin-256-real-ppo-s{seed}", f"sweep_s{seed}")
