"""Trained on synthetic, tested on real: the learned predictor fitted on one table, scored on a real test split,
and its rows in the fidelity report."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from baselines.transfer import MEASURES, NO_USERS, Target
from hpcgym import machines, traces
from hpcgym.sim import simulate
from hpcgym.traces.split import head
from synth import fidelity, report_writer
from synth.lublin import LublinModel

N_JOBS = 3000  # SDSC-SP2's first 3,000 jobs: train 2,100, test 900
ONE_LOSS = ("quantile:0.5",)  # one candidate loss: no validation fits (the tests stay quick)


@pytest.fixture(scope="module")
def real() -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reader's note on the jobs it dropped
        return head(traces.load("sdsc-sp2"), N_JOBS)


@pytest.fixture(scope="module")
def splits(real) -> tuple[pd.DataFrame, pd.DataFrame]:
    return traces.split(real, "train"), traces.split(real, "test")


@pytest.fixture(scope="module")
def target(splits) -> Target:
    return Target(splits[1], 128, windows=3, length=256)


def _no_habits(jobs: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The same jobs with their runtimes dealt out at random: a user's past says nothing about the next job."""
    out = jobs.copy()
    run = np.random.default_rng(seed).permutation(jobs["run"].to_numpy())
    out["run"] = np.minimum(run, jobs["walltime"].to_numpy())
    return out


def test_rules_match_an_independent_computation(splits, target):
    _, test = splits
    starts = traces.window_starts(len(test), 256, 3, 0)
    by_hand = np.mean([simulate(traces.window(test, 256, start=s), machines.get("sdsc-sp2"), "saf", "easy")["bsld"]
                       .mean() for s in starts])
    walltime = target.rule("walltime")
    assert walltime["bsld"] == pytest.approx(by_hand)
    wall, run = test["walltime"].to_numpy(float), test["run"].to_numpy(float)
    held = np.maximum(np.minimum(run, wall), 1)
    assert walltime["mae_log"] == pytest.approx(np.mean(np.log(wall / held)))  # the walltime never under-predicts
    assert walltime["under"] == 0.0
    assert walltime["within_2x"] == pytest.approx(np.mean(wall / held <= 2))


def test_fitted_on_a_table_scores_on_the_test_split(splits, target):
    train, _ = splits
    out = target.fitted(train, losses=ONE_LOSS)
    assert set(MEASURES) <= set(out) and out["loss"] == ONE_LOSS[0] and out["fit_s"] > 0
    assert 0 < out["mae_log"] < 5 and 0 <= out["under"] <= 1 and 0 < out["within_2x"] <= 1 and out["bsld"] >= 1


def test_a_table_without_users_or_too_short_is_not_fitted(splits, target):
    train, _ = splits
    anonymous = target.fitted(train.assign(user=-1), losses=ONE_LOSS)
    assert all(math.isnan(anonymous[m]) for m in MEASURES) and anonymous["loss"] == NO_USERS
    short = target.fitted(train.iloc[:50], losses=ONE_LOSS)
    assert all(math.isnan(short[m]) for m in MEASURES) and short["loss"].startswith("n/a")


def test_runtimes_without_habits_train_a_worse_predictor(splits, target):
    train, _ = splits
    real = target.fitted(train, losses=ONE_LOSS)
    shuffled = target.fitted(_no_habits(train), losses=ONE_LOSS)
    assert shuffled["mae_log"] > real["mae_log"] + 0.1
    assert shuffled["within_2x"] < real["within_2x"]


# ---- the fidelity report's rows ------------------------------------------------------------------------------
ROWS = [m for m, metric in fidelity.METRICS.items() if metric.section == "prediction"]


@pytest.fixture(scope="module")
def refs(splits, target) -> fidelity.References:
    return fidelity.prepare(*splits, seed=0, predictor=lambda table: target.fitted(table, losses=ONE_LOSS))


def test_prediction_rows_lower_is_better_and_floor_is_the_train_fit(splits, refs, target):
    for m in ROWS:
        assert (fidelity.METRICS[m].section, fidelity.METRICS[m].better) == ("prediction", "lower")
    floor = target.fitted(splits[0], losses=ONE_LOSS)
    assert refs.floor["values"][ROWS[0]] == pytest.approx(floor["mae_log"])
    assert refs.floor["values"][ROWS[1]] == pytest.approx(floor["bsld"])


def test_a_sample_without_habits_scores_worse_than_the_floor(splits, refs):
    values = fidelity.score(refs, _no_habits(splits[0]))["values"]
    assert fidelity.beats(refs.floor["values"][ROWS[0]], values[ROWS[0]], "lower")


def test_prediction_rows_are_na_without_users_or_predictor(real, splits, refs):
    lublin = LublinModel(128).sample(len(splits[1]), seed=0)
    out = fidelity.evaluate(real, lublin, seed=0, refs=refs)
    table = out["table"].set_index("metric")
    assert all(math.isnan(table.at[m, "synthetic"]) and NO_USERS in table.at[m, "note"] for m in ROWS)
    assert "## 10. Runtime predictor" in report_writer.render_markdown(out)
    plain = fidelity.References(refs.train, refs.test, refs.machine, 0, refs.floor, refs.bootstrap)
    table = fidelity.make_table(plain, {"synthetic": fidelity.score(plain, splits[0])}).set_index("metric")
    assert all(math.isnan(table.at[m, "synthetic"]) and "no predictor given" in table.at[m, "note"] for m in ROWS)


# ---- the benchmark's table -----------------------------------------------------------------------------------
def _benchmark():
    """``benchmarks/synth_predictor.py`` as a module (it imports its sibling ``synth_fidelity`` by name)."""
    import importlib.util
    import sys
    from pathlib import Path

    where = Path(__file__).resolve().parents[1] / "benchmarks"
    sys.path.insert(0, str(where))
    try:
        spec = importlib.util.spec_from_file_location("synth_predictor", where / "synth_predictor.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(where))
    return module


def test_benchmark_summary_means_ranges_and_failures(tmp_path):
    bench = _benchmark()
    rows = [{"generator": "real train", "mae_log": 1.0, "under": 0.5, "within_2x": 0.5, "bsld": 3.0, "loss": "a"},
            {"generator": "g", "sample": 0, "mae_log": 1.0, "under": 0.2, "within_2x": 0.4, "bsld": 5.0, "loss": "a"},
            {"generator": "g", "sample": 1, "mae_log": 2.0, "under": 0.4, "within_2x": 0.2, "bsld": 7.0, "loss": "b"},
            {"generator": "anon", "sample": 0, **dict.fromkeys(MEASURES, float("nan")), "loss": NO_USERS},
            {"generator": "broken", "error": "RuntimeError: out of time"}]
    table = bench.write(rows, tmp_path / "rows.csv", "t")
    assert list(pd.read_csv(tmp_path / "rows.csv")["generator"]) == ["real train", "g", "g", "anon", "broken"]
    lines = {line.split(" | ")[0].strip("| "): line for line in bench.summary(table).splitlines()[2:]}
    assert "| g | 2 | 1.500 [1.000-2.000] | 0.300 [0.200-0.400] |" in lines["g"] and "| a, b |" in lines["g"]
    assert lines["anon"].startswith("| anon | 1 | n/a | n/a | n/a | n/a | n/a (no user ids) |")
    assert lines["broken"].startswith("| broken | 0 |") and "out of time" in lines["broken"]
