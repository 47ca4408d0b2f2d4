"""``--tuned``: which fit ``tuned`` means in a run, and ``--tuned workload`` fitting it on the training data only.

The weights written into a fit file here are arbitrary numbers, so a run that read the trace's bundled fit instead
would show other weights; the fit made by ``--tuned workload`` is checked to come from the training part (or the
synthetic pool) by the hash of the table it names, which no validation or test job may change.
"""

import json
import warnings

import pytest

from baselines import tuned
from experiments import train
from experiments.protocol import load_data, resolve_heuristic, tuned_flag
from experiments.recipe import naming_context, resolve
from experiments.training import parts
from hpcgym import cli
from hpcgym.workload import PooledSampler
from synth.base import table_hash

warnings.filterwarnings("ignore", category=UserWarning)

WEIGHTS = {"log_estimate": 0.5, "log_nodes": 2.0, "log_walltime": 0.25, "wait_hours": 0.125}


def fit_file(tmp_path):
    fit = tuned.Fit(trace="x", backfill="easy", predictor="last2", weights=WEIGHTS, tuning_bsld=1.0, start_bsld=2.0,
                    windows=1, length=2, seed=0, evaluations=1)
    return tuned.save(fit, tmp_path / "mine.json")


def args_of(tmp_path, *extra):
    return train.parse_args(["--trace", "lublin-256", "--workload", "real", "--features", "v1", "--order", "tuned",
                             "--baseline", "tuned", "--prior", "tuned", "--clone", "", "--runs-dir",
                             str(tmp_path / "runs"), *extra]).recipe


def test_tuned_names_the_given_fit_in_every_role(tmp_path):
    recipe = args_of(tmp_path, "--tuned", str(fit_file(tmp_path)))
    named = resolve(recipe)
    for pol in (named.prior, named.order, named.baseline):
        assert tuned.weights_of(pol) == (1.0, 4.0, 0.5, 0.25)  # the weights over that of log_estimate
        assert pol.predictor == "last2"
    assert named.predictor == "last2"  # the environment shows the prior's estimates
    bundled = resolve(recipe.replace(tuned="")).prior  # else the trace's own fit
    assert tuned.weights_of(bundled) != (1.0, 4.0, 0.5, 0.25)
    assert resolve_heuristic("saf", **naming_context(recipe.source, "easy")).name == "saf"  # others are untouched


def test_a_fit_that_cannot_be_read_is_refused_naming_the_flag(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"weights": {}}))
    with pytest.raises(cli.UsageError, match="--tuned: .*bad.json: not a tuned-priority fit"):
        args_of(tmp_path, "--tuned", str(bad))


def test_a_teacher_must_read_what_the_environment_shows_or_be_clairvoyant(tmp_path):
    recipe = args_of(tmp_path, "--clone", "tuned@exact")  # tuned's weights on the jobs' own runtimes
    assert resolve(recipe).clone.predictor == "exact" and recipe.network.prior == "tuned"
    with pytest.raises(cli.UsageError, match="--clone sjf@median5 reads median5 estimates, the environment last2's"):
        args_of(tmp_path, "--prior", "", "--predictor", "last2", "--clone", "sjf@median5")
    with pytest.raises(cli.UsageError, match="--clone: .*predictor"):
        args_of(tmp_path, "--clone", "tuned@oracle")


def test_a_prior_with_the_default_clone_is_refused_not_taught_by_it(tmp_path):
    for clone in ("saf", "sjf-last2"):  # the default, and another non-clairvoyant heuristic
        with pytest.raises(cli.UsageError, match="--prior replaces the cloned warm start: give --clone ''"):
            args_of(tmp_path, "--clone", clone)
    assert args_of(tmp_path, "--clone", "tuned").warm_start.clone == "tuned"  # the control: the prior, its own teacher
    assert args_of(tmp_path, "--clone", "saf@exact").warm_start.clone == "saf@exact"


def test_teach_needs_a_prior_and_no_clone(tmp_path):
    assert args_of(tmp_path, "--teach", "runtimes").warm_start.teach == "runtimes"
    for extra in (["--prior", ""], ["--clone", "tuned"]):
        with pytest.raises(cli.UsageError, match="--teach fits a residual's correction"):
            args_of(tmp_path, "--teach", "runtimes", *extra)
    with pytest.raises(cli.UsageError, match="--teach must be one of"):
        args_of(tmp_path, "--teach", "choices")


@pytest.fixture()
def small_budget(monkeypatch):
    monkeypatch.setattr(parts, "TUNE_BUDGET", {"windows": 2, "length": 256, "evaluations": 6})


def test_tuned_workload_fits_on_the_training_part_and_caches_it(tmp_path, small_budget):
    recipe = args_of(tmp_path, "--tuned", "workload")
    data = load_data(recipe.source, recipe.selection.val_fraction)
    done = parts.tune_on_workload(recipe, data, data.fit).source
    path = tmp_path / "runs" / "cache" / "tuned" / f"{table_hash(data.fit)}-easy.json"
    assert done.tuned == str(path.resolve()) and path.exists()
    fit = tuned.load(path)
    assert fit.windows == 2 and fit.length == 256 and "--workload real" in fit.command
    a, *rest = (fit.weights[f] for f in tuned.FEATURES)
    refit = resolve_heuristic("tuned", trace="", tuned_fit=done.tuned)
    assert tuned.weights_of(refit) == pytest.approx((1.0, *(w / a for w in rest)))
    stamp = path.stat().st_mtime_ns
    again = parts.tune_on_workload(recipe, data, data.fit).source
    assert again.tuned == done.tuned  # another seed: the cached fit
    assert path.stat().st_mtime_ns == stamp


def test_tuned_workload_fits_a_synthetic_run_on_its_pool(tmp_path, small_budget):
    recipe = args_of(tmp_path, "--tuned", "workload", "--workload", "synthetic", "--synthesizer", "lublin",
                     "--sample-pool", "3000")
    data = load_data(recipe.source, recipe.selection.val_fraction)
    workload = parts.training_workload(recipe.source, recipe.run.seed, recipe.run.runs_dir, data)
    assert isinstance(workload, PooledSampler)
    done = parts.tune_on_workload(recipe, data, workload).source
    assert done.tuned.endswith(f"{table_hash(workload.pool)}-easy.json")
    assert table_hash(workload.pool) != table_hash(data.fit)


def test_without_tuned_workload_nothing_is_fitted(tmp_path):
    recipe = args_of(tmp_path)
    assert parts.tune_on_workload(recipe, None, None) is recipe
    assert not (tmp_path / "runs" / "cache" / "tuned").exists()


def test_a_study_sees_the_recorded_fit_as_the_flag_it_asked_for(tmp_path, small_budget):
    recipe = args_of(tmp_path, "--tuned", "workload")
    data = load_data(recipe.source, recipe.selection.val_fraction)
    done = parts.tune_on_workload(recipe, data, data.fit).source
    assert tuned_flag(done.tuned) == "workload"
    assert tuned_flag(str(fit_file(tmp_path))) == str(tmp_path / "mine.json")  # a fit given by hand stays itself
    assert tuned_flag("") == ""
