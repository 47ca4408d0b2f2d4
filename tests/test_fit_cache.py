"""synth.cache.FitCache: one key for a fit, atomic saves, and a refused save fitted again."""

from __future__ import annotations

import pandas as pd
import pytest

import synth
from hpcgym import traces
from synth.base import fit_key
from synth.cache import FitCache


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return traces.split(traces.load("lublin-256"), "train").iloc[:2000]


def test_a_fit_is_saved_once_and_found_again(tmp_path, table, monkeypatch):
    cache = FitCache(tmp_path / "cache")
    said = []
    first = cache.fitted("lublin", "lublin", table, seed=3, max_nodes=256, announce=said.append)
    folder = tmp_path / "cache" / f"lublin-lublin-{fit_key(table, 'lublin', {}, 3)}"
    assert cache.folder("lublin", "lublin", table, {}, 3) == folder and cache.holds(folder)
    assert len(said) == 1 and [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary left

    def no_fit(*a, **k):
        raise AssertionError("fitted again")

    monkeypatch.setattr(synth, "get", no_fit)
    again = cache.fitted("lublin", "lublin", table, seed=3, max_nodes=256, announce=said.append)
    assert len(said) == 1
    pd.testing.assert_frame_equal(again.sample(300, seed=1), first.sample(300, seed=1))


def test_a_damaged_save_is_fitted_again_and_replaced(tmp_path, table):
    cache = FitCache(tmp_path)
    cache.fitted("t", "lublin", table, seed=0, max_nodes=256)
    folder = cache.folder("t", "lublin", table, {}, 0)
    state = next(p for p in folder.iterdir() if p.name != "manifest.json")
    state.write_bytes(b"damaged")
    with pytest.warns(UserWarning, match="not using the cached fit"):
        assert cache.load(folder) is None
    with pytest.warns(UserWarning):
        cache.fitted("t", "lublin", table, seed=0, max_nodes=256)
    assert cache.load(folder) is not None  # the new save replaced the damaged one


def test_a_save_another_process_finished_first_is_kept(tmp_path, table):
    cache = FitCache(tmp_path)
    model = synth.get("lublin", max_nodes=256).fit(table, seed=0)
    folder = cache.save(model, tmp_path / "fit")
    stamp = (folder / "manifest.json").stat().st_mtime_ns
    cache.save(model, folder)
    assert (folder / "manifest.json").stat().st_mtime_ns == stamp
    cache.save(model, folder, replace=True)
    assert (folder / "manifest.json").stat().st_mtime_ns != stamp


def test_a_replacing_save_that_fails_leaves_the_old_save_whole(tmp_path, table, monkeypatch):
    cache = FitCache(tmp_path)
    model = synth.get("lublin", max_nodes=256).fit(table, seed=0)
    folder = cache.save(model, tmp_path / "fit")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def full_disk(path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(model, "_save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        cache.save(model, folder, replace=True)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["fit"]  # no temporary folder left beside it


def test_a_folder_that_holds_no_save_is_replaced_by_one(tmp_path, table):
    cache = FitCache(tmp_path)
    folder = tmp_path / "fit"
    folder.mkdir()
    (folder / "half-written.pkl").write_bytes(b"\0")
    cache.save(synth.get("lublin", max_nodes=256).fit(table, seed=0), folder)
    assert cache.holds(folder) and not (folder / "half-written.pkl").exists()
