"""hpcgym: a fast node-granular HPC scheduling simulator, Gymnasium environments and job traces.

``import hpcgym`` is light: it needs numpy, pandas, numba and gymnasium, never torch or sdv. It registers the
environments: ``hpcgym.make("theta-v0")`` or ``gymnasium.make("hpcgym/theta-v0")``, and their vector versions:
``hpcgym.make_vec("theta-v0", num_envs=16)``.
"""

from __future__ import annotations

from hpcgym import errors, jobs, machines, traces
from hpcgym.machines import Machine
from hpcgym.registration import ENVS, make, make_vec, register_all

register_all()

__version__ = "0.1.0"
__all__ = ["ENVS", "Machine", "errors", "jobs", "machines", "make", "make_vec", "traces", "__version__"]
