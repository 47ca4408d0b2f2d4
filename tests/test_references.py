"""The reference rows: the tuned priority (its score, fit, files and CLI), the clairvoyant row and the headroom."""

import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from baselines import references, tuned
from hpcgym import machines, traces
from hpcgym.sim import heuristics, simulate
from hpcgym.sim.policy import KEY, KEY_MINUS_LOG_R, KEY_PLUS_LOG_R


def small_train():
    warnings.simplefilter("ignore")
    return traces.split(traces.load("sdsc-sp2").iloc[:6000], "train")


def test_the_score_by_hand():
    # a log r + b log n + c log walltime - d w/h, with r the estimate; scaled by |a| into the engine's key.
    pol = tuned.policy([2.0, 1.0, 0.5, 3.0], "last2")
    assert pol.code == KEY_PLUS_LOG_R and pol.predictor == "last2"
    jobs = pd.DataFrame({"nodes": [4, 1], "walltime": [100, 3600], "submit": [0, 7200]})
    expected = np.array([(np.log(4) + 0.5 * np.log(100) + 0) / 2, (0 + 0.5 * np.log(3600) + 3.0 * 2) / 2])
    np.testing.assert_allclose(pol.keys(jobs), expected)
    assert tuned.policy([-1, 0, 0, 0], "last2").code == KEY_MINUS_LOG_R
    assert tuned.policy([0, 1, 0, 0], "last2").code == KEY


def test_saf_is_a_point_of_the_family():
    # (1, 1, 0, 0) on the walltimes orders as SAF: the same schedule.
    warnings.simplefilter("ignore")
    jobs = traces.window(traces.load("sdsc-sp2"), 500, start=2000)
    saf = simulate(jobs, "sdsc-sp2", "saf", "easy")["start"].to_numpy()
    family = simulate(jobs, "sdsc-sp2", tuned.policy([1, 1, 0, 0], "walltime"), "easy")["start"].to_numpy()
    assert np.array_equal(saf, family)


def test_fit_never_worse_than_its_start_and_round_trips(tmp_path):
    fit = tuned.fit(small_train(), 128, "easy", ("last2",), windows=4, length=300, evaluations=24, progress=False)
    assert fit.tuning_bsld <= fit.start_bsld and min(fit.weights.values()) >= 0
    path = tuned.save(fit, tmp_path / "x-easy.json")
    again = tuned.load(path)
    assert again == fit and again.policy().description == fit.policy().description
    assert tuned.find("x", "easy", search=[tmp_path]) == fit and tuned.find("x", "none", search=[tmp_path]) is None
    # The same seed gives the same weights.
    assert tuned.fit(small_train(), 128, "easy", ("last2",), windows=4, length=300, evaluations=24,
                     progress=False).weights == fit.weights


def test_a_broken_fit_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "theta-easy.json"
    bad.write_text(json.dumps({"trace": "theta"}))
    with pytest.raises(ValueError, match="baselines.tune"):
        tuned.load(bad)


def test_the_bundled_fits_exist_and_were_made_on_the_train_split():
    for trace in ("theta", "sdsc-sp2", "hpc2n"):
        for backfill in ("easy", "none"):
            fit = tuned.find(trace, backfill, search=[tuned.BUNDLED])
            assert fit is not None and fit.backfill == backfill and "baselines.tune" in fit.command
            assert fit.predictor in ("last2", "median5")


def test_tune_cli(tmp_path):
    out = tmp_path / "tuned.json"
    cmd = [sys.executable, "-m", "baselines.tune", "--trace", "lublin-256", "--backfill", "easy", "--windows", "2",
           "--window", "200", "--evaluations", "10", "--predictors", "last2", "--out", str(out), "--quiet"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "tuning bsld" in text and tuned.load(out).command.startswith("python -m baselines.tune --trace lublin-256")
    bad_cmd = [c if c != "last2" else "oracle" for c in cmd]
    bad = subprocess.run(bad_cmd, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "oracle" in bad.stderr


def test_clairvoyant_is_the_best_classic_heuristic_told_the_runtimes():
    warnings.simplefilter("ignore")
    jobs = traces.load("sdsc-sp2")
    windows = [traces.window(jobs, 300, start=s) for s in (1000, 9000)]
    cell, which = references.clairvoyant(windows, machines.get("sdsc-sp2"), "easy")
    # Independently: every classic heuristic with exact runtimes, by simulate.
    means = {p.name: np.mean([simulate(w, "sdsc-sp2", p, "easy", predictor="exact")["bsld"].mean() for w in windows])
             for p in heuristics.CLASSIC}
    assert which == min(means, key=means.get)
    assert references.mean_bsld(cell) == pytest.approx(means[which])


def test_headroom_by_hand():
    table = pd.DataFrame({
        "scheduler": ["saf+easy", "sjf+easy", "clairvoyant+easy", "tuned+easy", "agent", "saf+none"],
        "backfill": ["easy", "easy", "easy", "easy", "easy", "none"],
        "bsld": [10.0, 12.0, 2.0, 8.0, 11.0, 20.0],
    })
    share = references.headroom(table)
    # B = 10 (saf+easy, the best classic), C = 2: (10 - x) / 8.
    assert share.tolist()[:5] == [0.0, -0.25, 1.0, 0.25, -0.125]
    assert np.isnan(share.iat[5])  # no clairvoyant row without backfilling here
