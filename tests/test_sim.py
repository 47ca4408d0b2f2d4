import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from simcheck import BACKFILLS, POLICY_NAMES, peak_use, workloads

from baselines import priorities
from hpcgym import metrics, traces
from hpcgym.sim import PriorityPolicy, hold_times, simulate, start_times
from hpcgym.sim.policy import KEY

FCFS = priorities.FCFS


def test_toy_schedules_by_hand(toy_jobs):
    first5 = toy_jobs.iloc[:5].reset_index(drop=True)
    # t=0: jobs 1, 2 take all 4 nodes. t=10: job 3 (4 nodes) blocks. Job 2 ends at 50; the head's shadow is 120
    # (job 1's estimate), so job 4 (1 node, ends by 70) backfills at 50 under EASY, but waits under none.
    assert start_times(first5, 4, FCFS, "none").tolist() == [0, 0, 100, 130, 130]
    assert start_times(first5, 4, FCFS, "easy").tolist() == [0, 0, 100, 50, 130]


def test_kill_at_walltime_changes_hold():
    from conftest import make_jobs

    df = make_jobs([(0, 100, 50, 4), (1, 10, 10, 4)])
    assert start_times(df, 4, FCFS).tolist() == [0, 50]
    assert start_times(df, 4, FCFS, kill_at_walltime=False).tolist() == [0, 100]
    with pytest.raises(ValueError, match="conservative"):
        start_times(df, 4, FCFS, "conservative", kill_at_walltime=False)


@settings(max_examples=150, deadline=None)
@given(df=workloads())
def test_invariants_on_random_workloads(df):
    hold = hold_times(df)
    submit = df["submit"].to_numpy()
    for name in POLICY_NAMES:
        for backfill in BACKFILLS:
            start, first = start_times(df, 8, priorities.get(name), backfill, reservations=True)
            assert (start >= submit).all()
            assert peak_use(start, start + hold, df["nodes"].to_numpy()) <= 8
            if backfill == "conservative" or (backfill == "easy" and name == "fcfs"):
                has = first >= 0
                assert (start[has] <= first[has]).all(), (name, backfill)
            if backfill == "conservative":
                assert (first >= 0).all()
            assert np.array_equal(start, start_times(df, 8, priorities.get(name), backfill))


def test_no_backfill_fcfs_starts_in_submit_order():
    df = traces.window(traces.load("lublin-256"), 1024, rng=3)
    start = start_times(df, 256, FCFS, "none")
    assert (np.diff(start) >= 0).all()


def test_backfilling_helps_fcfs_on_real_windows():
    warnings.simplefilter("ignore")
    df = traces.window(traces.load("sdsc-sp2"), 2048, start=10_000)
    bsld = {b: simulate(df, "sdsc-sp2", FCFS, b)["bsld"].mean() for b in ("none", "easy", "conservative")}
    assert bsld["easy"] < bsld["none"] and bsld["conservative"] < bsld["none"]


def test_custom_static_policy_matches_builtin():
    df = traces.window(traces.load("lublin-256"), 512, rng=0)
    sjf_like = PriorityPolicy("my-sjf", KEY, key=lambda jobs: jobs["walltime"].to_numpy())
    for backfill in BACKFILLS:
        assert np.array_equal(start_times(df, 256, sjf_like, backfill), start_times(df, 256, priorities.SJF, backfill))


def test_clear_errors():
    df = traces.window(traces.load("lublin-256"), 16, rng=0)
    with pytest.raises(ValueError, match="backfill must be one of"):
        start_times(df, 256, FCFS, "greedy")
    with pytest.raises(ValueError, match="machine has 4"):
        start_times(df.assign(nodes=8), 4, FCFS)
    with pytest.raises(ValueError, match="sorted by submit"):
        start_times(df.iloc[::-1].reset_index(drop=True), 256, FCFS)
    with pytest.raises(KeyError, match="Did you mean 'wfp3'"):
        priorities.get("wfp2")


def test_priority_formulas():
    df = pd.DataFrame({"submit": [100, 0], "walltime": [10, 1000], "nodes": [1, 8]})
    now = 1100
    w = now - df["submit"].to_numpy()
    r = df["walltime"].to_numpy()
    n = df["nodes"].to_numpy()
    np.testing.assert_allclose(priorities.WFP3.scores(now, df), -((w / r) ** 3) * n)
    np.testing.assert_allclose(priorities.UNICEP.scores(now, df), -w / (np.array([1.0, 3.0]) * r))
    np.testing.assert_allclose(priorities.F1.scores(now, df), np.log10(r) * n + 870 * np.log10([100, 1]))
    np.testing.assert_allclose(priorities.SAF.scores(now, df), r * n)
    assert priorities.FCFS.scores(now, df).tolist() == [100, 0]


def test_metrics():
    bsld = metrics.bounded_slowdown(np.array([0, 90, 5]), np.array([100, 10, 1]))
    assert bsld.tolist() == [1.0, 10.0, 1.0]
    jobs = pd.DataFrame({"job_id": [1, 2], "submit": [0, 0], "walltime": [10, 10], "nodes": [2, 2]})
    rec = metrics.records(jobs, np.array([0, 10]), np.array([10, 10]))
    assert rec["wait"].tolist() == [0, 10]
    summary = metrics.summarize(rec, 4)
    assert summary["utilization"] == pytest.approx(40 / 80)
    assert summary["bsld_max"] == 2.0 and summary["makespan"] == 20
    mean, lo, hi = metrics.bootstrap_ci([1.0, 2.0, 3.0, 4.0], seed=1)
    assert lo <= mean <= hi and mean == 2.5
    assert metrics.bootstrap_ci([1.0, 2.0, 3.0], seed=1) == metrics.bootstrap_ci([1.0, 2.0, 3.0], seed=1)


def test_baselines_cli_smoke(tmp_path):
    out = tmp_path / "jobs.csv"
    cmd = [sys.executable, "-m", "baselines.run", "--trace", "lublin-256", "--policy", "all", "--backfill", "easy",
           "--window", "256", "--windows", "3", "--seed", "1", "--out", str(out), "--quiet"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for name in POLICY_NAMES:
        assert f"{name} " in text
    rec = pd.read_csv(out)
    # every registered heuristic, and the three on the trace's learned predictions (lublin-256 ships a model)
    learned_rows = {"sjbf-learned", "sjf-learned", "saf-learned"}
    assert len(rec) == (len(priorities.POLICIES) + len(learned_rows)) * 3 * 256
    assert set(rec["policy"]) == set(priorities.POLICIES) | learned_rows and set(rec["window"]) == {0, 1, 2}
    out2 = tmp_path / "again.csv"
    subprocess.run(cmd[:-2] + [str(out2), "--quiet"], capture_output=True, text=True, check=True)
    assert out.read_bytes() == out2.read_bytes()  # same seed, same windows, same schedules


def test_sim_speed_benchmark_smoke():
    cmd = [sys.executable, "benchmarks/sim_speed.py", "--repeat", "1", "--traces", "lublin-256", "--skip-big"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "lublin-256" in text and "easy" in text


def test_sim_speed_splits_the_learned_cost_with_stand_ins_that_keep_the_schedule():
    """The two stand-in models must leave the walltimes' schedule (the benchmark checks it and fails otherwise)."""
    cmd = [sys.executable, "benchmarks/sim_speed.py", "--repeat", "1", "--traces", "mustang-2012-12", "--learned-parts"]
    lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()
    assert [line.split("FCFS+EASY")[1].split("  ")[0].strip() for line in lines] == [
        "walltimes", "features, no walk (the walltimes' schedule)", "features and walk (the walltimes' schedule)",
        "learned"]
    assert lines[0].rstrip().endswith("1.00x")
