"""The environment ids (``hpcgym/<name>-v0``, ``-v1``), :func:`make` and :func:`action_masks` (through wrappers).

:func:`make` is a thin alias of ``gymnasium.make``; :func:`action_masks` reads the valid actions behind any wrappers.

A ``-v1`` id is its ``-v0`` id with runtime predictions and the observation's history columns
(``predictor="last2"``, ``features="v1"``; see :class:`hpcgym.env.SchedulingEnv`). Both are supported: ``-v1`` is a
sibling, not a fix of ``-v0``. Gymnasium reads a higher version as a newer revision and warns that ``-v0`` "is out of
date"; :func:`make` and :func:`make_vec` silence that one warning (``gymnasium.make("hpcgym/theta-v0")`` still shows
it, as Gymnasium's convention).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np

from hpcgym.errors import UnknownNameError

NAMESPACE = "hpcgym"

#: id -> (machine, default workload). Trinity has no public full trace: its default workload is synthetic.
ENVS: dict[str, tuple[str, str]] = {
    "theta-v0": ("theta", "theta"),
    "trinity-v0": ("trinity", "synthetic"),
    "mustang-v0": ("mustang", "mustang"),
    "sdsc-sp2-v0": ("sdsc-sp2", "sdsc-sp2"),
    "hpc2n-v0": ("hpc2n", "hpc2n"),
    "lublin256-v0": ("lublin-256", "lublin-256"),
    "mira-v0": ("mira", "mira"),
}
#: What a ``-v1`` id adds to its ``-v0`` id's keyword arguments.
V1_KWARGS = {"predictor": "last2", "features": "v1"}
ENVS.update({name.replace("-v0", "-v1"): spec for name, spec in list(ENVS.items())})


def register_all() -> None:
    """Register every id of :data:`ENVS` with Gymnasium (idempotent)."""
    for env_id, (machine, workload) in ENVS.items():
        full = f"{NAMESPACE}/{env_id}"
        if full not in gym.registry:
            extra = V1_KWARGS if env_id.endswith("-v1") else {}
            gym.register(full, entry_point="hpcgym.env:SchedulingEnv",
                         vector_entry_point="hpcgym.vector:SchedulingVectorEnv",
                         kwargs={"machine": machine, "workload": workload, **extra})


def _full_id(env_id: str) -> str:
    name = env_id.split("/", 1)[1] if env_id.startswith(f"{NAMESPACE}/") else env_id
    if name not in ENVS:
        raise UnknownNameError("environment id", name, ENVS)
    return f"{NAMESPACE}/{name}"


@contextmanager
def _siblings_not_outdated() -> Iterator[None]:
    """Silence Gymnasium's "out of date" warning for a ``-v0`` id: its ``-v1`` is a sibling (see the module doc)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=rf".*{NAMESPACE}/\S+-v0 is out of date")
        yield


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """``hpcgym.make("theta-v0", backfill="easy")`` is ``gymnasium.make("hpcgym/theta-v0", backfill="easy")``."""
    with _siblings_not_outdated():
        return gym.make(_full_id(env_id), **kwargs)


def make_vec(env_id: str, num_envs: int = 1, **kwargs: Any) -> gym.vector.VectorEnv:
    """N copies stepped in one compiled call (:class:`hpcgym.vector.SchedulingVectorEnv`).

    The same as ``gymnasium.make_vec("hpcgym/<id>", num_envs, vectorization_mode="vector_entry_point", **kwargs)``.
    """
    with _siblings_not_outdated():
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
