"""The run folder: what a training run writes where, how runs are named, who may write, and how to read one back.

``experiments.train`` writes one folder per run, ``<runs dir>/<run name>/`` (:class:`RunFolder`):

==========================  ======================================================================================
``args.json``               the run's settings as given (``experiments.train.Args``)
``scales.json``             the observation time scale the run resolved (``args.json`` keeps ``--time-scale``)
``model.zip``               the network kept: the best on the validation windows (else the last)
``last.zip``, ``best.zip``  the final network, and the best one on validation so far
``untrained.zip``           the untrained network (same seed, no training)
``cloned.zip``              the behaviour-cloned warm start (with ``--clone``); ``warm_start.json`` says which of
                            the two RL started from, and how well the clone reproduced its heuristic
``learning_curve.csv/.png`` validation bsld against training steps
``monitor.csv``, ``tb/``    training episodes; TensorBoard logs
``checkpoints/``            ``model_<steps>_steps.zip`` (and a DQN's newest replay buffer), for ``--resume``
``eval/``                   the evaluation on the test windows (:data:`PER_WINDOW`, :data:`PER_JOB`,
                            :data:`SUMMARY`, :data:`SUMMARY_MD`; ``experiments.evaluate --out`` writes the same)
``study-run.json``          written by ``experiments.study``: the seconds each stage took
``.lock``                   the PID of the process writing to the folder
==========================  ======================================================================================

Runs are named ``<base>-s<seed>`` (:func:`run_name`), the base being ``--run-name`` or ``<trace>-<workload>-<algo>``
(:func:`default_base`); the table across the seeds of one base goes to ``<base>-seeds/`` (:func:`seeds_folder`).
Every table compares with :data:`REFERENCE`. The fit cache of a runs folder is ``<runs dir>/cache/``
(:func:`fit_cache`). No other module of ``experiments`` spells a file name of these folders.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from baselines.grid import label
from hpcgym import cli
from hpcgym import io as hpcgym_io

T = TypeVar("T")

#: where ``experiments.train`` puts run folders unless ``--runs-dir`` says otherwise
RUNS_DIR = "runs"
#: the scheduler every results table compares with (win rates, shares of improvement, the seeds' check), and its name
REFERENCE_HEURISTIC = ("fcfs", "easy")
REFERENCE = label(*REFERENCE_HEURISTIC)
#: an evaluation's files (in a run's ``eval/``, or any ``experiments.evaluate --out`` folder)
PER_WINDOW, PER_JOB, SUMMARY, SUMMARY_MD = "per_window.csv", "per_job.csv", "summary.csv", "summary.md"
#: the across-seed table's files beside :data:`SUMMARY` and :data:`SUMMARY_MD`
PER_SEED, CURVES_PNG = "per_seed.csv", "learning_curves.png"
#: the prefix of the checkpoints' file names
CHECKPOINT_PREFIX = "model"
#: Flags a resumed run may change (the others must match the run's saved ``args.json``).
RESUMABLE = {"timesteps", "resume", "overwrite", "runs_dir", "run_name", "threads", "jobs", "quiet", "eval_windows",
             "eval_length"}


# ---- names -----------------------------------------------------------------------------------------------------
def default_base(trace_label: str, workload: str, algo: str) -> str:
    """The name shared by the seeds of one setting when ``--run-name`` is not given."""
    return f"{trace_label}-{workload}-{algo}"


def run_name(base: str, seed: int) -> str:
    """A seed's run folder name, ``<base>-s<seed>`` (:func:`base_of` inverts it)."""
    return f"{base}-s{seed}"


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
@dataclass
class Agent:
    """A network to evaluate and the environment settings it was trained with."""

    model: Any
    backfill: str = "none"
    slots: int = 128
    order: str | None = None
    kind: str = "agent"
    time_scale: float | None = None  #: the observation scale it trained with (None: the test workload's own)


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
    def settings(self) -> dict[str, Any]:
        """The saved ``args.json``."""
        return json.loads(self.args_json.read_text())

    def evaluated(self) -> bool:
        """Whether the run has an evaluation (``eval/per_window.csv``)."""
        return self.per_window.exists()

    def time_scale(self) -> float | None:
        """The time scale the run resolved and saved in ``scales.json`` (None: none saved)."""
        return float(json.loads(self.scales_json.read_text())["time_scale"]) if self.scales_json.exists() else None

    def save_time_scale(self, scale: float) -> None:
        """Write ``scales.json``."""
        hpcgym_io.write_text(self.scales_json, json.dumps({"time_scale": scale}, indent=2))

    def trained_time_scale(self, settings: dict[str, Any]) -> float | None:
        """The observation scale the run trained with: ``scales.json``'s, else its ``--time-scale`` (None: unset)."""
        saved = self.time_scale()
        return saved if saved is not None else settings.get("time_scale") or None

    def load_network(self, path: Path) -> tuple[Any, dict[str, Any]]:
        """A network of the run (``model.zip``: the one best on validation) and the run's settings."""
        settings = self.settings()
        if settings["algo"] == "ppo":
            from sb3_contrib import MaskablePPO

            return MaskablePPO.load(path, device="cpu"), settings
        from agents.dqn import MaskedDQN

        return MaskedDQN.load(path, device="cpu"), settings

    def agents(self) -> dict[str, Agent]:
        """The networks that exist, by row label: the agent, its untrained network, its cloned start."""
        out = {}
        for path, kind, suffix in ((self.model, "agent", ""), (self.untrained, "untrained", " (untrained)"),
                                   (self.cloned, "cloned", " (cloned, no RL)")):
            if path.exists():
                model, args = self.load_network(path)
                order = args.get("order") if args.get("backfill", "none") != "none" else None
                out[self.name + suffix] = Agent(model, args["backfill"], args["slots"], order, kind,
                                                self.trained_time_scale(args))
        return out

    # ---- writing ----
    @contextlib.contextmanager
    def owned(self, resume: bool, overwrite: bool) -> Iterator[RunFolder]:
        """Hold the folder for one process (a ``.lock`` file with its PID) while a run writes to it.

        A fresh run refuses a folder that already holds files unless ``overwrite`` (which empties it first); a
        resumed run needs it. A lock left by a process that is gone (killed) is taken over.
        """
        if self.path.exists() and any(self.path.iterdir()) and not resume:
            if not overwrite:
                raise cli.UsageError(f"the run folder {self.path} is not empty: pass --resume to continue that run, "
                                     "--overwrite to start it over, or another --run-name")
            self._check_free()
            shutil.rmtree(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._check_free()
        self.lock.write_text(str(os.getpid()))
        try:
            yield self
        finally:
            self.lock.unlink(missing_ok=True)

    def _check_free(self) -> None:
        if self.lock.exists():
            pid = int(self.lock.read_text().strip() or 0)
            try:
                os.kill(pid, 0)
            except (OSError, ValueError):
                return  # stale: its process is gone
            if pid != os.getpid():
                raise cli.UsageError(f"the run folder {self.path} is in use by process {pid}")


def resumed(args: T, given: set[str]) -> T:
    """With ``args.resume``: the run's saved settings, with the :data:`RESUMABLE` flags given now.

    ``args`` is an ``experiments.train.Args`` (``runs_dir``, ``name``, ``resume``); ``given``: the fields given on
    the command line.

    Raises:
        cli.UsageError: there is no such run (with the names of close ones), or a flag given contradicts its settings.
    """
    if not args.resume:
        return args
    folder = RunFolder(Path(args.runs_dir) / args.name)
    if not folder.args_json.exists():
        runs = sorted(RunFolder(p.parent).name for p in Path(args.runs_dir).glob(f"*/{folder.args_json.name}"))
        close = difflib.get_close_matches(args.name, runs, n=3, cutoff=0.5)
        raise cli.UsageError(f"--resume: no run {args.name!r} in {args.runs_dir}/" +
                             (f" (did you mean {', '.join(close)}?)" if close else " (give its --run-name)"))
    saved = folder.settings()
    known = {f.name for f in dataclasses.fields(args)}
    conflicts = [f"--{k.replace('_', '-')} {getattr(args, k)!r} (the run has {saved[k]!r})"
                 for k in sorted(given - RESUMABLE) if k in saved and saved[k] != getattr(args, k)]
    if conflicts:
        raise cli.UsageError(f"--resume continues {folder.path} with its saved settings; these flags contradict them: "
                             f"{'; '.join(conflicts)}")
    keep = {k: getattr(args, k) for k in RESUMABLE & given}
    keep.update(resume=True, run_name=args.name)
    return dataclasses.replace(type(args)(**{k: v for k, v in saved.items() if k in known}), **keep)
