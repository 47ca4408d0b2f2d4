"""The run folder: what a run writes where, how runs are named, how to read one back, and the checks on it.

The checks refuse a bad folder (missing, damaged, unwritable, misnamed) before any work.

``experiments.train`` writes one folder per run, ``<runs dir>/<run name>/`` (:class:`RunFolder`):

==========================  ======================================================================================
``args.json``               the run's recipe (:class:`experiments.recipe.Recipe`; read back by :meth:`RunFolder.recipe`)
``scales.json``             the observation time scale the run resolved (``args.json`` keeps ``--time-scale``)
``model.zip``               the network kept: the best on the validation windows (else the last)
``last.zip``, ``best.zip``  the final network, and the best one on validation so far
``untrained.zip``           the untrained network (same seed, no training)
``cloned.zip``              the behaviour-cloned warm start (with ``--clone``); ``warm_start.json`` says which of
                            the two RL started from, and how well the clone reproduced its heuristic
``learning_curve.csv/.png`` validation bsld against training steps
``monitor.csv``, ``tb/``    training episodes; TensorBoard logs
``checkpoints/``            the newest three ``model_<steps>_steps.zip`` (and a DQN's newest replay buffer), for
                            ``--resume``
``eval/``                   the evaluation on the test windows (:data:`PER_WINDOW`, :data:`PER_JOB`,
                            :data:`SUMMARY`, :data:`SUMMARY_MD`; ``experiments.evaluate --out`` writes the same),
                            and the run's verdict (:data:`VERDICT`, also the first line of ``summary.md``)
``study-run.json``          written by ``experiments.study``: the seconds each stage took
``.lock``                   the PID of the process writing to the folder (created exclusively; a lock whose
                            process is gone, or whose PID a later process took, is stale)
==========================  ======================================================================================

:class:`Agent` is what an evaluation plays: a run's network, or any object that follows the agent protocol
(:class:`AgentModel`: SB3's ``predict``), with the environment settings it plays with.

Runs are named ``<base>-s<seed>`` (:func:`run_name`), the base being ``--run-name`` or ``<trace>-<workload>-<algo>``
(:func:`default_base`; both defined with the recipe that names the run, :mod:`experiments.recipe`); the table across the
seeds of one base goes to ``<base>-seeds/`` (:func:`seeds_folder`). Every table compares with :data:`BASELINE`. The fit
cache of a runs folder is ``<runs dir>/cache/`` (:func:`fit_cache`). No other module of ``experiments`` spells a file
name of these folders.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from baselines.grid import label
from experiments.protocol import BASELINE_HEURISTIC
from experiments.recipe import RUNS_DIR as RUNS_DIR  # the names of runs live with the recipe that names them
from experiments.recipe import Recipe, agent_env, fields, flag_of, resolve
from experiments.recipe import default_base as default_base
from experiments.recipe import run_name as run_name
from hpcgym import cli
from hpcgym import io as hpcgym_io

#: the name of the scheduler every results table compares with (:data:`experiments.protocol.BASELINE_HEURISTIC`)
BASELINE = label(*BASELINE_HEURISTIC)
#: an evaluation's files (in a run's ``eval/``, or any ``experiments.evaluate --out`` folder)
PER_WINDOW, PER_JOB, SUMMARY, SUMMARY_MD = "per_window.csv", "per_job.csv", "summary.csv", "summary.md"
#: a training run's verdict beside its evaluation (:mod:`experiments.training.verdict`)
VERDICT = "verdict.json"
#: the across-seed table's files beside :data:`SUMMARY` and :data:`SUMMARY_MD`
PER_SEED, CURVES_PNG = "per_seed.csv", "learning_curves.png"
#: the prefix of the checkpoints' file names
CHECKPOINT_PREFIX = "model"
#: Flags a resumed run may change (the others must match the run's saved ``args.json``).
RESUMABLE = {"timesteps", "resume", "overwrite", "runs_dir", "run_name", "threads", "jobs", "quiet", "eval_windows",
             "eval_length"}
#: the longest file name, in bytes, that Linux and macOS file systems take
NAME_MAX = 255


# ---- names -----------------------------------------------------------------------------------------------------
def check_name(name: str) -> None:
    """Refuse a run name that is not one plain folder name, or is too long to be one (:class:`cli.UsageError`)."""
    if name in ("", ".", "..") or "/" in name or "\0" in name or (os.altsep and os.altsep in name):
        raise cli.UsageError(f"--run-name {name!r}: a run name is one folder's name (no '/', not '.' or '..')")
    if len(os.fsencode(name)) > NAME_MAX:
        raise cli.UsageError(f"the run name {name[:40]}... is {len(os.fsencode(name))} bytes long, more than the "
                             f"{NAME_MAX} a file name may have: give a shorter --run-name")


def close_runs(runs_dir: str | Path, name: str) -> list[str]:
    """The names of the run folders in ``runs_dir`` close to ``name`` (for "did you mean")."""
    found = sorted(p.parent.name for p in Path(runs_dir).glob("*/args.json")) if Path(runs_dir).is_dir() else []
    return difflib.get_close_matches(name, found, n=3, cutoff=0.5)


def check_writable(path: str | Path, what: str) -> None:
    """Refuse (one line) a folder that could not be made or written: a read-only file system, no permission.

    Nothing is left behind: the check makes and removes a temporary folder in ``path``, or in its nearest parent
    that exists.
    """
    path = Path(path)
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-check-", dir=existing))
    except OSError as exc:
        raise cli.UsageError(f"cannot write {what} {path}: {existing}: {exc.strerror or exc}") from None


def check_distinct(folders: Sequence[RunFolder]) -> None:
    """Refuse the same run folder given twice, and two runs whose rows would have the same label (one name)."""
    seen: dict[str, RunFolder] = {}
    for folder in folders:
        other = seen.setdefault(folder.name, folder)
        if other is not folder:
            same = other.path.resolve() == folder.path.resolve()
            raise cli.UsageError(f"the run {folder.path} is given twice" if same else
                                 f"two runs are named {folder.name} ({other.path}, {folder.path}): their rows "
                                 "would share one label; give one of them")


def base_of(name: str) -> str:
    """The base of a run folder name (``theta-real-ppo-s3`` -> ``theta-real-ppo``)."""
    return name.rsplit("-s", 1)[0]


def seeds_folder(runs_dir: str | Path, base: str) -> Path:
    """Where the table across the seeds of ``base`` goes."""
    return Path(runs_dir) / f"{base}-seeds"


def fit_cache(runs_dir: str | Path) -> Any:
    """The fit cache of a runs folder (:class:`synth.cache.FitCache` in ``<runs dir>/cache``)."""
    from synth.cache import FitCache

    return FitCache(Path(runs_dir) / "cache")


def evaluated_runs(runs_dir: str | Path) -> list[RunFolder]:
    """The run folders in ``runs_dir`` that hold an evaluation, the most recently evaluated last."""
    found = [RunFolder(p) for p in sorted(Path(runs_dir).iterdir())] if Path(runs_dir).is_dir() else []
    return sorted((r for r in found if r.evaluated()), key=lambda r: r.per_window.stat().st_mtime)


# ---- the networks ----------------------------------------------------------------------------------------------
@runtime_checkable
class AgentModel(Protocol):
    """What ``experiments.evaluate`` plays: anything with Stable-Baselines3's ``predict`` (the agent protocol).

    ``predict(obs, deterministic=True)`` gets a batch of observations, ``(n, slots + 1, features)`` float32 (the
    environment's, :class:`hpcgym.env.SchedulingEnv`), and returns ``(actions, state)``: ``actions`` one slot per
    row, ``(n,)`` integers; ``state`` is ignored. If ``predict`` has an ``action_masks`` parameter (as sb3-contrib's
    ``MaskablePPO``), it also gets the valid slots, ``(n, slots)`` booleans. An agent without it that picks an
    empty slot has its action mapped to a valid one (``invalid_action="wrap"``), and the evaluation warns.
    """

    def predict(self, observation: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """``(actions, state)`` for a batch of observations."""


@dataclass
class Agent:
    """A network (or any :class:`AgentModel`) to evaluate, and the environment settings it plays with."""

    model: Any
    backfill: str = "none"
    slots: int = 128
    order: Any = None  #: the backfill scan order: a policy or its name (None: the backfilling's own)
    kind: str = "agent"
    time_scale: float | None = None  #: the observation scale it trained with (None: the test workload's own)
    #: more :class:`hpcgym.env.SchedulingEnv` arguments, e.g. ``{"predictor": "last2", "features": "v1"}``
    env: dict[str, Any] = dataclasses.field(default_factory=dict)


#: The :class:`Agent` settings a bare model may carry as attributes (``backfill = "easy"`` on its class).
AGENT_SETTINGS = ("backfill", "slots", "order", "time_scale", "env")


def as_agent(obj: Any) -> Agent:
    """``obj`` as an :class:`Agent`: an Agent as it is; a model with its settings from its attributes, if any.

    Raises:
        TypeError: ``obj`` has no ``predict`` (it does not follow :class:`AgentModel`).
    """
    if isinstance(obj, Agent):
        return obj
    if not isinstance(obj, AgentModel):
        raise TypeError(f"an agent needs a predict(obs, deterministic=...) method (experiments.runs.AgentModel); "
                        f"{type(obj).__name__} has none")
    settings = {k: getattr(obj, k) for k in AGENT_SETTINGS if getattr(obj, k, None) is not None}
    return Agent(obj, **settings)


def load_agent(spec: str) -> tuple[str, Agent]:
    """``[LABEL=]MODULE:OBJECT`` (``experiments.evaluate --agent``): the row label and the agent.

    ``OBJECT`` is an :class:`Agent`, an :class:`AgentModel`, or a class or function that takes no argument and
    returns one of those. The label defaults to ``OBJECT``'s name. Importing the module runs its code: name only
    modules you trust.

    Raises:
        cli.UsageError: a malformed spec, a module or object that is not there, or an object that is no agent.
    """
    import importlib

    label, _, target = spec.rpartition("=")
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise cli.UsageError(f"--agent {spec!r}: expected [LABEL=]MODULE:OBJECT, e.g. mine=mypkg.agents:MyAgent")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise cli.UsageError(f"--agent {spec!r}: {type(exc).__name__}: {exc}") from None
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, (Agent, AgentModel))):
        obj = obj()
    try:
        return label or attr, as_agent(obj)
    except TypeError as exc:
        raise cli.UsageError(f"--agent {spec!r}: {exc}") from None


# ---- the folder ------------------------------------------------------------------------------------------------
class RunFolder:
    """A training run's folder: the paths of its files (see the module docstring), its settings, its networks.

    Args:
        path: the folder, ``<runs dir>/<run name>``.
    """

    def __init__(self, path: str | Path):
        p = self.path = Path(path)
        self.name = p.name
        self.args_json, self.scales_json = p / "args.json", p / "scales.json"
        self.model, self.last, self.best = p / "model.zip", p / "last.zip", p / "best.zip"
        self.untrained, self.cloned, self.warm_start = p / "untrained.zip", p / "cloned.zip", p / "warm_start.json"
        self.curve, self.curve_png = p / "learning_curve.csv", p / "learning_curve.png"
        self.monitor, self.tensorboard, self.checkpoints = p / "monitor.csv", p / "tb", p / "checkpoints"
        self.eval = p / "eval"
        self.per_window, self.per_job = self.eval / PER_WINDOW, self.eval / PER_JOB
        self.summary_md, self.verdict = self.eval / SUMMARY_MD, self.eval / VERDICT
        self.study_record = p / "study-run.json"
        self.log = p.parent / f"{p.name}.log"  #: beside the folder: a study's worker writes the run's output there
        self.lock = p / ".lock"

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)

    def __fspath__(self) -> str:
        return str(self.path)

    # ---- reading ----
    def recipe(self) -> Recipe:
        """The run's recipe: its ``args.json`` (of any version) read back, the one reader of a run's settings.

        Raises:
            cli.UsageError: the file is unreadable, is not a training run's, or holds settings that cannot run.
        """
        try:
            settings = json.loads(self.args_json.read_text())
        except (OSError, ValueError) as exc:
            raise cli.UsageError(f"{self.args_json}: unreadable ({cli.message(exc)})") from None
        if not isinstance(settings, dict) or "algo" not in settings:
            raise cli.UsageError(f"{self.args_json}: not the settings of a training run (no 'algo')")
        try:
            return Recipe.from_settings(settings)
        except (cli.UsageError, TypeError) as exc:
            raise cli.UsageError(f"{self.args_json}: {cli.message(exc)}") from None

    def check(self, need: str = "settings") -> RunFolder:
        """Refuse (:class:`cli.UsageError`, one line) a folder that is not a readable run holding what is needed.

        Args:
            need: ``"settings"`` (a readable ``args.json``), ``"model"`` (and an intact ``model.zip``) or
                ``"evaluation"`` (and ``eval/per_window.csv``).

        Returns:
            the folder itself.
        """
        if not self.path.is_dir():
            close = close_runs(self.path.parent, self.name)
            raise cli.UsageError(f"no run folder {self.path}" + (f" (did you mean {', '.join(close)}?)" if close else
                                                                  ""))
        if not self.args_json.exists():
            raise cli.UsageError(f"{self.path} is not a training run folder (it has no {self.args_json.name}); give "
                                 "a folder that experiments.train wrote")
        self.recipe()
        if need == "model":
            self._check_network(self.model)
        if need == "evaluation" and not self.evaluated():
            raise cli.UsageError(f"{self.path} has no evaluation ({self.per_window.relative_to(self.path)}): "
                                 f"run python -m experiments.evaluate --model {self.path}")
        return self

    def _check_network(self, path: Path) -> None:
        from agents.callbacks import intact

        if not path.exists():
            raise cli.UsageError(f"{self.path} has no {path.name}: its training did not finish; continue it with "
                                 f"python -m experiments.train --runs-dir {self.path.parent} --run-name {self.name} "
                                 "--resume")
        if not intact(path):
            raise cli.UsageError(_damaged(path, self))

    def learning_curve(self, kept: bool = False) -> Any:
        """``learning_curve.csv`` as a table (``timesteps, val_bsld, network``; empty without validation windows).

        ``kept``: only the rows of networks the run could keep (not the warm-start candidates marked "not kept").
        """
        import pandas as pd

        if not self.curve.is_file():
            return pd.DataFrame(columns=["timesteps", "val_bsld", "network"])
        curve = pd.read_csv(self.curve)
        return curve[~curve["network"].astype(str).str.contains("not kept")] if kept else curve

    def chosen_start(self) -> str | None:
        """The network RL started from (``warm_start.json``'s ``chosen``: ``untrained``, ``cloned``, ...), or None."""
        return json.loads(self.warm_start.read_text()).get("chosen") if self.warm_start.is_file() else None

    def evaluated(self) -> bool:
        """Whether the run has an evaluation (``eval/per_window.csv``)."""
        return self.per_window.exists()

    def time_scale(self) -> float | None:
        """The time scale the run resolved and saved in ``scales.json`` (None: none saved)."""
        return float(json.loads(self.scales_json.read_text())["time_scale"]) if self.scales_json.exists() else None

    def save_time_scale(self, scale: float) -> None:
        """Write ``scales.json``."""
        hpcgym_io.write_text(self.scales_json, json.dumps({"time_scale": scale}, indent=2))

    def trained_time_scale(self, recipe: Recipe) -> float | None:
        """The observation scale the run trained with: ``scales.json``'s, else its ``--time-scale`` (None: unset)."""
        saved = self.time_scale()
        return saved if saved is not None else recipe.environment.time_scale or None

    def load_network(self, path: Path) -> tuple[Any, Recipe]:
        """A network of the run (``model.zip``: the one best on validation) and the run's recipe.

        Raises:
            cli.UsageError: the file is damaged (with what to do about it).
        """
        recipe = self.recipe()
        if recipe.algorithm.algo == "ppo":
            from sb3_contrib import MaskablePPO as Algorithm
        else:
            from agents.dqn import MaskedDQN as Algorithm
        try:
            return Algorithm.load(path, device="cpu"), recipe
        except (ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:  # SB3: "wasn't a zip-file", no more
            raise cli.UsageError(_damaged(path, self) + f" ({cli.message(exc)})") from None

    def agents(self) -> dict[str, Agent]:
        """The networks that exist, by row label: the agent, its untrained network, its cloned start.

        Each plays in the run's environment (:func:`experiments.recipe.agent_env`), with the names of its recipe
        found once (:func:`experiments.recipe.resolve`).
        """
        out, env = {}, None
        for path, kind, suffix in ((self.model, "agent", ""), (self.untrained, "untrained", " (untrained)"),
                                   (self.cloned, "cloned", " (cloned, no RL)")):
            if path.exists():
                model, recipe = self.load_network(path)
                env = env if env is not None else agent_env(recipe, resolve(recipe, playing=True))
                mine = dict(env)
                out[self.name + suffix] = Agent(model, backfill=mine.pop("backfill"), slots=mine.pop("slots"),
                                                order=mine.pop("order"), kind=kind,
                                                time_scale=self.trained_time_scale(recipe), env=mine)
        return out

    # ---- writing ----
    def check_usable(self, resume: bool, overwrite: bool) -> None:
        """Refuse, before any work, what :meth:`owned` would refuse, and a folder that could not be written."""
        self.check_links()
        if self.path.exists() and any(self.path.iterdir()) and not resume and not overwrite:
            raise _not_empty(self.path)
        if self.path.exists():
            self._check_free()
        check_writable(self.path, "the run folder")

    @contextlib.contextmanager
    def owned(self, resume: bool, overwrite: bool) -> Iterator[RunFolder]:
        """Hold the folder for one process (a ``.lock`` file with its PID) while a run writes to it.

        A fresh run refuses a folder that already holds files unless ``overwrite`` (which empties it first); a
        resumed run needs it. A lock left by a process that is gone (killed, or its PID since reused) is taken
        over. The lock is created exclusively (``O_EXCL``): of two runs started at once, one is refused. A folder
        that is, or holds, a symbolic link is refused, so that nothing the run writes lands outside it.
        """
        self.check_links()
        if self.path.exists() and any(self.path.iterdir()) and not resume:
            if not overwrite:
                raise _not_empty(self.path)
            self._check_free()
            shutil.rmtree(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._take_lock()
        except FileExistsError:
            raise cli.UsageError(f"the run folder {self.path} was just taken by another process (its lock "
                                 f"{self.lock}); if no run is using it, remove that file") from None
        except OSError as exc:  # a read-only file system, a full disk: one line
            raise cli.UsageError(f"cannot write the run folder {self.path}: {cli.message(exc)}") from None
        try:
            yield self
        finally:
            self.lock.unlink(missing_ok=True)

    def discard_unfinished(self) -> None:
        """Remove the folder of a fresh run that failed before its first checkpoint (it holds nothing to resume)."""
        if self.path.is_dir() and not self.path.is_symlink() and not any(self.checkpoints.glob("*.zip")):
            shutil.rmtree(self.path, ignore_errors=True)

    def _take_lock(self) -> None:
        if self.lock.exists() or self.lock.is_symlink():
            self._check_free()  # refuses a live owner; a stale lock is removed below
            self.lock.unlink()
        hpcgym_io.create_exclusive(self.lock, str(os.getpid()))

    def check_links(self) -> None:
        """Refuse a run folder that is a symbolic link, or holds one (writes through it would leave the folder)."""
        if self.path.is_symlink():
            raise cli.UsageError(f"the run folder {self.path} is a symbolic link (to {os.readlink(self.path)}); give "
                                 "a real folder (--runs-dir can be the folder the link points into)")
        if not self.path.is_dir():
            return
        link = next((p for p in self.path.rglob("*") if p.is_symlink()), None)
        if link is not None:
            raise cli.UsageError(f"{link} is a symbolic link (to {os.readlink(link)}): a run writes only inside its "
                                 "folder; replace the link with a copy of the file, or remove it")

    def _check_free(self) -> None:
        """Refuse the folder while a live process holds its lock (a lock whose process is gone is stale)."""
        if not self.lock.exists():
            return
        text = self.lock.read_text().strip()
        if not text.isdigit():
            raise cli.UsageError(f"{self.lock}: not a lock written by a run (it should hold a process id, not "
                                 f"{text[:40]!r}); if no run is using {self.path}, remove that file")
        pid = int(text)
        if pid == os.getpid() or not _alive_since(pid, self.lock.stat().st_mtime):
            return  # ours, or stale: its process is gone (or the id now belongs to a process started after it)
        raise cli.UsageError(f"the run folder {self.path} is in use by process {pid} (its lock {self.lock}); if "
                             "that process is not a run of this folder, remove the lock file")


def _alive_since(pid: int, when: float) -> bool:
    """Whether process ``pid`` exists and started no later than ``when`` (a Unix time; unknown start: True)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # PermissionError: it exists, owned by another user
    started = _start_time(pid)
    return started is None or started <= when + 1  # a second of slack for the clocks' rounding


def _start_time(pid: int) -> float | None:
    """When process ``pid`` started (a Unix time), from Linux's ``/proc``; None elsewhere or when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime"))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: start time in clock ticks
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def _not_empty(path: Path) -> cli.UsageError:
    return cli.UsageError(f"the run folder {path} is not empty: pass --resume to continue that run, --overwrite to "
                          "start it over, or another --run-name")


def _damaged(path: Path, run: RunFolder) -> str:
    return (f"{path} is damaged (not a complete model file): train the run again (experiments.train --runs-dir "
            f"{run.path.parent} --run-name {run.name} --overwrite), or, if its checkpoints remain, continue it from "
            "the newest (--resume)")


def resumed(recipe: Recipe, given: set[str]) -> Recipe:
    """With ``--resume``: the run's saved recipe, with the :data:`RESUMABLE` settings given now.

    ``recipe``: the command line's (the flags given and the defaults); ``given``: the settings given explicitly.

    Raises:
        cli.UsageError: there is no such run (with the names of close ones), or a flag given contradicts its settings.
    """
    if not recipe.run.resume:
        return recipe
    folder, runs_dir, name = RunFolder(recipe.folder), recipe.run.runs_dir, recipe.name
    if not folder.args_json.exists():
        close = close_runs(runs_dir, name)
        raise cli.UsageError(f"--resume: no run {name!r} in {runs_dir}/" +
                             (f" (did you mean {', '.join(close)}?)" if close else " (give its --run-name)"))
    saved = folder.recipe()
    settings = given & {f.name for f in fields()}
    conflicts = [f"{flag_of(k)} {recipe.get(k)!r} (the run has {saved.get(k)!r})"
                 for k in sorted(settings - RESUMABLE) if saved.get(k) != recipe.get(k)]
    if conflicts:
        raise cli.UsageError(f"--resume continues {folder.path} with its saved settings; these flags contradict them: "
                             f"{'; '.join(conflicts)}")
    keep = {k: recipe.get(k) for k in RESUMABLE & settings}
    return saved.replace(**{"overwrite": False, **keep, "resume": True, "run_name": name})
