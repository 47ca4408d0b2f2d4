"""REaLTabFormer (a GPT-2 trained from scratch on the rows of the training table) behind the synthesizer interface.

Needs the ``[rtf]`` extra (``realtabformer`` 0.2.4 needs ``transformers<5`` and ``datasets<4``). The GPT-2 is
built from a config, never downloaded, so it trains and samples offline. ``user``, ``status``, ``hour`` and
``dow`` are given to REaLTabFormer as strings (one token per value) and the numeric columns as integers (tokenized
digit by digit, so a sample can fall outside the training range: :mod:`synth.postprocess` rejects what is invalid).

Parameters (JSON-serializable, recorded in the manifest):

- ``gpt2``: :class:`transformers.GPT2Config` keywords. REaLTabFormer's default 6-layer GPT-2 costs about 6 CPU-s per
  batch of 8 rows (the project's notes); the default here, ``n_layer=2, n_embd=128, n_head=4``, is at least 20x
  cheaper: one epoch of Theta's train split (16k rows, batches of 32) took 35 CPU-s with one torch thread, so the
  default ``epochs=10`` trains in about 6 CPU-min, and sampling 2000 rows takes about 4 CPU-s. Larger networks and
  more epochs (REaLTabFormer's own default is up to 1000 epochs with early stopping) fit better, on a GPU. On a
  small shared CPU ``torch.set_num_threads(1)`` can be many times faster than contending threads.
- ``epochs``, ``batch_size``: training epochs and rows per optimizer step.
- ``gen_batch``: rows generated per ``generate`` call when sampling.
- ``n_critic``: 0 (default) trains for ``epochs`` plainly; > 0 runs REaLTabFormer's sensitivity-based early
  stopping every ``n_critic`` epochs, which generates and compares many samples (expensive on a CPU).
- ``rtf``: other :class:`realtabformer.REaLTabFormer` keywords (``numeric_precision``, ``mask_rate``, ...).
- ``training_args``: :class:`transformers.TrainingArguments` keywords, over ours (no reporting, no checkpoints).
- ``fit_args``: other ``REaLTabFormer.fit`` keywords.
- ``device``: ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda"``.

Checkpoints go to a temporary directory that is removed after the fit. Seeds: the fit is seeded from
``fit(seed=...)`` (REaLTabFormer's ``random_state`` and the trainer's ``seed``; the global generators are restored
after). Sampling is deterministic given the seed on a CPU: torch is seeded from the caller's generator before each
``generate`` batch. Saving uses REaLTabFormer's ``save`` (a ``rtf/<experiment id>/`` folder with
``rtf_config.json`` and ``rtf_model.pt``) and loading its ``load_from_dir``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from synth import features
from synth.base import Synthesizer, require
from synth.sdv_models import seeded

EXTRA = "rtf"
#: the folder inside a save directory that REaLTabFormer's ``save`` writes into
FOLDER = "rtf"
STRING_COLUMNS = features.CATEGORICAL
log = logging.getLogger(__name__)


class REaLTabFormerModel(Synthesizer):
    """REaLTabFormer's tabular model (GPT-2 over tokenized rows); parameters in the module docstring."""

    name = "realtabformer"
    packages = ("numpy", "pandas", "realtabformer", "transformers", "datasets", "torch")
    revision = 2  # 2: a table without walltime estimates gives samples without them (walltime = run)
    learns_walltime = True
    defaults: ClassVar[dict[str, Any]] = {
        "gpt2": {"n_layer": 2, "n_embd": 128, "n_head": 4},
        "epochs": 10,
        "batch_size": 32,
        "gen_batch": 256,
        "n_critic": 0,
        "rtf": {},
        "training_args": {},
        "fit_args": {},
        "device": "auto",
    }

    def __init__(self, max_nodes: int | None = None, **params: Any):
        unknown = set(params) - set(self.defaults)
        if unknown:
            raise TypeError(f"{self.name}: unknown parameters {sorted(unknown)}; known: {sorted(self.defaults)}")
        super().__init__(max_nodes, **{**self.defaults, **params})
        self._rtf: Any = None

    def _device(self) -> str:
        device = self.params["device"]
        if device == "auto":
            torch = require("torch", EXTRA)
            return "cuda" if torch.cuda.is_available() else "cpu"
        return device

    def _fit(self, table: pd.DataFrame, jobs: pd.DataFrame, rng: np.random.Generator) -> None:
        rtf_module = require("realtabformer", EXTRA)
        transformers = require("transformers", EXTRA)
        p, device = self.params, self._device()
        seed = int(rng.integers(1, 2**31))
        data = table[list(features.COLUMNS)].copy()
        for col in STRING_COLUMNS:
            data[col] = data[col].astype(str)
        training_args = {"report_to": "none", "save_strategy": "no", "logging_strategy": "no", "disable_tqdm": True,
                         "gradient_accumulation_steps": 1, "seed": seed, "use_cpu": device == "cpu",
                         **p["training_args"]}
        fit_args = {"device": device, "n_critic": p["n_critic"], **p["fit_args"]}
        if fit_args["n_critic"] > 0:
            fit_args.setdefault("gen_kwargs", {})  # the default None crashes in 0.2.4 (upstream issue #103)
        with tempfile.TemporaryDirectory(prefix="hpcgym-rtf-") as tmp, seeded(seed), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The `bos_token_id`", category=UserWarning)
            rtf = rtf_module.REaLTabFormer(
                model_type="tabular", tabular_config=transformers.GPT2Config(**p["gpt2"]), epochs=p["epochs"],
                batch_size=p["batch_size"], random_state=seed, checkpoints_dir=f"{tmp}/checkpoints",
                samples_save_dir=f"{tmp}/samples", full_save_dir=f"{tmp}/full", **p["rtf"], **training_args)
            with _quiet():
                rtf.fit(data, **fit_args)
        self._rtf = rtf

    def _sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        seed = int(rng.integers(2**31))
        with seeded(seed), _quiet():
            out = self._rtf.sample(n_samples=n, gen_batch=self.params["gen_batch"], device=self._device())
        out = out[list(features.COLUMNS)].reset_index(drop=True)
        for col in ("user", "hour", "dow"):
            out[col] = pd.to_numeric(out[col], errors="coerce")
        out["status"] = out["status"].astype(str)
        return out

    def _save(self, path: Path) -> None:
        target = path / FOLDER
        if target.exists():
            shutil.rmtree(target)
        rtf = self._rtf
        full_save_dir = rtf.full_save_dir
        rtf.full_save_dir = str(full_save_dir)  # 0.2.4's save json-dumps its attributes and misses this Path
        try:
            with _quiet():
                rtf.save(target)
        finally:
            rtf.full_save_dir = full_save_dir

    def _load(self, path: Path) -> None:
        rtf_module = require("realtabformer", EXTRA)
        found = sorted((path / FOLDER).glob("*/rtf_config.json"))
        if len(found) != 1:
            raise FileNotFoundError(f"{self.name}: expected one saved model under {path / FOLDER}, found {len(found)}")
        with _quiet():
            self._rtf = rtf_module.REaLTabFormer.load_from_dir(found[0].parent)


@contextlib.contextmanager
def _quiet():
    """Send REaLTabFormer's prints (progress notes, sampling efficiency) to the debug log instead of stdout."""
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            yield
    finally:
        text = buffer.getvalue().strip()
        if text:
            log.debug("realtabformer: %s", text)
