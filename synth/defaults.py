"""The workloads ``synth`` provides to hpcgym by name (the ``hpcgym.workloads`` entry points in pyproject.toml).

``hpcgym.make(..., workload="synthetic")`` calls :func:`default_workload` through that registry, so that hpcgym
itself never imports ``synth``.
"""

from __future__ import annotations

import pandas as pd

from hpcgym.machines import Machine
from synth.arrivals import ArrivalAwareSynthesizer
from synth.base import table_hash
from synth.lublin import LublinModel
from synth.trinity import TrinityModel

#: fits made in this process, by (machine name, nodes, training table's hash): every environment that asks for the
#: same machine's default workload (a vector of them, a test module) shares one fit (sampling is stateless)
_FITTED: dict[tuple[str, int, str], ArrivalAwareSynthesizer] = {}


def default_workload(machine: Machine, train: pd.DataFrame | None):
    """Hpcgym's default synthetic workload for ``machine``.

    With ``train`` (the train split of the machine's bundled trace), the arrival-aware generator fitted on it (about
    10 s on Theta, most of it the slow arrival component's calibration; once per process and table). Without one:
    for Trinity, the model calibrated to the published OpenTrinity statistics (:mod:`synth.trinity`, an
    approximation); for any other machine, the Lublin-Feitelson model scaled to it.
    """
    if train is None and machine.name == "trinity":
        return TrinityModel()
    if train is None:
        return LublinModel(machine.nodes)
    key = (machine.name, machine.nodes, table_hash(train))
    if key not in _FITTED:
        _FITTED[key] = ArrivalAwareSynthesizer(max_nodes=machine.nodes).fit(train)
    return _FITTED[key]
