"""The training recipe's parts, as ``experiments.train`` assembles them.

What the agent trains on (:func:`training_workload`: real windows, a synthesizer's samples, or both), its
environments (:func:`env_kwargs`, :func:`make_env`), its network (:func:`network`: the job scorer with the recipe's
queue ranks, attention and prior, SB3's MLP, or a user's ``MODULE:CLASS``, with ``--policy-kwargs`` over them), the
algorithm (:func:`make_model`: MaskablePPO or the masked DQN, new or from a checkpoint) and the warm start
(:func:`warm_start`: a behaviour clone of a heuristic, or a residual on its score). :func:`check_recipe` refuses
combinations of the recipe's flags that cannot run, before anything is read. Each function takes
:class:`experiments.train.Args`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

from experiments import arguments, runs
from experiments.protocol import Data
from hpcgym import cli
from hpcgym import io as hpcgym_io

#: :class:`experiments.train.Args` (named, not imported: ``experiments.train`` imports this module)
Args = Any
#: the networks ``--network`` names; anything else is a ``MODULE:CLASS``
NETWORKS = ("scorer", "mlp")


def check_recipe(args: Args) -> None:
    """Refuse combinations of the recipe's flags that cannot run, and heuristics that cannot be found."""
    scorer_ppo = args.algo == "ppo" and args.policy == "scorer"
    if (args.prior or args.kl_coef or args.attention) and not scorer_ppo:
        raise cli.UsageError("--prior, --kl-coef and --attention need --algo ppo --network scorer")
    if args.action != "pick" and args.algo != "ppo":
        raise cli.UsageError(f"--action {args.action} needs --algo ppo (the masked DQN reads its masks from the "
                             "observation, which shows every waiting job as a choice)")
    if args.action == "guarded" and args.backfill != "easy":
        raise cli.UsageError("--action guarded chooses among EASY's backfill candidates: it needs --backfill easy")
    if args.action == "hold" and args.hold_limit < 1:
        raise cli.UsageError(f"--hold-limit must be at least 1 second, not {args.hold_limit}")
    if args.teach and not (args.prior and not args.clone):
        raise cli.UsageError("--teach fits a residual's correction: give --prior with it, and --clone ''")
    if args.kl_coef and args.ent_coef:
        raise cli.UsageError("--kl-coef takes the place of the entropy bonus: give --ent-coef 0 with it")
    if args.kl_coef < 0 or args.prior_temperature <= 0 or args.attention < 0:
        raise cli.UsageError("--kl-coef and --attention must be >= 0, --prior-temperature > 0")
    check_heuristics(args)


def check_heuristics(args: Args) -> None:
    """Refuse a ``--tuned`` fit that cannot be read, and heuristics (``--clone``, ``--prior``, ...) not found."""
    from baselines import tuned
    from experiments.protocol import TUNED_ON_WORKLOAD, heuristic

    if args.tuned and args.tuned != TUNED_ON_WORKLOAD:
        try:
            tuned.load(args.tuned)
        except ValueError as exc:
            raise cli.UsageError(f"--tuned: {cli.message(exc)}") from None
    settings = dataclasses.asdict(args)
    for name in ("clone", "baseline", "order", "prior"):
        if getattr(args, name):
            try:
                pol = heuristic(getattr(args, name), settings)
                if name == "prior":
                    tuned.weights_of(pol)
            except (ValueError, KeyError) as exc:
                raise cli.UsageError(f"{arguments.flag_name(type(args), name)}: {cli.message(exc)}") from None
    if args.clone:  # the heuristic's choices are read off the environment: its estimates must be there
        from experiments.protocol import predictor_of
        from hpcgym.sim import predict

        teacher, seen = heuristic(args.clone, settings).predictor, predictor_of(settings)
        clairvoyant = predict.get(teacher).clairvoyant
        if args.prior and not (clairvoyant or args.clone.lower() == args.prior.lower()):
            raise cli.UsageError(f"--prior replaces the cloned warm start: give --clone '' with it (or, to fit the "
                                 f"correction to a teacher, --clone NAME@exact, or --clone {args.prior} as the "
                                 "control)")
        if teacher not in ("walltime", seen) and not clairvoyant:
            raise cli.UsageError(f"--clone {args.clone} reads {teacher} estimates, the environment {seen}'s (from "
                                 "--predictor or --prior): give a heuristic on those, the walltimes, or NAME@exact")


def fitted_folder(spec: str) -> Path | None:
    """``--synthesizer`` as the folder of a fitted model (one with a manifest), or None for a name."""
    from synth.base import MANIFEST

    path = Path(spec)
    return path if (path / MANIFEST).is_file() else None


def check_synthesizer(spec: str) -> None:
    """Refuse a ``--synthesizer`` that is neither a synthesizer's name nor a fitted model's folder."""
    import synth

    if fitted_folder(spec) is not None or spec.lower() in synth.names():
        return
    what = "is a folder without a fitted model's manifest.json" if Path(spec).is_dir() else "is no synthesizer's name"
    raise cli.UsageError(f"--synthesizer {spec!r} {what}; give one of {', '.join(synth.names())}, or a folder written "
                         "by python -m synth.fit")


def env_kwargs(args: Args, data: Data) -> dict[str, Any]:
    """The environment settings every part of a run shares (training, validation, evaluation)."""
    from experiments.protocol import agent_env

    return {"machine": data.machine, "objective": args.objective, "time_scale": args.time_scale or None,
            "invalid_action": "raise",  # masked agents never choose an empty slot: if one does, that is a bug
            **agent_env(dataclasses.asdict(args))}


def scorer_kwargs(args: Args, nodes: int) -> dict[str, Any]:
    """The job scorer's ``policy_kwargs`` (PPO): queue ranks, attention, the residual's prior, the KL anchor.

    The prior reads the observation's log-scaled columns, so it needs the run's resolved ``time_scale``.
    """
    from baselines import tuned
    from experiments.protocol import heuristic
    from hpcgym.env import WAIT_SCALE

    kwargs: dict[str, Any] = {"ranks": rank_columns(args.ranks), "attention": args.attention,
                              "anchor": args.kl_coef > 0}
    if args.prior:
        weights = tuned.weights_of(heuristic(args.prior, dataclasses.asdict(args)))
        kwargs["prior"] = {"weights": weights, "temperature": args.prior_temperature, "time_scale": args.time_scale,
                           "wait_scale": WAIT_SCALE * args.time_scale, "nodes": nodes}
    return kwargs


def rank_columns(names: str) -> tuple[int, ...]:
    """``--ranks``' column names as indices of the observation's job row."""
    from hpcgym.observation import JOB_FEATURES

    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in JOB_FEATURES]
    if unknown:
        raise cli.UsageError(f"--ranks: unknown job column(s) {', '.join(unknown)}; they are {', '.join(JOB_FEATURES)}")
    return tuple(JOB_FEATURES.index(n) for n in wanted)


def network_kwargs(args: Args) -> dict[str, Any]:
    """``--policy-kwargs`` as a dict (refused in one line if it is not a JSON object)."""
    if not args.policy_kwargs:
        return {}
    try:
        kwargs = json.loads(args.policy_kwargs)
    except json.JSONDecodeError as exc:
        raise cli.UsageError(f"--policy-kwargs {args.policy_kwargs!r}: not JSON ({exc})") from None
    if not isinstance(kwargs, dict):
        raise cli.UsageError(f"--policy-kwargs {args.policy_kwargs!r}: expected a JSON object such as "
                             '\'{"hidden": [64, 32]}\'')
    return kwargs


def network(args: Args, nodes: int) -> tuple[Any, dict[str, Any] | None]:
    """The PPO policy ``--network`` names (a class, or SB3's ``"MlpPolicy"``) and its ``policy_kwargs``.

    The job scorer's come from the recipe's flags (:func:`scorer_kwargs`), and ``--policy-kwargs`` over them.
    """
    import importlib

    kwargs = network_kwargs(args)
    if args.policy == "scorer":
        from agents.policies import ScorerPolicy

        return ScorerPolicy, {**scorer_kwargs(args, nodes), **kwargs}
    if args.policy == "mlp":
        return "MlpPolicy", kwargs or None
    module, _, name = args.policy.partition(":")
    try:
        return getattr(importlib.import_module(module), name), kwargs or None
    except (ImportError, AttributeError) as exc:
        raise cli.UsageError(f"--network {args.policy!r}: {type(exc).__name__}: {exc}") from None


def training_workload(args: Args, data: Data, synthesizer: Any = None) -> Any:
    """What the agent trains on: the training part's windows, a synthesizer fitted on it, or both alternately.

    ``synthesizer``: an already fitted model to use instead of fitting one (or loading the run cache's). So is a
    fitted folder given as ``--synthesizer`` (:func:`load_fitted`).
    """
    from hpcgym.workload import MixedWorkload, PooledSampler

    if args.workload == "real":
        return data.fit
    model = synthesizer
    if model is None and fitted_folder(args.synthesizer) is not None:
        model = load_fitted(fitted_folder(args.synthesizer), data)
    if model is None:
        model = runs.fit_cache(args.runs_dir).fitted(args.trace_label, args.synthesizer, data.fit, args.seed,
                                                     data.machine.nodes, announce=print)
    if args.sample_pool:
        model = PooledSampler(model, args.sample_pool, args.seed)
    return model if args.workload == "synthetic" else MixedWorkload(data.fit, model)


#: ``--tuned workload``'s search: that of ``python -m baselines.tune`` (windows, jobs per window, CMA-ES evaluations
#: per predictor); a synthetic workload without a pool is tuned on a sample as long as the training part.
TUNE_BUDGET = {"windows": 64, "length": 1024, "evaluations": 300}


def tuning_table(args: Args, data: Data, workload: Any) -> Any:
    """The jobs ``--tuned workload`` fits on: the training data the agent sees (``mixed``: its real part)."""
    from hpcgym import jobs as jobtable

    if args.workload in ("real", "mixed"):
        return data.fit
    pool = getattr(workload, "pool", None)  # --sample-pool: the very jobs the agent trains on
    return pool if pool is not None else jobtable.finalize(workload.sample(len(data.fit), seed=args.seed))


def tune_on_workload(args: Args, data: Data, workload: Any) -> Args:
    """``--tuned workload``: fit ``tuned`` on the training workload and point ``--tuned`` at the fit's file.

    The fit is a function of the tuning table alone (CMA-ES seed 0), so it is cached under the table's hash: the
    seeds of one source that share their data (the real training part) share one fit, and a resumed run finds its own.
    """
    from baselines import tuned
    from experiments.protocol import TUNED_ON_WORKLOAD, WORKLOAD_FIT_COMMAND
    from synth.base import table_hash

    if args.tuned != TUNED_ON_WORKLOAD:
        return args
    table = tuning_table(args, data, workload)
    path = (Path(args.runs_dir) / "cache" / "tuned" / f"{table_hash(table)}-{args.backfill}.json").resolve()
    if not path.exists():
        if not args.quiet:
            print(f"tuning `tuned` on the training workload ({len(table):,} jobs, {args.backfill})")
        fit = tuned.fit(table, data.machine.nodes, args.backfill, trace=f"{args.trace_label} ({source_label(args)})",
                        progress=not args.quiet, **TUNE_BUDGET)
        fit.command = f"{WORKLOAD_FIT_COMMAND} ({source_label(args)}, seed {args.seed})"
        tuned.save(fit, path)
    return dataclasses.replace(args, tuned=str(path))


def source_label(args: Args) -> str:
    """The training source as the run's flags name it."""
    if args.workload == "real":
        return f"--workload real (window {args.window})"
    return f"--workload {args.workload} --synthesizer {args.synthesizer}"


def load_fitted(folder: Path, data: Data) -> Any:
    """A fitted model's folder, loaded; a warning if it was fitted on another table than the run's training part.

    The protocol fits generators on the training part only (the train split minus its validation tail): a model
    fitted on more (``synth.fit`` fits the whole train split by default) may have seen the validation or test jobs.
    """
    from synth.base import Synthesizer, table_hash

    model = Synthesizer.load(folder)
    if model.trace_hash != table_hash(data.fit):
        warnings.warn(f"{folder} was fitted on another table than this run's training part ({len(data.fit):,} jobs of "
                      "the train split, minus the validation tail): if that table held validation or test jobs, the "
                      "agent's validation and test scores are not held out", stacklevel=2)
    if model.max_nodes and model.max_nodes > data.machine.nodes:
        raise cli.UsageError(f"--synthesizer {folder} was fitted for {model.max_nodes} nodes; the machine has "
                             f"{data.machine.nodes}")
    return model


def make_env(args: Args, data: Data, workload: Any) -> Any:
    """The training environment: the vector env over the training workload, in SB3's interface, seeded.

    It is recorded (:class:`agents.resume.RecordedVecEnv`), so that a resumed run can play its history again;
    :func:`attach_monitor` sends its episodes to ``monitor.csv``.
    """
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.resume import RecordedVecEnv
    from agents.vec import HpcgymVecEnv
    from experiments.protocol import heuristic
    from hpcgym.vector import SchedulingVectorEnv

    baseline = heuristic(args.baseline, dataclasses.asdict(args)) if args.baseline else None
    venv = SchedulingVectorEnv(args.envs, workload=workload, window=args.window, split="all", reward=args.reward,
                               baseline=baseline, compare_with=("fcfs",), **env_kwargs(args, data))
    env = RecordedVecEnv(VecMonitor(HpcgymVecEnv(venv), info_keywords=("compare_json",)))
    env.seed(args.seed)
    return env


def attach_monitor(env: Any, run: runs.RunFolder, fresh: bool) -> None:
    """Write the environment's episodes to the run's ``monitor.csv`` (started over when ``fresh``, else appended)."""
    from stable_baselines3.common.monitor import ResultsWriter

    monitor = env.venv
    monitor.results_writer = ResultsWriter(str(run.monitor), header={"t_start": monitor.t_start},
                                           extra_keys=("compare_json",), override_existing=fresh)


def make_model(args: Args, env: Any, run: runs.RunFolder, checkpoint: Path | None = None,
               exact: bool = False, nodes: int = 0) -> Any:
    """A new agent (on a machine of ``nodes`` nodes), or the one saved in ``checkpoint``.

    ``exact``: the checkpoint has a state file, whose replay puts the environments back where they were (their
    saved last observation is kept); without one, training goes on from fresh environments.
    """
    from agents.callbacks import replay_buffer_for

    tb = str(run.tensorboard)
    if args.algo == "ppo":
        from sb3_contrib import MaskablePPO

        if checkpoint:
            return MaskablePPO.load(checkpoint, env=env, device="cpu", tensorboard_log=tb, force_reset=not exact)
        policy, kwargs = network(args, nodes)
        return MaskablePPO(policy, env, policy_kwargs=kwargs, learning_rate=args.learning_rate, n_steps=args.n_steps,
                           batch_size=args.batch_size, n_epochs=args.n_epochs, gamma=args.gamma,
                           gae_lambda=args.gae_lambda, clip_range=args.clip_range,
                           target_kl=args.target_kl or None, ent_coef=args.kl_coef or args.ent_coef, seed=args.seed,
                           tensorboard_log=tb, device="cpu", verbose=0)
    from agents.dqn import MaskedDQN

    if checkpoint:
        model = MaskedDQN.load(checkpoint, env=env, device="cpu", tensorboard_log=tb, force_reset=not exact)
        buffer = replay_buffer_for(checkpoint)
        if buffer:
            model.load_replay_buffer(buffer)
        elif exact:
            warnings.warn(f"{checkpoint} has no replay buffer beside it (only the newest is kept): the DQN goes on "
                          "with an empty one, so it will not match an uninterrupted run", stacklevel=2)
        return model
    return MaskedDQN(env=env, learning_rate=args.learning_rate, batch_size=args.batch_size, seed=args.seed,
                     gamma=args.gamma, buffer_size=100_000, learning_starts=1_000, exploration_fraction=0.3,
                     policy_kwargs={"scorer": args.policy == "scorer", "ranks": rank_columns(args.ranks),
                                    **network_kwargs(args)},
                     tensorboard_log=tb, device="cpu", verbose=0)


def warm_start(args: Args, model: Any, data: Data, workload: Any, run: runs.RunFolder,
               validate: Any) -> tuple[dict[str, float], str]:
    """Save the untrained network; with ``--clone``, behaviour-clone the heuristic and save that too.

    The demonstrations are the heuristic's choices on the training workload (synthetic samples for a synthetic
    run: a synthetic-trained agent never sees real jobs before its evaluation).

    With ``--start best`` and validation windows, RL then starts from whichever of the two scores better on them
    (``warm_start.json`` says which). Returns the validation scores measured and the network RL starts from.
    """
    from agents import pretrain
    from agents.callbacks import save_atomic
    from experiments.protocol import heuristic
    from hpcgym.env import SchedulingEnv

    save_atomic(model, run.untrained)
    if not (args.clone or args.prior):
        return {}, "untrained"
    held_out = None
    if args.val_windows > 0:  # the heuristic's choices on validation windows: how well the start reproduces them
        # (random windows of the validation table: with --val-periods one may span a held-out stretch's end and the
        # next one's start, a quiet spell between; it measures agreement with the heuristic, it selects nothing)
        held_out = (SchedulingEnv(workload=data.validation, window=args.val_length, split="all",
                                  **env_kwargs(args, data)), args.val_windows)
    validate = validate if args.start == "best" else None
    pol = heuristic(args.clone or args.prior, dataclasses.asdict(args))
    # a copy: the demonstrations must not move the training environments' workload (a mixed workload's turn),
    # or a resumed run, which skips them, would not find the workload where the uninterrupted run had it
    demo_env = SchedulingEnv(workload=copy.copy(workload), window=args.clone_window, split="all",
                             **env_kwargs(args, data)) if args.clone or args.teach else None
    if args.prior:
        teach = None
        if args.clone:  # a teacher: fit the correction to its choices
            def teach() -> float:
                return pretrain.behaviour_clone(model, demo_env, pol, args.clone_episodes, args.clone_epochs,
                                                seed=args.seed, progress=not args.quiet)
        elif args.teach:  # runtimes: fit the correction to the runtimes the prior's estimates miss
            def teach() -> float:
                return pretrain.teach_runtimes(model, demo_env, pol, args.clone_episodes, args.clone_epochs,
                                               seed=args.seed)
        done = pretrain.residual_start(model, pol, held_out, validate, on_start=lambda m: save_atomic(m, run.cloned),
                                       teach=teach)
        what = (f"residual on {args.prior}, taught by {args.clone}: reproduces" if args.clone else
                f"residual on {args.prior}, taught the runtimes:" if args.teach else
                f"residual on {args.prior}: the prior alone reproduces")
    else:
        done = pretrain.warm_start(model, pol, demo_env, args.clone_episodes, args.clone_epochs, args.seed, held_out,
                                   validate, on_clone=lambda m: save_atomic(m, run.cloned), progress=not args.quiet)
        what = f"behaviour-cloned {args.clone}:"
    on_val = f" ({done.accuracy_held_out:.1%} on validation windows)" if held_out else ""
    did = (f"the log-runtime error {done.accuracy:.1%} lower on its demonstrations" if args.teach else
           f"{done.accuracy:.1%} of its choices{on_val}")
    print(f"{what} {did}; RL starts from the {done.chosen} network (validation "
          f"bsld: {json.dumps({k: round(v, 3) for k, v in done.scores.items()})})", flush=True)
    kept = {"runtime_error_removed": done.accuracy, "prior_choices_kept_validation": done.accuracy_held_out} \
        if args.teach else {"clone_accuracy": done.accuracy}
    hpcgym_io.write_text(run.warm_start, json.dumps({**kept,
                                                      "clone_accuracy_validation": done.accuracy_held_out if held_out
                                                      else None, "validation": done.scores, "chosen": done.chosen},
                                                     indent=2))
    return done.scores, done.chosen
