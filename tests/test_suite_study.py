"""python -m experiments.study --suite at smoke size: its answer checked by hand against its own per-window file."""

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from experiments import suite_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    cmd = [sys.executable, "-m", "experiments.study", "--suite", "--quick", "--traces", "theta", "mustang",
           "--sources", "real,lublin", "--out", str(out / "s"), "--cache", str(out / "cache")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / "s", cmd, done.stdout


def test_the_answer_is_the_pooled_ratio_of_its_per_window_file(study):
    folder, _, stdout = study
    per_window = pd.read_csv(folder / "bench" / "per_window.csv")
    sums = per_window.groupby(["log", "scheduler"])["bsld"].sum().unstack()
    answer = pd.read_csv(folder / "answer.csv").set_index(["learner", "source"])
    for learner in ("tuned", "saf-learned", "tuned-learned"):
        by_hand = math.exp(np.mean([math.log(sums.loc[log, f"{learner}/lublin"] / sums.loc[log, f"{learner}/real"])
                                    for log in ("theta", "mustang")]))
        row = answer.loc[(learner, "lublin")]
        assert row["ratio"] == pytest.approx(by_hand, rel=1e-12)
        assert row["lo"] <= by_hand <= row["hi"] and row["logs"] == 2 and row["windows"] == 12
        assert row["answer"] == suite_study.verdict(row["ratio"], row["lo"], row["hi"])
    assert "trained on lublin" in stdout and (folder / "report.md").is_file()


def test_each_source_got_its_own_fits(study):
    folder, _, _ = study
    for log in ("theta", "mustang"):
        for source in ("real", "lublin"):
            for name in (f"{source}-easy.json", f"{source}.npz", f"{source}-easy-learned.json", f"{source}.json"):
                assert (folder / "fits" / log / name).is_file(), (log, name)
    real = json.loads((folder / "fits" / "theta" / "real-easy.json").read_text())
    lublin = json.loads((folder / "fits" / "theta" / "lublin-easy.json").read_text())
    assert (real["trace"], lublin["trace"]) == ("theta/real", "theta/lublin")  # each fitted on its own table
    assert real["start_bsld"] != lublin["start_bsld"] and real["evaluations"] == lublin["evaluations"]


def test_a_rerun_reuses_every_fit(study):
    folder, cmd, _ = study
    before = {p: p.stat().st_mtime_ns for p in (folder / "fits").rglob("*") if p.suffix in (".npz", ".json")
              and not p.name.endswith(("real.json", "lublin.json"))}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())  # nothing fitted again


def test_verdicts():
    assert suite_study.verdict(0.99, 0.96, 1.03) == "as good as real"
    assert suite_study.verdict(1.02, 0.93, 1.08) == "can't tell"
    assert suite_study.verdict(1.2, 1.1, 1.3) == "worse"


def test_fidelity_vs_usefulness_by_hand():
    """Three logs x two generators: the metric (lower is better) ranks the ratios exactly: rho_oriented = 1."""
    fidelity = pd.DataFrame([{"log": log, "source": s, "metric": "m", "section": "x", "better": "lower", "value": v}
                             for log, s, v in [("a", "g1", 0.1), ("a", "g2", 0.5), ("b", "g1", 0.2),
                                               ("b", "g2", 0.6), ("c", "g1", 0.3), ("c", "g2", 0.7)]])
    per_log = pd.DataFrame([{"log": log, "scheduler": f"tuned/{s}", "reference": "tuned/real", "ratio": r}
                            for log, s, r in [("a", "g1", 1.0), ("a", "g2", 1.4), ("b", "g1", 1.1),
                                              ("b", "g2", 1.5), ("c", "g1", 1.2), ("c", "g2", 1.6)]])
    table = suite_study.fidelity_vs_usefulness(fidelity, per_log, n_boot=200)
    row = table.set_index(["learner", "metric"]).loc[("tuned", "m")]
    assert row["rho_oriented"] == pytest.approx(1.0) and row["pairs"] == 6 and row["logs"] == 3


@pytest.mark.slow
def test_the_residual_agents_are_trained_per_source_and_judged_on_their_log(tmp_path):
    cmd = [sys.executable, "-m", "experiments.study", "--suite", "--quick", "--traces", "theta", "--sources",
           "real,lublin", "--learners", "tuned", "--agents", "--agent-sources", "real,lublin", "--no-fidelity",
           "--out", str(tmp_path / "s"), "--cache", str(tmp_path / "cache")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    per_window = pd.read_csv(tmp_path / "s" / "bench" / "per_window.csv")
    agents = per_window[per_window["kind"] == "agent"]
    assert set(agents["scheduler"]) == {"residual/real/s0", "residual/lublin/s0"} and set(agents["log"]) == {"theta"}
    sums = agents.groupby("scheduler")["bsld"].sum()
    row = pd.read_csv(tmp_path / "s" / "answer_agents.csv").iloc[0]
    assert row["ratio"] == pytest.approx(sums["residual/lublin/s0"] / sums["residual/real/s0"], rel=1e-12)
