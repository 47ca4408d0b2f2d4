"""The arrivals generator split into sub-models samples as the single module did, bit for bit, and loads its saves.

The golden hashes and saves were written by ``tests/arrivals_golden.py`` on the code at commit 19ae773, before the
split (see that file). Same fit seed, same sample seed: the same job table, byte for byte, with the same repairs.
"""

from __future__ import annotations

import json
import shutil
import sys
import warnings
from pathlib import Path

import pytest

from synth.base import Synthesizer, fit_key

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import arrivals_golden as golden  # noqa: E402  (a script beside the tests, not a package)

DATA = HERE / "data" / "arrivals_golden"
EXPECTED = json.loads((DATA / "golden.json").read_text())


@pytest.mark.parametrize("name", list(golden.CASES))
def test_the_split_generator_samples_as_the_single_module_did(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the readers' "dropped invalid jobs"
        model = golden.fit(name)
    found = golden.describe(model, golden.CASES[name][3])
    want = EXPECTED[name]
    assert found["numbers"] == want["numbers"]  # exactly: JSON keeps a float's every bit
    assert found["hashes"] == want["hashes"]


@pytest.mark.parametrize("name", golden.SAVED)
def test_saves_of_the_single_module_load_and_sample_the_same(name, tmp_path):
    """A fit saved by the code before the split (its pickle names ``synth.arrivals._Kernel``) loads, samples the
    same tables, and saved again by the split code, loads and samples the same once more."""
    folder = tmp_path / name
    shutil.copytree(DATA / "saved" / name, folder)
    old = Synthesizer.load(folder)
    lengths = golden.CASES[name][3]
    assert golden.describe(old, lengths)["hashes"] == EXPECTED[name]["hashes"]
    again = Synthesizer.load(old.save(tmp_path / "again"))
    assert golden.describe(again, lengths)["hashes"] == EXPECTED[name]["hashes"]


def test_fit_keys_are_unchanged():
    """The fit cache's keys of arrivals fits are the single module's (revision 7 kept): fits cached before the split
    are found. Keys computed by ``synth.base.fit_key`` at commit 19ae773."""
    from hpcgym.testing import make_jobs

    assert fit_key(make_jobs(golden.DEGENERATE["burst"]), "arrivals", {}, 0) == "26967d62d8285721"
    assert fit_key(golden._outage_log(), "arrivals", {"slow": 0.0}, 0) == "45b27206437abdb7"


def test_a_changed_sample_changes_the_hash():
    """The hash the golden test compares sees a one-second change in one job (so the test can fail)."""
    model = golden.fit("toy-burst")
    jobs = model.sample(20, seed=0)
    before = golden.sample_hash(jobs)
    jobs.loc[3, "run"] = int(jobs.loc[3, "run"]) + 1
    assert golden.sample_hash(jobs) != before
