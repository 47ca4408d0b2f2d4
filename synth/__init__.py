"""Synthetic job streams: generators fitted on real traces, and the fidelity report that judges them.

Every synthesizer has ``fit(job_table)``, ``sample(n_jobs, seed)``, ``save(dir)`` and ``Synthesizer.load(dir)``;
:func:`get` builds one by name. The SDV and REaLTabFormer models need the ``[synth]`` and ``[rtf]`` extras.
"""

from __future__ import annotations

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


def model_class(name: str) -> type:
    """The synthesizer class of a name (see :data:`MODELS`)."""
    import importlib

    key = name.lower()
    if key not in MODELS:
        raise UnknownNameError("synthesizer", name, MODELS)
    module, _, cls = MODELS[key].partition(":")
    return getattr(importlib.import_module(module), cls)


def get(name: str, **params: Any):
    """A new, unfitted synthesizer by name (see :data:`MODELS`)."""
    return model_class(name)(**params)
