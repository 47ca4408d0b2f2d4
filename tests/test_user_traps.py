"""Small traps a new user met: Gymnasium ids without `import hpcgym`, warnings that point at the user's code,
sampled tables that name their machine, policy names in simulate, footnotes for identical rows."""

import gzip
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd

from hpcgym import machines, traces
from hpcgym.sim import simulate

REPO = Path(__file__).resolve().parents[1]


def test_gymnasium_finds_the_ids_through_the_module_prefix():
    code = ("import gymnasium, sys; env = gymnasium.make('hpcgym:hpcgym/lublin256-v0', window=64); "
            "v = gymnasium.make_vec('hpcgym:hpcgym/lublin256-v0', num_envs=2, vectorization_mode='vector_entry_point',"
            " window=64); print(type(env.unwrapped).__name__, type(v).__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.stdout.split() == ["SchedulingEnv", "SchedulingVectorEnv"], done.stderr[-2000:]


def test_the_dropped_jobs_warning_points_at_the_callers_line(tmp_path):
    part = tmp_path / "sdsc-part.swf"  # not the bundled file (whose known cleaning is not warned about): a part of it
    part.write_bytes(b"".join(gzip.open(traces.path_of("sdsc-sp2")).readlines()[:5000]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traces.read(str(part))
    assert any("dropped" in str(w.message) for w in caught)
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}


def test_a_sampled_table_names_its_machine():
    import synth

    train = traces.split(traces.load("lublin-256"), "train")
    fake = synth.get("arrivals", max_nodes=256).fit(train).sample(64, seed=0)
    assert machines.get(fake.attrs["machine"]).nodes == 256


def test_simulate_takes_a_policy_name():
    jobs = traces.window(traces.load("lublin-256"), 64, rng=0)
    pd.testing.assert_frame_equal(simulate(jobs, "lublin-256", "saf"), simulate(jobs, "lublin-256", "SAF"))


def test_evaluation_footnotes_identical_rows_and_the_monitor_is_json(tmp_path):
    from experiments import evaluate

    per_window, per_job = evaluate.evaluate_on_test("theta", {}, windows=2, length=256, seed=0, progress=False)
    table = evaluate.write_results(tmp_path, per_window, per_job, "measured")
    notes = evaluate.identical_rows(per_window)
    assert any(n.startswith("f1+none and f1+easy are identical") for n in notes)
    text = (tmp_path / "summary.md").read_text()  # the table first, then what was measured and the notes
    assert text.startswith("Reference: ") and "\n\nmeasured\nNote: " in text and len(table)
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.vec import HpcgymVecEnv

    env = VecMonitor(HpcgymVecEnv.make("lublin256-v0", 2, window=32, compare_with="fcfs"), str(tmp_path / "m"),
                     info_keywords=("compare_json",))
    env.reset()
    for _ in range(200):
        env.step(env.env_method("action_masks")[0].nonzero()[0][:1].repeat(2))
    env.close()
    rows = pd.read_csv(tmp_path / "m.monitor.csv", skiprows=1)
    assert len(rows) and set(json.loads(rows["compare_json"].iat[0])) == {"fcfs"}
