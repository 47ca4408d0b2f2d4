"""hpcgym: a fast node-granular HPC scheduling simulator, Gymnasium environments and job traces.

``import hpcgym`` is light: it needs numpy, pandas and gymnasium, never torch or sdv.
"""

from __future__ import annotations

from hpcgym import errors, jobs, machines, traces
from hpcgym.machines import Machine

__version__ = "0.1.0"
__all__ = ["Machine", "errors", "jobs", "machines", "traces", "__version__"]
