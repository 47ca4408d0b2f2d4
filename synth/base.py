"""The synthesizer interface: public ``fit``/``sample``/``save``/``load`` validate; private hooks model.

Every synthesizer learns from the *training table* of :mod:`synth.features` and returns canonical job tables, so
any of them plugs into the environment as ``workload=`` (it has ``sample(n_jobs, seed)``). A subclass implements
``_fit(table)``, ``_sample(n, rng) -> table`` and, if its state is not plain picklable Python,
``_save(dir)``/``_load(dir)``. Saves are a directory: ``manifest.json`` (class, parameters, library versions, a
hash of the training trace) next to the backend's own files.
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import json
import pickle
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable
from hpcgym import machines
from hpcgym.errors import DependencyNotInstalled
from hpcgym.io import atomic_folder, write_text
from hpcgym.machines import Machine
from synth import MANIFEST, features, postprocess


def require(module: str, extra: str) -> Any:
    """Import an optional dependency, or raise :class:`DependencyNotInstalled` naming the pip extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise DependencyNotInstalled(module.split(".")[0], extra) from exc


def table_hash(jobs: pd.DataFrame) -> str:
    """A short hash of a job table's canonical columns (identifies the training data in manifests)."""
    data = pd.util.hash_pandas_object(jobs[list(jobtable.COLUMNS)].astype({"status": str}), index=False)
    return hashlib.sha256(data.to_numpy().tobytes()).hexdigest()[:16]


def fit_key(table: pd.DataFrame, model: str, params: dict[str, Any], seed: int) -> str:
    """The cache key of a fit: a hash of the training table, the model's name, its settings and the seed.

    A model class past its first code revision (:attr:`Synthesizer.revision`) adds it, so its older fits are not
    reused while the keys of the other models' fits stay valid (fits of the neural models take many CPU-minutes).

    Args:
        table: the training table.
        model: a registered model name (:func:`synth.names`).
        params: the model's constructor settings.
        seed: the fit's seed.

    Returns:
        16 hex digits.
    """
    import synth

    payload = {"table": table_hash(table), "model": model, "params": params, "seed": seed}
    revision = synth.model_class(model).revision
    if revision > 1:
        payload["revision"] = revision
    text = json.dumps(payload, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


class Synthesizer:
    """Base class. Subclasses set ``name`` and implement the private hooks."""

    name = "base"
    #: packages whose versions go into the manifest
    packages: tuple[str, ...] = ("numpy", "pandas")
    #: the modelling code's revision: raise it when a change makes a fitted model sample differently, so that saved
    #: models (the training scripts' fit caches) of the older code are fitted again instead of mixing the two
    revision = 1
    #: whether the model draws the walltime column as learned from the table (the tabular models): where most
    #: training jobs had no estimate (``walltime_known`` false, ``walltime = run``), its samples get the same
    learns_walltime = False

    def __init__(self, max_nodes: int | None = None, **params: Any):
        self.max_nodes = max_nodes
        self.params = params
        self.fitted = False
        self.fit_seconds: float | None = None
        self.trace_hash: str | None = None
        self.unix_start_time = 0
        self.cores_per_node = 1
        self.estimates = True  # whether most training jobs had a walltime estimate

    # ---- public API ------------------------------------------------------------------------------------------
    def fit(self, jobs: pd.DataFrame, seed: int = 0) -> Synthesizer:
        """Learn from a canonical job table (its chronological train part, by the project's protocol)."""
        jobtable.validate(jobs)
        if len(jobs) < 10:
            raise ValueError(f"{self.name}: need at least 10 jobs to fit, got {len(jobs)}")
        if self.max_nodes is None:
            self.max_nodes = int(jobs["nodes"].max())
        self.trace_hash = table_hash(jobs)
        self.unix_start_time = int(jobs.attrs.get("unix_start_time", 0) or 0)
        self.cores_per_node = int(max(1, round(float(np.median(jobs["procs"] / jobs["nodes"])))))
        self.estimates = bool(jobs["walltime_known"].to_numpy(bool).mean() > 0.5)
        started = time.perf_counter()
        self._fit(features.to_training(jobs), jobs, np.random.default_rng(seed))
        self.fit_seconds = time.perf_counter() - started
        self.fitted = True
        return self

    def sample(self, n_jobs: int, seed: int | np.random.Generator | None = None) -> pd.DataFrame:
        """``n_jobs`` valid jobs as a canonical job table; repairs and rejections are in ``attrs["postprocess"]``."""
        if not self.fitted:
            raise RuntimeError(f"{self.name}: call fit() (or load()) before sample()")
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
            raise ValueError(f"n_jobs must be a whole number >= 1, not {n_jobs!r}")
        rng = np.random.default_rng(seed)
        rows, counts, tries = [], {}, 0
        have = 0
        while have < n_jobs and tries < 20:  # rejected rows are replaced by fresh draws
            raw = self._sample(int((n_jobs - have) * (1.1 if tries else 1.0)) + 1, rng)
            kept, c = postprocess.clean(raw, self.max_nodes)
            for k, v in c.items():
                counts[k] = counts.get(k, 0) + v
            rows.append(kept)
            have += len(kept)
            tries += 1
        if have < n_jobs:
            raise RuntimeError(f"{self.name}: only {have} of {n_jobs} sampled rows were valid after 20 rounds")
        table = pd.concat(rows, ignore_index=True).iloc[:n_jobs]
        out = features.to_jobs(table, self.unix_start_time, name=f"{self.name}-synthetic",
                               cores_per_node=self.cores_per_node)
        if self.learns_walltime and not self.estimates:
            # the data had no estimates: the readers' convention (walltime = run, flagged), not an independent
            # draw of the walltime column that lets jobs run past it
            out["walltime"] = out["run"]
            out["walltime_known"] = False
        out.attrs["postprocess"] = counts
        if self.max_nodes:
            out.attrs["machine"] = self.machine.name
        return out

    @property
    def machine(self) -> Machine:
        """The machine the model was fitted for.

        It is the catalog entry of its size and node shape, else one built from them and registered, so that
        ``machines.get(sample.attrs["machine"])`` works.
        """
        if not self.max_nodes:
            raise ValueError(f"{self.name}: the model records no machine size (max_nodes); pass --machine")
        nodes, cores = int(self.max_nodes), int(self.cores_per_node or 1)
        for mach in machines.CATALOG.values():
            if mach.nodes == nodes and mach.cores_per_node == cores:
                return mach
        mach = Machine(f"{self.name}-{nodes}x{cores}", nodes, cores, source=f"the {self.name} synthesizer's machine")
        machines.CATALOG.setdefault(mach.name, mach)
        return mach

    def save(self, path: str | Path) -> Path:
        """Write the model to a directory (manifest + backend files), atomically: a temporary folder, renamed.

        Raises:
            FileExistsError: ``path`` holds files but no saved model (it would be hashed and replaced).
        """
        if not self.fitted:
            raise RuntimeError(f"{self.name}: nothing to save before fit()")
        path = Path(path)
        if path.is_dir() and any(path.iterdir()) and not (path / MANIFEST).exists():
            raise FileExistsError(errno.EEXIST, "holds files but no saved synthesizer (no manifest.json); give a new "
                                  "or empty folder, or one a synthesizer was saved in (it is replaced)", str(path))
        return atomic_folder(path, self._save_folder)  # a kill or a full disk leaves the old save as it was

    def _save_folder(self, path: Path) -> None:
        self._save(path)
        manifest = {"class": f"{type(self).__module__}:{type(self).__qualname__}", "name": self.name,
                    "params": self.params, "max_nodes": self.max_nodes, "trace_hash": self.trace_hash,
                    "unix_start_time": self.unix_start_time, "fit_seconds": self.fit_seconds,
                    "cores_per_node": self.cores_per_node, "estimates": self.estimates,
                    "revision": type(self).revision,
                    "versions": {p: _version(p) for p in ("hpcgym", *self.packages)},
                    "files": _file_hashes(path)}
        write_text(path / MANIFEST, json.dumps(manifest, indent=2, default=str))  # last: it vouches for the rest

    @staticmethod
    def load(path: str | Path) -> Synthesizer:
        """Load any saved synthesizer (the manifest names its class).

        The backend's files are pickles, and unpickling runs code: load only folders you trust. Before anything is
        unpickled, every file's SHA-256 must match the manifest's (written last at save time), so that a folder
        whose save was interrupted, or whose files were swapped or damaged, is refused. The check guards against
        accidents, not against a forged folder (whoever can write the pickle can write the manifest).

        Raises:
            ValueError: a file does not match the manifest, the model was saved by another revision of its
                class's code (:attr:`revision`), or its class's module (a plugin) is not installed.
        """
        path = Path(path)
        manifest = json.loads((path / MANIFEST).read_text())
        _verify(path, manifest)
        cls = _saved_class(path, manifest["class"])
        saved = manifest.get("revision", 1)
        if saved != cls.revision:
            raise ValueError(f"{path}: saved by revision {saved} of the {manifest['name']} synthesizer's code, and "
                             f"this is revision {cls.revision}; fit it again")
        model = cls(max_nodes=manifest["max_nodes"], **manifest["params"])
        model.trace_hash, model.unix_start_time = manifest["trace_hash"], manifest["unix_start_time"]
        model.fit_seconds = manifest.get("fit_seconds")
        model.cores_per_node = int(manifest.get("cores_per_node", 1))
        model.estimates = bool(manifest.get("estimates", True))
        model._load(path)
        model.fitted = True
        return model

    # ---- hooks -----------------------------------------------------------------------------------------------
    def _fit(self, table: pd.DataFrame, jobs: pd.DataFrame, rng: np.random.Generator) -> None:
        raise NotImplementedError

    def _sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        raise NotImplementedError

    def _state(self) -> dict[str, Any]:
        """Plain state to pickle (default: everything but the constructor's)."""
        skip = {"params", "max_nodes", "fitted", "fit_seconds", "trace_hash", "unix_start_time", "cores_per_node",
                "estimates"}
        return {k: v for k, v in self.__dict__.items() if k not in skip}

    def _save(self, path: Path) -> None:
        with open(path / "state.pkl", "wb") as fh:
            pickle.dump(self._state(), fh)

    def _load(self, path: Path) -> None:
        with open(path / "state.pkl", "rb") as fh:
            self.__dict__.update(pickle.load(fh))


def _saved_class(path: Path, spec: str) -> type[Synthesizer]:
    """The class a manifest names (``module:Class``), or a one-line ValueError naming the folder and what is missing."""
    module, _, cls_name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), cls_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{path / MANIFEST}: the model's class {spec} cannot be imported ({exc}); install the "
                         "package that provides it (a plugin's synthesizer), or fit the model again") from None


def _file_hashes(path: Path) -> dict[str, str]:
    """SHA-256 of every file of a saved model's folder but the manifest, by relative path."""
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file() and not f.name.startswith(MANIFEST)}


def _verify(path: Path, manifest: dict[str, Any]) -> None:
    expected = manifest.get("files")
    if expected is None:
        warnings.warn(f"{path}: the manifest has no file hashes (saved by an older hpcgym); loading it unverified",
                      stacklevel=3)
        return
    found = _file_hashes(path)
    bad = sorted(k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k))
    if bad:
        raise ValueError(f"{path}: {', '.join(bad)} do(es) not match the manifest's hashes (an interrupted save, or "
                         "files changed since); refusing to unpickle it. Fit and save the model again.")
