"""Train an RL batch scheduler on real or synthetic job streams, then evaluate it on held-out real windows.

Examples::

    python -m experiments.train --workload synthetic            # the defaults: Theta, EASY, PPO, 2-3 minutes
    python -m experiments.train --workload synthetic --seeds 0 1 2 3 4 --workers 2  # five seeds and their table
    python -m experiments.train --workload real --trace sdsc-sp2 --backfill none
    python -m experiments.train --workload synthetic --synthesizer tvae --algo dqn
    python -m experiments.train --run-name my-run --resume       # continue a killed run from its last checkpoint

The script reads top to bottom from :class:`Args` and ends with a verdict line: the network kept and why, and the
agent against its start and the reference (the strongest implementable row) with paired 95% CIs. The protocol: the
real trace is split chronologically, 70% train and 30% test. The last ``val_fraction`` of the train part is the
*validation* part; training sees only the rest (its windows, or samples of a synthesizer fitted on it). Every
``val_every`` steps the deterministic agent plays fixed validation windows, and ``model.zip`` is the best of those
checkpoints (``last.zip`` holds the final weights). The evaluation runs the agent, its untrained network
(``untrained.zip``: same seed, no training), its cloned start (``cloned.zip``, when ``--clone``) and every heuristic
on identical windows of the *test* split. Everything goes to ``runs/<run name>/``: ``args.json`` (the flags),
``scales.json`` (the observation's resolved time scale), TensorBoard logs (``tb/``: SB3's ``rollout/`` and
``train/`` keys, ``sched/bsld``, ``sched/fcfs`` and ``val/bsld``), checkpoints, ``learning_curve.csv`` and ``.png``,
and ``eval/`` (the folder's layout: :mod:`experiments.runs`). With ``--seeds``, each seed gets its own run folder
and ``runs/<name>-seeds/`` gets the table across seeds (``experiments.seeds``).

The default recipe (EASY backfilling with the smallest-area-first scan order; a job scorer that also sees each
job's rank in its queue by walltime, nodes and area; a warm start cloned from smallest-area-first, kept only if it
beats the untrained network on validation; a log-ratio reward against that heuristic on the same window; 16
parallel windows; checkpoint selection on validation windows) was chosen on validation windows, by the sweep and
the clone studies in ``docs/results.md`` (``python -m experiments.recipe_sweep``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from experiments import arguments, runs
from experiments.arguments import TraceArgs, flag
from experiments.protocol import Data, run_data, validation_references, validation_starts
from experiments.recipe import (
    NETWORKS,
    attach_monitor,
    check_recipe,
    check_synthesizer,
    env_kwargs,
    make_env,
    make_model,
    network_kwargs,
    rank_columns,
    source_label,
    training_workload,
    tune_on_workload,
    warm_start,
)
from hpcgym import cli
from hpcgym import io as hpcgym_io
from hpcgym.errors import NoDecisionError
from hpcgym.rewards import OBJECTIVES


@dataclass
class Args(TraceArgs):
    """Every knob of a training run (each one is a command-line flag)."""

    trace: str = flag("theta", "real trace (bundled name or file): its train split is the training data, its test "
                               "split the evaluation")
    workload: str = flag("synthetic", "real | synthetic | mixed (real and synthetic windows alternately): what the "
                                      "agent trains on")
    synthesizer: str = flag("arrivals", "for --workload synthetic|mixed: a synthesizer's name (fitted on the training "
                                        "part; those of installed packages too: docs/extend.md), or the folder of one "
                                        "fitted already (synth.fit --out)")
    sample_pool: int = flag(0, "sample this many jobs from the synthesizer once (seeded by --seed) and train on "
                               "windows of them; 0: a new sample every episode (slow for realtabformer and the SDV "
                               "models)")
    algo: str = flag("ppo", "ppo (sb3-contrib MaskablePPO) | dqn (masked DQN)")
    policy: str = flag("scorer", "the agent's network: scorer (shared per-slot job scorer) | mlp | MODULE:CLASS (your "
                                 "own SB3 policy class; for PPO a MaskableActorCriticPolicy: docs/extend.md)",
                       flag="--network", aliases=("--policy",))
    ranks: str = flag("walltime,nodes,area", "job columns (hpcgym.observation.JOB_FEATURES) whose rank within the "
                                             "queue the scorer also sees; empty: none")
    policy_kwargs: str = flag("", "a JSON object of keyword arguments for the network (SB3's policy_kwargs), over "
                                  "--ranks, e.g. '{\"hidden\": [64, 32]}'; empty: none")
    timesteps: int = flag(100_000, "agent decisions to train for (all envs together)")
    backfill: str = flag("easy", "none | easy: the simulator's backfilling")
    order: str = flag("saf", "heuristic whose order the EASY backfill scan follows")
    window: int = flag(256, "jobs per training episode")
    slots: int = flag(128, "visible queue slots (the action space)")
    time_scale: float = flag(0.0, "seconds the observation's log time features map to 1, the same in training, "
                                  "validation and evaluation; 0: the training workload's longest walltime (saved in "
                                  "scales.json)")
    objective: str = flag("bsld", "bsld | wait | turnaround | util")
    reward: str = flag("log", "objective | log: the final reward's scale (hpcgym.rewards)")
    baseline: str = flag("saf", "heuristic the reward is relative to on the same window; empty: none")
    envs: int = flag(16, "parallel windows (copies of the vector environment)")
    learning_rate: float = flag(3e-4, "optimizer learning rate")
    n_steps: int = flag(128, "PPO rollout length per env (rollout = n_steps x envs)")
    n_epochs: int = flag(4, "PPO epochs per rollout")
    batch_size: int = flag(512, "minibatch size")
    clip_range: float = flag(0.2, "PPO clip range")
    target_kl: float = flag(0.0, "PPO: stop an update's epochs past this KL (0: never)")
    gamma: float = flag(1.0, "discount: 1, since the only reward comes at the episode's end")
    gae_lambda: float = flag(0.97, "GAE lambda (PPO)")
    ent_coef: float = flag(0.0, "entropy bonus (PPO)")
    features: str = flag("v0", "the observation's columns: v0 | v1 (adds each job's runtime estimate, its user's "
                               "accuracy and history, whether it may start without delaying the reservation, and the "
                               "reservation and the release profile; docs/definitions.md)")
    predictor: str = flag("", "runtime predictor of EASY's reservations, backfill checks and scan order: walltime | "
                              "last2 | median5; empty: that of the heuristic of --clone (or --prior, or --order)")
    action: str = flag("pick", "what the agent chooses (docs/simulation.md, action modes): pick (the head of the pass) "
                               "| guarded (the backfill job, among those that cannot delay EASY's reservation for "
                               "--order's head) | hold (the head, or a hold: start nothing until the next event)")
    hold_limit: int = flag(3600, "--action hold: seconds of holds a job may be charged before it must start")
    attention: int = flag(0, "scorer: heads of one self-attention layer across the queue (0: none)")
    prior: str = flag("", "residual policy (PPO scorer): the logits are this heuristic's preference (saf, sjf, tuned: "
                          "the trace's fit, ...) plus a learned correction that starts at 0; replaces --clone")
    tuned: str = flag("", "the fit that `tuned` means in --prior, --order, --baseline and --clone: a fit's JSON file "
                          "(python -m baselines.tune --out); workload: fitted first on this run's training workload "
                          "(the real training part, or the synthetic pool; cached in RUNS_DIR/cache/tuned), so that "
                          "what the agent knows comes from its training data only; empty: the trace's own fit")
    prior_temperature: float = flag(0.1, "--prior's softness: jobs whose weighted size differs by a factor e^T "
                                         "differ by one logit")
    kl_coef: float = flag(0.0, "PPO: penalty on the KL divergence from the network RL starts from, in place of the "
                               "entropy bonus (0: none)")
    clone: str = flag("saf", "warm start (PPO and DQN): behaviour-clone this heuristic first (tuned: the trace's "
                             "fit; NAME@exact: that heuristic told the jobs' own runtimes, a teacher no scheduler "
                             "can be); with --prior, the teacher whose choices the correction is fitted to: "
                             "NAME@exact, or the prior itself as a control (docs/results.md); empty: none")
    teach: str = flag("", "with --prior: before RL, fit the correction to what the agent cannot see: runtimes (each "
                          "waiting job's log runtime over its estimate, so the scorer is the prior on a runtime "
                          "estimate learned from the training jobs; docs/results.md); empty: none")
    clone_episodes: int = flag(100, "episodes of demonstrations for --clone (and --teach)")
    clone_window: int = flag(1024, "jobs per demonstration episode (as long as the validation and test windows: long "
                                   "queues are where a clone of short windows errs)")
    clone_epochs: int = flag(40, "passes over the demonstrations for --clone")
    start: str = flag("best", "best: RL starts from whichever of the untrained and the cloned network scores better "
                              "on validation | clone")
    val_fraction: float = flag(0.2, "last part of the train split kept for validation")
    val_periods: int = flag(1, "validation from this many periods: the train split cut into as many equal stretches, "
                               "the last --val-fraction of each held out, the validation windows shared among them")
    val_windows: int = flag(16, "validation windows (0: keep the last model)")
    val_length: int = flag(1024, "jobs per validation window", flag="--val-window", aliases=("--val-length",))
    val_every: int = flag(20_000, "timesteps between validations")
    seed: int = flag(0, "seed of the agent, the environment and the synthesizer")
    seeds: list[int] = flag([], "several seeds, one run each, and the table across them (overrides --seed)")
    jobs: int = flag(1, "seeds trained at once (processes) with --seeds", flag="--workers", aliases=("--jobs",))
    eval_windows: int = flag(20, "test windows in the final evaluation (0: none)")
    eval_length: int = flag(1024, "jobs per test window", flag="--eval-window", aliases=("--eval-length",))
    checkpoint_every: int = flag(20_000, "timesteps between checkpoints (each taken when the next rollout starts)")
    runs_dir: str = flag(runs.RUNS_DIR, "where run folders go")
    run_name: str = flag("", "run folder name; empty: trace-workload-algo-sSEED")
    resume: bool = flag(False, "continue the run folder's run from its last intact checkpoint, with the run's saved "
                               "settings: it ends as the uninterrupted run would have")
    overwrite: bool = flag(False, "delete an existing run folder of this name first")
    threads: int = flag(1, "torch threads (1 is fastest for these tiny networks)")
    quiet: bool = flag(False, "no progress output (results and errors only)")

    @property
    def name(self) -> str:
        """The run folder's name: ``--run-name``, else ``<trace>-<workload>-<algo>-s<seed>``."""
        return self.run_name or runs.run_name(runs.default_base(self.trace_label, self.workload, self.algo), self.seed)


CHOICES = {"workload": ("real", "synthetic", "mixed"), "algo": ("ppo", "dqn"), "backfill": ("none", "easy"),
           "reward": ("objective", "log"), "start": ("best", "clone"), "features": ("v0", "v1"),
           "predictor": ("", "walltime", "last2", "median5"), "action": ("pick", "guarded", "hold"),
           "teach": ("", "runtimes"), "objective": OBJECTIVES}


def parser() -> cli.ArgumentParser:
    """The command line of :class:`Args` (one flag per field, with its help and default)."""
    return arguments.parser(Args, "python -m experiments.train", __doc__)


def parse_args(argv: list[str] | None = None) -> Args:
    """Parse the command line into :class:`Args` (with ``--resume``: the run's saved settings)."""
    ap = parser()
    args, given = arguments.parse(Args, ap, argv)
    try:
        args = runs.resumed(args, given)
        check_args(args)
    except cli.UsageError as exc:
        ap.error(str(exc))
    return args


#: the least value of each whole-number flag
AT_LEAST = {"sample_pool": 0, "timesteps": 0, "window": 2, "slots": 1, "envs": 1, "n_steps": 1, "n_epochs": 1,
            "batch_size": 1, "clone_episodes": 1, "clone_window": 2, "clone_epochs": 1, "val_windows": 0,
            "val_periods": 1, "val_length": 2, "val_every": 1, "jobs": 1, "eval_windows": 0, "eval_length": 2,
            "checkpoint_every": 1, "threads": 1}
TB_NAME = "run"  # SB3's tb_log_name: the TensorBoard curves are in <run>/tb/run_1


def check_args(args: Args) -> None:
    """Refuse settings that cannot run (:class:`hpcgym.cli.UsageError`, naming the flag), before anything is read."""
    from hpcgym.env import SCALE_SAMPLE_JOBS

    for name, allowed in CHOICES.items():
        if getattr(args, name) not in allowed:
            raise cli.UsageError(f"{_flag(name)} must be one of {allowed}")
    for name, least in AT_LEAST.items():
        if getattr(args, name) < least:
            raise cli.UsageError(f"{_flag(name)} must be at least {least}, not {getattr(args, name)}")
    check_seeds(args)
    if not (args.learning_rate > 0 and 0 < args.val_fraction < 1 and 0 <= args.gamma <= 1):
        raise cli.UsageError("--learning-rate must be > 0, --val-fraction between 0 and 1 (both excluded), "
                             "--gamma between 0 and 1")
    check_ranges(args)
    if args.resume and args.overwrite:
        raise cli.UsageError("--resume continues the run folder and --overwrite deletes it: pick one")
    least = max(args.window, SCALE_SAMPLE_JOBS)  # the environment samples that many jobs for its scales
    if args.sample_pool and args.sample_pool < least:
        raise cli.UsageError(f"--sample-pool ({args.sample_pool}) must be 0 or at least {least} (--window, and the "
                             f"{SCALE_SAMPLE_JOBS} jobs the environment's scales come from)")
    rank_columns(args.ranks)
    network_kwargs(args)
    if args.policy not in NETWORKS and (args.algo != "ppo" or ":" not in args.policy):
        raise cli.UsageError(f"--network {args.policy!r}: expected one of {', '.join(NETWORKS)}, or MODULE:CLASS (a "
                             "MaskableActorCriticPolicy subclass) with --algo ppo")
    if args.workload != "real":
        check_synthesizer(args.synthesizer)
    check_recipe(args)
    base = args.run_name or runs.default_base(args.trace_label, args.workload, args.algo)
    names = [runs.run_name(base, s) for s in args.seeds] + [runs.seeds_folder("", base).name] if args.seeds else []
    for name in names or [args.name]:
        runs.check_name(name)


def check_seeds(args: Args) -> None:
    """Seeds numpy can take, and no seed twice in ``--seeds`` (its second run would stop at the first's folder)."""
    for flag_name, seed in [("--seed", args.seed), *(("--seeds", s) for s in args.seeds)]:
        if not 0 <= seed <= cli.MAX_SEED:
            raise cli.UsageError(f"{flag_name} must be between 0 and {cli.MAX_SEED}, not {seed}")
    if len(set(args.seeds)) < len(args.seeds):
        raise cli.UsageError(f"--seeds repeats a seed ({' '.join(map(str, args.seeds))}): each seed is one run")


#: the numeric settings SB3 takes without checking them, with the range each must be in (closed ends)
RANGES = {"gae_lambda": (0.0, 1.0), "clip_range": (1e-12, float("inf")), "target_kl": (0.0, float("inf")),
          "ent_coef": (0.0, float("inf")), "time_scale": (0.0, float("inf"))}


def check_ranges(args: Args) -> None:
    """Refuse a setting of :data:`RANGES` outside its range (or NaN), naming the flag."""
    for name, (lo, hi) in RANGES.items():
        value = getattr(args, name)
        if not lo <= value <= hi:  # NaN fails both
            what = f"between {lo:g} and {hi:g}" if hi < float("inf") else ("> 0" if lo > 0 else ">= 0")
            raise cli.UsageError(f"{_flag(name)} must be {what}, not {value}")


def _flag(name: str) -> str:
    return arguments.flag_name(Args, name)


def check_inputs(args: Args, data: Data) -> None:
    """Refuse windows longer than the parts of the trace they come from (before the run folder is made)."""
    parts = [("--val-window", args.val_length if args.val_windows else 0, "validation part",
              data.shortest_validation),
             ("--eval-window", args.eval_length if args.eval_windows else 0, "test split", data.test_jobs)]
    if args.workload != "synthetic":  # real windows of the training part
        parts += [("--window", args.window, "training part", len(data.fit)),
                  ("--clone-window", args.clone_window if args.clone else 0, "training part", len(data.fit))]
    for flag_name, length, part, jobs in parts:
        if length > jobs:
            raise cli.UsageError(f"{flag_name} {length} is longer than the trace's {part} ({jobs} jobs): lower it"
                                 + (" or raise --val-fraction" if part == "validation part" else "")
                                 + (" or lower --val-periods" if part == "validation part" and args.val_periods > 1
                                    else ""))


def resolve_time_scale(args: Args, env: Any, run: runs.RunFolder) -> float:
    """The run's observation time scale: ``--time-scale``, else the training environment's, saved in ``scales.json``.

    Validation, cloning and evaluation all use it, so every environment of a run maps times to features alike.
    """
    if args.time_scale:
        return args.time_scale
    scale = run.time_scale()  # a resumed run keeps the scale it started with
    if scale is None:
        scale = float(env.get_attr("time_scale", [0])[0])
        run.save_time_scale(scale)
    return scale


def train(args: Args, synthesizer: Any = None) -> Path:
    """Train (or resume) and save ``model.zip`` (best on validation) and ``last.zip``; return the run folder.

    ``synthesizer``: a fitted model for ``--workload synthetic|mixed`` (e.g. one fit shared by several seeds, as
    ``experiments.study`` does); default: fit ``args.synthesizer`` on the training part, or load it from the cache.
    The run folder is made only once the folder, the trace, the windows and the workload are known to be good:
    a mistake leaves nothing behind.
    """
    import torch
    torch.set_num_threads(args.threads)
    folder = runs.RunFolder(Path(args.runs_dir) / args.name)
    folder.check_usable(args.resume, args.overwrite)
    data = run_data(args)
    check_inputs(args, data)
    starts = validation_starts(data, args.val_length, args.val_windows)
    workload = training_workload(args, data, synthesizer)
    args = tune_on_workload(args, data, workload)
    try:
        env = make_env(args, data, workload)
        with folder.owned(args.resume, args.overwrite) as run:
            _train(args, run, data, workload, env, starts)
    except NoDecisionError as exc:  # name the source and what to do (one line through cli.run)
        raise NoDecisionError(exc.windows, exc.window, exc.offered_load, source_label(args)) from None
    return run.path


def _resume_point(args: Args, run: runs.RunFolder) -> tuple[Path | None, dict[str, Any] | None]:
    """The checkpoint to resume from (None: start afresh) and its state (None: a checkpoint without one)."""
    from agents import resume
    from agents.callbacks import latest_checkpoint

    found = latest_checkpoint(run.checkpoints) if args.resume else None
    if found is None:
        return None, None
    path = resume.state_path(found[0])
    if not path.exists():
        warnings.warn(f"{found[0]} has no state file (it predates exact resumes): training goes on from fresh "
                      "environments and generators, so the run will differ from an uninterrupted one", stacklevel=2)
        return found[0], None
    state = resume.load_state(path)
    resume.cut_files(state, path)
    return found[0], state


def _train(args: Args, run: runs.RunFolder, data: Data, workload: Any, env: Any, starts: list[int]) -> None:
    from agents import resume
    from agents.callbacks import (
        AtomicCheckpointCallback,
        HyperparametersCallback,
        ProgressBarCallback,
        SchedulingMetricsCallback,
        ValidationCallback,
        save_atomic,
    )
    from agents.curves import plot_learning_curves

    hpcgym_io.write_text(run.args_json, json.dumps(dataclasses.asdict(args), indent=2))
    checkpoint, state = _resume_point(args, run)
    attach_monitor(env, run, fresh=checkpoint is None)
    args = dataclasses.replace(args, time_scale=resolve_time_scale(args, env, run))
    model = make_model(args, env, run, checkpoint, exact=state is not None, nodes=data.machine.nodes)
    val_env = dict(workload=data.validation, window=args.val_length, split="all", **env_kwargs(args, data))
    validation = ValidationCallback(starts, args.val_every, run.best, run.curve, val_env) if starts else None
    if checkpoint is None:
        run.curve.unlink(missing_ok=True)
        scores, chosen = warm_start(args, model, data, workload, run, validation.score if validation else None)
        if validation is not None:
            validation.initial, validation.start_label = scores.get(chosen), chosen
            validation.prior = {f"{k} (not kept)": v for k, v in scores.items() if k != chosen}
        if args.kl_coef:
            model.policy.set_anchor()  # the network RL starts from
    metrics = SchedulingMetricsCallback()
    carry = {"metrics": metrics, **({"validation": validation} if validation else {})}
    checkpoints = AtomicCheckpointCallback(args.checkpoint_every, str(run.checkpoints), runs.CHECKPOINT_PREFIX,
                                           save_replay_buffer=args.algo == "dqn", carry=carry,
                                           appended=(run.monitor, run.curve))
    callbacks = [checkpoints, metrics, HyperparametersCallback(dataclasses.asdict(args))]
    if state is not None:
        resume.restore(state, model, carry)
        checkpoints.pending_log = state.get("log", {})
    if checkpoint is not None:
        resume.hide_tensorboard_after(model.tensorboard_log, TB_NAME, model.num_timesteps)
    if validation is not None:
        callbacks.append(validation)
    if not args.quiet:
        callbacks.append(ProgressBarCallback(max(args.timesteps - model.num_timesteps, 0)))
    try:
        with _checkpoint_on_interrupt(checkpoints):
            model.learn(max(args.timesteps - model.num_timesteps, 0), callback=callbacks,
                        reset_num_timesteps=model.num_timesteps == 0, tb_log_name=TB_NAME)
    except KeyboardInterrupt:  # Ctrl-C: say how to go on
        raise KeyboardInterrupt(_resume_hint(args, run, checkpoints.last_saved)) from None
    save_atomic(model, run.last)
    source = run.best if starts and run.best.exists() else run.last
    hpcgym_io.atomic_write(run.model, lambda tmp: shutil.copyfile(source, tmp))
    if starts:
        plot_learning_curves({args.name: run.curve}, run.curve_png,
                             title=f"{args.name}: validation bsld ({args.val_windows} windows of the train split)",
                             references=validation_references(data, args.val_length, starts, args.backfill))
    print(f"trained {args.algo} for {model.num_timesteps} timesteps; saved {run.model}", flush=True)


@contextlib.contextmanager
def _checkpoint_on_interrupt(checkpoints: Any) -> Iterator[None]:
    """The first Ctrl-C asks for a checkpoint at the next rollout's start and a stop there; a second stops now."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread (a worker's run keeps Python's default)
        return

    def stop(signum: int, frame: Any) -> None:
        if checkpoints.stop_requested:
            raise KeyboardInterrupt
        checkpoints.stop_requested = True
        sys.stderr.write("\nstopping after a checkpoint at the next rollout (Ctrl-C again to stop now, losing the "
                         "steps since the last checkpoint)\n")

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _resume_hint(args: Args, run: runs.RunFolder, steps: int) -> str:
    saved = f"the newest checkpoint is at {steps:,} steps" if steps else "no checkpoint was saved yet"
    return (f"{saved}; continue with python -m experiments.train --runs-dir {run.path.parent} --run-name {run.name} "
            "--resume")


def train_and_evaluate(args: Args) -> tuple[Path, pd.DataFrame | None]:
    """Train, then (unless ``eval_windows`` is 0) evaluate; return the run folder and the summary."""
    from experiments import evaluate

    folder = runs.RunFolder(Path(args.runs_dir) / args.name)
    fresh = not (folder.path.exists() and any(folder.path.iterdir()))
    try:
        run_dir = train(args)
    except NoDecisionError:
        if fresh:  # nothing was learned: no folder to refuse the corrected command as "not empty" (a study, which
            folder.discard_unfinished()  # calls train() and records the source as untrainable there, keeps it)
        raise
    if args.eval_windows <= 0:
        return run_dir, None
    return run_dir, evaluate.evaluate_run(runs.RunFolder(run_dir), args.trace, args.read_kwargs(), args.eval_windows,
                                          args.eval_length, progress=not args.quiet)


def kept_network(curve: pd.DataFrame) -> str:
    """Which network ``model.zip`` holds and why, from the learning curve (``timesteps, val_bsld, network``)."""
    kept = curve[~curve["network"].astype(str).str.contains("not kept")]
    start, rl = kept[kept["timesteps"] == 0], kept[kept["timesteps"] > 0]
    if start.empty or rl.empty:
        return "kept the last network (no validation)"
    label, first = start["network"].iat[-1], float(start["val_bsld"].iat[-1])
    best = rl.loc[rl["val_bsld"].idxmin()]
    if best["val_bsld"] < first:
        return (f"kept the RL network of step {int(best['timesteps']):,} (validation bsld {best['val_bsld']:.2f}, "
                f"its {label} start {first:.2f})")
    return (f"kept the {label} start: RL did not improve validation (best RL checkpoint {best['val_bsld']:.2f} at "
            f"step {int(best['timesteps']):,}, start {first:.2f})")


def comparison(ratio: tuple[float, float, float], what: str) -> str:
    """``0.987 (0.962-1.011) x WHAT: a tie`` (the CI spans 1), ``...: better`` or ``...: worse``."""
    word = "better" if ratio[2] < 1 else "worse" if ratio[1] > 1 else "a tie"
    return f"{ratio[0]:.3f} ({ratio[1]:.3f}-{ratio[2]:.3f}) x {what}: {word}"


def verdict(run: runs.RunFolder, table: pd.DataFrame) -> str:
    """One line: the network kept and why; the agent against its start and the reference on the test windows.

    The comparisons are paired ratios of mean bsld with 95% block-bootstrap CIs (:mod:`experiments.tables`).
    """
    from experiments import tables

    per_window = pd.read_csv(run.per_window)
    kinds = per_window.groupby("scheduler")["kind"].first()
    agent = kinds.index[kinds == "agent"]
    kept = kept_network(pd.read_csv(run.curve)) if run.curve.is_file() else "kept the last network (no validation)"
    if agent.empty:
        return f"verdict: {kept}"
    row = table.set_index("scheduler").loc[agent[0]]
    parts = [f"verdict: {kept}. On the test windows the agent's bsld is {row['bsld']:.2f}"]
    chosen = json.loads(run.warm_start.read_text()).get("chosen") if run.warm_start.is_file() else "untrained"
    start = kinds.index[kinds == chosen]
    if len(start):
        ratio = tables.paired(per_window, start[0]).set_index("scheduler").loc[agent[0]]
        parts.append(comparison(tuple(ratio), f"its {chosen} start"))
    reference = table.attrs.get("reference")
    if reference and "vs_reference" in row:
        ratio = (row["vs_reference"], row["vs_reference_low"], row["vs_reference_high"])
        ref_bsld = table.set_index("scheduler").loc[reference, "bsld"]
        parts.append(comparison(ratio, f"the reference {reference} ({ref_bsld:.2f})"))
    return "; ".join(parts) + " (paired ratios of mean bsld, 95% block-bootstrap CI)"


def _train_and_evaluate_seed(args: Args) -> str:
    return str(train_and_evaluate(args)[0])


def main(argv: list[str] | None = None) -> int:
    """Train, then evaluate on the test windows."""
    args = parse_args(argv)
    started = time.time()
    if args.seeds:
        from experiments import seeds

        dirs, table = seeds.run(args, _train_and_evaluate_seed)
        if table is not None:
            print(seeds.format_table(table))
        print(f"done in {time.time() - started:.0f} s: {', '.join(map(str, dirs))}")
        return 0
    run_dir, table = train_and_evaluate(args)
    if table is not None:
        from experiments.evaluate import format_summary

        print(format_summary(table, table.attrs.get("description", "")))
    print(f"done in {time.time() - started:.0f} s: {run_dir}")
    if table is not None:
        print(verdict(runs.RunFolder(run_dir), table))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
