"""A deprecated alias, kept for old imports: hpcgym.sim.core is renamed :mod:`hpcgym.sim.loop`."""

import warnings
from typing import Any

from hpcgym.sim import loop as _new

warnings.warn("hpcgym.sim.core is renamed hpcgym.sim.loop (its run is advance)", DeprecationWarning, stacklevel=2)
_RENAMED = {"run": "advance"}


def __getattr__(name: str) -> Any:
    return getattr(_new, _RENAMED.get(name, name))
