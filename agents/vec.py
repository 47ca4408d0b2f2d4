"""Stable-Baselines3's ``VecEnv`` interface over hpcgym's compiled vector environment.

MaskablePPO and the masked DQN train on :class:`HpcgymVecEnv` directly: one compiled call steps every copy, the
policy scores all copies in one batch, and masks come from ``env_method("action_masks")`` as sb3-contrib expects.
Episode ends carry SB3's ``terminal_observation`` and the single environment's final info (``metrics``,
``compare``, ...); wrap it in SB3's ``VecMonitor`` for episode statistics and ``monitor.csv``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

import hpcgym
from hpcgym.vector import SchedulingVectorEnv


class HpcgymVecEnv(VecEnv):
    """An SB3 ``VecEnv`` over a :class:`~hpcgym.vector.SchedulingVectorEnv`.

    Args:
        venv: the vector environment (or build one with :meth:`make`).
    """

    def __init__(self, venv: SchedulingVectorEnv):
        self.venv = venv
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self._actions: np.ndarray | None = None

    @classmethod
    def make(cls, env_id: str, num_envs: int, **kwargs: Any) -> HpcgymVecEnv:
        """``HpcgymVecEnv(hpcgym.make_vec(env_id, num_envs, **kwargs))``."""
        return cls(hpcgym.make_vec(env_id, num_envs=num_envs, **kwargs))

    @property
    def envs(self) -> list[Any]:
        """The copies (single environments sharing the workload)."""
        return self.venv.envs

    def reset(self) -> np.ndarray:
        """Reset every copy (with the seeds given to :meth:`seed`, once)."""
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        obs, _ = self.venv.reset(seed=seeds)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Store the actions for :meth:`step_wait`."""
        self._actions = np.asarray(actions)

    def step_wait(self):
        """Step every copy; finished copies are reset and report their episode in ``infos``."""
        obs, reward, terminated, truncated, step_info = self.venv.step(self._actions)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i, info in self.venv.final_infos.items():
            infos[i] = {**info, "terminal_observation": step_info["final_obs"][i], "TimeLimit.truncated": False,
                        "compare_json": json.dumps(info["compare"])}  # a JSON column for VecMonitor's CSV
        return obs, reward.astype(np.float32), terminated | truncated, infos

    def close(self) -> None:
        """Close the vector environment."""
        self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """An attribute of each copy (``action_masks`` etc.)."""
        return [getattr(self.venv.envs[i], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute on each copy."""
        for i in self._get_indices(indices):
            setattr(self.venv.envs[i], attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        """Call a method of each copy; ``action_masks`` comes from the batch in one piece."""
        idx = list(self._get_indices(indices))
        if method_name == "action_masks" and not method_args and not method_kwargs:
            return list(self.venv.action_masks()[idx])
        return [getattr(self.venv.envs[i], method_name)(*method_args, **method_kwargs) for i in idx]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> Sequence[bool]:
        """The copies are never wrapped."""
        return [False for _ in self._get_indices(indices)]
