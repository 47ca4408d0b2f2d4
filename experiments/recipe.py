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

A section's ``__post_init__`` refuses values that cannot run (:class:`hpcgym.cli.UsageError`, naming the flag);
:class:`Recipe`'s refuses combinations across sections and names that cannot be found (heuristics, the ``tuned``
fit, the synthesizer). A field's ``help`` is its command-line flag's help (``experiments.train`` builds its flat
``Args`` from these fields). The recipe is saved in the run folder's ``args.json`` as one flat object with a
``version`` (:meth:`Recipe.settings`) and read back with :meth:`Recipe.from_settings`, which also reads the files
written before the version existed.

To add a choice to a setting (a reward kind, say), add it to :data:`CHOICES`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents import NETWORKS
from experiments import runs
from experiments.arguments import TraceReading, flag
from hpcgym import cli
from hpcgym.rewards import OBJECTIVES

#: the version :meth:`Recipe.settings` writes (1: the flat ``experiments.train.Args`` of before, without a version)
VERSION = 2
#: the networks ``--network`` names; anything else is a ``MODULE:CLASS``
#: the values a text setting may take
CHOICES = {"workload": ("real", "synthetic", "mixed"), "algo": ("ppo", "dqn"), "backfill": ("none", "easy"),
           "reward": ("objective", "log", "counterfactual"), "start": ("best", "clone"), "features": ("v0", "v1"),
           "predictor": ("", "walltime", "last2", "median5"), "action": ("pick", "guarded", "hold"),
           "teach": ("", "runtimes"), "objective": OBJECTIVES}
#: the least value of each whole-number setting
AT_LEAST = {"sample_pool": 0, "timesteps": 0, "window": 2, "slots": 1, "envs": 1, "n_steps": 1, "n_epochs": 1,
            "batch_size": 1, "clone_episodes": 1, "clone_window": 2, "clone_epochs": 1, "val_windows": 0,
            "val_periods": 1, "val_length": 2, "val_every": 1, "eval_windows": 0, "eval_length": 2,
            "checkpoint_every": 1, "threads": 1}
#: the numeric settings SB3 takes without checking them, with the range each must be in (closed ends)
RANGES = {"gae_lambda": (0.0, 1.0), "clip_range": (1e-12, float("inf")), "target_kl": (0.0, float("inf")),
          "ent_coef": (0.0, float("inf")), "time_scale": (0.0, float("inf"))}
#: settings whose flag is not ``--`` + the name with dashes
FLAGS = {"policy": "--network", "val_length": "--val-window", "eval_length": "--eval-window"}


def flag_of(name: str) -> str:
    """The command-line flag of the setting ``name``."""
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def _check_fields(section: Any) -> None:
    """Refuse a field of ``section`` outside :data:`CHOICES`, :data:`AT_LEAST` or :data:`RANGES`."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if f.name in CHOICES and value not in CHOICES[f.name]:
            raise cli.UsageError(f"{flag_of(f.name)} must be one of {CHOICES[f.name]}")
        if f.name in AT_LEAST and value < AT_LEAST[f.name]:
            raise cli.UsageError(f"{flag_of(f.name)} must be at least {AT_LEAST[f.name]}, not {value}")
        if f.name in RANGES and not RANGES[f.name][0] <= value <= RANGES[f.name][1]:  # NaN fails both
            lo, hi = RANGES[f.name]
            what = f"between {lo:g} and {hi:g}" if hi < float("inf") else ("> 0" if lo > 0 else ">= 0")
            raise cli.UsageError(f"{flag_of(f.name)} must be {what}, not {value}")


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
                                      "agent trains on")
    synthesizer: str = flag("arrivals", "for --workload synthetic|mixed: a synthesizer's name (fitted on the training "
                                        "part; those of installed packages too: docs/extend.md), or the folder of one "
                                        "fitted already (synth.fit --out)")
    sample_pool: int = flag(0, "sample this many jobs from the synthesizer once (seeded by --seed) and train on "
                               "windows of them; 0: a new sample every episode (slow for realtabformer and the SDV "
                               "models)")
    tuned: str = flag("", "the fit that `tuned` means in --prior, --order, --baseline and --clone: a fit's JSON file "
                          "(python -m baselines.tune --out); workload: fitted first on this run's training workload "
                          "(the real training part, or the synthetic pool; cached in RUNS_DIR/cache/tuned), so that "
                          "what the agent knows comes from its training data only; empty: the trace's own fit")

    def __post_init__(self) -> None:
        _check_fields(self)


@dataclass(frozen=True)
class Environment:
    """The simulator and the environment every network of the run plays in (training, validation, test)."""

    backfill: str = flag("easy", "none | easy: the simulator's backfilling")
    order: str = flag("saf", "heuristic whose order the EASY backfill scan follows")
    window: int = flag(256, "jobs per training episode")
    slots: int = flag(128, "visible queue slots (the action space)")
    time_scale: float = flag(0.0, "seconds the observation's log time features map to 1, the same in training, "
                                  "validation and evaluation; 0: the training workload's longest walltime (saved in "
                                  "scales.json)")
    objective: str = flag("bsld", "bsld | wait | turnaround | util")
    reward: str = flag("log", "objective | log: the final reward's scale | counterfactual: a credit per decision, "
                              "(V(s_t) - V(s_t+1)) / V(s_0) with V the window finished under --baseline from a fork "
                              "of the simulator (needs --gamma 1; hpcgym.rewards)")
    baseline: str = flag("saf", "heuristic the reward is relative to on the same window; empty: none")
    envs: int = flag(16, "parallel windows (copies of the vector environment)")
    features: str = flag("v0", "the observation's columns: v0 | v1 (adds each job's runtime estimate, its user's "
                               "accuracy and history, whether it may start without delaying the reservation, and the "
                               "reservation and the release profile; docs/definitions.md)")
    predictor: str = flag("", "runtime predictor of EASY's reservations, backfill checks and scan order: walltime | "
                              "last2 | median5; empty: that of the heuristic of --clone (or --prior, or --order)")
    action: str = flag("pick", "what the agent chooses (docs/simulation.md, action modes): pick (the head of the pass) "
                               "| guarded (the backfill job, among those that cannot delay EASY's reservation for "
                               "--order's head) | hold (the head, or a hold: start nothing until the next event)")
    hold_limit: int = flag(3600, "--action hold: seconds of holds a job may be charged before it must start")

    def __post_init__(self) -> None:
        _check_fields(self)
        if self.action == "guarded" and self.backfill != "easy":
            raise cli.UsageError("--action guarded chooses among EASY's backfill candidates: it needs --backfill easy")
        if self.action == "hold" and self.hold_limit < 1:
            raise cli.UsageError(f"--hold-limit must be at least 1 second, not {self.hold_limit}")


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
                                         "differ by one logit")

    def __post_init__(self) -> None:
        if not self.prior_temperature > 0:
            raise cli.UsageError(f"--prior-temperature must be > 0, not {self.prior_temperature}")
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
    """The RL algorithm and its hyper-parameters."""

    algo: str = flag("ppo", "ppo (sb3-contrib MaskablePPO) | dqn (masked DQN)")
    learning_rate: float = flag(3e-4, "optimizer learning rate")
    n_steps: int = flag(128, "PPO rollout length per env (rollout = n_steps x envs)")
    n_epochs: int = flag(4, "PPO epochs per rollout")
    batch_size: int = flag(512, "minibatch size")
    clip_range: float = flag(0.2, "PPO clip range")
    target_kl: float = flag(0.0, "PPO: stop an update's epochs past this KL (0: never)")
    gamma: float = flag(1.0, "discount: 1, since the only reward comes at the episode's end")
    gae_lambda: float = flag(0.97, "GAE lambda (PPO)")
    ent_coef: float = flag(0.0, "entropy bonus (PPO)")
    kl_coef: float = flag(0.0, "PPO: penalty on the KL divergence from the network RL starts from, in place of the "
                               "entropy bonus (0: none)")

    def __post_init__(self) -> None:
        _check_fields(self)
        if not (self.learning_rate > 0 and 0 <= self.gamma <= 1):
            raise cli.UsageError("--learning-rate must be > 0 and --gamma between 0 and 1")
        if self.kl_coef and self.ent_coef:
            raise cli.UsageError("--kl-coef takes the place of the entropy bonus: give --ent-coef 0 with it")
        if not self.kl_coef >= 0:
            raise cli.UsageError(f"--kl-coef must be >= 0, not {self.kl_coef}")


@dataclass(frozen=True)
class WarmStart:
    """What RL starts from (``agents.pretrain`` does the work; ``experiments.training.warm_start`` wires it)."""

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

    def __post_init__(self) -> None:
        _check_fields(self)


@dataclass(frozen=True)
class Selection:
    """The validation part of the train split, and its windows (the kept network and the warm start)."""

    val_fraction: float = flag(0.2, "last part of the train split kept for validation")
    val_periods: int = flag(1, "validation from this many periods: the train split cut into as many equal stretches, "
                               "the last --val-fraction of each held out, the validation windows shared among them")
    val_windows: int = flag(16, "validation windows (0: keep the last model)")
    val_length: int = flag(1024, "jobs per validation window", flag="--val-window", aliases=("--val-length",))
    val_every: int = flag(20_000, "timesteps between validations")

    def __post_init__(self) -> None:
        _check_fields(self)
        if not 0 < self.val_fraction < 1:
            raise cli.UsageError(f"--val-fraction must be between 0 and 1 (both excluded), not {self.val_fraction}")


@dataclass(frozen=True)
class Run:
    """The seed, the budget, the test windows and the run folder."""

    timesteps: int = flag(100_000, "agent decisions to train for (all envs together)")
    seed: int = flag(0, "seed of the agent, the environment and the synthesizer")
    eval_windows: int = flag(20, "test windows in the final evaluation (0: none)")
    eval_length: int = flag(1024, "jobs per test window", flag="--eval-window", aliases=("--eval-length",))
    no_whole_split: bool = flag(False, "the final evaluation on the test windows only, without the whole test split "
                                       "scheduled as one stream (the study's --quick preset: it is most of a smoke "
                                       "run's evaluation time)")
    checkpoint_every: int = flag(20_000, "timesteps between checkpoints (each taken when the next rollout starts)")
    runs_dir: str = flag(runs.RUNS_DIR, "where run folders go")
    run_name: str = flag("", "run folder name; empty: trace-workload-algo-sSEED")
    resume: bool = flag(False, "continue the run folder's run from its last intact checkpoint, with the run's saved "
                               "settings: it ends as the uninterrupted run would have")
    overwrite: bool = flag(False, "delete an existing run folder of this name first")
    threads: int = flag(1, "torch threads (1 is fastest for these tiny networks)")
    quiet: bool = flag(False, "no progress output (results and errors only)")

    def __post_init__(self) -> None:
        _check_fields(self)
        if not 0 <= self.seed <= cli.MAX_SEED:
            raise cli.UsageError(f"--seed must be between 0 and {cli.MAX_SEED}, not {self.seed}")
        if self.resume and self.overwrite:
            raise cli.UsageError("--resume continues the run folder and --overwrite deletes it: pick one")


#: the sections of a recipe, by attribute name, in their order
SECTIONS: dict[str, type] = {"source": Source, "environment": Environment, "network": Network,
                             "algorithm": Algorithm, "warm_start": WarmStart, "selection": Selection, "run": Run}


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
        _check_names(self)

    @property
    def name(self) -> str:
        """The run folder's name: ``--run-name``, else ``<trace>-<workload>-<algo>-s<seed>``."""
        return self.run.run_name or runs.run_name(self.base, self.run.seed)

    @property
    def base(self) -> str:
        """The name of this setting's runs without the seed: ``--run-name``, else ``<trace>-<workload>-<algo>``."""
        return self.run.run_name or runs.default_base(self.source.trace_label, self.source.workload,
                                                      self.algorithm.algo)

    @property
    def folder(self) -> Path:
        """The run folder."""
        return Path(self.run.runs_dir) / self.name

    def settings(self) -> dict[str, Any]:
        """The recipe as one flat object with its :data:`VERSION` (what ``args.json`` holds)."""
        flat: dict[str, Any] = {"version": VERSION}
        for name in SECTIONS:
            flat.update(dataclasses.asdict(getattr(self, name)))
        return flat

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Recipe:
        """The recipe of a flat object: :meth:`settings`' output, an ``args.json`` of any version, or flags.

        Settings a recipe does not have are ignored (the command line's ``--seeds`` and ``--workers``, flags
        removed since); a setting missing takes its default. Version 1's ``attention`` (the flag ``--attention``,
        dropped: measured no better, docs/journal/results-2026-11.md) becomes the scorer's ``policy_kwargs``.
        """
        flat = upgrade(settings)
        parts = {}
        for name, section in SECTIONS.items():
            known = {f.name for f in dataclasses.fields(section)}
            parts[name] = section(**{k: v for k, v in flat.items() if k in known})
        return cls(**parts)

    def replace(self, **changes: Any) -> Recipe:
        """A copy with the flat settings ``changes`` (e.g. ``seed=1, run_name="x-s1"``), validated again."""
        return Recipe.from_settings({**self.settings(), **changes})


def upgrade(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings of any version (``args.json``, flags) in today's names.

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


def _check_names(r: Recipe) -> None:
    """Refuse a synthesizer, a ``--tuned`` fit or heuristics (``--clone``, ``--prior``, ...) that cannot be found."""
    from baselines import tuned
    from experiments.protocol import TUNED_ON_WORKLOAD, heuristic_context, resolve_heuristic

    if r.source.workload != "real":
        check_synthesizer(r.source.synthesizer)
    if r.source.tuned and r.source.tuned != TUNED_ON_WORKLOAD:
        try:
            tuned.load(r.source.tuned)
        except ValueError as exc:
            raise cli.UsageError(f"--tuned: {cli.message(exc)}") from None
    settings = r.settings()
    for name in ("clone", "baseline", "order", "prior"):
        if settings[name]:
            try:
                pol = resolve_heuristic(settings[name], **heuristic_context(settings))
                if name == "prior":
                    tuned.weights_of(pol)
            except (ValueError, KeyError) as exc:
                raise cli.UsageError(f"{flag_of(name)}: {cli.message(exc)}") from None
    if r.warm_start.clone:
        _check_teacher(r, settings)


def _check_teacher(r: Recipe, settings: dict[str, Any]) -> None:
    """The cloned heuristic's choices are read off the environment: its estimates must be there."""
    from experiments.protocol import heuristic_context, predictor_of, resolve_heuristic
    from hpcgym.sim import predict

    clone, prior = r.warm_start.clone, r.network.prior
    teacher = resolve_heuristic(clone, **heuristic_context(settings)).predictor
    seen = predictor_of(settings)
    clairvoyant = predict.get(teacher).clairvoyant
    if prior and not (clairvoyant or clone.lower() == prior.lower()):
        raise cli.UsageError(f"--prior replaces the cloned warm start: give --clone '' with it (or, to fit the "
                             f"correction to a teacher, --clone NAME@exact, or --clone {prior} as the control)")
    if teacher not in ("walltime", seen) and not clairvoyant:
        raise cli.UsageError(f"--clone {clone} reads {teacher} estimates, the environment {seen}'s (from "
                             "--predictor or --prior): give a heuristic on those, the walltimes, or NAME@exact")


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
