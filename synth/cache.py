"""The fit cache: fitted synthesizers saved under a key of what they learned, shared by every script that fits one.

A fit lives in ``<root>/<label>-<model>-<key>/`` (a :meth:`synth.base.Synthesizer.save` folder), where ``label``
names the trace and ``key`` is :func:`synth.base.fit_key`: a hash of the training table, the model's name, its
settings, the seed and the model's code revision. Training (``experiments.train``), the study
(``experiments.study``) and the fidelity benchmark (``benchmarks/synth_fidelity.py``) all go through
:class:`FitCache`, so a fit made by one is found by the others when they fit the same model on the same table.

Saves are atomic (a temporary folder, then a rename), so processes that fit in parallel never see half a model; a
fit another process finished first is kept. A cached folder that :meth:`~synth.base.Synthesizer.load` refuses (a
damaged save, or another code revision) is fitted again, with a warning.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from synth.base import MANIFEST, Synthesizer, fit_key


class FitCache:
    """Fitted synthesizers under one folder (see the module docstring).

    Args:
        root: the cache folder (created on the first save).
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def folder(self, label: str, model: str, table: pd.DataFrame, params: dict[str, Any], seed: int) -> Path:
        """Where the fit of ``model`` (``params``, ``seed``) on ``table`` is saved; ``label`` names the trace."""
        return self.root / f"{label}-{model}-{fit_key(table, model, params, seed)}"

    @staticmethod
    def holds(folder: Path) -> bool:
        """Whether a complete save is in ``folder`` (its manifest is written last)."""
        return (Path(folder) / MANIFEST).exists()

    def load(self, folder: Path) -> Synthesizer | None:
        """The model saved in ``folder``; None when there is none, or when it cannot be used (with a warning)."""
        if not self.holds(folder):
            return None
        try:
            return Synthesizer.load(folder)
        except ValueError as exc:  # a damaged save or another code revision: the caller fits again
            warnings.warn(f"not using the cached fit {folder}: {exc}", stacklevel=2)
            return None

    def save(self, model: Synthesizer, folder: Path, replace: bool = False) -> Path:
        """Save ``model`` to ``folder`` atomically and return ``folder``.

        A complete save already there (another process finished the same fit meanwhile) is kept, unless ``replace``
        (it was refused by :meth:`load`).
        """
        folder = Path(folder)
        if self.holds(folder) and not replace:
            return folder
        if folder.exists() and not self.holds(folder):  # not a save (no manifest): Synthesizer.save would refuse it
            shutil.rmtree(folder)
        model.save(folder)  # atomic (hpcgym.io.atomic_folder): a refused save stays whole until the new one is in
        return folder

    def fitted(self, label: str, model: str, table: pd.DataFrame, seed: int, max_nodes: int,
               params: dict[str, Any] | None = None, announce: Callable[[str], None] | None = None) -> Synthesizer:
        """The model fitted on ``table``: from the cache, else fitted now (``announce`` is told) and saved.

        Args:
            label: the trace's short name (the folder's prefix).
            model: a registered model name (:func:`synth.names`).
            table: the training table.
            seed: the fit's seed.
            max_nodes: the machine's size (:class:`~synth.base.Synthesizer`'s ``max_nodes``).
            params: the model's constructor settings (default: its own).
            announce: called with one line before a fit starts (e.g. ``print``).

        Returns:
            The fitted model.
        """
        import synth

        params = params or {}
        folder = self.folder(label, model, table, params, seed)
        cached = self.load(folder)
        if cached is not None:
            return cached
        refused = self.holds(folder)
        if announce is not None:
            announce(f"fitting {model} on {len(table):,} jobs ...")
        fitted = synth.get(model, max_nodes=max_nodes, **params).fit(table, seed=seed)
        self.save(fitted, folder, replace=refused)
        return fitted
