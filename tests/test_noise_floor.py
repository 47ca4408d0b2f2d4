"""``experiments.noise_floor``: near-copies of ``tuned`` on the evaluation's test windows.

The reference's score is checked against the evaluation's own path (``experiments.evaluate.run_heuristics``, which
builds its windows and its ``tuned`` row separately), and the near-copies' spread against the asked-for sd.
"""

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from baselines import tuned
from experiments import evaluate, noise_floor
from hpcgym import machines, traces

REPO = Path(__file__).resolve().parents[1]
warnings.filterwarnings("ignore", category=UserWarning)


def test_near_copies_scale_each_weight_by_a_lognormal_factor():
    w = (1.0, 2.0, 0.5, 0.1)
    np.testing.assert_array_equal(noise_floor.near_copies(w, 0.0, 3, 0), np.tile(w, (3, 1)))
    logs = np.log(noise_floor.near_copies(w, 0.2, 4000, 1) / w)
    assert np.allclose(logs.std(0), 0.2, atol=0.01) and np.allclose(logs.mean(0), 0, atol=0.01)
    assert not np.allclose(logs[:, 0], logs[:, 1])  # each weight its own factor


def test_copies_at_sd_0_score_tuneds_evaluation_row(tmp_path):
    out = subprocess.run([sys.executable, "-m", "experiments.noise_floor", "--trace", "lublin-256", "--sd", "0",
                          "--draws", "2", "--out", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    draws = pd.read_csv(tmp_path / "draws.csv")
    real = traces.load("lublin-256")
    test = traces.split(real, "test")
    starts = traces.window_starts(len(test), 1024, 20, 0)
    recs = evaluate.run_heuristics(test, machines.get(real.attrs["machine"]), starts, 1024, backfills=("easy",))
    per_window = [r["bsld"].mean() for r in recs if r["scheduler"].iat[0] == "tuned+easy"]
    assert len(per_window) == 20
    np.testing.assert_allclose(draws["bsld"], np.mean(per_window), rtol=1e-12)
    np.testing.assert_allclose(draws[["a", "b", "c", "d"]].to_numpy()[0],
                               tuned.weights_of(tuned.named("tuned", "lublin-256", "easy")))
    assert "draws_better" in (tmp_path / "summary.md").read_text() and (tmp_path / "noise_floor.png").stat().st_size


def test_a_trace_without_a_fit_is_one_error_line(tmp_path):
    swf = tmp_path / "mine.swf"
    swf.write_text("".join(f"{i} {i * 60} 0 600 4 -1 -1 4 1200 -1 1 1 1 -1 -1 -1 -1 -1\n" for i in range(1, 50)))
    out = subprocess.run([sys.executable, "-m", "experiments.noise_floor", "--trace", str(swf), "--machine", "64"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2 and "no tuned fit for mine.swf" in out.stderr and "baselines.tune" in out.stderr


def test_the_runs_median_is_placed_among_the_draws():
    runs = pd.DataFrame({"run": ["a", "b", "c", "a"], "kind": ["agent", "agent", "agent", "cloned"],
                         "bsld": [7.0, 9.5, 10.5, 10.0]})
    table = noise_floor.summarize(10.0, np.array([8.0, 9.0, 11.0, 12.0]), runs).set_index("row")
    assert table.loc["median of 3 runs (agent)", "bsld"] == 9.5
    assert table.loc["median of 3 runs (agent)", "draws_better"] == 0.5  # 8 and 9 of the four draws
    assert table.loc["a (agent)", "draws_better"] == 0.0 and table.loc["tuned", "draws_better"] == 0.5
    assert not any(row.startswith("median of 1") for row in table.index)  # one cloned run: no median row
