"""Smoke-size runs of the real CLIs: train, resume, evaluate, compare, the notebook (kill -9 and an exact resume:
tests/test_resume.py; the sweep on Ray: tests/test_recipe.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from baselines import priorities

REPO = Path(__file__).resolve().parents[1]
TINY = ["--trace", "lublin-256", "--envs", "4", "--n-steps", "64", "--batch-size", "64", "--window", "64",
        "--slots", "32", "--eval-windows", "2", "--eval-window", "128", "--val-windows", "2", "--val-window", "256",
        "--val-every", "256", "--clone-episodes", "4", "--clone-window", "256", "--clone-epochs", "20"]


def train_cmd(runs, *extra, whole_split=False):
    """A smoke-size train; its evaluation skips the whole test split unless ``whole_split`` (tests/test_stream.py
    and the end-to-end test below cover it; it is most of a smoke run's time)."""
    skip = [] if whole_split else ["--no-whole-split"]
    return [sys.executable, "-m", "experiments.train", *TINY, *skip, "--runs-dir", str(runs), *extra]


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, **kw)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def num_timesteps(run_dir):
    from sb3_contrib import MaskablePPO

    return MaskablePPO.load(run_dir / "last.zip").num_timesteps


@pytest.mark.slow
def test_train_and_evaluate_end_to_end(tmp_path):
    out = run(train_cmd(tmp_path, "--workload", "synthetic", "--timesteps", "600", whole_split=True)).stdout
    run_dir = tmp_path / "lublin-256-synthetic-ppo-s0"
    assert "fcfs+easy" in out and (run_dir / "model.zip").exists()
    last = out.strip().splitlines()[-1]  # the verdict: the network kept, its start and the reference, paired CIs
    assert last.startswith("verdict: kept the ") and " x its " in last and " x the reference " in last, last
    assert (run_dir / "eval" / "summary.md").read_text().splitlines()[0] == last  # the run keeps its verdict
    assert json.loads((run_dir / "eval" / "verdict.json").read_text())["verdict"] == last
    args = json.loads((run_dir / "args.json").read_text())
    assert args["workload"] == "synthetic" and args["synthesizer"] == "arrivals"
    assert any((tmp_path / "cache").iterdir())  # the fitted synthesizer is cached
    assert list((run_dir / "tb").rglob("events.out.tfevents*"))
    summary = pd.read_csv(run_dir / "eval" / "summary.csv")
    # 3 networks; every heuristic, the tuned fit, the clairvoyant row and the three heuristics on the trace's learned
    # predictions (lublin-256 ships a model), with and without backfilling.
    assert set(summary["kind"]) == {"agent", "untrained", "cloned", "heuristic", "clairvoyant"}
    assert len(summary) == 3 + (len(priorities.POLICIES) + 2 + 3) * 2
    assert {"saf-learned+easy", "sjbf-learned+none"} <= set(summary["scheduler"])
    assert "test split" in (run_dir / "eval" / "summary.md").read_text()  # the table says what it measured
    curve = pd.read_csv(run_dir / "learning_curve.csv")
    assert curve["timesteps"].iat[0] == 0 and len(curve) >= 3 and (run_dir / "learning_curve.png").exists()
    from test_recipe import _same_as_before  # the numbers of before the recipe became one object (tests/test_recipe.py)

    _same_as_before(run_dir, "train_synthetic")
    warm = json.loads((run_dir / "warm_start.json").read_text())
    assert warm["chosen"] in ("untrained", "cloned") and 0 <= warm["clone_accuracy_validation"] <= 1
    scale = json.loads((run_dir / "scales.json").read_text())["time_scale"]
    assert args["time_scale"] == 0 and scale > 0  # the flag as given; the training environment's scale beside it
    from experiments.runs import RunFolder

    assert {a.time_scale for a in RunFolder(run_dir).agents().values()} == {scale}  # evaluation reuses it
    ev = run([sys.executable, "-m", "experiments.evaluate", "--model", str(run_dir), "--trace", "lublin-256",
              "--windows", "2", "--window", "128", "--out", str(tmp_path / "ev")]).stdout
    assert "lublin-256-synthetic-ppo-s0" in ev
    per_window = pd.read_csv(tmp_path / "ev" / "per_window.csv")
    assert per_window.groupby("scheduler")["window"].nunique().eq(2).all()


@pytest.mark.slow
def test_several_seeds_make_one_table(tmp_path):
    out = run(train_cmd(tmp_path, "--workload", "real", "--timesteps", "256", "--seeds", "0", "1", "--workers", "2",
                        "--run-name", "multi")).stdout
    tstr = run([sys.executable, "-m", "experiments.compare", str(tmp_path / "multi-s0"),
                str(tmp_path / "multi-s1")]).stdout
    assert "across seeds" in tstr and "share_ci_low" in tstr
    table = pd.read_csv(tmp_path / "multi-seeds" / "summary.csv")
    agent = table.set_index("scheduler").loc["agent"]
    assert agent["seeds"] == 2 and agent["iqr_low"] <= agent["median"] <= agent["iqr_high"] <= agent["worst_seed"]
    assert {"seeds_beating_fcfs+easy", "seeds_beating_untrained", "ci_low", "ci_high"} <= set(table.columns)
    per_seed = pd.read_csv(tmp_path / "multi-seeds" / "per_seed.csv")
    assert sorted(per_seed.loc[per_seed["scheduler"] == "agent", "seed"]) == [0, 1]
    assert (tmp_path / "multi-seeds" / "learning_curves.png").exists() and "2 seeds [0, 1]" in out


def test_seed_table_counts_seeds_against_the_start_and_the_strongest_reference():
    from experiments import seeds

    rows = [(s, name, kind, v) for s, values in enumerate([(30.0, 34.0, 33.0), (33.5, 34.0, 31.0), (31.0, 34.0, 35.0)])
            for name, kind, v in zip(("agent", "cloned", "untrained"), ("agent", "cloned", "untrained"), values,
                                     strict=True)]
    rows += [(s, name, kind, v) for s in range(3) for name, kind, v in
             (("tuned+easy", "heuristic", 32.0), ("saf+easy", "heuristic", 40.0), ("fcfs+easy", "heuristic", 70.0),
              ("clairvoyant+easy", "clairvoyant", 14.0))]
    per_seed = pd.DataFrame(rows, columns=["seed", "scheduler", "kind", "bsld"]).assign(backfill="easy", windows=20)
    assert seeds.best_reference(per_seed) == "tuned+easy"  # the clairvoyant row is no reference
    agent = seeds.table(per_seed).set_index("scheduler").loc["agent"]
    # by hand: agent 30, 33.5, 31 against cloned 34 (3 of 3), untrained 33, 31, 35 (2 of 3), tuned 32 (2 of 3)
    assert (agent["seeds_beating_cloned"], agent["seeds_beating_untrained"]) == (3, 2)
    assert (agent["seeds_beating_best_reference"], agent["seeds_beating_fcfs+easy"]) == (2, 3)


@pytest.mark.slow
def test_seed_table_refuses_runs_on_other_windows(tmp_path):
    run(train_cmd(tmp_path, "--workload", "real", "--timesteps", "256", "--run-name", "a"))
    run(train_cmd(tmp_path, "--workload", "real", "--timesteps", "256", "--run-name", "b", "--eval-windows", "3",
                  "--seed", "1"))  # another seed: the same seed twice is refused first
    bad = subprocess.run([sys.executable, "-m", "experiments.seeds", str(tmp_path / "a"), str(tmp_path / "b"),
                          "--out", str(tmp_path / "t")], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "same windows" in bad.stderr
    bad = subprocess.run([sys.executable, "-m", "experiments.compare", str(tmp_path / "a"), str(tmp_path / "b")],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "same windows" in bad.stderr


@pytest.mark.parametrize("teacher", [["--clone", "tuned@exact"], ["--clone", "", "--teach", "runtimes"]])
def test_a_taught_residual_trains_from_the_cli(tmp_path, teacher):
    out = run(train_cmd(tmp_path, "--workload", "real", "--features", "v1", "--order", "tuned", "--baseline", "tuned",
                        "--prior", "tuned", *teacher, "--timesteps", "256", "--clone-epochs", "2")).stdout
    run_dir = tmp_path / "lublin-256-real-ppo-s0"
    start = json.loads((run_dir / "warm_start.json").read_text())
    assert set(start["validation"]) == {"untrained", "prior", "cloned"}
    assert start["chosen"] == min(start["validation"], key=start["validation"].get)
    assert ("taught by tuned@exact" if teacher[1] else "taught the runtimes") in out
    table = pd.read_csv(run_dir / "eval" / "summary.csv")
    assert {"agent", "cloned", "untrained"} <= set(table["kind"])


def test_dqn_train_smoke(tmp_path):
    run(train_cmd(tmp_path, "--workload", "real", "--algo", "dqn", "--timesteps", "1200", "--eval-windows", "0",
                  "--checkpoint-every", "256"))
    run_dir = tmp_path / "lublin-256-real-dqn-s0"
    assert (run_dir / "model.zip").exists()
    steps = [int(p.name.split("_")[-2]) for p in (run_dir / "checkpoints").glob("model_[0-9]*_steps.zip")]
    buffers = [p.name for p in (run_dir / "checkpoints").glob("*replay_buffer*.pkl")]
    assert len(steps) > 1 and buffers == [f"model_replay_buffer_{max(steps)}_steps.pkl"]  # only the newest buffer


@pytest.mark.slow
def test_compare_table(tmp_path):
    for workload in ("real", "synthetic"):
        run(train_cmd(tmp_path, "--workload", workload, "--timesteps", "300"))
    runs = [str(tmp_path / f"lublin-256-{w}-ppo-s0") for w in ("real", "synthetic")]
    out = run([sys.executable, "-m", "experiments.compare", *runs, "--out", str(tmp_path / "c.csv")]).stdout
    table = pd.read_csv(tmp_path / "c.csv")
    assert list(table["trained_on"]) == ["real", "synthetic:arrivals"]
    assert {"bsld", "ci_low", "ci_high", "win_rate", "share_of_real_improvement"} <= set(table.columns)
    assert "synthetic:arrivals" in out


def test_notebook_executes_on_saved_results(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    from experiments import evaluate

    per_window, per_job = evaluate.evaluate_on_test("lublin-256", {}, windows=3, length=128, seed=0, progress=False)
    evaluate.write_csv(per_window, tmp_path / "per_window.csv")
    evaluate.write_csv(per_job, tmp_path / "per_job.csv")
    nb = nbformat.read(REPO / "experiments" / "notebooks" / "compare_slowdown.ipynb", as_version=4)
    os.environ["HPCGYM_RESULTS"] = str(tmp_path)
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}).execute()
    finally:
        del os.environ["HPCGYM_RESULTS"]
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert any(o.get("output_type") == "display_data" for o in outputs)  # the plots were drawn
    assert not any(o.get("output_type") == "error" for o in outputs)


def fails(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert done.returncode != 0
    return done.stderr


@pytest.mark.slow
def test_resume_takes_the_runs_settings_and_refuses_others(tmp_path):
    run(train_cmd(tmp_path, "--workload", "real", "--timesteps", "300", "--run-name", "r"))
    base = [sys.executable, "-m", "experiments.train", "--runs-dir", str(tmp_path)]
    run([*base, "--run-name", "r", "--resume", "--timesteps", "600"])  # no other flag repeated
    saved = json.loads((tmp_path / "r" / "args.json").read_text())
    assert saved["trace"] == "lublin-256" and saved["timesteps"] == 600 and num_timesteps(tmp_path / "r") >= 600
    monitor = (tmp_path / "r" / "monitor.csv").read_text().splitlines()
    assert sum(line.startswith("#") for line in monitor) == 1 and len(monitor) > 3  # appended, one header
    assert "contradict" in fails([*base, "--run-name", "r", "--resume", "--trace", "theta"])
    assert "did you mean r" in fails([*base, "--run-name", "rr", "--resume"])


@pytest.mark.slow
def test_run_folders_are_not_mixed(tmp_path):
    run(train_cmd(tmp_path, "--workload", "real", "--timesteps", "256", "--run-name", "r", "--eval-windows", "0"))
    assert "not empty" in fails(train_cmd(tmp_path, "--workload", "real", "--run-name", "r"))
    (tmp_path / "r" / ".lock").write_text(str(os.getppid()))  # a live process owns it
    assert "in use" in fails(train_cmd(tmp_path, "--workload", "real", "--run-name", "r", "--overwrite"))
    (tmp_path / "r" / ".lock").unlink()
    run(train_cmd(tmp_path, "--workload", "real", "--timesteps", "256", "--run-name", "r", "--overwrite",
                  "--eval-windows", "0"))
    trace = REPO / "hpcgym" / "data" / "lublin_256.swf.gz"
    run(train_cmd(tmp_path / "abs", "--workload", "real", "--timesteps", "256", "--eval-windows", "0") +
        ["--trace", str(trace)])
    assert (tmp_path / "abs" / "lublin_256-real-ppo-s0" / "model.zip").exists()


@pytest.mark.slow
def test_resume_skips_a_damaged_checkpoint(tmp_path):
    steps = ["--workload", "real", "--timesteps", "1024", "--checkpoint-every", "256", "--eval-windows", "0",
             "--run-name", "r"]
    run(train_cmd(tmp_path, *steps))
    checkpoints = sorted((tmp_path / "r" / "checkpoints").glob("*_steps.zip"), key=lambda p: p.stat().st_mtime)
    newest = checkpoints[-1]
    newest.write_bytes(newest.read_bytes()[:500])  # what a kill in the middle of a save would leave
    out = run([sys.executable, "-m", "experiments.train", "--runs-dir", str(tmp_path), "--run-name", "r", "--resume",
               "--timesteps", "1280"])
    assert "not a complete checkpoint" in out.stderr and num_timesteps(tmp_path / "r") >= 1280


class _CountingModel:
    """A stand-in synthesizer: windows of the bundled Lublin trace, and how often it was asked."""

    def __init__(self):
        from hpcgym import traces

        self.table, self.calls = traces.load("lublin-256"), 0

    def sample(self, n_jobs, seed):
        from hpcgym import traces

        self.calls += 1
        return traces.window(self.table, n_jobs, rng=seed)


def test_sample_pool_samples_once_and_is_seeded():
    from hpcgym.workload import PooledSampler

    model = _CountingModel()
    pool = PooledSampler(model, 3000, seed=7)
    windows = [pool.sample(256, seed=s) for s in range(20)]
    assert model.calls == 1 and len(pool.pool) == 3000
    assert all(len(w) == 256 and w["submit"].iat[0] == 0 for w in windows)
    assert len({int(w.attrs["window_start"]) for w in windows}) > 1  # different seeds, different windows
    again = PooledSampler(_CountingModel(), 3000, seed=7)
    pd.testing.assert_frame_equal(again.sample(256, seed=3), windows[3])
    other = PooledSampler(_CountingModel(), 3000, seed=8)
    assert not other.pool["job_id"].equals(pool.pool["job_id"])


def test_sample_pool_must_hold_the_scale_sample():
    from experiments import train
    from hpcgym.cli import UsageError

    with pytest.raises(UsageError, match="at least 1024"):
        train.parse_args(["--workload", "synthetic", "--sample-pool", "500"])
    assert train.parse_args(["--workload", "synthetic", "--sample-pool", "2048"]).recipe.source.sample_pool == 2048
