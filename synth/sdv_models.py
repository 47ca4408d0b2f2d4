"""SDV 2.x single-table synthesizers (GaussianCopula, CTGAN, TVAE, CopulaGAN) behind :class:`~synth.base.Synthesizer`.

Needs the ``[synth]`` extra (SDV is under the Business Source License; SDV 2.0 and its rdt/copulas/sdmetrics pin
``pandas<3``). Each model learns the training table of :mod:`synth.features` as one SDV table: ``interarrival``,
``nodes``, ``run`` and ``walltime`` as ``numerical`` (SDV 2 would detect low-cardinality integers as ``ordinal``),
``user``, ``status``, ``hour`` and ``dow`` as ``categorical``. SDV's own min/max clipping and rounding stay on; the
shared post-processing of :mod:`synth.postprocess` runs after it.

Constructor parameters go to the SDV synthesizer unchanged (``SDVModel(epochs=10, batch_size=200)``); the class
defaults below are merged in first, and the merged set is what the manifest records. They are lists and numbers
only, so they survive the JSON manifest. The defaults are for a CPU. Costs measured on Theta's train split (16k
rows, 48 users) with one torch thread; a per-epoch cost grows with the one-hot width of the categorical columns (the
number of users), and the project's notes measured up to 30 CPU-s (CTGAN) and 1.4 CPU-s (TVAE) per epoch per 10k
rows elsewhere. On a small shared CPU ``torch.set_num_threads(1)`` can be much faster than contending threads.

============== =========================================================================================
model          cost on a CPU and the trade-off of the defaults
============== =========================================================================================
gaussiancopula no epochs: 2.3 CPU-s to fit 16k rows (the notes: about 17 CPU-s for 100k). The fastest, and a strong
               baseline for the marginals; its copula misses non-Gaussian dependence.
ctgan          about 5 CPU-s of preprocessing plus 2.6 CPU-s per epoch (SDV's (256, 256) networks, batch 500).
               The default is 100 epochs (about 5 CPU-min) instead of SDV's 300; raise ``epochs`` (and keep
               ``enable_gpu``) on a GPU, where quality keeps improving with more.
tvae           about 3 CPU-s of preprocessing plus 0.6 CPU-s per epoch: SDV's default 300 epochs (about 3 CPU-min).
copulagan      CTGAN's cost plus the copula transforms (about 1 CPU-s more): same default as ``ctgan``.
============== =========================================================================================

Seeds: ``fit(seed=...)`` seeds NumPy, Python and torch around the fit (the global generators are restored after).
Sampling is deterministic given the seed: each batch resets SDV's sampling state and seeds the model with a draw
from the caller's generator (SDV has no public seeded sampling: it is ``_set_random_state``, used here).
Saving uses SDV's ``save`` (cloudpickle) and loading ``sdv.utils.load_synthesizer``.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from synth import features
from synth.base import Synthesizer, require

#: the SDV table name (SDV 2 takes and returns ``{table_name: frame}``)
TABLE = "jobs"
#: the backend file inside a save directory
FILE = "sdv_synthesizer.pkl"
EXTRA = "synth"


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed Python's, NumPy's and torch's global generators for the block, and restore them after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:
        torch = None
    try:
        if torch is None:
            yield
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def metadata() -> Any:
    """The SDV 2 :class:`~sdv.metadata.Metadata` of the training table (sdtypes set, not detected)."""
    meta = require("sdv.metadata", EXTRA)
    columns = {c: {"sdtype": "numerical"} for c in features.NUMERIC}
    columns.update({c: {"sdtype": "categorical"} for c in features.CATEGORICAL})
    return meta.Metadata.load_from_dict({"tables": {TABLE: {"columns": columns}}, "METADATA_SPEC_VERSION": "V2"})


class SDVModel(Synthesizer):
    """Base of the SDV models: subclasses name the SDV class and their default parameters."""

    name = "sdv"
    packages = ("numpy", "pandas", "sdv", "rdt", "copulas", "ctgan", "torch")
    revision = 2  # 2: a table without walltime estimates gives samples without them (walltime = run)
    learns_walltime = True
    #: class name in :mod:`sdv.single_table`
    sdv_class: ClassVar[str] = ""
    #: parameters merged under the caller's (JSON-serializable)
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, max_nodes: int | None = None, **params: Any):
        super().__init__(max_nodes, **{**self.defaults, **params})
        self._synth: Any = None

    def _new(self) -> Any:
        module = require("sdv.single_table", EXTRA)
        try:
            return getattr(module, self.sdv_class)(metadata(), **self.params)
        except TypeError as exc:
            raise TypeError(f"{self.name}: bad parameter for sdv {self.sdv_class}: {exc}") from exc

    def _fit(self, table: pd.DataFrame, jobs: pd.DataFrame, rng: np.random.Generator) -> None:
        synth = self._new()
        with seeded(int(rng.integers(2**31))):
            synth.fit({TABLE: table[list(features.COLUMNS)]})
        self._synth = synth

    def _sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        seed = int(rng.integers(2**31))
        synth = self._synth
        synth.reset_sampling()  # the transformers' random states back to their post-fit values
        synth._set_random_state(seed)  # private: SDV 2 has no public seeded sampling
        with seeded(seed):
            out = synth.sample(n)[TABLE]
        return out[list(features.COLUMNS)].reset_index(drop=True)

    def _save(self, path: Path) -> None:
        self._synth.save(str(path / FILE))

    def _load(self, path: Path) -> None:
        utils = require("sdv.utils", EXTRA)
        self._synth = utils.load_synthesizer(str(path / FILE))


class GaussianCopulaModel(SDVModel):
    """SDV's Gaussian copula: parametric marginals (beta by default) tied by a Gaussian copula. No training loop."""

    name = "gaussiancopula"
    sdv_class = "GaussianCopulaSynthesizer"
    defaults: ClassVar[dict[str, Any]] = {"default_distribution": "beta"}


class CTGANModel(SDVModel):
    """SDV's CTGAN (conditional tabular GAN); see the module docstring for the CPU cost of ``epochs``."""

    name = "ctgan"
    sdv_class = "CTGANSynthesizer"
    defaults: ClassVar[dict[str, Any]] = {"epochs": 100, "batch_size": 500}


class TVAEModel(SDVModel):
    """SDV's TVAE (tabular variational autoencoder): about 4x cheaper per epoch than CTGAN on a CPU."""

    name = "tvae"
    sdv_class = "TVAESynthesizer"
    defaults: ClassVar[dict[str, Any]] = {"epochs": 300, "batch_size": 500}


class CopulaGANModel(SDVModel):
    """SDV's CopulaGAN: CTGAN on copula-transformed numerical columns; CTGAN's cost per epoch."""

    name = "copulagan"
    sdv_class = "CopulaGANSynthesizer"
    defaults: ClassVar[dict[str, Any]] = {"epochs": 100, "batch_size": 500, "default_distribution": "beta"}
