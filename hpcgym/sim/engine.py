"""A deprecated alias, kept for old imports: hpcgym.sim.engine is renamed :mod:`hpcgym.sim.simulator`."""

import warnings
from typing import Any

from hpcgym.sim import simulator as _new

warnings.warn("hpcgym.sim.engine is renamed hpcgym.sim.simulator", DeprecationWarning, stacklevel=2)
_RENAMED = {}


def __getattr__(name: str) -> Any:
    return getattr(_new, _RENAMED.get(name, name))
