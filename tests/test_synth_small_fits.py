"""Fitting on the smallest tables a fit accepts (10 jobs): it works without numpy's warnings, or says why not."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import synth
from hpcgym import traces
from hpcgym.testing import TOY, make_jobs

REPO = Path(__file__).resolve().parents[1]
#: 10-job tables whose columns are constant somewhere: one submit burst, equal gaps and one request, all equal
DEGENERATE = {
    "burst": [(0, 100 * (k + 1), 200 * (k + 1), k % 3 + 1) for k in range(10)],
    "equal-gaps": [(10 * k, 100, 100, 2) for k in range(10)],
    "identical": [(0, 100, 100, 2)] * 10,
}


CASES = [("arrivals", case) for case in DEGENERATE] + [("lublin", "identical"), ("gaussiancopula", "identical")]


@pytest.mark.parametrize("model, case", CASES)
def test_fits_on_ten_degenerate_jobs_raise_no_warning(model, case):
    jobs = make_jobs(DEGENERATE[case])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a leaked RuntimeWarning fails the test
        fitted = synth.get(model, max_nodes=TOY.nodes).fit(jobs, seed=0)
        sample = fitted.sample(20, seed=0)
    assert len(sample) == 20 and sample["nodes"].max() <= TOY.nodes


def test_fewer_than_ten_jobs_is_a_clear_error():
    with pytest.raises(ValueError, match="arrivals: need at least 10 jobs to fit, got 9"):
        synth.get("arrivals").fit(make_jobs(DEGENERATE["burst"][:9]))
    # the CLI fits the train split: 7 of 10 jobs is the same error, one line (tests/test_cli.py checks the form)


def test_a_log_without_two_submits_within_twelve_hours_is_a_clear_error():
    daily = make_jobs([(13 * 3600 * k, 100, 200, 2) for k in range(12)])  # one job every 13 h: all outages
    with pytest.raises(ValueError, match=r"arrivals: every gap between the 12 training jobs' submits is over 43,200 s"):
        synth.get("arrivals", max_nodes=TOY.nodes).fit(daily)


def test_the_cli_fits_ten_jobs_quietly(tmp_path):
    rows = make_jobs(DEGENERATE["equal-gaps"], machine=TOY)
    traces.write_swf(rows, tmp_path / "ten.swf", machine=TOY)
    run = [sys.executable, "-m", "synth.fit", "--trace", str(tmp_path / "ten.swf"), "--machine", "4"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([*run, "--split", "all", "--out", str(tmp_path / "m")], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr[-2000:]
