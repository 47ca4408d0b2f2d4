"""The environment ids (``hpcgym/<name>-v0``, ``hpcgym/<name>-predict-v0``), :func:`make` and :func:`action_masks`.

:func:`make` is a thin alias of ``gymnasium.make``; :func:`action_masks` reads the valid actions behind any wrappers.

**The rule of the ids.** An id's version counts *revisions* of one environment: it is raised only when the
observation, the reward or the episode of that id change, and an older version is then out of date (Gymnasium's
convention, which warns about it). A different *set* of observation columns or a runtime predictor is a choice, not
a revision: it is an argument (``features=``, ``predictor=``), and the one bundle of them hpcgym names is the
``-predict`` id: ``<name>-predict-v0`` is ``<name>-v0`` with ``predictor="last2"`` and ``features="v1"`` (see
:class:`hpcgym.env.SchedulingEnv`). Names follow the bundled traces' (``lublin-256-v0`` for ``lublin-256``).

So ``gymnasium.make("hpcgym/theta-v0")`` is quiet, and ``gymnasium.make("hpcgym/theta")`` gives ``theta-v0``.
The ids of earlier releases keep working as aliases of the same specs (:data:`ALIASES`): ``<name>-v1`` (now
``<name>-predict-v0``) and ``lublin256-v0``/``-v1`` (now ``lublin-256-v0``/``lublin-256-predict-v0``). An alias is
a second key of Gymnasium's registry for the same spec, not a version of the name, so it makes nothing out of date.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from hpcgym.errors import UnknownNameError
from hpcgym.sim.predict import IdDefault

NAMESPACE = "hpcgym"

#: id -> (machine, default workload). Trinity has no public full trace: its default workload is synthetic.
ENVS: dict[str, tuple[str, str]] = {
    "theta-v0": ("theta", "theta"),
    "trinity-v0": ("trinity", "synthetic"),
    "mustang-v0": ("mustang", "mustang"),
    "sdsc-sp2-v0": ("sdsc-sp2", "sdsc-sp2"),
    "hpc2n-v0": ("hpc2n", "hpc2n"),
    "lublin-256-v0": ("lublin-256", "lublin-256"),
    "mira-v0": ("mira", "mira"),
}
#: What a ``-predict`` id adds to its plain id's keyword arguments (its predictor is the id's: a counterfactual
#: reward's baseline replaces it, see :class:`hpcgym.sim.predict.IdDefault`).
PREDICT_KWARGS = {"predictor": IdDefault("last2"), "features": "v1"}
V1_KWARGS = PREDICT_KWARGS  # its name when those ids were ``-v1``
ENVS.update({name.replace("-v0", "-predict-v0"): spec for name, spec in list(ENVS.items())})
#: Ids of earlier releases -> the id they name now (both work; see the module docstring).
ALIASES: dict[str, str] = {
    **{name.replace("-predict-v0", "-v1").replace("lublin-256", "lublin256"): name
       for name in ENVS if name.endswith("-predict-v0")},
    "lublin256-v0": "lublin-256-v0",
}


def register_all() -> None:
    """Register every id of :data:`ENVS` with Gymnasium, and the :data:`ALIASES` as keys of the same specs."""
    for env_id, (machine, workload) in ENVS.items():
        full = f"{NAMESPACE}/{env_id}"
        if full not in gym.registry:
            extra = PREDICT_KWARGS if env_id.endswith("-predict-v0") else {}
            gym.register(full, entry_point="hpcgym.env:SchedulingEnv",
                         vector_entry_point="hpcgym.vector:SchedulingVectorEnv",
                         kwargs={"machine": machine, "workload": workload, **extra})
    for old, new in ALIASES.items():
        # not gym.register: a spec with the old id would be a version of the old name ("theta-v1" would make
        # "theta-v0" out of date); the registry is a dict, and a second key for the spec adds no version
        gym.registry.setdefault(f"{NAMESPACE}/{old}", gym.registry[f"{NAMESPACE}/{new}"])


def _full_id(env_id: str) -> str:
    name = env_id.split("/", 1)[1] if env_id.startswith(f"{NAMESPACE}/") else env_id
    name = ALIASES.get(name, name)
    if name not in ENVS:
        raise UnknownNameError("environment id", name, ENVS)
    return f"{NAMESPACE}/{name}"


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """``hpcgym.make("theta-v0", backfill="easy")`` is ``gymnasium.make("hpcgym/theta-v0", backfill="easy")``."""
    return gym.make(_full_id(env_id), **kwargs)


def make_vec(env_id: str, num_envs: int = 1, **kwargs: Any) -> gym.vector.VectorEnv:
    """N copies stepped in one compiled call (:class:`hpcgym.vector.SchedulingVectorEnv`).

    The same as ``gymnasium.make_vec("hpcgym/<id>", num_envs, vectorization_mode="vector_entry_point", **kwargs)``.
    """
    return gym.make_vec(_full_id(env_id), num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)


def action_masks(env: Any) -> np.ndarray:
    """The valid actions of an hpcgym environment behind any wrappers: ``(slots,)``, or ``(num_envs, slots)``.

    Gymnasium's wrappers (``OrderEnforcing``, ``RecordEpisodeStatistics``, ...) do not pass ``action_masks()`` on;
    this reads it from the environment inside (``env.unwrapped``). It takes a single environment, the vector
    environment (``hpcgym.make_vec``), or Gymnasium's ``SyncVectorEnv``/``AsyncVectorEnv`` of single ones (for
    those, ``infos["action_mask"]`` is the same, batched). ``info["action_mask"]`` needs no access to the env.

    >>> import hpcgym
    >>> env = hpcgym.make("lublin256-v0")  # wrapped in OrderEnforcing and PassiveEnvChecker
    >>> _, info = env.reset(seed=0)
    >>> bool((hpcgym.action_masks(env) == info["action_mask"]).all())
    True
    """
    inner = env.unwrapped
    if hasattr(inner, "action_masks"):
        return inner.action_masks()
    if hasattr(inner, "call"):  # Gymnasium's own vector environments of single hpcgym environments
        return np.stack(inner.call("action_masks"))
    raise TypeError(f"{type(inner).__name__} is not an hpcgym environment (it has no action_masks)")
