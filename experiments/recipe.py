"""The training recipe: one frozen, typed :class:`Recipe` made of sections, each validated where it is defined.

====================  ============================================================================================
section               what it says
====================  ============================================================================================
:class:`Source`       the real trace (its train split is the training data, its test split the evaluation), what
                      the agent trains on (real windows, a synthesizer's samples, or both) and the ``tuned`` fit
:class:`Environment`  the simulator and the environment every network of the run plays in (backfilling, slots,
                      observation, action mode, reward, parallel windows)
:class:`Network`      the agent's network (the job scorer, SB3's MLP or a user's class) and the residual's prior
:class:`Algorithm`    PPO or the masked DQN and their hyper-parameters
:class:`WarmStart`    what RL starts from: a behaviour clone of a heuristic, a residual's teacher, or nothing
:class:`Selection`    the validation part and windows the kept network and the warm start are chosen on
:class:`Run`          the seed, the budget, the test windows and where the run folder goes
====================  ============================================================================================

A setting is one field of one section, and its declaration says everything about it
(:func:`experiments.arguments.flag`): its default, its command-line flag and help (``experiments.train`` builds its
flags from these fields), the values it may take (``choices``, ``at_least``, ``above``, ...: a section's
``__post_init__`` refuses anything else with a :class:`hpcgym.cli.UsageError` naming the flag) and where it goes: an
:class:`Environment` field is an argument of every :class:`~hpcgym.env.SchedulingEnv` the run's networks play in
unless its metadata says ``env="training"`` (the training environment only) or ``env=False`` (the run passes it in
its own form: a heuristic's name resolved, the vector environment's size); an :class:`Algorithm` field with
``sb3=(ALGO, ...)`` is an argument of those algorithms' SB3 constructors. :class:`Recipe`'s ``__post_init__``
refuses combinations across sections. Adding a setting is adding a field: its flag, its check, its place in
``args.json`` and in the environment follow from the declaration.

A recipe is a value: building, checking and :meth:`Recipe.replace`-ing one reads no file. What it names (the
``tuned`` fit, the heuristics, a fitted synthesizer's folder) is found by one explicit step, :func:`resolve`, which
refuses a name that cannot be found and returns the names loaded (:class:`Resolved`); a run calls it once.

The recipe is saved in the run folder's ``args.json`` as one flat object with a ``version``
(:meth:`Recipe.settings`) and read back with :meth:`Recipe.from_settings` (every reader of a run folder goes through
:meth:`experiments.runs.RunFolder.recipe`), which also reads the files written before the version existed.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents import NETWORKS
from experiments import protocol
from experiments.arguments import TraceReading, check, flag
from hpcgym import cli
from hpcgym.rewards import OBJECTIVES
from hpcgym.sim.policy import PriorityPolicy

#: the version :meth:`Recipe.settings` writes (1: the flat ``experiments.train.Args`` of before, without a version)
VERSION = 2
#: where ``experiments.train`` puts run folders unless ``--runs-dir`` says otherwise
RUNS_DIR = "runs"
#: :class:`Environment` metadata ``env``: an argument of the training environment only
TRAINING = "training"
#: :class:`Algorithm` metadata ``sb3``: the algorithms whose SB3 constructor takes the field
PPO, DQN = ("ppo",), ("dqn",)


@dataclass(frozen=True)
class Source(TraceReading):
    """The real trace and what the agent trains on."""

    trace: str = flag("theta", "real trace (bundled name or file): its train split is the training data, its test "
                               "split the evaluation")
    format: str = ""  #: ``--format`` (:func:`hpcgym.cli.add_trace_args`); empty: from the file's name and header
    machine: str = ""  #: ``--machine`` as text; empty: the trace's own
    columns: str = ""  #: ``--columns`` as text (for ``--format csv``)
    round: str = ""  #: ``--round`` as text; empty: the readers' defaults (counts must be whole)
    on_duplicate: str = "warn"  #: ``--on-duplicate``: ``warn`` (keep jobs whose id repeats) or ``error``
    workload: str = flag("synthetic", "real | synthetic | mixed (real and synthetic windows alternately): what the "
                                      "agent trains on", choices=("real", "synthetic", "mixed"))
    synthesizer: str = flag("arrivals", "for --workload synthetic|mixed: a synthesizer's name (fitted on the training "
                                        "part; those of installed packages too: docs/extend.md), or the folder of one "
                                        "fitted already (synth.fit --out)")
    sample_pool: int = flag(0, "sample this many jobs from the synthesizer once (seeded by --seed) and train on "
                               "windows of them; 0: a new sample every episode (slow for realtabformer and the SDV "
                               "models)", at_least=0)
    tuned: str = flag("", "the fit that `tuned` means in --prior, --order, --baseline and --clone: a fit's JSON file "
                          "(python -m baselines.tune --out); workload: fitted first on this run's training workload "
                          "(the real training part, or the synthetic pool; cached in RUNS_DIR/cache/tuned), so that "
                          "what the agent knows comes from its training data only; empty: the trace's own fit")

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class Environment:
    """The simulator and the environment every network of the run plays in (training, validation, test).

    A field is an argument of each of those :class:`~hpcgym.env.SchedulingEnv` by its name (:meth:`env_kwargs`),
    unless its metadata ``env`` says otherwise (the module docstring).
    """

    backfill: str = flag("easy", "none | easy: the simulator's backfilling", choices=("none", "easy"))
    order: str = flag("saf", "heuristic whose order the EASY backfill scan follows", env=False)
    window: int = flag(256, "jobs per training episode", at_least=2, env=TRAINING)
    slots: int = flag(128, "visible queue slots (the action space)", at_least=1)
    time_scale: float = flag(0.0, "seconds the observation's log time features map to 1, the same in training, "
                                  "validation and evaluation; 0: the training workload's longest walltime (saved in "
                                  "scales.json)", at_least=0.0, env=False)
    objective: str = flag("bsld", "bsld | wait | turnaround | util", choices=OBJECTIVES)
    reward: str = flag("log", "objective | log: the final reward's scale | counterfactual: a credit per decision, "
                              "(V(s_t) - V(s_t+1)) / V(s_0) with V the window finished under --baseline from a fork "
                              "of the simulator (needs --gamma 1; hpcgym.rewards)",
                       choices=("objective", "log", "counterfactual"), env=TRAINING)
    baseline: str = flag("saf", "heuristic the reward is relative to on the same window; empty: none", env=False)
    envs: int = flag(16, "parallel windows (copies of the vector environment)", at_least=1, env=False)
    features: str = flag("v0", "the observation's columns: v0 | v1 (adds each job's runtime estimate, its user's "
                               "accuracy and history, whether it may start without delaying the reservation, and the "
                               "reservation and the release profile; docs/definitions.md)", choices=("v0", "v1"))
    predictor: str = flag("", "runtime predictor of EASY's reservations, backfill checks and scan order: walltime | "
                              "last2 | median5; empty: that of the heuristic of --clone (or --prior, or --order)",
                          choices=("", "walltime", "last2", "median5"), env=False)
    action: str = flag("pick", "what the agent chooses (docs/simulation.md, action modes): pick (the head of the pass) "
                               "| guarded (the backfill job, among those that cannot delay EASY's reservation for "
                               "--order's head) | hold (the head, or a hold: start nothing until the next event)",
                       choices=("pick", "guarded", "hold"))
    hold_limit: int = flag(3600, "--action hold: seconds of holds a job may be charged before it must start")

    def __post_init__(self) -> None:
        check(self)
        if self.action == "guarded" and self.backfill != "easy":
            raise cli.UsageError("--action guarded chooses among EASY's backfill candidates: it needs --backfill easy")
        if self.action == "hold" and self.hold_limit < 1:
            raise cli.UsageError(f"--hold-limit must be at least 1 second, not {self.hold_limit}")

    def env_kwargs(self, training: bool = False) -> dict[str, Any]:
        """This section's arguments of every environment the run's networks play in, by name.

        ``training``: and those of the training environment only. The fields with ``env=False`` are the run's to pass
        (:func:`agent_env`).
        """
        wanted = (True, TRAINING) if training else (True,)
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("env", True) in
                wanted}


@dataclass(frozen=True)
class Network:
    """The agent's network."""

    policy: str = flag("scorer", "the agent's network: scorer (shared per-slot job scorer) | mlp | MODULE:CLASS (your "
                                 "own SB3 policy class; for PPO a MaskableActorCriticPolicy: docs/extend.md)",
                       flag="--network", aliases=("--policy",))
    ranks: str = flag("walltime,nodes,area", "job columns (hpcgym.observation.JOB_FEATURES) whose rank within the "
                                             "queue the scorer also sees; empty: none")
    policy_kwargs: str = flag("", "a JSON object of keyword arguments for the network (SB3's policy_kwargs), over "
                                  "--ranks, e.g. '{\"hidden\": [64, 32]}' or the scorer's self-attention across the "
                                  "queue, '{\"attention\": 2}'; empty: none")
    prior: str = flag("", "residual policy (PPO scorer): the logits are this heuristic's preference (saf, sjf, tuned: "
                          "the trace's fit, ...) plus a learned correction that starts at 0; replaces --clone")
    prior_temperature: float = flag(0.1, "--prior's softness: jobs whose weighted size differs by a factor e^T "
                                         "differ by one logit", above=0.0)

    def __post_init__(self) -> None:
        check(self)
        rank_columns(self.ranks)
        self.kwargs()

    def kwargs(self) -> dict[str, Any]:
        """``--policy-kwargs`` as a dict (refused in one line if it is not a JSON object)."""
        if not self.policy_kwargs:
            return {}
        try:
            kwargs = json.loads(self.policy_kwargs)
        except json.JSONDecodeError as exc:
            raise cli.UsageError(f"--policy-kwargs {self.policy_kwargs!r}: not JSON ({exc})") from None
        if not isinstance(kwargs, dict):
            raise cli.UsageError(f"--policy-kwargs {self.policy_kwargs!r}: expected a JSON object such as "
                                 '\'{"hidden": [64, 32]}\'')
        return kwargs

    @property
    def scorer(self) -> bool:
        """Whether the network is the job scorer."""
        return self.policy == "scorer"


def rank_columns(names: str) -> tuple[int, ...]:
    """``--ranks``' column names as indices of the observation's job row."""
    from hpcgym.observation import JOB_FEATURES

    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in JOB_FEATURES]
    if unknown:
        raise cli.UsageError(f"--ranks: unknown job column(s) {', '.join(unknown)}; they are {', '.join(JOB_FEATURES)}")
    return tuple(JOB_FEATURES.index(n) for n in wanted)


@dataclass(frozen=True)
class Algorithm:
    """The RL algorithm and its hyper-parameters (a field with ``sb3=`` goes to those algorithms' constructors)."""

    algo: str = flag("ppo", "ppo (sb3-contrib MaskablePPO) | dqn (masked DQN)", choices=("ppo", "dqn"))
    learning_rate: float = flag(3e-4, "optimizer learning rate", above=0.0, sb3=PPO + DQN)
    n_steps: int = flag(128, "PPO rollout length per env (rollout = n_steps x envs)", at_least=1, sb3=PPO)
    n_epochs: int = flag(4, "PPO epochs per rollout", at_least=1, sb3=PPO)
    batch_size: int = flag(512, "minibatch size", at_least=1, sb3=PPO + DQN)
    clip_range: float = flag(0.2, "PPO clip range", above=0.0, sb3=PPO)
    target_kl: float = flag(0.0, "PPO: stop an update's epochs past this KL (0: never)", at_least=0.0)
    gamma: float = flag(1.0, "discount: 1, since the only reward comes at the episode's end", at_least=0.0,
                        at_most=1.0, sb3=PPO + DQN)
    gae_lambda: float = flag(0.97, "GAE lambda (PPO)", at_least=0.0, at_most=1.0, sb3=PPO)
    ent_coef: float = flag(0.0, "entropy bonus (PPO)", at_least=0.0)
    kl_coef: float = flag(0.0, "PPO: penalty on the KL divergence from the network RL starts from, in place of the "
                               "entropy bonus (0: none)", at_least=0.0)
    buffer_size: int = flag(100_000, "DQN: transitions the replay buffer keeps", at_least=1, sb3=DQN)
    learning_starts: int = flag(1_000, "DQN: transitions collected before learning starts", at_least=0, sb3=DQN)
    exploration_fraction: float = flag(0.3, "DQN: share of the training over which epsilon falls to its least",
                                       at_least=0.0, at_most=1.0, sb3=DQN)

    def __post_init__(self) -> None:
        check(self)
        if self.kl_coef and self.ent_coef:
            raise cli.UsageError("--kl-coef takes the place of the entropy bonus: give --ent-coef 0 with it")

    def sb3_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of the algorithm's SB3 constructor.

        The fields whose ``sb3`` names the algorithm, and PPO's two weights in SB3's form.

        ``target_kl`` 0 is SB3's None (never stop). SB3's PPO weights one term besides the clipped objective and the
        value loss, ``ent_coef * -mean(entropy)``, and the anchored job scorer reports ``-KL(pi || anchor)`` there
        (:mod:`agents.policies`): with ``kl_coef`` that term's weight is ``kl_coef`` (the two are exclusive).
        """
        kwargs = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if self.algo in f.metadata.get("sb3",
                                                                                                           ())}
        if self.algo == "ppo":
            kwargs.update(target_kl=self.target_kl or None, ent_coef=self.kl_coef or self.ent_coef)
        return kwargs


@dataclass(frozen=True)
class WarmStart:
    """What RL starts from (``agents.pretrain`` does the work; ``experiments.training.warm_start`` wires it)."""

    clone: str = flag("saf", "warm start (PPO and DQN): behaviour-clone this heuristic first (tuned: the trace's "
                             "fit; NAME@exact: that heuristic told the jobs' own runtimes, a teacher no scheduler "
                             "can be); with --prior, the teacher whose choices the correction is fitted to: "
                             "NAME@exact, or the prior itself as a control (docs/results.md); empty: none")
    teach: str = flag("", "with --prior: before RL, fit the correction to what the agent cannot see: runtimes (each "
                          "waiting job's log runtime over its estimate, so the scorer is the prior on a runtime "
                          "estimate learned from the training jobs; docs/results.md); empty: none",
                      choices=("", "runtimes"))
    clone_episodes: int = flag(100, "episodes of demonstrations for --clone (and --teach)", at_least=1)
    clone_window: int = flag(1024, "jobs per demonstration episode (as long as the validation and test windows: long "
                                   "queues are where a clone of short windows errs)", at_least=2)
    clone_epochs: int = flag(40, "passes over the demonstrations for --clone", at_least=1)
    start: str = flag("best", "best: RL starts from whichever of the untrained and the cloned network scores better "
                              "on validation | clone", choices=("best", "clone"))

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class Selection:
    """The validation part of the train split, and its windows (the kept network and the warm start)."""

    val_fraction: float = flag(0.2, "last part of the train split kept for validation", above=0.0, below=1.0)
    val_periods: int = flag(1, "validation from this many periods: the train split cut into as many equal stretches, "
                               "the last --val-fraction of each held out, the validation windows shared among them",
                            at_least=1)
    val_windows: int = flag(16, "validation windows (0: keep the last model)", at_least=0)
    val_length: int = flag(1024, "jobs per validation window", flag="--val-window", aliases=("--val-length",),
                           at_least=2)
    val_every: int = flag(20_000, "timesteps between validations", at_least=1)

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class Run:
    """The seed, the budget, the test windows and the run folder."""

    timesteps: int = flag(100_000, "agent decisions to train for (all envs together)", at_least=0)
    seed: int = flag(0, "seed of the agent, the environment and the synthesizer", at_least=0, at_most=cli.MAX_SEED)
    eval_windows: int = flag(20, "test windows in the final evaluation (0: none)", at_least=0)
    eval_length: int = flag(1024, "jobs per test window", flag="--eval-window", aliases=("--eval-length",),
                            at_least=2)
    no_whole_split: bool = flag(False, "the final evaluation on the test windows only, without the whole test split "
                                       "scheduled as one stream (the study's --quick preset: it is most of a smoke "
                                       "run's evaluation time)")
    checkpoint_every: int = flag(20_000, "timesteps between checkpoints (each taken when the next rollout starts)",
                                 at_least=1)
    runs_dir: str = flag(RUNS_DIR, "where run folders go")
    run_name: str = flag("", "run folder name; empty: trace-workload-algo-sSEED")
    resume: bool = flag(False, "continue the run folder's run from its last intact checkpoint, with the run's saved "
                               "settings: it ends as the uninterrupted run would have")
    overwrite: bool = flag(False, "delete an existing run folder of this name first")
    threads: int = flag(1, "torch threads (1 is fastest for these tiny networks)", at_least=1)
    quiet: bool = flag(False, "no progress output (results and errors only)")

    def __post_init__(self) -> None:
        check(self)
        if self.resume and self.overwrite:
            raise cli.UsageError("--resume continues the run folder and --overwrite deletes it: pick one")


@dataclass(frozen=True)
class Recipe:
    """Everything a training run needs, in sections (see the module docstring)."""

    source: Source = dataclasses.field(default_factory=Source)
    environment: Environment = dataclasses.field(default_factory=Environment)
    network: Network = dataclasses.field(default_factory=Network)
    algorithm: Algorithm = dataclasses.field(default_factory=Algorithm)
    warm_start: WarmStart = dataclasses.field(default_factory=WarmStart)
    selection: Selection = dataclasses.field(default_factory=Selection)
    run: Run = dataclasses.field(default_factory=Run)

    def __post_init__(self) -> None:
        _check_across(self)

    @property
    def name(self) -> str:
        """The run folder's name: ``--run-name``, else ``<trace>-<workload>-<algo>-s<seed>``."""
        return self.run.run_name or run_name(self.base, self.run.seed)

    @property
    def base(self) -> str:
        """The name of this setting's runs without the seed: ``--run-name``, else ``<trace>-<workload>-<algo>``."""
        return self.run.run_name or default_base(self.source.trace_label, self.source.workload, self.algorithm.algo)

    @property
    def folder(self) -> Path:
        """The run folder."""
        return Path(self.run.runs_dir) / self.name

    def get(self, name: str) -> Any:
        """The setting ``name`` (a field of one section, e.g. ``seed``)."""
        return getattr(getattr(self, _section_of(name)), name)

    def settings(self) -> dict[str, Any]:
        """The recipe as one flat object with its :data:`VERSION` (what ``args.json`` holds)."""
        flat: dict[str, Any] = {"version": VERSION}
        for name in SECTIONS:
            flat.update(dataclasses.asdict(getattr(self, name)))
        return flat

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Recipe:
        """The recipe of a flat object: :meth:`settings`' output, or an ``args.json`` of any version.

        Settings a recipe does not have are ignored (the command line's ``--seeds`` and ``--workers``, flags
        removed since); a setting missing takes its default. Version 1's ``attention`` (the flag ``--attention``,
        dropped: measured no better, docs/journal/results-2026-11.md) becomes the scorer's ``policy_kwargs``.
        """
        flat = upgrade(settings)
        return cls(**{name: section(**{f.name: flat[f.name] for f in dataclasses.fields(section) if f.name in flat})
                      for name, section in SECTIONS.items()})

    def replace(self, **changes: Any) -> Recipe:
        """A copy with the settings ``changes`` (e.g. ``seed=1, run_name="x-s1"``), checked again.

        Raises:
            TypeError: a recipe has no such setting.
        """
        by_section: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            by_section.setdefault(_section_of(name), {})[name] = value
        return dataclasses.replace(self, **{s: dataclasses.replace(getattr(self, s), **c)
                                            for s, c in by_section.items()})


def default_base(trace_label: str, workload: str, algo: str) -> str:
    """The name shared by the seeds of one setting when ``--run-name`` is not given."""
    return f"{trace_label}-{workload}-{algo}"


def run_name(base: str, seed: int) -> str:
    """A seed's run folder name, ``<base>-s<seed>`` (:func:`experiments.runs.base_of` inverts it)."""
    return f"{base}-s{seed}"


#: the sections of a recipe, by attribute name, in their order
SECTIONS: dict[str, type] = {f.name: typing.get_type_hints(Recipe)[f.name] for f in dataclasses.fields(Recipe)}


def _section_of(name: str) -> str:
    """The section that holds the setting ``name`` (a TypeError if none does)."""
    for section, cls in SECTIONS.items():
        if any(f.name == name for f in dataclasses.fields(cls)):
            return section
    raise TypeError(f"a recipe has no setting {name!r}")


def fields() -> list[dataclasses.Field]:
    """Every setting of a recipe (each section's fields, in order)."""
    return [f for cls in SECTIONS.values() for f in dataclasses.fields(cls)]


def flag_of(name: str) -> str:
    """The command-line flag of the setting ``name``."""
    from experiments import arguments

    return next(arguments.flag_of(f) for f in fields() if f.name == name)


def choices_of(name: str) -> tuple[str, ...]:
    """The values the setting ``name`` may take (its field's ``choices``)."""
    return tuple(next(f.metadata["choices"] for f in fields() if f.name == name))


def differences(a: Recipe, b: Recipe) -> list[str]:
    """The settings whose values differ between two recipes, by name, sorted."""
    return sorted(f.name for f in fields() if a.get(f.name) != b.get(f.name))


def upgrade(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings of any version (``args.json``) in today's names.

    Version 1's ``attention``, a flag dropped since, becomes the scorer's ``policy_kwargs`` (``{"attention": N}``).
    """
    flat = dict(settings)
    attention = flat.pop("attention", 0)
    if attention:
        kwargs = json.loads(flat.get("policy_kwargs") or "{}")
        flat["policy_kwargs"] = json.dumps({"attention": attention, **kwargs})
    return flat


def _check_across(r: Recipe) -> None:
    """Refuse combinations of settings of several sections that cannot run."""
    from hpcgym.env import SCALE_SAMPLE_JOBS

    algo, net, env, warm = r.algorithm.algo, r.network, r.environment, r.warm_start
    scorer_ppo = algo == "ppo" and net.scorer
    attention = net.kwargs().get("attention", 0) if net.scorer else 0
    if (net.prior or r.algorithm.kl_coef or attention) and not scorer_ppo:
        raise cli.UsageError("--prior, --kl-coef and --attention need --algo ppo --network scorer")
    if env.action != "pick" and algo != "ppo":
        raise cli.UsageError(f"--action {env.action} needs --algo ppo (the masked DQN reads its masks from the "
                             "observation, which shows every waiting job as a choice)")
    if env.reward == "counterfactual" and not (env.baseline and r.algorithm.gamma == 1):
        raise cli.UsageError("--reward counterfactual needs --baseline (the heuristic whose finish values each "
                             "decision) and --gamma 1 (the credits sum to the window's relative reward undiscounted)")
    if warm.teach and not (net.prior and not warm.clone):
        raise cli.UsageError("--teach fits a residual's correction: give --prior with it, and --clone ''")
    least = max(env.window, SCALE_SAMPLE_JOBS)  # the environment samples that many jobs for its scales
    if r.source.sample_pool and r.source.sample_pool < least:
        raise cli.UsageError(f"--sample-pool ({r.source.sample_pool}) must be 0 or at least {least} (--window, and "
                             f"the {SCALE_SAMPLE_JOBS} jobs the environment's scales come from)")
    if net.policy not in NETWORKS and (algo != "ppo" or ":" not in net.policy):
        raise cli.UsageError(f"--network {net.policy!r}: expected one of {', '.join(NETWORKS)}, or MODULE:CLASS (a "
                             "MaskableActorCriticPolicy subclass) with --algo ppo")


def naming_context(source: Source, backfill: str) -> dict[str, str]:
    """What naming a heuristic depends on (the keywords of ``protocol.resolve_heuristic``)."""
    return {"trace": source.trace, "backfill": backfill, "tuned_fit": source.tuned}


# ---- what a recipe names ---------------------------------------------------------------------------------------
#: the settings that name a heuristic, in the order :func:`resolve` checks them
HEURISTICS = ("clone", "baseline", "order", "prior")


@dataclass(frozen=True)
class Resolved:
    """What a recipe names, found (:func:`resolve`): its heuristics as policies and its environment's predictor."""

    clone: PriorityPolicy | None  #: ``--clone``: the warm start's heuristic, or a residual's teacher
    baseline: PriorityPolicy | None  #: ``--baseline``: the heuristic the reward is relative to
    order: PriorityPolicy | None  #: ``--order``: the backfill scan order (None without backfilling)
    prior: PriorityPolicy | None  #: ``--prior``: the residual's heuristic
    predictor: str  #: the runtime predictor of every environment of the run (:func:`protocol.environment_predictor`)


def resolve(recipe: Recipe, playing: bool = False) -> Resolved:
    """Find what ``recipe`` names: the synthesizer, the ``--tuned`` fit and the heuristics (it reads their files).

    A ``--tuned workload`` run's ``tuned`` is the trace's own fit until the run has fitted its own
    (:func:`experiments.protocol.resolve_heuristic`): resolve the recipe again once it names the fit's file.
    ``playing``: only what a trained run's networks play with, its heuristics and its predictor, not the inputs of
    its training (the synthesizer, the ``--tuned`` file unless a heuristic reads it, the warm start's teacher rule):
    a finished run's fitted folder may be gone.

    Raises:
        cli.UsageError: a name that cannot be found, or a warm start whose teacher reads estimates the environment
            does not show (naming the flag to change).
    """
    from baselines import tuned

    source, env = recipe.source, recipe.environment
    if source.workload != "real" and not playing:
        check_synthesizer(source.synthesizer)
    if source.tuned and source.tuned != protocol.TUNED_ON_WORKLOAD and not playing:
        try:
            tuned.load(source.tuned)
        except ValueError as exc:
            raise cli.UsageError(f"--tuned: {cli.message(exc)}") from None
    found: dict[str, PriorityPolicy | None] = {}
    for name in HEURISTICS:
        try:
            found[name] = protocol.resolve_heuristic(recipe.get(name), **naming_context(source, env.backfill)) \
                if recipe.get(name) else None
            if name == "prior" and found[name] is not None:
                tuned.weights_of(found[name])
        except (ValueError, KeyError) as exc:
            raise cli.UsageError(f"{flag_of(name)}: {cli.message(exc)}") from None
    order = found["order"] if env.backfill != "none" else None
    imitated = [p for p in (found["prior"], found["clone"], order) if p is not None]
    named = Resolved(found["clone"], found["baseline"], order, found["prior"],
                     protocol.environment_predictor(env.predictor, imitated))
    if named.clone is not None and not playing:
        _check_teacher(recipe, named)
    return named


def _check_teacher(r: Recipe, named: Resolved) -> None:
    """The cloned heuristic's choices are read off the environment: its estimates must be there."""
    from hpcgym.sim import predict

    clone, prior = r.warm_start.clone, r.network.prior
    teacher = named.clone.predictor
    clairvoyant = predict.get(teacher).clairvoyant
    if prior and not (clairvoyant or clone.lower() == prior.lower()):
        raise cli.UsageError(f"--prior replaces the cloned warm start: give --clone '' with it (or, to fit the "
                             f"correction to a teacher, --clone NAME@exact, or --clone {prior} as the control)")
    if teacher not in ("walltime", named.predictor) and not clairvoyant:
        raise cli.UsageError(f"--clone {clone} reads {teacher} estimates, the environment {named.predictor}'s (from "
                             "--predictor or --prior): give a heuristic on those, the walltimes, or NAME@exact")


def agent_env(recipe: Recipe, named: Resolved, training: bool = False) -> dict[str, Any]:
    """The :class:`~hpcgym.env.SchedulingEnv` settings of a run's networks, the same in training, validation and test.

    The environment section's own (:meth:`Environment.env_kwargs`: backfilling, slots, objective, observation
    columns, action mode, ...; ``training``: the training environment's too), the backfill scan order as a policy
    and the runtime predictor (``named``: the recipe's names, found by :func:`resolve`).
    """
    return {**recipe.environment.env_kwargs(training), "order": named.order, "predictor": named.predictor}


def fitted_folder(spec: str) -> Path | None:
    """``--synthesizer`` as the folder of a fitted model, or None for a name (:func:`synth.resolve`)."""
    import synth

    found = synth.resolve(spec)
    return found if isinstance(found, Path) else None


def check_synthesizer(spec: str) -> None:
    """Refuse a ``--synthesizer`` that is neither a synthesizer's name nor a fitted model's folder."""
    import synth

    try:
        synth.resolve(spec)
    except KeyError as exc:
        raise cli.UsageError(f"--synthesizer: {cli.message(exc)} Or give a folder written by python -m synth.fit."
                             ) from None
