"""hpcgym: a fast node-granular HPC scheduling simulator, Gymnasium environments and job traces.

``import hpcgym`` is light: it needs numpy, pandas, numba and gymnasium, never torch or sdv. It registers the
environments: ``hpcgym.make("theta-v0")`` or ``gymnasium.make("hpcgym/theta-v0")``, and their vector versions:
``hpcgym.make_vec("theta-v0", num_envs=16)``. ``hpcgym.action_masks(env)`` reads the valid actions behind any
wrappers (also in every ``info["action_mask"]``).
"""

from __future__ import annotations

from hpcgym import jit

jit.use_source_keyed_cache()  # before any kernel is compiled or loaded: an edited kernel is the one that runs

# the other imports come after the cache folder is set
from hpcgym import errors, jobs, machines, traces  # noqa: E402
from hpcgym.machines import Machine  # noqa: E402
from hpcgym.registration import ENVS, action_masks, make, make_vec, register_all  # noqa: E402

register_all()

__version__ = "0.1.0"
__all__ = ["ENVS", "Machine", "action_masks", "errors", "jobs", "machines", "make", "make_vec", "traces",
           "__version__"]
