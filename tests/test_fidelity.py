"""The fidelity report: building blocks, noise floors, wrong traces flagged, copies caught, the CLI runs.

The v2 semantics (test-split reference, bootstrap baseline, privacy, validity, worst scores) are in
``test_report_v2.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import sklearn  # noqa: F401  (the C2ST and DCR need it: installed by the [dev] and [synth] extras)

from hpcgym import traces
from hpcgym.traces.split import halves
from synth import fidelity
from synth.lublin import LublinModel

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def theta_train() -> pd.DataFrame:
    return traces.split(traces.load("theta"), "train")


def _copy(jobs: pd.DataFrame) -> pd.DataFrame:
    out = jobs.copy()
    out.attrs = dict(jobs.attrs)
    return out


def _shuffled_gaps(jobs: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The same jobs with their inter-arrival gaps permuted: same marginals, no arrival correlation."""
    out = _copy(jobs)
    gaps = np.random.default_rng(seed).permutation(np.diff(jobs["submit"].to_numpy()))
    out["submit"] = jobs["submit"].iat[0] + np.concatenate([[0], np.cumsum(gaps)])
    return out


# ---- building blocks -----------------------------------------------------------------------------------------
def test_ks_and_wasserstein_match_scipy():
    stats = scipy.stats
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=500), rng.normal(0.3, 1.2, size=700)
    assert fidelity.ks_statistic(a, b) == pytest.approx(stats.ks_2samp(a, b).statistic)
    assert fidelity.wasserstein(a, b) == pytest.approx(stats.wasserstein_distance(a, b))
    assert fidelity.ks_statistic(a, a) == 0.0 and fidelity.wasserstein(a, a) == 0.0


def test_arrival_stats_of_poisson_and_daily_cycle(theta_train):
    rng = np.random.default_rng(1)
    n, span = 6000, 60 * 86400
    poisson = _copy(theta_train.iloc[:n].reset_index(drop=True))
    poisson["submit"] = np.sort(rng.integers(0, span, n))
    s = fidelity.arrival_stats(poisson)
    assert s["cv"] == pytest.approx(1.0, abs=0.1)
    assert s["dispersion"] == pytest.approx(1.0, abs=0.15)
    assert abs(s["lag1_acf"]) < 0.05
    assert 0.3 < s["spectral_24h"] < 3.0
    # thinning by a strong daily cycle puts a peak at 24 h
    t = np.sort(rng.integers(0, span, 4 * n))
    keep = rng.random(t.size) < 0.5 * (1 + np.sin(2 * np.pi * t / 86400))
    cycle = _copy(theta_train.iloc[: keep.sum()].reset_index(drop=True))
    cycle["submit"] = t[keep]
    assert fidelity.arrival_stats(cycle)["spectral_24h"] > 20
    # a 2.1-day reference and a 1.9-day sample (Mustang's test split and a denser sample of as many jobs): both
    # are measured, on the same one-day segments, and a daily cycle still shows
    two, short = (cycle[cycle["submit"] < days * 86400].reset_index(drop=True) for days in (2.1, 1.9))
    pair = fidelity.arrivals(two, short)
    assert all(pair[k]["spectral_24h"] > 5 for k in ("real", "synthetic"))
    assert pair["real"]["spectral_24h"] == fidelity.arrival_stats(two, segment_days=1)["spectral_24h"]


# ---- noise floor ---------------------------------------------------------------------------------------------
def test_noise_floor_of_theta_is_small(theta_train):
    first, second = halves(theta_train)
    assert abs(len(first) - len(second)) <= 1 and len(first) + len(second) == len(theta_train)
    floor = fidelity.marginals(first, second)
    assert (floor["ks"] < 0.15).all(), floor
    assert fidelity.correlations(first, second)["mad"] < 0.05
    assert fidelity.arrivals(first, second)["hour_tv"] < 0.15


# ---- wrong traces are flagged --------------------------------------------------------------------------------
def test_lublin_on_theta_is_flagged(theta_train):
    lublin = LublinModel(4392).sample(5000, seed=0)
    first, second = halves(theta_train)
    floor = fidelity.c2st(first, second, max_rows=2000)["auc"]
    auc = fidelity.c2st(theta_train, lublin, max_rows=2000)["auc"]
    assert auc > 0.9 and auc > floor + 0.1
    ks = fidelity.marginals(theta_train, lublin)["ks"]
    assert ks["walltime"] > 2 * fidelity.marginals(first, second).at["walltime", "ks"]
    gates = fidelity.shape(theta_train, lublin)
    assert gates["menu_candidate"] < gates["menu_reference"] - 0.3  # Theta's walltime menu is not Lublin's


def test_shuffled_interarrivals_lose_their_autocorrelation(theta_train):
    real = fidelity.arrival_stats(theta_train)
    shuffled = fidelity.arrival_stats(_shuffled_gaps(theta_train))
    assert real["lag1_acf"] > 0.3
    assert abs(shuffled["lag1_acf"]) < 0.05
    assert shuffled["cv"] == pytest.approx(real["cv"])  # same gaps, so the same CV: only the order changed
    first, second = halves(theta_train)
    floor = abs(fidelity.arrival_stats(first)["lag1_acf"] - fidelity.arrival_stats(second)["lag1_acf"])
    assert abs(shuffled["lag1_acf"] - real["lag1_acf"]) > 3 * floor


# ---- copies --------------------------------------------------------------------------------------------------
def test_exact_copy_is_caught_but_indistinguishable(theta_train):
    copy = _copy(theta_train)
    assert fidelity.exact_copy_share(theta_train, copy) == 1.0
    assert fidelity.c2st(theta_train, copy, max_rows=3000)["auc"] == pytest.approx(0.5, abs=0.05)
    holdout = traces.split(traces.load("theta"), "test")
    privacy = fidelity.dcr(theta_train, copy, holdout, max_rows=1000)
    assert privacy["zero_synthetic"] == 1.0 and privacy["median_synthetic"] == 0.0
    assert privacy["median_holdout"] > 0 and privacy["below_p5_holdout"] <= 0.06


def test_c2st_separates_small_tables_that_differ():
    """24 rows per class: scikit-learn's default leaf (20 rows) could not split a fold, so every AUC was 0.5."""
    real = traces.load("sdsc-sp2").iloc[:24].reset_index(drop=True)
    longer = real.copy()
    longer["run"] *= 1000
    longer["walltime"] *= 1000
    assert fidelity.c2st(real, longer)["auc"] > 0.9  # the runtimes alone tell them apart
    assert np.isnan(fidelity.c2st(real.iloc[:9], longer.iloc[:9])["auc"])  # under two rows per fold: no score


# ---- summary table -------------------------------------------------------------------------------------------
def test_fidelity_table_rows_and_columns():
    real = traces.load("lublin-256").iloc[:2000].reset_index(drop=True)
    real.attrs = dict(traces.load("lublin-256").attrs)
    train, test = traces.split(real, "train"), traces.split(real, "test")
    synthetic = LublinModel(256).sample(len(test), seed=3)
    refs = fidelity.prepare(train, test, seed=0)
    table = fidelity.make_table(refs, {"synthetic": fidelity.score(refs, synthetic)})
    assert list(table.columns) == list(fidelity.TABLE_COLUMNS)
    assert list(table["metric"]) == list(fidelity.METRICS)
    assert set(table["better"]) == {"lower", "higher", "= train", "= test"}
    # the Lublin trace and model have no user ids: n/a everywhere (and no predictor is given)
    history = table["section"].isin(["history", "prediction"])
    assert table.loc[history, ["floor", "bootstrap", "synthetic", "test"]].isna().all().all()
    numeric = table.drop(index=table.index[(table["metric"] == "SDMetrics quality score") | history])
    # a 600-job test split has two 256-job windows: too few for a spread (NaN, and the worst value for a candidate)
    spread = numeric["metric"] == "windowed load spread gap"
    assert numeric.loc[spread, "floor"].isna().all() and np.isinf(numeric.loc[spread, "synthetic"]).all()
    assert numeric.loc[~spread, ["floor", "bootstrap", "synthetic"]].notna().all().all()
    two = fidelity.make_table(refs, {"a": fidelity.score(refs, synthetic), "b": fidelity.score(refs, None)})
    assert list(two.columns) == ["metric", "section", "better", "target", "floor", "bootstrap", "a", "b", "test",
                                 "note"]
    pd.testing.assert_series_equal(two["a"], table["synthetic"], check_names=False)
    worst = pd.Series([fidelity.worst(m) for m in fidelity.METRICS])
    assert ((two["b"] == worst) | (two["b"].isna() & worst.isna())).all()  # no sample: the worst (or n/a) everywhere


def test_missing_sdmetrics_is_reported_not_raised(monkeypatch, theta_train):
    monkeypatch.setitem(sys.modules, "sdmetrics", None)  # makes `import sdmetrics` raise ImportError
    first, second = halves(theta_train.iloc[:400])
    result = fidelity.sdmetrics_quality(first, second)
    assert result["status"] == "not installed" and np.isnan(result["score"])


# ---- report and CLI ------------------------------------------------------------------------------------------
def test_cli_writes_report_and_plots(tmp_path):
    synthetic = LublinModel(256).sample(1500, seed=7)
    swf = tmp_path / "synthetic.swf"
    traces.write_swf(synthetic, swf, machine="lublin-256")
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "synth.report", "--real", "lublin-256", "--synthetic", str(swf), "--out", str(out),
         "--jobs", "2000"],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == str(out / "report.md")
    text = (out / "report.md").read_text()
    assert "## Summary" in text and "C2ST ROC AUC" in text and "floor (train vs test)" in text
    assert "the first 600 of 1,500 jobs" in text  # a file longer than the test split is cut to its size
    for name in ("marginals.png", "correlation.png", "hourly.png", "scheduling.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in text
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_load_synthetic_rejects_unknown_spec(theta_train):
    from synth.report import load_synthetic

    with pytest.raises(ValueError, match="not a trace file"):
        load_synthetic("no-such-model-or-file", theta_train, 10)


def test_cli_scores_several_samples_of_a_model(tmp_path, capsys):
    from hpcgym import cli
    from synth import report

    argv = ["--real", "lublin-256", "--jobs", "2000", "--synthetic", "lublin", "--samples", "2",
            "--out", str(tmp_path / "report")]
    assert cli.run(report.main, argv) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "2 samples of 600 jobs (seeds 0-1)" in text and "synthetic (mean of 2)" in text
    assert "| offered load (whole trace) | = train |" in text
    # a trace file is one sample: asking for more is a usage error that names the option
    swf = tmp_path / "one.swf"
    traces.write_swf(LublinModel(256).sample(700, seed=1), swf, machine="lublin-256")
    capsys.readouterr()
    argv = ["--real", "lublin-256", "--jobs", "2000", "--synthetic", str(swf), "--samples", "3",
            "--out", str(tmp_path / "r2")]
    assert cli.run(report.main, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --samples 3: the trace file") and not (tmp_path / "r2").exists()
