"""Train an RL batch scheduler on real or synthetic job streams, then evaluate it on held-out real windows.

Examples::

    python -m experiments.train --workload synthetic            # the defaults: Theta, EASY, PPO, 2-3 minutes
    python -m experiments.train --workload synthetic --seeds 0 1 2 3 4 --jobs 2   # five seeds and their table
    python -m experiments.train --workload real --trace sdsc-sp2 --backfill none
    python -m experiments.train --workload synthetic --synthesizer tvae --algo dqn
    python -m experiments.train --run-name my-run --resume       # continue a killed run from its last checkpoint

The script reads top to bottom from :class:`Args`. The protocol: the real trace is split chronologically, 70%
train and 30% test. The last ``val_fraction`` of the train part is the *validation* part;
training sees only the rest (its windows, or samples of a synthesizer fitted on it). Every ``val_every`` steps the
deterministic agent plays fixed validation windows, and ``model.zip`` is the best of those checkpoints
(``last.zip`` holds the final weights). The evaluation runs the agent, its untrained network (``untrained.zip``:
same seed, no training), its cloned start (``cloned.zip``, when ``--clone``) and every heuristic on identical
windows of the *test* split. Everything goes to ``runs/<run name>/``: ``args.json`` (the flags), ``scales.json``
(the observation's resolved time scale), TensorBoard logs (``tb/``: SB3's ``rollout/`` and ``train/`` keys,
``sched/bsld``, ``sched/fcfs`` and ``val/bsld``), checkpoints, ``learning_curve.csv`` and ``.png``, and ``eval/``.
With ``--seeds``, each seed gets its own run folder and ``runs/<name>-seeds/`` gets the table across seeds
(``experiments.seeds``).

The default recipe (EASY backfilling with the smallest-area-first scan order; a job scorer that also sees each
job's rank in its queue by walltime, nodes and area; a warm start cloned from smallest-area-first, kept only if it
beats the untrained network on validation; a log-ratio reward against that heuristic on the same window; 16
parallel windows; checkpoint selection on validation windows) was chosen on validation windows, by the sweep and
the clone studies in ``docs/results.md`` (``python -m experiments.recipe_sweep``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hpcgym import cli
from hpcgym import io as hpcgym_io


@dataclass
class Args:
    """Every knob of a training run (each one is a command-line flag)."""

    workload: str = field(default="synthetic", metadata={"help": "real | synthetic | mixed (real and synthetic "
                                                                 "windows alternately): what the agent trains on"})
    trace: str = field(default="theta", metadata={"help": "real trace (bundled name or file): its train split is the "
                                                          "training data, its test split the evaluation"})
    format: str = field(default="", metadata={"help": "the trace file's format: swf | alcf | mustang | csv; "
                                                      "empty: from its name and header"})
    machine: str = field(default="", metadata={"help": "the trace's machine: NAME or NODES[xCORES]; empty: the "
                                                       "trace's own (its header, or the format's machine)"})
    columns: str = field(default="", metadata={"help": "for --format csv: name=column pairs, e.g. "
                                                       "interarrival=interval,run=run_time,nodes=node_num"})
    round: str = field(default="", metadata={"help": "how to round values that should be whole and are not: ceil, "
                                                     "floor, nearest, or FIELD=MODE pairs such as nodes=ceil"})
    synthesizer: str = field(default="arrivals", metadata={"help": "synthesizer for --workload synthetic|mixed"})
    sample_pool: int = field(default=0, metadata={"help": "sample this many jobs from the synthesizer once (seeded by "
                                                          "--seed) and train on windows of them; 0: a new sample "
                                                          "every episode (slow for realtabformer and the SDV models)"})
    algo: str = field(default="ppo", metadata={"help": "ppo (sb3-contrib MaskablePPO) | dqn (masked DQN)"})
    policy: str = field(default="scorer", metadata={"help": "scorer (shared per-slot job scorer) | mlp"})
    ranks: str = field(default="walltime,nodes,area", metadata={"help": "job columns (hpcgym.observation."
                                                                        "JOB_FEATURES) whose rank within the "
                                                                        "queue the scorer also sees; empty: none"})
    timesteps: int = field(default=100_000, metadata={"help": "agent decisions to train for (all envs together)"})
    backfill: str = field(default="easy", metadata={"help": "none | easy: the simulator's backfilling"})
    order: str = field(default="saf", metadata={"help": "heuristic whose order the EASY backfill scan follows"})
    window: int = field(default=256, metadata={"help": "jobs per training episode"})
    slots: int = field(default=128, metadata={"help": "visible queue slots (the action space)"})
    time_scale: float = field(default=0.0, metadata={"help": "seconds the observation's log time features map to 1, "
                                                             "the same in training, validation and evaluation; 0: "
                                                             "the training workload's longest walltime (saved in "
                                                             "scales.json)"})
    objective: str = field(default="bsld", metadata={"help": "bsld | wait | turnaround | util"})
    reward: str = field(default="log", metadata={"help": "objective | log: the final reward's scale "
                                                         "(hpcgym.rewards)"})
    baseline: str = field(default="saf", metadata={"help": "heuristic the reward is relative to on the same "
                                                           "window; empty: none"})
    envs: int = field(default=16, metadata={"help": "parallel windows (copies of the vector environment)"})
    learning_rate: float = field(default=3e-4, metadata={"help": "optimizer learning rate"})
    n_steps: int = field(default=128, metadata={"help": "PPO rollout length per env (rollout = n_steps x envs)"})
    n_epochs: int = field(default=4, metadata={"help": "PPO epochs per rollout"})
    batch_size: int = field(default=512, metadata={"help": "minibatch size"})
    clip_range: float = field(default=0.2, metadata={"help": "PPO clip range"})
    target_kl: float = field(default=0.0, metadata={"help": "PPO: stop an update's epochs past this KL (0: never)"})
    gamma: float = field(default=1.0, metadata={"help": "discount: 1, since the only reward comes at the episode's "
                                                        "end"})
    gae_lambda: float = field(default=0.97, metadata={"help": "GAE lambda (PPO)"})
    ent_coef: float = field(default=0.0, metadata={"help": "entropy bonus (PPO)"})
    clone: str = field(default="saf", metadata={"help": "warm start (PPO and DQN): behaviour-clone this heuristic "
                                                        "first; empty: none"})
    clone_episodes: int = field(default=100, metadata={"help": "episodes of demonstrations for --clone"})
    clone_window: int = field(default=1024, metadata={"help": "jobs per demonstration episode (as long as the "
                                                              "validation and test windows: long queues are where "
                                                              "a clone of short windows errs)"})
    clone_epochs: int = field(default=40, metadata={"help": "passes over the demonstrations for --clone"})
    start: str = field(default="best", metadata={"help": "best: RL starts from whichever of the untrained and the "
                                                         "cloned network scores better on validation | clone"})
    val_fraction: float = field(default=0.2, metadata={"help": "last part of the train split kept for validation"})
    val_windows: int = field(default=16, metadata={"help": "validation windows (0: keep the last model)"})
    val_length: int = field(default=1024, metadata={"help": "jobs per validation window"})
    val_every: int = field(default=20_000, metadata={"help": "timesteps between validations"})
    seed: int = field(default=0, metadata={"help": "seed of the agent, the environment and the synthesizer"})
    seeds: list[int] = field(default_factory=list, metadata={"help": "several seeds, one run each, and the table "
                                                                     "across them (overrides --seed)"})
    jobs: int = field(default=1, metadata={"help": "seeds trained at once (processes) with --seeds"})
    eval_windows: int = field(default=20, metadata={"help": "test windows in the final evaluation (0: none)"})
    eval_length: int = field(default=1024, metadata={"help": "jobs per test window"})
    checkpoint_every: int = field(default=20_000, metadata={"help": "timesteps between checkpoints"})
    runs_dir: str = field(default="runs", metadata={"help": "where run folders go"})
    run_name: str = field(default="", metadata={"help": "run folder name; empty: trace-workload-algo-sSEED"})
    resume: bool = field(default=False, metadata={"help": "continue the run folder's run from its last intact "
                                                          "checkpoint, with the run's saved settings"})
    overwrite: bool = field(default=False, metadata={"help": "delete an existing run folder of this name first"})
    threads: int = field(default=1, metadata={"help": "torch threads (1 is fastest for these tiny networks)"})
    quiet: bool = field(default=False, metadata={"help": "no progress output (results and errors only)"})

    def read_kwargs(self) -> dict[str, Any]:
        """How to read the trace (:func:`hpcgym.traces.read`'s ``format``, ``machine``, ``columns``, ``round``)."""
        return {"format": self.format or None, "machine": self.machine or None, "columns": self.columns or None,
                "round": self.round or None}

    @property
    def trace_label(self) -> str:
        """The trace's short name (a path's file name without extensions)."""
        return Path(self.trace).name.split(".")[0] or "trace"

    @property
    def name(self) -> str:
        """The run folder's name."""
        return self.run_name or f"{self.trace_label}-{self.workload}-{self.algo}-s{self.seed}"


#: Flags a resumed run may change (the others must match the run's saved ``args.json``).
RESUMABLE = {"timesteps", "resume", "overwrite", "runs_dir", "run_name", "threads", "jobs", "quiet", "eval_windows",
             "eval_length"}


CHOICES = {"workload": ("real", "synthetic", "mixed"), "algo": ("ppo", "dqn"), "policy": ("scorer", "mlp"),
           "backfill": ("none", "easy"), "reward": ("objective", "log"), "start": ("best", "clone")}


def _parser() -> argparse.ArgumentParser:
    """The command line of :class:`Args` (one flag per field, with its help and default)."""
    ap = cli.ArgumentParser(prog="python -m experiments.train", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            ap.add_argument(flag, action="store_true", help=f.metadata["help"])
        elif str(f.type).startswith("list"):
            ap.add_argument(flag, type=int, nargs="+", default=[], help=f.metadata["help"])
        else:
            kind = {"int": int, "float": float}.get(str(f.type), str)
            shown = f" (default: {f.default})" if f.default != "" else ""
            ap.add_argument(flag, type=kind, default=f.default, help=f"{f.metadata['help']}{shown}")
    return ap


def parse_args(argv: list[str] | None = None) -> Args:
    """Parse the command line into :class:`Args` (with ``--resume``: the run's saved settings)."""
    ap = _parser()
    args = Args(**vars(ap.parse_args(argv)))
    unset = object()  # not a str: argparse would type-convert a string default
    probe = _parser()
    probe.set_defaults(**{f.name: unset for f in dataclasses.fields(Args)})
    given = {k for k, v in vars(probe.parse_args(argv)).items() if v is not unset}
    args = _resumed(args, given, ap)
    for name, allowed in CHOICES.items():
        if getattr(args, name) not in allowed:
            ap.error(f"--{name.replace('_', '-')} must be one of {allowed}")
    if args.envs < 1 or args.timesteps < 0:
        ap.error("--envs must be >= 1 and --timesteps >= 0")
    if args.sample_pool:
        _check_pool(ap, args)
    try:
        rank_columns(args.ranks)
    except cli.UsageError as exc:
        ap.error(str(exc))
    return args


def _resumed(args: Args, given: set[str], ap: argparse.ArgumentParser) -> Args:
    """With ``--resume``: the run's saved settings, refusing flags that contradict them."""
    if not args.resume:
        return args
    run_dir = Path(args.runs_dir) / args.name
    if not (run_dir / "args.json").exists():
        import difflib

        runs = sorted(p.parent.name for p in Path(args.runs_dir).glob("*/args.json"))
        close = difflib.get_close_matches(args.name, runs, n=3, cutoff=0.5)
        ap.error(f"--resume: no run {args.name!r} in {args.runs_dir}/" +
                 (f" (did you mean {', '.join(close)}?)" if close else " (give its --run-name)"))
    saved = json.loads((run_dir / "args.json").read_text())
    known = {f.name for f in dataclasses.fields(Args)}
    conflicts = [f"--{k.replace('_', '-')} {getattr(args, k)!r} (the run has {saved[k]!r})"
                 for k in sorted(given - RESUMABLE) if k in saved and saved[k] != getattr(args, k)]
    if conflicts:
        ap.error(f"--resume continues {run_dir} with its saved settings; these flags contradict them: "
                 f"{'; '.join(conflicts)}")
    keep = {k: getattr(args, k) for k in RESUMABLE & given}
    keep.update(resume=True, run_name=args.name)
    return dataclasses.replace(Args(**{k: v for k, v in saved.items() if k in known}), **keep)


class RunFolder:
    """A run's folder, owned by one process at a time (a ``.lock`` file with its PID) while the run writes to it.

    A fresh run refuses a folder that already holds files unless ``overwrite`` (which empties it first); a resumed
    run needs it. A lock left by a process that is gone (killed) is taken over.
    """

    def __init__(self, path: Path, resume: bool, overwrite: bool):
        self.path, self.lock = path, path / ".lock"
        if path.exists() and any(path.iterdir()) and not resume:
            if not overwrite:
                raise cli.UsageError(f"the run folder {path} is not empty: pass --resume to continue that run, "
                                     "--overwrite to start it over, or another --run-name")
            self._check_free()
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)

    def _check_free(self) -> None:
        import os

        if self.lock.exists():
            pid = int(self.lock.read_text().strip() or 0)
            try:
                os.kill(pid, 0)
            except (OSError, ValueError):
                return  # stale: its process is gone
            if pid != os.getpid():
                raise cli.UsageError(f"the run folder {self.path} is in use by process {pid}")

    def __enter__(self) -> RunFolder:
        import os

        self._check_free()
        self.lock.write_text(str(os.getpid()))
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.unlink(missing_ok=True)


class MixedWorkload:
    """Real train windows and synthetic samples, alternately (``sample(n_jobs, seed)``)."""

    def __init__(self, real: pd.DataFrame, model: Any):
        self.real, self.model, self.calls = real, model, 0

    def sample(self, n_jobs: int, seed: int) -> pd.DataFrame:
        """Even calls: a real window; odd calls: a synthetic sample."""
        from hpcgym import traces

        self.calls += 1
        if self.calls % 2:
            return traces.window(self.real, n_jobs, rng=seed)
        return self.model.sample(n_jobs, seed=seed)


def _check_pool(ap: argparse.ArgumentParser, args: Args) -> None:
    from hpcgym.env import SCALE_SAMPLE_JOBS

    least = max(args.window, SCALE_SAMPLE_JOBS)  # the environment samples that many jobs for its scales
    if args.sample_pool < least:
        ap.error(f"--sample-pool ({args.sample_pool}) must be 0 or at least {least} (--window, and the "
                 f"{SCALE_SAMPLE_JOBS} jobs the environment's scales come from)")


class PooledSampler:
    """Windows of one large sample of a synthesizer (``sample(n_jobs, seed)`` is a window of it).

    One call to a slow sampler instead of one per episode: REaLTabFormer takes about 1 s per 256-job window on
    Theta, which made a 100,000-step run take hours. The pool is drawn with the run's seed, so it is reproducible.
    """

    def __init__(self, model: Any, n_jobs: int, seed: int):
        from hpcgym import jobs as jobtable

        self.pool = jobtable.finalize(model.sample(n_jobs, seed=seed))

    def sample(self, n_jobs: int, seed: int) -> pd.DataFrame:
        """A window of ``n_jobs`` consecutive pooled jobs, from a start drawn with ``seed``."""
        from hpcgym import traces

        return traces.window(self.pool, n_jobs, rng=seed)


@dataclass
class Data:
    """The parts of the real trace a run uses."""

    machine: Any
    fit: pd.DataFrame  #: the train split minus the validation part: all the agent (or synthesizer) sees
    validation: pd.DataFrame  #: the last ``val_fraction`` of the train split


def load_data(args: Args) -> Data:
    """Read the trace and carve the train split into the training and validation parts."""
    from hpcgym import machines, traces

    real = traces.read(args.trace, **args.read_kwargs())
    train = traces.split(real, "train")
    fit, validation = (traces.split(train, part, 1.0 - args.val_fraction) for part in ("train", "test"))
    return Data(machines.get(real.attrs["machine"]), fit, validation)


def fitted_synthesizer(args: Args, train: pd.DataFrame, nodes: int, cache: Path) -> Any:
    """The synthesizer fitted on the training part, from the cache when the same fit was done before."""
    import synth
    from synth.base import Synthesizer, table_hash

    where = cache / f"{args.trace_label}-{args.synthesizer}-s{args.seed}-{table_hash(train)}"
    if (where / "manifest.json").exists():
        try:
            return Synthesizer.load(where)
        except ValueError as exc:  # a damaged cache entry: fit again
            print(f"not using the cached synthesizer: {exc}", flush=True)
    print(f"fitting {args.synthesizer} on {len(train):,} jobs of {args.trace}'s train split ...", flush=True)
    model = synth.get(args.synthesizer, max_nodes=nodes).fit(train, seed=args.seed)
    model.save(where)
    return model


def env_kwargs(args: Args, data: Data) -> dict[str, Any]:
    """The environment settings every part of a run shares (training, validation, evaluation)."""
    return {"machine": data.machine, "backfill": args.backfill, "slots": args.slots, "objective": args.objective,
            "order": args.order if args.backfill != "none" else None, "time_scale": args.time_scale or None,
            "invalid_action": "raise"}  # masked agents never choose an empty slot: if one does, that is a bug


def training_workload(args: Args, data: Data, synthesizer: Any = None) -> Any:
    """What the agent trains on: the training part's windows, a synthesizer fitted on it, or both alternately.

    ``synthesizer``: an already fitted model to use instead of fitting one (or loading the run cache's).
    """
    if args.workload == "real":
        return data.fit
    model = synthesizer if synthesizer is not None else fitted_synthesizer(args, data.fit, data.machine.nodes,
                                                                           Path(args.runs_dir) / "cache")
    if args.sample_pool:
        model = PooledSampler(model, args.sample_pool, args.seed)
    return model if args.workload == "synthetic" else MixedWorkload(data.fit, model)


def make_env(args: Args, data: Data, workload: Any, run_dir: Path) -> Any:
    """The training environment: the vector env over the training workload, in SB3's interface.

    Episodes go to ``monitor.csv`` (appended to when resuming).
    """
    from stable_baselines3.common.monitor import ResultsWriter
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.vec import HpcgymVecEnv
    from hpcgym.vector import SchedulingVectorEnv

    venv = SchedulingVectorEnv(args.envs, workload=workload, window=args.window, split="all", reward=args.reward,
                               baseline=args.baseline or None, compare_with=("fcfs",), **env_kwargs(args, data))
    env = VecMonitor(HpcgymVecEnv(venv), info_keywords=("compare_json",))
    env.results_writer = ResultsWriter(str(run_dir / "monitor.csv"), header={"t_start": env.t_start},
                                       extra_keys=("compare_json",), override_existing=not args.resume)
    env.seed(args.seed)
    return env


def rank_columns(names: str) -> tuple[int, ...]:
    """``--ranks``' column names as indices of the observation's job row."""
    from hpcgym.observation import JOB_FEATURES

    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in JOB_FEATURES]
    if unknown:
        raise cli.UsageError(f"--ranks: unknown job column(s) {', '.join(unknown)}; they are {', '.join(JOB_FEATURES)}")
    return tuple(JOB_FEATURES.index(n) for n in wanted)


def make_model(args: Args, env: Any, run_dir: Path) -> Any:
    """A new agent, or the last checkpoint's when resuming."""
    from agents.callbacks import latest_checkpoint, replay_buffer_for

    found = latest_checkpoint(run_dir / "checkpoints") if args.resume else None
    tb = str(run_dir / "tb")
    if args.algo == "ppo":
        from sb3_contrib import MaskablePPO

        from agents.policies import ScorerPolicy

        if found:
            return MaskablePPO.load(found[0], env=env, device="cpu", tensorboard_log=tb)
        policy = ScorerPolicy if args.policy == "scorer" else "MlpPolicy"
        kwargs = {"ranks": rank_columns(args.ranks)} if args.policy == "scorer" and args.ranks else None
        return MaskablePPO(policy, env, policy_kwargs=kwargs, learning_rate=args.learning_rate, n_steps=args.n_steps,
                           batch_size=args.batch_size, n_epochs=args.n_epochs, gamma=args.gamma,
                           gae_lambda=args.gae_lambda, clip_range=args.clip_range,
                           target_kl=args.target_kl or None, ent_coef=args.ent_coef, seed=args.seed,
                           tensorboard_log=tb, device="cpu", verbose=0)
    from agents.dqn import MaskedDQN

    if found:
        model = MaskedDQN.load(found[0], env=env, device="cpu", tensorboard_log=tb)
        buffer = replay_buffer_for(found[0])
        if buffer:
            model.load_replay_buffer(buffer)
        return model
    return MaskedDQN(env=env, learning_rate=args.learning_rate, batch_size=args.batch_size, seed=args.seed,
                     gamma=args.gamma, buffer_size=100_000, learning_starts=1_000, exploration_fraction=0.3,
                     policy_kwargs={"scorer": args.policy == "scorer", "ranks": rank_columns(args.ranks)},
                     tensorboard_log=tb, device="cpu", verbose=0)


def validation_starts(args: Args, data: Data) -> list[int]:
    """Fixed validation windows (seed 0: the same for every run) in the validation part."""
    from hpcgym import traces

    if args.val_windows <= 0:
        return []
    if len(data.validation) < args.val_length:
        raise cli.UsageError(f"the validation part has {len(data.validation)} jobs, fewer than --val-length "
                             f"{args.val_length}: lower it or raise --val-fraction")
    return traces.window_starts(len(data.validation), args.val_length, args.val_windows, seed=0)


def validation_references(args: Args, data: Data, starts: list[int]) -> dict[str, float]:
    """Mean bsld of a few heuristics on the validation windows (reference lines for the learning curves)."""
    from baselines import priorities
    from hpcgym import traces
    from hpcgym.sim import simulate

    out = {}
    for name, backfill in (("saf", args.backfill), ("fcfs", "easy")):
        values = [simulate(traces.window(data.validation, args.val_length, start=s), data.machine,
                           priorities.get(name), backfill)["bsld"].mean() for s in starts]
        out[f"{name}+{backfill}"] = float(sum(values) / len(values))
    return out


def warm_start(args: Args, model: Any, data: Data, workload: Any, run_dir: Path,
               validate: Any) -> tuple[dict[str, float], str]:
    """Save the untrained network; with ``--clone``, behaviour-clone the heuristic and save that too.

    The demonstrations are the heuristic's choices on the training workload (synthetic samples for a synthetic
    run: a synthetic-trained agent never sees real jobs before its evaluation).

    With ``--start best`` and validation windows, RL then starts from whichever of the two scores better on them
    (``warm_start.json`` says which). Returns the validation scores measured and the network RL starts from.
    """
    from agents.callbacks import save_atomic

    save_atomic(model, run_dir / "untrained.zip")
    if not args.clone:
        return {}, "untrained"
    from agents import pretrain
    from baselines import priorities
    from hpcgym.env import SchedulingEnv

    scores = {"untrained": validate(model)} if args.start == "best" and validate else {}
    untrained = {k: v.clone() for k, v in model.policy.state_dict().items()}
    heuristic = priorities.get(args.clone)
    demo_env = SchedulingEnv(workload=workload, window=args.clone_window, split="all", **env_kwargs(args, data))
    accuracy = pretrain.behaviour_clone(model, demo_env, heuristic, args.clone_episodes, args.clone_epochs,
                                        seed=args.seed)
    held_out = float("nan")
    if args.val_windows > 0:  # the heuristic's choices on validation windows: how well the clone generalizes
        val_env = SchedulingEnv(workload=data.validation, window=args.val_length, split="all",
                                **env_kwargs(args, data))
        held_out = pretrain.accuracy(model, *pretrain.demonstrations(val_env, heuristic, args.val_windows, seed=0))
    save_atomic(model, run_dir / "cloned.zip")
    if args.start == "best" and validate:
        scores["cloned"] = validate(model)
    chosen = min(scores, key=scores.get) if scores else "cloned"
    if chosen == "untrained":
        model.policy.load_state_dict(untrained)
    on_val = f" ({held_out:.1%} on validation windows)" if held_out == held_out else ""
    print(f"behaviour-cloned {args.clone}: {accuracy:.1%} of its choices reproduced{on_val}; RL starts from the "
          f"{chosen} network (validation bsld: {json.dumps({k: round(v, 3) for k, v in scores.items()})})", flush=True)
    (run_dir / "warm_start.json").write_text(json.dumps({"clone_accuracy": accuracy,
                                                         "clone_accuracy_validation": held_out if on_val else None,
                                                         "validation": scores, "chosen": chosen}, indent=2))
    return scores, chosen


def resolve_time_scale(args: Args, env: Any, run_dir: Path) -> float:
    """The run's observation time scale: ``--time-scale``, else the training environment's, saved in ``scales.json``.

    Validation, cloning and evaluation all use it, so every environment of a run maps times to features alike.
    """
    from experiments.evaluate import SCALES, saved_time_scale

    if args.time_scale:
        return args.time_scale
    scale = saved_time_scale(run_dir)  # a resumed run keeps the scale it started with
    if scale is None:
        scale = float(env.get_attr("time_scale", [0])[0])
        hpcgym_io.write_text(run_dir / SCALES, json.dumps({"time_scale": scale}, indent=2))
    return scale


def train(args: Args, synthesizer: Any = None) -> Path:
    """Train (or resume) and save ``model.zip`` (best on validation) and ``last.zip``; return the run folder.

    ``synthesizer``: a fitted model for ``--workload synthetic|mixed`` (e.g. one fit shared by several seeds, as
    ``experiments.study`` does); default: fit ``args.synthesizer`` on the training part, or load it from the cache.
    """
    import torch
    torch.set_num_threads(args.threads)
    folder = RunFolder(Path(args.runs_dir) / args.name, args.resume, args.overwrite)
    with folder:
        return _train(args, folder.path, synthesizer)


def _train(args: Args, run_dir: Path, synthesizer: Any = None) -> Path:
    from agents.callbacks import (
        AtomicCheckpointCallback,
        HyperparametersCallback,
        ProgressBarCallback,
        SchedulingMetricsCallback,
        ValidationCallback,
        save_atomic,
    )
    from agents.curves import plot_learning_curves

    hpcgym_io.write_text(run_dir / "args.json", json.dumps(dataclasses.asdict(args), indent=2))
    data = load_data(args)
    workload = training_workload(args, data, synthesizer)
    env = make_env(args, data, workload, run_dir)
    args = dataclasses.replace(args, time_scale=resolve_time_scale(args, env, run_dir))
    model = make_model(args, env, run_dir)
    starts = validation_starts(args, data)
    val_env = dict(workload=data.validation, window=args.val_length, split="all", **env_kwargs(args, data))
    validation = ValidationCallback(starts, args.val_every, run_dir / "best.zip", run_dir / "learning_curve.csv",
                                    val_env) if starts else None
    if model.num_timesteps == 0:
        (run_dir / "learning_curve.csv").unlink(missing_ok=True)
        scores, chosen = warm_start(args, model, data, workload, run_dir, validation.score if validation else None)
        if validation is not None:
            validation.initial, validation.start_label = scores.get(chosen), chosen
            validation.prior = {f"{k} (not kept)": v for k, v in scores.items() if k != chosen}
    callbacks = [AtomicCheckpointCallback(max(args.checkpoint_every // args.envs, 1), str(run_dir / "checkpoints"),
                                          "model", save_replay_buffer=args.algo == "dqn"),
                 SchedulingMetricsCallback(),
                 HyperparametersCallback(dataclasses.asdict(args))]
    if validation is not None:
        callbacks.append(validation)
    if not args.quiet:
        callbacks.append(ProgressBarCallback(max(args.timesteps - model.num_timesteps, 0)))
    model.learn(max(args.timesteps - model.num_timesteps, 0), callback=callbacks,
                reset_num_timesteps=model.num_timesteps == 0, tb_log_name="run")
    save_atomic(model, run_dir / "last.zip")
    best = run_dir / "best.zip"
    source = best if starts and best.exists() else run_dir / "last.zip"
    hpcgym_io.atomic_write(run_dir / "model.zip", lambda tmp: shutil.copyfile(source, tmp))
    if starts:
        plot_learning_curves({args.name: run_dir / "learning_curve.csv"}, run_dir / "learning_curve.png",
                             title=f"{args.name}: validation bsld ({args.val_windows} windows of the train split)",
                             references=validation_references(args, data, starts))
    print(f"trained {args.algo} for {model.num_timesteps} timesteps; saved {run_dir / 'model.zip'}", flush=True)
    return run_dir


def evaluate_run(args: Args, run_dir: Path) -> pd.DataFrame:
    """Agent, untrained, cloned and every heuristic on the same test windows; writes ``eval/``; returns the summary."""
    from experiments import evaluate

    agents = evaluate.run_agents(run_dir)
    per_window, per_job = evaluate.evaluate(args.trace, agents, args.eval_windows, args.eval_length, seed=0,
                                            read=args.read_kwargs(), progress=not args.quiet)
    return evaluate.write_results(run_dir / "eval", per_window, per_job,
                                  evaluate.describe(args.trace, args.eval_windows, args.eval_length, seed=0))


def run(args: Args) -> tuple[Path, pd.DataFrame | None]:
    """Train, then (unless ``eval_windows`` is 0) evaluate; return the run folder and the summary."""
    run_dir = train(args)
    return run_dir, (evaluate_run(args, run_dir) if args.eval_windows > 0 else None)


def _run_seed(args: Args) -> str:
    return str(run(args)[0])


def run_seeds(args: Args) -> tuple[list[Path], pd.DataFrame | None]:
    """One run per seed of ``args.seeds`` (``args.jobs`` at a time), then the table across seeds."""
    from experiments import seeds as across

    base = args.run_name or f"{args.trace}-{args.workload}-{args.algo}"
    per_seed = [dataclasses.replace(args, seed=s, seeds=[], run_name=f"{base}-s{s}") for s in args.seeds]
    if args.jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            dirs = [Path(d) for d in pool.map(_run_seed, per_seed)]
    else:
        dirs = [run(a)[0] for a in per_seed]
    if args.eval_windows <= 0:
        return dirs, None
    return dirs, across.write(dirs, Path(args.runs_dir) / f"{base}-seeds")


def main(argv: list[str] | None = None) -> int:
    """Train, then evaluate on the test windows."""
    args = parse_args(argv)
    started = time.time()
    if args.seeds:
        dirs, table = run_seeds(args)
        if table is not None:
            from experiments.seeds import format_table

            print(format_table(table))
        print(f"done in {time.time() - started:.0f} s: {', '.join(map(str, dirs))}")
        return 0
    run_dir, table = run(args)
    if table is not None:
        from experiments.evaluate import format_summary

        print(format_summary(table, table.attrs.get("description", "")))
    print(f"done in {time.time() - started:.0f} s: {run_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
