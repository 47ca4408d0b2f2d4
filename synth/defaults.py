"""The workloads ``synth`` provides to hpcgym by name (the ``hpcgym.workloads`` entry points in pyproject.toml).

``hpcgym.make(..., workload="synthetic")`` calls :func:`default_workload` through that registry, so that hpcgym
itself never imports ``synth``.
"""

from __future__ import annotations

import pandas as pd

from hpcgym.machines import Machine
from synth.arrivals import ArrivalAwareSynthesizer
from synth.lublin import LublinModel
from synth.trinity import TrinityModel


def default_workload(machine: Machine, train: pd.DataFrame | None):
    """Hpcgym's default synthetic workload for ``machine``.

    With ``train`` (the train split of the machine's bundled trace), the arrival-aware generator fitted on it (a
    fraction of a second). Without one: for Trinity, the model calibrated to the published OpenTrinity statistics
    (:mod:`synth.trinity`, an approximation); for any other machine, the Lublin-Feitelson model scaled to it.
    """
    if train is None and machine.name == "trinity":
        return TrinityModel()
    if train is None:
        return LublinModel(machine.nodes)
    return ArrivalAwareSynthesizer(max_nodes=machine.nodes).fit(train)
