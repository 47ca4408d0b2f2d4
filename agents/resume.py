"""What a checkpoint carries besides SB3's zip, so that a resumed run goes on as the run that was killed would have.

SB3's ``save`` keeps the networks, the optimizer, the step counters, the learning-rate schedule's progress, the
last observation and the recent episodes' statistics. It leaves out the random generators (Python's, numpy's and
torch's global ones, the spaces' own, and any attribute an algorithm keeps out of its zip, such as the masked DQN's
exploration generator), everything the environments hold, and the callbacks' bookkeeping. :func:`save_state`
writes those beside each checkpoint, in ``<prefix>_state_<steps>_steps.pkl.gz`` (:func:`state_path`):

- the generators' states;
- the environments' history: every seed, option, reset, state-changing call and batch of actions they were given
  (:class:`RecordedVecEnv`). A resumed run builds its environments from its settings and plays the history again
  (:meth:`RecordedVecEnv.replay`). That brings back whatever they hold, without pickling any of it: each copy's
  generator and episode in progress, the workload's position (a mixed workload's turn), the monitor's counters.
  The replay must end on the observation SB3 saved, or the resume is refused: the trace, the synthesizer or the
  code changed since the checkpoint, and the run could not continue as it was;
- the state of each callback that has one (``state()`` and ``load_state(state)``): validation's best score and the
  step its next validation is due;
- what SB3's logger holds for its next log (the last update's ``train/`` values), put back into the resumed run's
  logger when it starts (:func:`put_log_back`);
- the sizes of the files the run appends to (``monitor.csv``, ``learning_curve.csv``), which :func:`cut_files`
  cuts back to, so that what a killed run wrote after its checkpoint is not written twice.

TensorBoard's event files are not cut: a resumed run goes on in the killed run's folder (SB3's
``reset_num_timesteps=False``), and :func:`hide_tensorboard_after` first writes TensorBoard's own restart marker
there (``SummaryWriter(purge_step=...)``), which hides every point the killed run logged after the checkpoint's step;
without it, the curves between the checkpoint and the kill were drawn twice.

Checkpoints are taken when a rollout starts (:class:`agents.callbacks.AtomicCheckpointCallback`): PPO's rollout
buffer is empty then, so nothing of it needs saving. A DQN's replay buffer is saved beside the checkpoint.

Replaying costs only the environments' own time, no network: :file:`docs/protocol.md` gives a measurement.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import pickle
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from hpcgym.io import write_bytes

#: bumped when the state file's layout changes (an older one is refused, not misread)
STATE_VERSION = 1
#: model attributes that SB3's zip leaves out and a checkpoint need not carry: saved elsewhere, or rebuilt by load
NOT_CARRIED = frozenset({"policy", "device", "env", "replay_buffer", "rollout_buffer", "_vec_normalize_env",
                         "_logger", "_custom_logger"})
#: environment methods that only read (:meth:`RecordedVecEnv.env_method` does not record them)
READ_ONLY = frozenset({"action_masks"})


class RecordedVecEnv(VecEnvWrapper):
    """A ``VecEnv`` wrapper that records what the environments were given, to play it again in another process.

    Put it outermost (the algorithm's ``env``). It records ``seed``, ``set_options``, ``reset``, ``set_attr`` and
    ``env_method`` calls (but the read-only ones of :data:`READ_ONLY`) in order, and every batch of actions.
    """

    def __init__(self, venv: VecEnv):
        super().__init__(venv)
        self.actions: list[np.ndarray] = []
        self.events: list[tuple[int, str, tuple]] = []  # (action batches before it, method, arguments)

    def _record(self, method: str, *args: Any) -> None:
        self.events.append((len(self.actions), method, args))

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Record, then seed the environments (at their next reset)."""
        self._record("seed", seed)
        return self.venv.seed(seed)

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        """Record, then set the options of the next reset."""
        self._record("set_options", options)
        return self.venv.set_options(options)

    def reset(self) -> Any:
        """Record, then reset."""
        self._record("reset")
        return self.venv.reset()

    def step_async(self, actions: np.ndarray) -> None:
        """Record the actions, then pass them on."""
        self.actions.append(np.array(actions, copy=True))
        self.venv.step_async(actions)

    def step_wait(self) -> Any:
        """The inner environments' step."""
        return self.venv.step_wait()

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        """Record, then set the attribute."""
        self._record("set_attr", attr_name, value, indices)
        return self.venv.set_attr(attr_name, value, indices)

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list:
        """Record (unless the method only reads), then call the method."""
        if method_name not in READ_ONLY:
            self._record("env_method", method_name, method_args, indices, method_kwargs)
        return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)

    def history(self) -> dict[str, Any]:
        """What the environments were given so far (compact: actions in the smallest integer type that holds them)."""
        actions = np.stack(self.actions) if self.actions else np.zeros((0, self.num_envs), np.int64)
        dtype = actions.dtype
        if np.issubdtype(dtype, np.integer) and actions.size and actions.min() >= 0:
            actions = actions.astype(np.min_scalar_type(int(actions.max())))
        return {"actions": actions, "dtype": dtype.str, "events": list(self.events)}

    def replay(self, history: Mapping[str, Any]) -> Any:
        """Play ``history`` (:meth:`history`) on these freshly built environments; return the last observation.

        Monitors below this wrapper write nothing meanwhile: their files already hold those episodes.
        """
        actions = history["actions"].astype(np.dtype(history["dtype"]))
        events, obs, done = history["events"], None, 0
        with _muted(self.venv):
            for k in range(len(actions) + 1):
                while done < len(events) and events[done][0] == k:
                    obs = self._apply(events[done][1], events[done][2], obs)
                    done += 1
                if k < len(actions):
                    self.venv.step_async(actions[k])
                    obs = self.venv.step_wait()[0]
        self.actions, self.events = list(actions), list(events)
        return obs

    def _apply(self, method: str, args: tuple, obs: Any) -> Any:
        if method == "reset":
            return self.venv.reset()
        if method == "env_method":
            name, method_args, indices, kwargs = args
            self.venv.env_method(name, *method_args, indices=indices, **kwargs)
        else:
            getattr(self.venv, method)(*args)
        return obs


@contextlib.contextmanager
def _muted(env: VecEnv) -> Iterator[None]:
    """Silence the ``results_writer`` (SB3's monitor file) of every wrapper from ``env`` down, for a replay."""
    layers = [layer for layer in _layers(env) if vars(layer).get("results_writer") is not None]
    writers = [layer.results_writer for layer in layers]
    for layer in layers:
        layer.results_writer = None
    try:
        yield
    finally:
        for layer, writer in zip(layers, writers, strict=True):
            layer.results_writer = writer


def _layers(env: Any) -> Iterator[Any]:
    while env is not None:
        yield env
        env = vars(env).get("venv")  # vars: a wrapper's getattr would look further down


# ---- the state file -------------------------------------------------------------------------------------------
def state_path(checkpoint: Path) -> Path:
    """The state file of a checkpoint (``model_1024_steps.zip`` -> ``model_state_1024_steps.pkl.gz``)."""
    prefix, _, rest = checkpoint.name.rpartition("_")  # rest: "steps.zip"
    prefix, _, steps = prefix.rpartition("_")
    return checkpoint.with_name(f"{prefix}_state_{steps}_{rest.removesuffix('.zip')}.pkl.gz")


def save_state(path: Path, model: Any, callbacks: Mapping[str, Any], appended: Sequence[Path]) -> None:
    """Write what ``model``'s checkpoint needs besides its zip (see the module docstring), atomically.

    Args:
        path: the state file (:func:`state_path` of the checkpoint).
        model: the algorithm; its ``env`` must be a :class:`RecordedVecEnv`.
        callbacks: the callbacks with a ``state()``, by name.
        appended: the files the run appends to.
    """
    env = model.get_env()
    if not isinstance(env, RecordedVecEnv):
        raise TypeError("a checkpoint that resumes exactly needs the model's env wrapped in RecordedVecEnv")
    state = {"version": STATE_VERSION, "timesteps": int(model.num_timesteps), "rng": _generators(model),
             "model": {name: getattr(model, name) for name in _carried(model)}, "env": env.history(),
             "callbacks": {name: cb.state() for name, cb in callbacks.items()}, "log": pending_log(model),
             "files": {os.path.relpath(f, path.parent): (f.stat().st_size if f.exists() else None) for f in appended}}
    write_bytes(path, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), gzip_by_suffix=True)


def load_state(path: Path) -> dict[str, Any]:
    """Read a state file written by :func:`save_state` (a file from this project: it holds pickles)."""
    state = pickle.loads(gzip.decompress(path.read_bytes()))
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"{path}: a checkpoint state of version {state.get('version')}, not {STATE_VERSION}; "
                         "start the run over (--overwrite)")
    return state


def cut_files(state: Mapping[str, Any], path: Path) -> None:
    """Cut the appended files back to their sizes at the checkpoint (``path``: the state file); remove new ones."""
    for name, size in state["files"].items():
        file = Path(os.path.normpath(path.parent / name))  # lexically: "../monitor.csv" beside the checkpoints
        if size is None:
            file.unlink(missing_ok=True)
        elif file.exists() and file.stat().st_size > size:
            os.truncate(file, size)


def pending_log(model: Any) -> dict[str, dict[str, Any]]:
    """What SB3's logger holds for its next log: at a checkpoint, the ``train/`` values of the last update."""
    logger = getattr(model, "_logger", None)
    if logger is None:
        return {}
    return {"values": dict(logger.name_to_value), "counts": dict(logger.name_to_count),
            "excluded": dict(logger.name_to_excluded)}


def put_log_back(logger: Any, log: Mapping[str, Mapping[str, Any]]) -> None:
    """Give a resumed run's new logger what the killed run's held at the checkpoint (:func:`pending_log`)."""
    logger.name_to_value.update(log.get("values", {}))
    logger.name_to_count.update(log.get("counts", {}))
    logger.name_to_excluded.update(log.get("excluded", {}))


def hide_tensorboard_after(log_dir: str | os.PathLike | None, name: str, step: int) -> None:
    """Hide the points a killed run logged after ``step`` (its checkpoint's) from TensorBoard (module docstring).

    The points logged *at* ``step`` stay: a checkpoint is taken when a rollout starts, after that step's log. The
    resumed run logs the rest again, its first log with the ``train/`` values the checkpoint carried
    (:func:`pending_log`).

    ``log_dir`` and ``name`` are the model's ``tensorboard_log`` and ``learn``'s ``tb_log_name``: the run goes on in
    SB3's latest ``<name>_<id>`` folder there. Nothing to do without one.
    """
    from stable_baselines3.common.utils import get_latest_run_id

    run_id = get_latest_run_id(str(log_dir), name) if log_dir else 0
    if run_id:
        from torch.utils.tensorboard import SummaryWriter

        SummaryWriter(os.path.join(str(log_dir), f"{name}_{run_id}"), purge_step=step + 1).close()


def restore(state: Mapping[str, Any], model: Any, callbacks: Mapping[str, Any]) -> None:
    """Put the checkpoint's state back into ``model`` (just loaded from its zip), its environments and ``callbacks``.

    Raises:
        ValueError: the environments, played again, do not reach the observation the checkpoint saved.
    """
    env = model.get_env()
    obs = env.replay(state["env"])
    if not _equal(obs, model._last_obs):
        raise ValueError(f"the training environments, replayed to step {state['timesteps']}, do not give the "
                         "observation the checkpoint saved: the trace, the synthesizer or the code changed since "
                         "the run started, so it cannot continue as it was; start it over (--overwrite)")
    for name, value in state["model"].items():
        setattr(model, name, value)
    for name, cb in callbacks.items():
        if name in state["callbacks"]:
            cb.load_state(state["callbacks"][name])
    _set_generators(model, state["rng"])  # last: nothing may draw from them before training goes on


def _carried(model: Any) -> list[str]:
    """The attributes SB3's zip leaves out that a checkpoint carries.

    Not the networks (a DQN's ``q_net`` is an alias of its policy's, which ``load`` rebuilds), nor what
    :data:`NOT_CARRIED` names.
    """
    import torch

    return [n for n in model._excluded_save_params() if n not in NOT_CARRIED and hasattr(model, n)
            and not isinstance(getattr(model, n), torch.nn.Module)]


def _generators(model: Any) -> dict[str, Any]:
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
             "spaces": {name: getattr(model, name).np_random.bit_generator.state
                        for name in ("action_space", "observation_space")}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_generators(model: Any, state: Mapping[str, Any]) -> None:
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    for name, bits in state["spaces"].items():
        getattr(model, name).np_random.bit_generator.state = bits


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a is not None and b is not None and np.array_equal(np.asarray(a), np.asarray(b))
