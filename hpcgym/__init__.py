"""hpcgym: a fast node-granular HPC scheduling simulator, Gymnasium environments and job traces.

``import hpcgym`` is light: it needs numpy, pandas, numba and gymnasium, never torch or sdv. It registers the
environments: ``hpcgym.make("theta-v0")`` or ``gymnasium.make("hpcgym/theta-v0")``, and their vector versions:
``hpcgym.make_vec("theta-v0", num_envs=16)``. ``hpcgym.action_masks(env)`` reads the valid actions behind any
wrappers (also in every ``info["action_mask"]``).
"""

from __future__ import annotations

from hpcgym import errors, jobs, machines, traces
from hpcgym.machines import Machine
from hpcgym.registration import ENVS, action_masks, make, make_vec, register_all

register_all()

__version__ = "0.1.0"
__all__ = ["ENVS", "Machine", "action_masks", "errors", "jobs", "machines", "make", "make_vec", "traces",
           "__version__"]
