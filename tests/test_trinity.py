"""The Trinity model reproduces the published OpenTrinity statistics (synth/trinity.py, docs/trinity.md)."""

import numpy as np
import pytest

import synth
from hpcgym import jobs as jobtable
from hpcgym import machines
from synth.fidelity import hourly_counts
from synth.trinity import JOBS, TrinityModel, TrinitySynthesizer


@pytest.fixture(scope="module")
def sample():
    return TrinityModel().sample(JOBS, seed=0)  # the trace's own size: 25,237 jobs


def _night(jobs):
    hour = ((jobs["submit"] + jobs.attrs["unix_start_time"]) // 3600) % 24
    return ((hour >= 19) | (hour < 7)).to_numpy()


def test_published_statistics(sample):
    """Each published value, with the tolerance docs/trinity.md states."""
    days = sample["submit"].iat[-1] / 86400
    assert 85 <= days <= 95  # 25,237 jobs in three months
    assert sample["user"].nunique() == 88
    assert sample["nodes"].min() >= 2  # multi-node jobs
    assert np.mean(sample["nodes"] <= 512) == pytest.approx(0.90, abs=0.02)  # 90% use 1-16K cores
    assert np.mean(sample["run"] <= 6 * 3600) == pytest.approx(0.90, abs=0.02)  # 90% last up to 6 h
    assert 30 * 3600 <= sample["run"].max() <= 32 * 3600 + 60  # the longest: 32 h (killed: plus seconds)
    assert hourly_counts(sample).max() < 40  # fewer than 40 submissions in any hour


def test_diurnal_cycle_with_larger_longer_jobs_at_night(sample):
    night = _night(sample)
    assert (~night).mean() > 0.6  # the 12 day hours get most submissions
    assert sample["nodes"][night].mean() > 1.3 * sample["nodes"][~night].mean()
    assert np.median(sample["run"][night]) > 1.3 * np.median(sample["run"][~night])


def test_valid_for_trinity_and_deterministic(sample):
    trinity = machines.get("trinity")
    assert (trinity.nodes, trinity.cores_per_node) == (9408, 32)
    jobtable.validate(sample, trinity.nodes)
    assert (sample["procs"] == 32 * sample["nodes"]).all()
    assert sample.equals(TrinityModel().sample(JOBS, seed=0))
    assert not sample.iloc[:500].equals(TrinityModel().sample(500, seed=1))
    killed = sample["run"] > sample["walltime"]
    assert (sample["status"][killed] == "timeout").all() and 0.03 < killed.mean() < 0.15


def test_load_calibration_and_synthesizer_interface(tmp_path):
    jobs = TrinityModel(load=0.6).sample(8000, seed=3)
    assert jobtable.offered_load(jobs, 9408) == pytest.approx(0.6, rel=0.15)
    model = synth.get("trinity")
    assert isinstance(model, TrinitySynthesizer) and model.machine.name == "trinity"
    fake = model.sample(300, seed=5)  # no fit needed: the model has no data to learn from
    jobtable.validate(fake, 9408)
    assert fake.attrs["machine"] == "trinity" and (fake["procs"] == 32 * fake["nodes"]).all()
    model.save(tmp_path / "m")
    assert synth.base.Synthesizer.load(tmp_path / "m").sample(300, seed=5).equals(fake)
    with pytest.raises(ValueError, match="9408"):
        TrinitySynthesizer(max_nodes=128)
