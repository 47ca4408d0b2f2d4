"""A deprecated alias, kept for old imports: hpcgym.render is renamed :mod:`hpcgym.gantt`."""

import warnings
from typing import Any

from hpcgym import gantt as _new

warnings.warn("hpcgym.render is renamed hpcgym.gantt", DeprecationWarning, stacklevel=2)
_RENAMED = {}


def __getattr__(name: str) -> Any:
    return getattr(_new, _RENAMED.get(name, name))
