"""The bench (python -m experiments.bench) at smoke size: its files, its pooled table checked by hand, its cache."""

import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments import bench, bench_log, bench_report, suite
from hpcgym import traces

ISSUE_COLUMNS = ["scheduler", "reference", "ratio", "lo", "hi", "lo_logs", "hi_logs", "logs", "windows", "noise_floor"]


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    """The last 9,000 jobs of SDSC-SP2 as a file of its own: 2 disjoint test windows of 1,024 jobs, which queue."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jobs = traces.load("sdsc-sp2")
    part = jobs.iloc[-9000:].reset_index(drop=True)
    part.attrs = dict(jobs.attrs)
    path = tmp_path_factory.mktemp("log") / "mine.swf"
    traces.write_swf(part, path)
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory, small_log):
    """One run of the real command line on two catalogued logs, one that fails the rule, and the user's file."""
    out = tmp_path_factory.mktemp("bench")
    cmd = [sys.executable, "-m", "experiments.bench", "--traces", "sdsc-sp2", "lublin-256", "mustang-2012-02",
           "--trace-file", str(small_log), "--schedulers", "saf+easy", "sjf+easy", "tuned+easy",
           "--reference", "saf+easy", "--draws", "3", "--boot", "300", "--out", str(out), "--quiet"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_it_writes_every_file_with_the_issues_columns(run):
    out, stdout = run
    for name in ("pooled.csv", "per_log.csv", "per_window.csv", "per_block.csv", "logs.csv", "leaderboard.md",
                 "forest-saf+easy.png"):
        assert (out / name).is_file(), name
    table = pd.read_csv(out / "pooled.csv")
    assert list(table.columns[:len(ISSUE_COLUMNS)]) == ISSUE_COLUMNS
    assert "noise floor" in stdout and "sjf+easy:" in stdout


def test_a_log_that_fails_the_rule_is_listed_and_a_file_joins_the_suite(run):
    out, _ = run
    logs = pd.read_csv(out / "logs.csv").set_index("log")
    assert logs.loc["mustang-2012-02", "status"] == "excluded"
    assert logs.loc["mustang-2012-02", "reason"] == "no whole test window"
    assert logs.loc["mine", "status"] == "suite" and logs.loc["mine", "windows"] == 2
    per_window = pd.read_csv(out / "per_window.csv")
    assert set(per_window.loc[per_window["scheduler"] == "saf+easy", "log"]) == {"sdsc-sp2", "lublin-256", "mine"}


def test_rows_skipped_are_said_not_lost(run):
    """tuned reads predictions: lublin-256 has no requested times, and the user's file has no tuned fit."""
    out, _ = run
    per_log = pd.read_csv(out / "per_log.csv")
    assert set(per_log.loc[per_log["scheduler"] == "tuned+easy", "log"]) == {"sdsc-sp2"}
    board = (out / "leaderboard.md").read_text()
    assert "lublin-256, tuned+easy: reads" in board and "mine, tuned+easy: no tuned fit" in board
    pooled_table = pd.read_csv(out / "pooled.csv").set_index("scheduler")
    assert pooled_table.loc["tuned+easy", "skipped"] == 2 and pooled_table.loc["tuned+easy", "logs"] == 1


def test_the_pooled_ratio_and_floor_match_a_hand_computation_from_the_per_window_file(run):
    out, _ = run
    per_window = pd.read_csv(out / "per_window.csv")
    sums = per_window.groupby(["log", "scheduler"])["bsld"].sum().unstack()
    logs = ["sdsc-sp2", "lublin-256", "mine"]
    by_hand = math.exp(np.mean([math.log(sums.loc[log, "sjf+easy"] / sums.loc[log, "saf+easy"]) for log in logs]))
    copies = [math.exp(np.mean([math.log(sums.loc[log, f"saf+easy~{j}"] / sums.loc[log, "saf+easy"])
                                for log in logs])) for j in range(3)]
    floor = max(abs(math.log(c)) for c in copies)
    table = pd.read_csv(out / "pooled.csv").set_index("scheduler")
    assert table.loc["sjf+easy", "ratio"] == pytest.approx(by_hand, rel=1e-12)
    assert table.loc["sjf+easy", "lo"] <= by_hand <= table.loc["sjf+easy", "hi"]
    assert table.loc["sjf+easy", "noise_floor"] == pytest.approx(math.expm1(floor), rel=1e-12)
    assert table.loc["saf+easy", ["ratio", "lo", "hi", "lo_logs", "hi_logs"]].tolist() == [1.0] * 5
    assert table.loc["sjf+easy", ["logs", "windows"]].tolist() == [3, 15 + 2 + 2]


def test_the_headroom_is_the_share_of_fcfs_to_clairvoyant(run):
    out, _ = run
    per_window = pd.read_csv(out / "per_window.csv")
    means = per_window[per_window["log"] == "sdsc-sp2"].groupby("scheduler")["bsld"].mean()
    share = (means["fcfs+easy"] - means["sjf+easy"]) / (means["fcfs+easy"] - means["clairvoyant+easy"])
    per_log = pd.read_csv(out / "per_log.csv").set_index(["log", "scheduler"])
    assert per_log.loc[("sdsc-sp2", "sjf+easy"), "headroom"] == pytest.approx(share)


def test_a_row_added_later_costs_only_its_own_runs(tmp_path):
    args = bench.Args(schedulers=["saf+easy"], reference=["saf+easy"], traces=["lublin-256"], draws=2, boot=200,
                      out=str(tmp_path / "b"), quiet=True)
    bench.run(args)
    first = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "b" / "cache").rglob("*.csv")}
    args.schedulers = ["saf+easy", "wfp3+easy"]
    bench.run(args)
    second = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "b" / "cache").rglob("*.csv")}
    added = sorted(set(second) - set(first))
    assert [n.split("-")[0] for n in added] == ["wfp3+easy", "wfp3+easy"]  # its windows and its stream
    assert all(second[n] == first[n] for n in first)  # nothing else was simulated again


def test_a_log_that_cannot_be_read_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.swf"
    bad.write_text("; MaxNodes: 8\n1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1\n")
    assert bench.cli.run(bench.main, ["--trace-file", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --trace-file") and "bad.swf" in err and len(err.splitlines()) == 1


def test_row_specs():
    assert bench_log.Row.parse("saf").label == "saf+easy"
    assert bench_log.Row.parse("tuned:fits/x.json+none") == bench_log.Row("tuned:fits/x.json", "none")
    with pytest.raises(ValueError, match="backfilling"):
        bench_log.Row.parse("saf+eazy")
    row = bench_log.Row.parse("mine=tuned:fits/{log}-easy.json+none")
    assert (row.label, row.backfill, row.on("theta")) == ("mine", "none", "tuned:fits/theta-easy.json")
    args = bench.Args(schedulers=["mine=saf+easy"], reference=["mine", "sjf+easy"])
    rows, refs = bench.rows_of(args)
    assert [r.label for r in refs] == ["mine", "sjf+easy"] and [r.label for r in rows] == ["mine", "sjf+easy"]


def test_the_rule():
    assert suite.admit(3, 1.5).status == suite.IN_SUITE
    assert suite.admit(3, 1.05).status == suite.EXCLUDED
    assert suite.disjoint_starts(4096, 1024) == [0, 1024, 2048, 3072]


def test_the_forest_plot_draws_each_row(tmp_path):
    per_log = pd.DataFrame({"log": ["a", "b"], "scheduler": ["x", "x"], "reference": ["r", "r"],
                            "ratio": [0.9, 1.1], "lo": [0.8, 1.0], "hi": [1.0, 1.2]})
    table = pd.DataFrame({"scheduler": ["x"], "reference": ["r"], "ratio": [0.99], "lo": [0.9], "hi": [1.1],
                          "lo_logs": [0.8], "hi_logs": [1.2], "noise_floor": [0.05]})
    path = bench_report.forest(per_log, table, "r", tmp_path / "f.png")
    assert path.stat().st_size > 1000


@pytest.mark.slow
def test_a_trained_run_is_judged_beside_its_cloned_start(tmp_path):
    tiny = ["--trace", "lublin-256", "--envs", "4", "--n-steps", "64", "--batch-size", "64", "--window", "64",
            "--slots", "32", "--val-windows", "2", "--val-window", "256", "--val-every", "256", "--clone-episodes", "4",
            "--clone-window", "256", "--clone-epochs", "5"]
    train = [sys.executable, "-m", "experiments.train", *tiny, "--no-whole-split", "--runs-dir", str(tmp_path),
             "--workload", "real", "--timesteps", "256", "--eval-windows", "0", "--run-name", "r"]
    assert subprocess.run(train, capture_output=True, text=True, timeout=900).returncode == 0
    args = bench.Args(schedulers=["saf+easy"], reference=["saf+easy"], traces=["lublin-256"], draws=0, boot=200,
                      model=[f"mine={tmp_path / 'r'}"], no_whole_split=True, out=str(tmp_path / "b"), quiet=True)
    table = bench.run(args).set_index("scheduler")
    assert {"mine", "mine (cloned, no RL)"} <= set(table.index)
    per_window = pd.read_csv(tmp_path / "b" / "per_window.csv")
    assert set(per_window.loc[per_window["scheduler"] == "mine", "kind"]) == {"agent"}
    assert len(per_window[per_window["scheduler"] == "mine"]) == 2  # lublin-256's two disjoint test windows


def test_the_cost_benchmark_runs(tmp_path):
    out = tmp_path / "cost.csv"
    done = subprocess.run([sys.executable, "benchmarks/bench_cost.py", "--traces", "lublin-256", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    table = pd.read_csv(out)
    assert len(table) == 2 and (table["wall_s"] > 0).all() and (table["peak_mib"] > 50).all()
