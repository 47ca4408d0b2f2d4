"""The vector environment: N scheduling environments stepped in one compiled call.

:class:`SchedulingVectorEnv` is a Gymnasium ``VectorEnv``. Its copies are :class:`~hpcgym.env.SchedulingEnv`
objects that share one workload (the trace is read, or the generator fitted, once) and keep their simulation state,
observation and mask in rows of the batch arrays. A step applies the N actions and builds the N observations in
one numba call (:class:`hpcgym.sim.simulator.Batch`, with the observation as its hook); Python only runs at the
end of an episode (the result, the next window). Each copy draws its windows with its own generator through the
single environment's code, so copy ``i`` reset with seed ``s + i`` plays exactly the episodes of a single
environment reset with that seed (the tests check it).

Infos are Gymnasium's vector infos: a dict of arrays with one entry per copy, each key ``k`` beside a boolean
``_k`` that says which copies have it. Every step (and ``reset``) has ``time``, ``waiting``, ``decisions``,
``window_done`` (not ``done``, a key TorchRL reserves), ``invalid_actions`` (so far in each copy's episode) and
``action_mask`` (``(num_envs, slots)``, as :meth:`~SchedulingVectorEnv.action_masks`), the single env's keys batched.
Like Gymnasium's own vector environments it has an :attr:`~SchedulingVectorEnv.autoreset_mode` attribute, which
TorchRL's ``GymWrapper`` reads.

Autoreset is Gymnasium's ``SAME_STEP`` mode: the step that ends an episode returns the next episode's first
observation, and ``infos["final_obs"]`` (an object array: the finished observation, ``None`` for the copies that
did not end) and ``infos["final_info"]`` hold the finished episodes'. ``final_info`` is again a dict of arrays,
not a list of dicts: copy ``i``'s mean bounded slowdown is ``infos["final_info"]["metrics"]["bsld_mean"][i]``,
valid where ``infos["_final_info"][i]`` is True (the other copies hold zeros). :attr:`SchedulingVectorEnv.final_infos`
keeps the last step's finished episodes' infos as plain dicts (copy -> the single env's final info), which is what
the Stable-Baselines3 adapter (:mod:`agents.vec`) reads.

With ``gymnasium.make_vec(..., vectorization_mode="sync")`` Gymnasium steps single environments in a loop
instead: the same episodes, but its ``SyncVectorEnv`` has Gymnasium's default ``NEXT_STEP`` autoreset (the step
after an episode's end only resets that copy, and its action is ignored) and no ``action_masks()``
(:func:`hpcgym.action_masks` or ``infos["action_mask"]`` work there too).

>>> import hpcgym
>>> envs = hpcgym.make_vec("lublin256-v0", num_envs=4)
>>> obs, info = envs.reset(seed=0)
>>> obs.shape, envs.action_masks().shape, info["action_mask"].shape
((4, 129, 8), (4, 128), (4, 128))
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from hpcgym.env import SchedulingEnv, reset_options, warn_if_unmasked, whole_number
from hpcgym.observation import Observer, Scales
from hpcgym.sim import fork
from hpcgym.sim.loop import DONE
from hpcgym.sim.simulator import Batch, Buffers
from hpcgym.sim.state import QE, QS, T


class SchedulingVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` copies of :class:`~hpcgym.env.SchedulingEnv` (every keyword argument is the single env's).

    Observations are ``(num_envs, slots + 1, features)``, actions ``(num_envs,)`` slots, and
    :meth:`action_masks` is ``(num_envs, slots)``. Infos are described in the module docstring. :attr:`time_scale`
    is the observation's time scale, shared by every copy: pass it to the environments an agent trained here is
    validated or evaluated in (``time_scale=envs.time_scale``).
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    #: as Gymnasium's own vector environments have it (TorchRL's ``GymWrapper`` reads the attribute)
    autoreset_mode = AutoresetMode.SAME_STEP

    def __init__(self, num_envs: int = 1, **env_kwargs: Any):
        if whole_number(num_envs, "num_envs") < 1:
            raise ValueError(f"num_envs must be >= 1, not {num_envs}")
        limit = env_kwargs.pop("max_episode_steps", None)  # gymnasium.make_vec passes the spec's (None)
        if limit is not None:  # the compiled batch has no step limit; ignoring it would run every episode to its end
            raise ValueError(f"max_episode_steps={limit!r}: the vector environment does not truncate episodes (each "
                             "ends when its window is scheduled); for a step limit, vectorize the single environment "
                             "(gymnasium.make_vec(..., vectorization_mode='sync'))")
        self.num_envs = int(num_envs)
        template = SchedulingEnv(**env_kwargs)
        self.single_observation_space = template.observation_space
        self.single_action_space = template.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.render_mode = None
        self.time_scale: float = template.time_scale  #: seconds the time features map to 1 (the single env's)
        self.scales: Scales = template.scales  #: the observation's scales, shared by every copy (clocks aside)
        self.buffers = Buffers.for_predictor(template.window, template.predictor, (self.num_envs,))
        self._obs = np.zeros((self.num_envs, *self.single_observation_space.shape), np.float32)
        self._mask = np.zeros((self.num_envs, template.action_space.n), bool)
        self.envs = [template.copy_for_vector(self.buffers.row(i), self._obs[i], self._mask[i])
                     for i in range(self.num_envs)]
        self._clocks = np.zeros(self.num_envs, np.int64)  # each copy's window clock (the time of day's origin)
        observer = Observer(self._obs, self._mask, self.scales, template.features, clocks=self._clocks)
        self.batch = Batch([env.sim for env in self.envs], self.buffers, observer)
        self._invalid = np.zeros(self.num_envs, np.int64)  # each copy's invalid actions in its episode
        self._every = np.ones(self.num_envs, bool)
        self._every.flags.writeable = False
        self.final_infos: dict[int, dict[str, Any]] = {}
        self.invalid_actions = 0
        self._credit = template._credit  # reward="counterfactual": the settings; each copy's state is a row below
        if self._credit is not None:
            self._credit_state = np.zeros((self.num_envs, 3))
            self._custom = np.zeros((self.num_envs, template.window))
            for i, env in enumerate(self.envs):
                env._credit.bind(self._credit_state[i], self._custom[i])
            self._chosen, self._heads = np.zeros(self.num_envs, np.int64), np.zeros(self.num_envs, np.int64)

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict | None = None):
        """Reset every copy: copy ``i`` gets ``seed + i`` (or ``seed[i]``).

        ``options={"window_start": [row_0, ..., row_N-1]}`` pins each copy's window (see the single env; a copy
        whose pinned window needs no decision ends at the next step, whatever its action).
        """
        seeds = _seeds(seed, self.num_envs)
        pinned = reset_options(options).get("window_start")
        if pinned is not None and (np.ndim(pinned) != 1 or len(pinned) != self.num_envs):
            raise ValueError(f"options['window_start'] needs one row per copy ({self.num_envs}), not {pinned!r}")
        for i, env in enumerate(self.envs):
            env.reset(seed=seeds[i], options=None if pinned is None else {"window_start": pinned[i]})
            self._loaded(i)
        return self._obs.copy(), self._step_info()

    def step(self, actions: Any):
        """Apply one action per copy; copies whose episode ends are reset in the same step."""
        actions = np.asarray(actions)
        if actions.size != self.num_envs:
            raise ValueError(f"step takes one action per copy ({self.num_envs}), got {actions.size}: {actions!r}")
        actions = self._checked(actions.reshape(self.num_envs))
        counterfactual = self._credit is not None
        if counterfactual:
            pending = self._choices(actions)
        terminated = self.batch.choose(actions)
        reward = np.zeros(self.num_envs)
        if counterfactual:
            self._credits(pending, terminated, reward)
        self.final_infos = {}
        final_obs, final_info = None, {}
        for i in np.flatnonzero(terminated):
            self.batch.ended(i)
            env = self.envs[i]
            result = env.finish()
            env.invalid_actions = int(self._invalid[i])
            warn_if_unmasked(env.invalid_actions, int(self.batch.decisions[i]), f"copy {i}'s episode")
            if not counterfactual:
                reward[i] = result.reward
            if final_obs is None:
                final_obs = np.full(self.num_envs, None, dtype=object)
            final_obs[i] = self._obs[i].copy()
            info = env.step_info(result)  # the single env's final info, word for word
            self.final_infos[int(i)] = info
            final_info = self._add_info(final_info, info, i)
            env.reset()
            self._loaded(i)
        infos = self._step_info()
        if final_obs is not None:
            infos.update(final_obs=final_obs, _final_obs=terminated.copy(), final_info=final_info,
                         _final_info=terminated.copy())
        return self._obs.copy(), reward, terminated, np.zeros(self.num_envs, bool), infos

    def _add_info(self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int) -> dict[str, Any]:
        """Gymnasium's, but a numpy boolean (``window_done``) batches as a bool array, not Gymnasium's object array."""
        for key, value in env_info.items():
            if isinstance(value, np.bool_) and key not in vector_infos:
                vector_infos[key] = np.zeros(self.num_envs, bool)
        return super()._add_info(vector_infos, env_info, env_num)

    def action_masks(self) -> np.ndarray:
        """Valid slots of every copy, ``(num_envs, slots)``."""
        return self._mask.copy()

    def close_extras(self, **kwargs: Any) -> None:
        """Nothing to release (no processes, no files)."""

    # ---- internals -------------------------------------------------------------------------------------------
    def _choices(self, actions: np.ndarray) -> np.ndarray:
        """``reward="counterfactual"``, before a step: the pending copies (their chosen jobs, the baseline's heads)."""
        pending = self.batch.status != DONE
        credit, jobs, state = self._credit, *self.batch.arrays
        fork.row_choices(pending, self.batch.lengths, jobs, state, credit.code, self.envs[0].slots, actions,
                         credit.shortcut, self._chosen, self._heads)
        return pending

    def _credits(self, pending: np.ndarray, terminated: np.ndarray, reward: np.ndarray) -> None:
        """``reward="counterfactual"``, after a step: every copy's credit in one compiled call (forks included)."""
        c, jobs, state = self._credit, *self.batch.arrays
        fork.row_credits(pending, terminated, self.batch.lengths, jobs, state, self._chosen, self._heads, c.code,
                         c.mode, self._custom, c.scan, c.kind, c.nodes, c.sign, self._credit_state, reward)

    def _loaded(self, i: int) -> None:
        self.batch.loaded(i)
        self._clocks[i] = self.envs[i].scales.clock
        self._invalid[i] = 0

    def _checked(self, actions: np.ndarray) -> np.ndarray:
        """Valid actions are those of the mask; map (the ``(a mod v)``-th valid one) or refuse the others."""
        if not np.issubdtype(actions.dtype, np.integer):
            if not np.issubdtype(actions.dtype, np.number) or not np.all(actions == np.floor(actions)):
                raise ValueError(f"actions must be integer slots, got {actions}")
        actions = actions.astype(np.int64)
        width = self._mask.shape[1]
        outside = (actions < 0) | (actions >= width)
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise ValueError(f"action {actions[i]} of copy {i} is outside the action space Discrete({width})")
        bad = ~self._mask[np.arange(self.num_envs), actions] & (self.batch.status != DONE)
        if bad.any():
            valid = self._mask.sum(axis=1)
            if self.envs[0].invalid_action != "wrap":
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"invalid action {actions[i]} for copy {i}: not allowed now (an empty slot, or a "
                                 f"choice the action mode does not offer; {valid[i]} valid actions; the valid ones "
                                 "are infos['action_mask'], or envs.action_masks())")
            self.invalid_actions += int(bad.sum())
            self._invalid += bad
            for i in np.flatnonzero(bad):
                actions[i] = np.flatnonzero(self._mask[i])[actions[i] % valid[i]]
        return actions

    def _step_info(self) -> dict[str, Any]:
        sc = self.buffers.state.sc
        every = self._every  # every copy has every key (Gymnasium's "_key" convention); read-only, shared
        return {"time": sc[:, T].copy(), "_time": every, "waiting": sc[:, QE] - sc[:, QS], "_waiting": every,
                "decisions": self.batch.decisions.copy(), "_decisions": every,
                "window_done": self.batch.status == DONE, "_window_done": every,
                "invalid_actions": self._invalid.copy(), "_invalid_actions": every,
                "action_mask": self._mask.copy(), "_action_mask": every}


def _seeds(seed: int | list[int | None] | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(n)]
    if len(seed) != n:
        raise ValueError(f"got {len(seed)} seeds for {n} copies")
    return list(seed)


__all__ = ["SchedulingVectorEnv"]
