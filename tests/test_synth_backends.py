"""The SDV 2.x and REaLTabFormer synthesizers on a small budget: fit, sample, seeds, save/load, and no network.

Each model is fitted once per module on the first 400 jobs of Theta's train split with tiny networks and 1-2 epochs,
with every internet socket blocked. A backend that is not installed FAILS here (with the pip extra to install):
these tests are the check that the ``[synth]`` and ``[rtf]`` extras work.
"""

from __future__ import annotations

import json
import socket
import sys
import urllib.request

import numpy as np
import pandas as pd
import pytest

import synth
from hpcgym import jobs as jobtable
from hpcgym import traces
from hpcgym.errors import DependencyNotInstalled
from synth.base import MANIFEST, Synthesizer

N_TRAIN = 400
N_SAMPLE = 200
TINY: dict[str, dict] = {
    "gaussiancopula": {},
    "ctgan": {"epochs": 2, "batch_size": 100, "embedding_dim": 16, "generator_dim": [32, 32],
              "discriminator_dim": [32, 32]},
    "tvae": {"epochs": 2, "batch_size": 100, "embedding_dim": 16, "compress_dims": [32, 32],
             "decompress_dims": [32, 32]},
    "copulagan": {"epochs": 2, "batch_size": 100, "embedding_dim": 16, "generator_dim": [32, 32],
                  "discriminator_dim": [32, 32]},
    "realtabformer": {"gpt2": {"n_layer": 1, "n_embd": 32, "n_head": 2}, "epochs": 1, "batch_size": 32,
                      "gen_batch": 128},
}
#: the package each model needs, and the extra that installs it
BACKEND = {"gaussiancopula": ("sdv", "synth"), "ctgan": ("sdv", "synth"), "tvae": ("sdv", "synth"),
           "copulagan": ("sdv", "synth"), "realtabformer": ("realtabformer", "rtf")}
#: the backend's own file(s) in a save directory
SAVED = {"gaussiancopula": "sdv_synthesizer.pkl", "ctgan": "sdv_synthesizer.pkl", "tvae": "sdv_synthesizer.pkl",
         "copulagan": "sdv_synthesizer.pkl", "realtabformer": "rtf/*/rtf_model.pt"}
NAMES = list(TINY)
INTEGER_COLUMNS = ("job_id", "submit", "run", "walltime", "nodes", "procs", "user", "group", "queue")


class NetworkBlocked(OSError):
    """Raised by the blocked socket functions."""


@pytest.fixture(scope="module")
def offline():
    """Block every internet connection and name lookup for the module; yield the list of attempts."""
    attempts: list[str] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def refuse(what: str):
        attempts.append(what)
        raise NetworkBlocked(f"network access attempted in an offline test: {what}")

    def connect(self, address, *args):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            refuse(f"connect {address}")
        return real_connect(self, address, *args)

    def connect_ex(self, address, *args):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            refuse(f"connect_ex {address}")
        return real_connect_ex(self, address, *args)

    def getaddrinfo(host, *args, **kwargs):
        refuse(f"getaddrinfo {host}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", connect)
        mp.setattr(socket.socket, "connect_ex", connect_ex)
        mp.setattr(socket, "getaddrinfo", getaddrinfo)
        mp.setattr(socket, "create_connection", lambda address, *a, **k: refuse(f"create_connection {address}"))
        yield attempts


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny networks on a small shared CPU: one thread is much faster than two contending OpenMP threads."""
    try:
        import torch
    except ImportError:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def train_jobs() -> pd.DataFrame:
    return traces.split(traces.load("theta"), "train").iloc[:N_TRAIN]


@pytest.fixture(scope="module")
def fitted(train_jobs, offline):
    """``fitted(name)``: the model fitted once (seed 0) on the train jobs, offline."""
    cache: dict[str, Synthesizer] = {}

    def get(name: str) -> Synthesizer:
        if name not in cache:
            try:
                cache[name] = synth.get(name, **TINY[name]).fit(train_jobs, seed=0)
            except DependencyNotInstalled as exc:
                package, extra = BACKEND[name]
                pytest.fail(f"{name}: backend {package!r} is not installed ({exc}); "
                            f"pip install 'hpcgym[{extra}]' (see pyproject.toml)")
        return cache[name]

    return get


@pytest.mark.parametrize("name", NAMES)
def test_backend_is_installed(name):
    package, extra = BACKEND[name]
    try:
        __import__(package)
    except ImportError as exc:
        pytest.fail(f"{name} needs {package!r}, which does not import ({exc}): pip install 'hpcgym[{extra}]'")


@pytest.mark.parametrize("name", NAMES)
def test_fit_and_sample_give_a_valid_job_table(name, fitted, train_jobs, offline):
    model = fitted(name)
    assert model.fitted and model.fit_seconds > 0
    assert model.max_nodes == int(train_jobs["nodes"].max())
    out = model.sample(N_SAMPLE, seed=1)
    jobtable.validate(out, max_nodes=model.max_nodes)
    assert len(out) == N_SAMPLE
    for col in INTEGER_COLUMNS:
        assert pd.api.types.is_integer_dtype(out[col]), f"{name}: {col} is {out[col].dtype}"
    assert (out["run"] > 0).all() and (out["walltime"] > 0).all() and (out["nodes"] >= 1).all()
    assert out["submit"].is_monotonic_increasing and out["submit"].iloc[0] == 0
    assert set(out["status"].astype(str)) <= set(jobtable.STATUSES)
    assert out.attrs["name"] == f"{name}-synthetic" and isinstance(out.attrs["postprocess"], dict)
    # the samples come from the training distribution's support (numeric columns clipped or rejected)
    assert out["nodes"].max() <= train_jobs["nodes"].max()
    assert offline == [], f"{name} tried to reach the network: {offline}"


@pytest.mark.parametrize("name", NAMES)
def test_sampling_is_seeded(name, fitted):
    model = fitted(name)
    first = model.sample(N_SAMPLE, seed=3)
    pd.testing.assert_frame_equal(first, model.sample(N_SAMPLE, seed=3))
    assert not first.equals(model.sample(N_SAMPLE, seed=4))
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    pd.testing.assert_frame_equal(model.sample(50, seed=rng_a), model.sample(50, seed=rng_b))


@pytest.mark.parametrize("name", NAMES)
def test_fit_is_seeded(name, train_jobs, fitted, offline):
    model = fitted(name)
    again = synth.get(name, **TINY[name]).fit(train_jobs, seed=0)
    pd.testing.assert_frame_equal(model.sample(N_SAMPLE, seed=5), again.sample(N_SAMPLE, seed=5))
    assert offline == [], f"{name} tried to reach the network: {offline}"


@pytest.mark.parametrize("name", NAMES)
def test_save_load_round_trip(name, fitted, tmp_path, offline):
    model = fitted(name)
    path = model.save(tmp_path / name)
    manifest = json.loads((path / MANIFEST).read_text())
    assert manifest["name"] == name and manifest["params"] == model.params
    package, _ = BACKEND[name]
    assert manifest["versions"][package], manifest["versions"]
    assert list(path.glob(SAVED[name])), sorted(p.name for p in path.rglob("*"))
    loaded = Synthesizer.load(path)
    assert type(loaded) is type(model) and loaded.max_nodes == model.max_nodes
    assert loaded.trace_hash == model.trace_hash
    out = loaded.sample(N_SAMPLE, seed=1)
    jobtable.validate(out, max_nodes=loaded.max_nodes)
    pd.testing.assert_frame_equal(out, model.sample(N_SAMPLE, seed=1))
    # saving again into the same folder replaces the backend files
    model.save(path)
    pd.testing.assert_frame_equal(Synthesizer.load(path).sample(20, seed=2), model.sample(20, seed=2))
    assert offline == [], f"{name} tried to reach the network: {offline}"


def test_network_is_blocked_here(offline):
    with pytest.raises(OSError, match="network access attempted"):
        urllib.request.urlopen("https://huggingface.co", timeout=1)
    assert offline
    offline.clear()


@pytest.mark.parametrize(("name", "module"), [("tvae", "sdv.single_table"), ("realtabformer", "realtabformer")])
def test_missing_backend_names_the_extra(name, module, train_jobs, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    with pytest.raises(DependencyNotInstalled, match=rf"hpcgym\[{BACKEND[name][1]}\]"):
        synth.get(name, **TINY[name]).fit(train_jobs)


@pytest.mark.parametrize("name", NAMES)
def test_default_params_are_json(name):
    model = synth.get(name)
    assert json.loads(json.dumps(model.params)) == model.params
    assert model.name == name


@pytest.mark.parametrize("name", ["ctgan", "realtabformer"])
def test_bad_parameter_is_named(name, train_jobs):
    with pytest.raises(TypeError, match="bogus"):
        synth.get(name, bogus=1).fit(train_jobs)
