"""Synthetic job streams: generators fitted on real traces, and the fidelity report that judges them.

Every synthesizer has ``fit(job_table)``, ``sample(n_jobs, seed)``, ``save(dir)`` and ``Synthesizer.load(dir)``;
:func:`get` builds one by name. The SDV and REaLTabFormer models need the ``[synth]`` and ``[rtf]`` extras.

A new generator is a subclass of :class:`synth.base.Synthesizer`. :func:`register` adds it by name for one process;
an installed package adds it for every process (``synth.fit --model``, ``experiments.train --synthesizer``) through
the ``hpcgym.synthesizers`` entry points, each naming its class as ``"module:Class"`` (``docs/extend.md``).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from hpcgym.errors import UnknownNameError

#: name -> "module:class"; imported only when asked for, so optional backends stay optional.
MODELS: dict[str, str] = {
    "arrivals": "synth.arrivals:ArrivalAwareSynthesizer",
    "lublin": "synth.lublin:LublinSynthesizer",
    "trinity": "synth.trinity:TrinitySynthesizer",
    "gaussiancopula": "synth.sdv_models:GaussianCopulaModel",
    "ctgan": "synth.sdv_models:CTGANModel",
    "tvae": "synth.sdv_models:TVAEModel",
    "copulagan": "synth.sdv_models:CopulaGANModel",
    "realtabformer": "synth.realtabformer:REaLTabFormerModel",
}
DEFAULT = "arrivals"
#: the file that makes a folder a fitted model (written last by ``Synthesizer.save``: it vouches for the rest)
MANIFEST = "manifest.json"

#: The entry-point group of installed packages' synthesizers (each a ``"module:Class"``).
ENTRY_POINTS = "hpcgym.synthesizers"
_plugins_loaded = False


def register(name: str, cls: type | str) -> None:
    """Add a synthesizer class (or its ``"module:Class"``) under ``name`` for this process."""
    MODELS[name.lower()] = cls if isinstance(cls, str) else f"{cls.__module__}:{cls.__qualname__}"


def _load_plugins() -> None:
    """Add the installed packages' synthesizers (their classes are imported only when used)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for point in entry_points(group=ENTRY_POINTS):
        MODELS.setdefault(point.name.lower(), point.value)


def names() -> list[str]:
    """Every synthesizer's name: the built-in ones, then those registered or installed."""
    _load_plugins()
    return list(MODELS)


def model_class(name: str) -> type:
    """The synthesizer class of a name (see :func:`names`)."""
    import importlib

    key = name.lower()
    if key not in MODELS:
        _load_plugins()
    if key not in MODELS:
        raise UnknownNameError("synthesizer", name, MODELS,
                               hint="Add one with synth.register or the hpcgym.synthesizers entry points "
                                    "(docs/extend.md).")
    module, _, cls = MODELS[key].partition(":")
    return getattr(importlib.import_module(module), cls)


def resolve(spec: str | Path) -> type | Path:
    """A synthesizer's spec: a name (its class, :func:`model_class`) or the folder of a fitted model (its path).

    Raises:
        UnknownNameError: neither; a folder without a fitted model's manifest says so.
    """
    path = Path(spec)
    if (path / MANIFEST).is_file():
        return path
    if path.is_dir():
        raise UnknownNameError("synthesizer", str(spec), names(),
                               hint=f"{str(spec)!r} is a folder without a fitted model's {MANIFEST}: give a "
                                    "folder written by python -m synth.fit --out.")
    return model_class(str(spec))


def get(name: str, **params: Any):
    """A new, unfitted synthesizer by name (see :func:`names`)."""
    return model_class(name)(**params)
