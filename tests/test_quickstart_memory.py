"""The quick start's memory (issue 55, item 7): a warm start's demonstrations held compactly, with the same fit, and
the kernels compiled in a child process when a fresh clone has none cached.

``python benchmarks/quickstart_memory.py`` measures the whole command; these tests check the two mechanisms.
"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
import warnings

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO

from agents import pretrain
from agents.policies import ScorerPolicy
from baselines import priorities
from hpcgym import jit
from hpcgym.env import SchedulingEnv

pytestmark = pytest.mark.filterwarnings("ignore:.*dropped")


def _env() -> SchedulingEnv:
    return SchedulingEnv(machine="theta", workload="theta", window=256, split="train", backfill="easy")


def _dense(env: SchedulingEnv, episodes: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The demonstrations as plain stacked arrays (the observations as the environment gives them)."""
    obs, masks, actions = [], [], []
    for o, a in pretrain.played(env, priorities.get("saf"), episodes):
        obs.append(o)
        masks.append(env.action_masks())
        actions.append(a)
    return np.stack(obs), np.stack(masks), actions


def test_compact_observations_read_back_exactly():
    env = _env()
    obs, masks, actions = _dense(env, 3)
    got_obs, got_masks, got_actions = pretrain.demonstrations(env, priorities.get("saf"), 3)
    assert len(got_obs) == len(obs) == len(actions) > 100 and got_obs.shape == obs.shape
    np.testing.assert_array_equal(got_obs[np.arange(len(obs))], obs)
    some = np.random.default_rng(0).permutation(len(obs))[:77]
    np.testing.assert_array_equal(got_obs[some], obs[some])
    np.testing.assert_array_equal(got_masks, masks)
    assert got_actions.tolist() == actions


def test_demonstrations_take_a_fraction_of_their_dense_size():
    """Dense, 20 episodes of 256 jobs take (decisions x 129 x 8 x 4) bytes, twice while a list of them is stacked;
    held compactly, a queue of a few jobs keeps a few rows."""
    env = _env()
    pretrain.demonstrations(env, priorities.get("saf"), 1)  # compiled and warmed
    tracemalloc.start()
    obs, masks, _ = pretrain.demonstrations(env, priorities.get("saf"), 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    dense = len(obs) * 129 * 8 * 4
    assert len(obs) > 1000 and peak < 0.3 * dense, (peak, dense)


def test_a_clone_fitted_on_compact_demonstrations_is_the_dense_fit():
    env = _env()
    dense = _dense(env, 4)
    compact = pretrain.demonstrations(env, priorities.get("saf"), 4)
    models = []
    for demos in (dense, compact):
        model = MaskablePPO(ScorerPolicy, env, seed=0)
        pretrain.fit_clone(model, demos[0], demos[1], np.asarray(demos[2]), epochs=3, batch_size=64, seed=0)
        models.append(model)
    for a, b in zip(models[0].policy.parameters(), models[1].policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert pretrain.accuracy(models[0], *dense[:2], np.asarray(dense[2])) == pretrain.accuracy(models[1], *compact)


def test_a_fresh_cache_is_compiled_in_a_child_process(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(jit, "FOLDER", tmp_path)
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    assert not jit.compiled() and jit.compile_apart()
    assert calls == [[sys.executable, "-c", "from hpcgym import jit; jit.compile_kernels()"]]
    (tmp_path / "sim_x").mkdir()
    (tmp_path / "sim_x" / "loop.run-10.py311.nbi").write_bytes(b"")  # a kernel's index: compiled already
    assert jit.compiled() and not jit.compile_apart() and len(calls) == 1
    monkeypatch.setattr(jit, "FOLDER", None)  # the user's NUMBA_CACHE_DIR: left alone
    assert not jit.compile_apart() and len(calls) == 1


def test_the_quick_start_compiles_apart_before_it_reads_anything(monkeypatch):
    from experiments import train

    order = []
    monkeypatch.setattr(jit, "compiled", lambda folder=None: False)
    monkeypatch.setattr(jit, "compile_apart", lambda: order.append("compile") or True)

    def stop(recipe):
        order.append("train")
        raise SystemExit(0)

    monkeypatch.setattr("experiments.training.loop.train_and_evaluate", stop)
    with warnings.catch_warnings(), pytest.raises(SystemExit):
        warnings.simplefilter("ignore")
        train.main(["--workload", "synthetic"])
    assert order == ["compile", "train"]
