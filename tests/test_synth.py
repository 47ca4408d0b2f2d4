import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ks_2samp

import synth
from baselines.priorities import FCFS
from hpcgym import jobs as jobtable
from hpcgym import traces
from hpcgym.sim import simulate
from synth import features, postprocess
from synth.arrivals import ArrivalAwareSynthesizer
from synth.base import Synthesizer
from synth.lublin import LublinModel

warnings.filterwarnings("ignore", category=UserWarning)


@pytest.fixture(scope="module")
def theta_train():
    return traces.split(traces.load("theta"), "train")


@pytest.fixture(scope="module")
def arrivals_model(theta_train):
    return ArrivalAwareSynthesizer(max_nodes=4392).fit(theta_train, seed=0)


def lag1(jobs):
    x = np.log1p(np.diff(jobs["submit"].to_numpy()).astype(float))
    return np.corrcoef(x[1:], x[:-1])[0, 1]


def pow2_share(jobs):
    n = jobs["nodes"].to_numpy()
    return float(((n & (n - 1)) == 0).mean())


def test_features_round_trip(theta_train):
    back = features.to_jobs(features.to_training(theta_train), theta_train.attrs["unix_start_time"], cores_per_node=64)
    for col in ("submit", "nodes", "run", "walltime", "procs"):
        assert np.array_equal(back[col].to_numpy(), theta_train[col].to_numpy()), col


def test_postprocess_repairs_and_rejects_with_counts():
    raw = pd.DataFrame({"interarrival": [5.4, -3, 10, 7], "nodes": [2.2, 4, 0, 9], "run": [10, 0, 5, 5],
                        "walltime": [60, 60, 60, 60], "user": [1, 1, 1, 1], "status": ["completed"] * 4,
                        "hour": [1, 1, 1, 1], "dow": [0, 0, 0, 0]})
    kept, counts = postprocess.clean(raw, max_nodes=8)
    assert kept["nodes"].tolist() == [3]  # nodes round up
    assert counts == {"rounded interarrival": 1, "rounded nodes": 1, "negative interarrival set to 0": 1,
                      "rejected: run <= 0": 1, "rejected: nodes <= 0": 1, "rejected: nodes > machine": 1}


def test_arrivals_meets_fidelity_targets_on_theta(theta_train, arrivals_model):
    assert arrivals_model.fit_seconds < 120
    fake = arrivals_model.sample(len(theta_train), seed=1)
    jobtable.validate(fake, 4392)
    assert (fake["procs"] == 64 * fake["nodes"]).all()  # derived column
    assert abs(pow2_share(fake) - pow2_share(theta_train)) <= 0.05
    menu = theta_train["walltime"].value_counts().index[:10]
    real_menu, fake_menu = theta_train["walltime"].isin(menu).mean(), fake["walltime"].isin(menu).mean()
    assert abs(real_menu - fake_menu) <= 0.05
    assert abs(lag1(fake) - lag1(theta_train)) <= 0.1
    killed = lambda df: (df["run"] > df["walltime"]).mean()  # noqa: E731
    assert abs(killed(fake) - killed(theta_train)) <= 0.03  # the spike of jobs killed at their walltime
    real_wait = simulate(theta_train, "theta", FCFS, "easy")["wait"]
    fake_wait = simulate(fake, "theta", FCFS, "easy")["wait"]
    assert ks_2samp(real_wait, fake_wait).statistic <= 0.10


def test_arrivals_is_seeded_and_saves(tmp_path, arrivals_model):
    a = arrivals_model.sample(500, seed=3)
    assert a.equals(arrivals_model.sample(500, seed=3))
    assert not a.equals(arrivals_model.sample(500, seed=4))
    arrivals_model.save(tmp_path / "m")
    manifest = (tmp_path / "m" / "manifest.json").read_text()
    assert "ArrivalAwareSynthesizer" in manifest and arrivals_model.trace_hash in manifest
    assert Synthesizer.load(tmp_path / "m").sample(500, seed=3).equals(a)
    with pytest.raises(ValueError, match="whole number"):
        arrivals_model.sample(2.5)


def test_a_damaged_saved_model_is_refused_before_unpickling(tmp_path, arrivals_model):
    arrivals_model.save(tmp_path / "m")
    state = tmp_path / "m" / "state.pkl"
    state.write_bytes(state.read_bytes()[:-10])  # an interrupted save, or a swapped file
    with pytest.raises(ValueError, match="state.pkl .* not match the manifest"):
        Synthesizer.load(tmp_path / "m")


def test_a_model_saved_by_older_modelling_code_is_fitted_again(tmp_path, arrivals_model):
    import hashlib
    import json

    from synth.base import fit_key, table_hash

    arrivals_model.save(tmp_path / "m")
    manifest = tmp_path / "m" / "manifest.json"
    data = json.loads(manifest.read_text())
    assert data["revision"] == type(arrivals_model).revision == 7
    data["revision"] = 6  # as saved before users owned their requests
    manifest.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="revision 6 .* this is revision 7; fit it again"):
        Synthesizer.load(tmp_path / "m")  # the fit cache (synth.cache.FitCache) catches this and fits again
    table = arrivals_model.sample(200, seed=0)
    # the fit cache keys a revised model anew, and keeps the keys of first-revision models
    key_arrivals, key_lublin = fit_key(table, "arrivals", {}, 0), fit_key(table, "lublin", {}, 0)
    plain = json.dumps({"table": table_hash(table), "model": "lublin", "params": {}, "seed": 0}, sort_keys=True)
    assert key_lublin == hashlib.sha256(plain.encode()).hexdigest()[:16]
    plain = json.dumps({"table": table_hash(table), "model": "arrivals", "params": {}, "seed": 0}, sort_keys=True)
    assert key_arrivals != hashlib.sha256(plain.encode()).hexdigest()[:16]


def test_previous_same_key_by_hand():
    from synth.arrivals.sessions import previous_same

    assert previous_same(np.array([5, 2, 5, 5, 2, 9])).tolist() == [-1, -1, 0, 2, 1, -1]


def test_arrivals_load_calibration(theta_train):
    model = ArrivalAwareSynthesizer(max_nodes=4392, load=0.9).fit(theta_train)
    fake = model.sample(4000, seed=0)
    assert jobtable.offered_load(fake, 4392) == pytest.approx(0.9, rel=0.05)


def test_lublin_model_scales_and_calibrates():
    for nodes in (128, 9408):
        jobs = LublinModel(nodes, load=0.7).sample(3000, seed=2)
        jobtable.validate(jobs, nodes)
        assert jobtable.offered_load(jobs, nodes) == pytest.approx(0.7, rel=0.02)
        assert jobs.equals(LublinModel(nodes, load=0.7).sample(3000, seed=2))
    hours = (LublinModel(256).sample(5000, seed=0)["submit"] // 3600) % 24
    counts = np.bincount(hours, minlength=24)
    assert counts.max() > 3 * counts.min()  # the daily cycle


def test_lublin_synthesizer_and_registry(theta_train):
    model = synth.get("lublin", max_nodes=4392).fit(theta_train)
    jobtable.validate(model.sample(1000, seed=0), 4392)
    with pytest.raises(KeyError, match="Did you mean 'tvae'"):
        synth.get("tvea")
    with pytest.raises(RuntimeError, match="fit"):
        ArrivalAwareSynthesizer().sample(10)


def test_fit_and_sample_cli(tmp_path):
    model_dir, out = tmp_path / "model", tmp_path / "synth.swf.gz"
    subprocess.run([sys.executable, "-m", "synth.fit", "--trace", "sdsc-sp2", "--out", str(model_dir)],
                   check=True, capture_output=True)
    text = subprocess.run([sys.executable, "-m", "synth.sample", "--model", str(model_dir), "--jobs", "800",
                           "--machine", "sdsc-sp2", "--out", str(out)], check=True, capture_output=True, text=True)
    assert "sampled 800 jobs" in text.stdout
    jobs = traces.read(out, machine="sdsc-sp2")
    assert len(jobs) == 800 and jobs["nodes"].max() <= 128


def test_the_default_workload_is_fitted_once_per_machine_and_table():
    """``hpcgym.make(..., workload="synthetic")`` fits ``arrivals`` once per process and training table (a fit takes
    about 10 s on Theta since revision 6), and another table gets its own fit."""
    from hpcgym.machines import Machine
    from hpcgym.testing import make_jobs
    from synth.defaults import default_workload

    rows = [(i * 600, 1800, 3600, 1 + i % 3) for i in range(40)]
    machine, jobs = Machine("toy-4", 4), make_jobs(rows)
    model = default_workload(machine, jobs)
    assert isinstance(model, ArrivalAwareSynthesizer) and model.fitted
    assert default_workload(machine, jobs) is model
    assert default_workload(machine, make_jobs(rows[:30])) is not model


def test_a_tabular_model_keeps_a_log_without_estimates_without_them(tmp_path):
    """Lublin-256 has no walltime estimates (walltime = run, flagged): GaussianCopula drew the walltime column on its
    own, flagged every job as estimated and let about a quarter run past their walltime."""
    full = traces.load("lublin-256")
    table = full.iloc[:200].reset_index(drop=True)
    table.attrs = full.attrs
    assert not table["walltime_known"].any()
    model = synth.get("gaussiancopula").fit(table, seed=0)
    sample = model.sample(100, seed=0)
    assert not sample["walltime_known"].any() and (sample["walltime"] == sample["run"]).all()
    model.save(tmp_path / "gc")
    assert Synthesizer.load(tmp_path / "gc").sample(100, seed=0).equals(sample)  # the flag survives a save
    theta = traces.load("theta").iloc[:300].reset_index(drop=True)
    assert synth.get("gaussiancopula").fit(theta, seed=0).sample(50, seed=0)["walltime_known"].all()
