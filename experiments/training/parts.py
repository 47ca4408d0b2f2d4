"""A run's parts, each from the recipe sections it needs.

What the agent trains on (:func:`training_workload`: real windows, a synthesizer's samples, or both), its
environments (:func:`env_kwargs`, :func:`make_env`), its network (:func:`network`: the job scorer with its queue
ranks and prior, SB3's MLP, or a user's ``MODULE:CLASS``, with ``--policy-kwargs`` over them) and the algorithm
(:func:`make_model`: MaskablePPO or the masked DQN, new or from a checkpoint).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from experiments import runs
from experiments.protocol import Data
from experiments.recipe import (
    Algorithm,
    Environment,
    Network,
    Recipe,
    Resolved,
    Source,
    agent_env,
    fitted_folder,
    rank_columns,
)
from hpcgym import cli


def env_kwargs(recipe: Recipe, named: Resolved, data: Data, training: bool = False) -> dict[str, Any]:
    """The environment settings every part of a run shares (training, validation, evaluation).

    ``named``: the recipe's names found (:func:`experiments.recipe.resolve`): the runtime predictor follows the
    heuristic the network imitates (``--prior``, ``--clone``). ``training``: the training environment's own too.
    """
    env = recipe.environment
    return {"machine": data.machine, "time_scale": env.time_scale or None,
            "invalid_action": "raise",  # masked agents never choose an empty slot: if one does, that is a bug
            **agent_env(recipe, named, training)}


def source_label(source: Source, window: int) -> str:
    """The training source as the run's flags name it."""
    if source.workload == "real":
        return f"--workload real (window {window})"
    return f"--workload {source.workload} --synthesizer {source.synthesizer}"


def training_workload(source: Source, seed: int, runs_dir: str, data: Data, synthesizer: Any = None) -> Any:
    """What the agent trains on: the training part's windows, a synthesizer fitted on it, or both alternately.

    ``synthesizer``: an already fitted model to use instead of fitting one (or loading the run cache's). So is a
    fitted folder given as ``--synthesizer`` (:func:`load_fitted`).
    """
    from hpcgym.workload import MixedWorkload, PooledSampler

    if source.workload == "real":
        return data.fit
    model = synthesizer
    if model is None and fitted_folder(source.synthesizer) is not None:
        model = load_fitted(fitted_folder(source.synthesizer), data)
    if model is None:
        model = runs.fit_cache(runs_dir).fitted(source.trace_label, source.synthesizer, data.fit, seed,
                                                data.machine.nodes, announce=print)
    if source.sample_pool:
        model = PooledSampler(model, source.sample_pool, seed)
    return model if source.workload == "synthetic" else MixedWorkload(data.fit, model)


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


#: ``--tuned workload``'s search: that of ``python -m baselines.tune`` (windows, jobs per window, CMA-ES evaluations
#: per predictor); a synthetic workload without a pool is tuned on a sample as long as the training part.
TUNE_BUDGET = {"windows": 64, "length": 1024, "evaluations": 300}


def tuning_table(source: Source, seed: int, data: Data, workload: Any) -> Any:
    """The jobs ``--tuned workload`` fits on: the training data the agent sees (``mixed``: its real part)."""
    from hpcgym import jobs as jobtable

    if source.workload in ("real", "mixed"):
        return data.fit
    pool = getattr(workload, "pool", None)  # --sample-pool: the very jobs the agent trains on
    return pool if pool is not None else jobtable.finalize(workload.sample(len(data.fit), seed=seed))


def tune_on_workload(recipe: Recipe, data: Data, workload: Any) -> Recipe:
    """``--tuned workload``: fit ``tuned`` on the training workload and point ``--tuned`` at the fit's file.

    The fit is a function of the tuning table alone (CMA-ES seed 0), so it is cached under the table's hash: the
    seeds of one source that share their data (the real training part) share one fit, and a resumed run finds its own.
    """
    from baselines import tuned
    from experiments.protocol import TUNED_ON_WORKLOAD, WORKLOAD_FIT_COMMAND
    from synth.base import table_hash

    source, run, backfill = recipe.source, recipe.run, recipe.environment.backfill
    if source.tuned != TUNED_ON_WORKLOAD:
        return recipe
    table = tuning_table(source, run.seed, data, workload)
    path = (Path(run.runs_dir) / "cache" / "tuned" / f"{table_hash(table)}-{backfill}.json").resolve()
    if not path.exists():
        label = source_label(source, recipe.environment.window)
        if not run.quiet:
            print(f"tuning `tuned` on the training workload ({len(table):,} jobs, {backfill})")
        fit = tuned.fit(table, data.machine.nodes, backfill, trace=f"{source.trace_label} ({label})",
                        progress=not run.quiet, **TUNE_BUDGET)
        fit.command = f"{WORKLOAD_FIT_COMMAND} ({label}, seed {run.seed})"
        tuned.save(fit, path)
    return recipe.replace(tuned=str(path))


def make_env(env: Environment, kwargs: dict[str, Any], workload: Any, baseline: Any, seed: int) -> Any:
    """The training environment: the vector env over the training workload, in SB3's interface, seeded.

    ``kwargs``: :func:`env_kwargs` with ``training``; ``baseline``: the heuristic the reward is relative to (None:
    none). It is recorded (:class:`agents.resume.RecordedVecEnv`), so that a resumed run can play its history again;
    :func:`attach_monitor` sends its episodes to ``monitor.csv``.
    """
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.resume import RecordedVecEnv
    from agents.vec import HpcgymVecEnv
    from hpcgym.vector import SchedulingVectorEnv

    venv = SchedulingVectorEnv(env.envs, workload=workload, split="all", baseline=baseline, compare_with=("fcfs",),
                               **kwargs)
    out = RecordedVecEnv(VecMonitor(HpcgymVecEnv(venv), info_keywords=("compare_json",)))
    out.seed(seed)
    return out


def training_env(recipe: Recipe, named: Resolved, data: Data, workload: Any) -> Any:
    """:func:`make_env` with the recipe's environment, its reward's baseline heuristic and its seed."""
    return make_env(recipe.environment, env_kwargs(recipe, named, data, training=True), workload, named.baseline,
                    recipe.run.seed)


def attach_monitor(env: Any, run: runs.RunFolder, fresh: bool) -> None:
    """Write the environment's episodes to the run's ``monitor.csv`` (started over when ``fresh``, else appended)."""
    from stable_baselines3.common.monitor import ResultsWriter

    monitor = env.venv
    monitor.results_writer = ResultsWriter(str(run.monitor), header={"t_start": monitor.t_start},
                                           extra_keys=("compare_json",), override_existing=fresh)


def scorer_kwargs(net: Network, prior: Any, anchor: bool, time_scale: float, nodes: int) -> dict[str, Any]:
    """The job scorer's ``policy_kwargs`` (PPO): queue ranks, the residual's ``prior`` (a heuristic), the KL anchor.

    The prior reads the observation's log-scaled columns, so it needs the run's resolved ``time_scale``.
    """
    from baselines import tuned
    from hpcgym.env import WAIT_SCALE

    kwargs: dict[str, Any] = {"ranks": rank_columns(net.ranks), "anchor": anchor}
    if prior is not None:
        kwargs["prior"] = {"weights": tuned.weights_of(prior), "temperature": net.prior_temperature,
                           "time_scale": time_scale, "wait_scale": WAIT_SCALE * time_scale, "nodes": nodes}
    return kwargs


def network(net: Network, prior: Any, anchor: bool, time_scale: float, nodes: int) -> tuple[Any, dict | None]:
    """The PPO policy ``--network`` names (a class, or SB3's ``"MlpPolicy"``) and its ``policy_kwargs``.

    The job scorer's come from :func:`scorer_kwargs`, and ``--policy-kwargs`` over them.
    """
    from agents.policies import resolve

    kwargs = net.kwargs()
    if net.scorer:
        return resolve(net.policy), {**scorer_kwargs(net, prior, anchor, time_scale, nodes), **kwargs}
    try:
        return resolve(net.policy), kwargs or None
    except KeyError as exc:
        raise cli.UsageError(f"--network: {cli.message(exc)}") from None


def make_model(algo: Algorithm, policy: tuple[Any, dict | None], seed: int, env: Any, run: runs.RunFolder,
               checkpoint: Path | None = None, exact: bool = False) -> Any:
    """A new agent with ``policy`` (:func:`network`; the DQN reads its ``policy_kwargs``), or ``checkpoint``'s.

    The algorithm's hyper-parameters are its section's (:meth:`experiments.recipe.Algorithm.sb3_kwargs`).

    ``exact``: the checkpoint has a state file, whose replay puts the environments back where they were (their
    saved last observation is kept); without one, training goes on from fresh environments.
    """
    tb = str(run.tensorboard)
    if algo.algo == "ppo":
        from sb3_contrib import MaskablePPO

        if checkpoint:
            return MaskablePPO.load(checkpoint, env=env, device="cpu", tensorboard_log=tb, force_reset=not exact)
        return MaskablePPO(policy[0], env, policy_kwargs=policy[1], seed=seed, tensorboard_log=tb, device="cpu",
                           verbose=0, **algo.sb3_kwargs())
    if checkpoint:
        return _load_dqn(checkpoint, env, tb, exact)
    from agents.dqn import MaskedDQN

    return MaskedDQN(env=env, seed=seed, policy_kwargs=policy[1], tensorboard_log=tb, device="cpu", verbose=0,
                     **algo.sb3_kwargs())


def dqn_policy(net: Network) -> tuple[Any, dict[str, Any]]:
    """The masked DQN's network settings (its policy class is its own)."""
    return None, {"scorer": net.scorer, "ranks": rank_columns(net.ranks), **net.kwargs()}


def _load_dqn(checkpoint: Path, env: Any, tb: str, exact: bool) -> Any:
    from agents.callbacks import replay_buffer_for
    from agents.dqn import MaskedDQN

    model = MaskedDQN.load(checkpoint, env=env, device="cpu", tensorboard_log=tb, force_reset=not exact)
    buffer = replay_buffer_for(checkpoint)
    if buffer:
        model.load_replay_buffer(buffer)
    elif exact:
        warnings.warn(f"{checkpoint} has no replay buffer beside it (only the newest is kept): the DQN goes on "
                      "with an empty one, so it will not match an uninterrupted run", stacklevel=2)
    return model
