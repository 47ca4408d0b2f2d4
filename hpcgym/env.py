"""Gymnasium environments in which an agent picks, at each real decision, the job to schedule next."""

from __future__ import annotations

import copy
import importlib
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from hpcgym import jobs as jobtable
from hpcgym import machines, observation, rewards, traces
from hpcgym.errors import NoDecisionError, warn
from hpcgym.observation import WAIT_SCALE, Observer, Scales
from hpcgym.rewards import OBJECTIVES
from hpcgym.sim import PriorityPolicy, Simulator, actions, heuristics, predict
from hpcgym.sim.loop import Backfill
from hpcgym.sim.policy import priority
from hpcgym.sim.simulator import FCFS_ORDER, Buffers
from hpcgym.sim.state import QE, QS, T
from hpcgym.workload import EpisodeSource, Window
from hpcgym.workload import factory as workload_factory

#: Windows that need no decision are redrawn at most this many times in a row.
MAX_REDRAWS = 100
#: Sampled workloads: the observation's scales come from this many jobs sampled with seed 0.
SCALE_SAMPLE_JOBS = 1024


def resolve(spec: Any, trace: str | None = None, backfill: str = "none") -> Any:
    """An object given by name: a ``"module:attribute"`` string is imported lazily, any other name is a heuristic.

    A heuristic's name is read by :func:`hpcgym.sim.heuristics.resolve`, the one resolver of the CLIs and the
    evaluation too, for a run on ``trace`` with ``backfill`` (``"tuned"``: the fit for them; ``"saf@last2"``; a
    family's ``"tuned:FIT.json"``, although it looks like a module's attribute). Objects pass through.
    """
    if not isinstance(spec, str):
        return spec
    module, _, attr = spec.partition(":")
    if _MODULE_SPEC.fullmatch(spec) and not heuristics.is_family(module):
        return getattr(importlib.import_module(module), attr)
    return heuristics.resolve(spec, trace, backfill)


class SchedulingEnv(gym.Env):
    """Pick the next job to schedule on a node-granular HPC machine.

    ## Description
    A window of ``window`` consecutive jobs (from a random start in the chosen split of a trace, or freshly sampled
    from a generator) arrives on an empty machine of ``machine`` nodes. Time advances from event to event (job ends
    and arrivals; see ``docs/simulation.md``). At each *decision* the agent sees the first ``slots`` waiting jobs in
    arrival order and picks one. If it fits in the free nodes it starts now and the agent decides again at the same
    time; if not, it becomes the blocked head: with ``backfill="easy"`` it gets a reservation at its shadow time
    and the other waiting jobs are backfilled around it (scanned in the order of ``order``), then time advances.
    Such a choice commits nothing beyond that pass: the job keeps no reservation, and at the next decision the agent
    may pick any waiting job (under ``backfill="rlscheduler"`` the shadow time is kept while the same job is picked
    again). Without backfilling it is in effect a wait until the next job end or arrival. So how many decisions an
    episode has depends on the choices, which matters for a discount ``gamma < 1`` (the reward comes at the end).

    Decisions that cannot change the schedule are skipped (the simulator resolves them itself):
    1. no job waits;
    2. no waiting job fits in the free nodes (whatever the choice, nothing starts before the next event); under
       ``backfill="rlscheduler"`` this case is *not* skipped, since that mode remembers the chosen head's shadow;
    3. exactly one job waits (it is chosen: it starts if it fits, else it blocks).

    ## Action space
    ``Discrete(slots)``: the slot (row) of the job to schedule. :meth:`action_masks` marks the valid actions, as
    sb3-contrib's ``MaskablePPO`` expects; in the default action mode they are the slots that hold a job, the
    first ``v`` slots (``v`` waiting jobs, at most ``slots``). The same mask is ``info["action_mask"]`` after every
    ``reset`` and ``step`` (Gymnasium's convention), which reaches code behind any wrapper;
    :func:`hpcgym.action_masks` reads the method through wrappers.
    An action of the action space outside the mask has a fixed meaning by default (``invalid_action="wrap"``):
    action ``a`` schedules slot ``a mod v``, and ``info["invalid_actions"]`` counts such actions in the episode.
    This is what lets generic algorithms and the environment checkers, which sample from the whole action space,
    run unchanged; an episode in which most actions were outside the mask ends with a warning (an agent that does
    not read the mask, such as plain PPO, picks empty slots most of the time and learns little).
    ``invalid_action="raise"`` is the strict mode for debugging: a ``ValueError`` instead. An action outside the
    action space (negative, or ``slots`` and above) is a ``ValueError`` in both modes, and actions must
    be whole numbers (``2.5`` is an error, not slot 2).

    The ``action`` argument picks what a choice means (``docs/simulation.md``, "Action modes"):

    - ``"pick"`` (the default): the job to put first in this scheduling pass; it starts if it fits, else it is the
      blocked head that backfilling reserves for.
    - ``"guarded"`` (needs ``backfill="easy"``): the ``order`` heuristic runs the pass as EASY does; the agent
      chooses only which *backfill* candidate starts next, among jobs that fit now and cannot delay the blocked
      head's reservation (the mask marks them). EASY's promise to the head holds whatever the agent does.
    - ``"hold"``: as ``"pick"``, plus one more action (``Discrete(slots + 1)``; the last one) that starts nothing
      and waits for the next event. Holds are bounded: a job that fits while holds go on is charged their length,
      and once charged ``hold_limit`` seconds it is due (no hold is offered while a due job fits, and only due jobs
      may be picked), so holds never keep a job from starting for more than ``hold_limit`` seconds.

    ## Observation space
    ``Box(0, 1, shape=(slots + 1, 8), float32)``. Rows ``0..slots-1`` are waiting jobs (padding rows are all zero,
    with ``present = 0``); the last row is the machine. Times are log-scaled against ``time_scale`` seconds (by
    default the workload's longest walltime): a time of ``time_scale`` maps to 1, waits to 1 at
    :data:`~hpcgym.observation.WAIT_SCALE` times it, areas at ``time_scale`` x the machine's nodes (:attr:`scales`
    holds them all, as a :class:`~hpcgym.observation.Scales`).

    | col | job row | machine row |
    |-----|---------|-------------|
    | 0 | present (1) or padding (0) | free nodes / nodes |
    | 1 | wait | waiting jobs / slots (1: some are not visible) |
    | 2 | walltime (the user's estimate; the run time is never shown) | time to the next estimated end |
    | 3 | nodes / machine nodes | mean time to the running jobs' estimated ends |
    | 4 | fits now (0/1) | time to the last estimated end |
    | 5 | area (walltime x nodes) | jobs finished / window |
    | 6 | time until enough nodes free up, by estimates | time of day |
    | 7 | arrival position / slots | 1 (row marker) |

    With ``features="v1"`` (the ``-predict`` ids) each row has 12 columns, the 8 above and:

    | col | job row | machine row |
    |-----|---------|-------------|
    | 8 | estimate: the runtime prediction (or the walltime) | time to the reservation's shadow time (0: none) |
    | 9 | its user's recent accuracy: mean runtime / walltime (1: no history) | the reservation's extra nodes / nodes |
    | 10 | its user's finished jobs the predictor reads / k | time until half the machine is free, by estimates |
    | 11 | 1 if it fits now without delaying the reservation | nodes the next estimated end frees / nodes |

    The *reservation* is the one EASY would give the oldest waiting job that does not fit now (its shadow time and
    extra nodes, from the running jobs' current estimates): starting a job whose column 11 is 1 cannot delay that
    job (EASY's rules (a) and (b)). Without backfilling, or when every waiting job fits, there is none and column 11
    is "fits now". "Estimates" are the predictor's (``predictor``), raised
    to the walltime when a job outlives its prediction (:mod:`hpcgym.sim.predict`).

    ## Rewards
    0 at every step (but with ``reward="counterfactual"``, below). At the end of the episode, a function of the
    window's mean ``objective``: ``bsld`` (bounded slowdown, tau 10 s), ``wait`` or ``turnaround`` (seconds), or
    utilization for ``util``. With
    ``reward="objective"`` (the default) it is ``-mean`` (``+utilization``); with ``reward="log"`` it is
    ``-log(mean)``, whose scale does not swing by 100x between a quiet and a busy window. With ``baseline`` (a
    heuristic run on the same window and backfill mode) it is relative: ``(b - agent) / b``, or
    ``log(b) - log(agent)`` with ``reward="log"`` (:mod:`hpcgym.rewards` has the table).
    ``reward="counterfactual"`` (with a baseline; without a ``predictor`` given, the environment takes the baseline's,
    which its ``str`` then names: ``predictor="median5"`` for ``tuned`` on SDSC-SP2) gives each decision its share of
    that relative reward: ``(V(s_t) - V(s_{t+1})) / V(s_0)``, ``V(s)`` being the window's objective if the baseline
    took over at ``s`` (a fork of the simulator, :mod:`hpcgym.sim.fork`). The credits sum to ``(b - agent) / b``;
    a decision on which the agent does what the baseline would (with ``order`` the baseline) gets 0. The final
    info's result (:attr:`result`) keeps the episode's total as its ``reward``.

    ## Starting state
    The window's first job arrives at time 0 on an empty machine; ``reset`` runs to the first decision.

    ## Episode end
    Terminated when every job of the window has finished. Never truncated by the environment; since the whole reward
    comes at the last step, a TimeLimit wrapper that truncates an episode removes all of its reward.

    ## Info
    Every step (and ``reset``), as numpy scalars: ``time``, ``waiting``, ``decisions``, ``window_done`` (also as
    ``done``, its old name: the vector environment has only ``window_done``, since ``done`` is a key TorchRL
    reserves), ``invalid_actions`` (so far this episode) and ``action_mask`` (the valid slots, as
    :meth:`action_masks`). At the end also ``metrics`` (see
    :func:`hpcgym.metrics.summarize`), ``compare`` (the objective of each ``compare_with`` heuristic on the same
    window and backfill mode), ``records`` (per-job columns as numpy arrays: ``pd.DataFrame(records)``
    gives the table), ``window_start`` (row of the split, or
    -1 for sampled workloads) and, only when a ``baseline`` is set, ``baseline`` (its objective value).

    ## Arguments
    - ``machine``: catalog name or :class:`~hpcgym.machines.Machine`.
    - ``workload``: a bundled trace name, a trace path, a job table, ``"synthetic"``, a ``"module:attribute"``
      string, or any object with ``sample(n_jobs, seed)``. ``"synthetic"`` is the workload registered under that
      name (:mod:`hpcgym.workload`; ``synth`` provides it): the arrival-aware generator (:mod:`synth.arrivals`)
      fitted on the train split of the machine's bundled trace; for Trinity, which has none, a model calibrated to
      the published OpenTrinity statistics (:mod:`synth.trinity`).
    - ``backfill``: ``"none"``, ``"easy"`` or ``"rlscheduler"``.
    - ``window`` (256), ``slots`` (128), ``split`` (``"train"``, ``"test"`` or ``"all"``; chronological 70/30;
      ignored for sampled workloads), ``objective`` (``"bsld"``), ``baseline`` (None), ``order`` (the backfill scan
      order: FCFS; a policy or a name such as ``"wfp3"``), ``kill_at_walltime`` (True), ``invalid_action``
      (``"raise"`` or ``"wrap"``), ``compare_with`` (heuristics, e.g. ``("fcfs",)``, to report in the final info),
      ``render_mode``, ``reward`` (``"objective"``, ``"log"`` or ``"counterfactual"``).
    - ``predictor`` (None: the walltimes; ``"last2"`` for the ``-predict`` ids): the runtime predictor whose estimates
      EASY's reservation, its backfill checks and the scan order use instead of the walltimes
      (:mod:`hpcgym.sim.predict`). Kill times stay the walltimes.
    - ``features`` (``"v0"``; ``"v1"`` for the ``-predict`` ids): the observation's columns (above).
    - ``action`` (``"pick"``), ``hold_limit`` (3600 s, hold mode only): the action mode (see "Action space").
    - ``time_scale`` (None): seconds that the log-scaled time features map to 1; None takes the workload's longest
      walltime (at least 60 s; for a sampled workload, that of :data:`SCALE_SAMPLE_JOBS` jobs sampled with seed 0).
      :attr:`time_scale` holds the value used (:attr:`scales` every scale). An agent must see the *same* scale
      wherever it plays: give the environments it is validated and evaluated in its training environment's
      ``time_scale``, or one job would look different in each (their workloads' longest walltimes differ).

    After the episode ends, :attr:`result` holds its :class:`hpcgym.rewards.EpisodeResult`; ``step`` raises
    ``ValueError`` until ``reset``. :func:`hpcgym.make_vec` steps N copies in one compiled call.

    ## Version history
    - v0: first release. Later changes that leave every valid action's episode unchanged: ``reward="log"``, the
      vector environment, ``invalid_action="wrap"`` as the default (it used to be ``"raise"``), and
      ``time_scale`` (its default is the old behaviour). One fix changed what agents see: until 2026-11-25 the
      machine row's time of day was right only for windows that start at the trace's first job (it added the
      window's clock to the trace's start); agents trained before then saw noise in that column. Since 2026-11-26
      ``info["action_mask"]`` is in every info, and an action outside the action space is refused in
      ``invalid_action="wrap"`` mode too (it used to wrap like one outside the mask).
    - v1: ``predictor="last2"`` and ``features="v1"``: EASY reserves and backfills on runtime predictions, and the
      observation has the 4 more columns above. A prediction that expires is an event, so an agent may get a
      decision at a time v0 would not give one.
    - ``reward="counterfactual"`` (opt-in, any version): a reward at every decision; the default reward is unchanged.

    >>> import hpcgym
    >>> env = hpcgym.make("lublin256-v0")
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape
    (129, 8)
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, machine: str | machines.Machine = "lublin-256", workload: Any = "lublin-256",
                 backfill: Backfill = "none", window: int = 256, slots: int = 128, split: str = "train",
                 objective: str = "bsld", baseline: Any = None, order: Any = None, kill_at_walltime: bool = True,
                 train_fraction: float = 0.7, invalid_action: str = "wrap", compare_with: tuple | str = (),
                 render_mode: str | None = None, reward: str = "objective", time_scale: float | None = None,
                 predictor: str | None = None, features: str = "v0", action: str = "pick", hold_limit: int = 3600):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
        if reward not in rewards.REWARDS:
            raise ValueError(f"reward must be one of {rewards.REWARDS}, not {reward!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        if invalid_action not in ("raise", "wrap"):
            raise ValueError(f"invalid_action must be 'raise' or 'wrap', not {invalid_action!r}")
        if features not in observation.WIDTH:
            raise ValueError(f"features must be one of {sorted(observation.WIDTH)}, not {features!r}")
        self.features = features
        self.trace = _trace_name(workload)  #: the trace the workload names (a bare ``learned`` reads its model)
        self.baseline: PriorityPolicy | None = None if baseline is None else resolve(baseline, self.trace, backfill)
        #: where the predictor comes from: "" (as given, or the id's), or why another was taken
        self.predictor_source = ""
        if reward == "counterfactual":
            predictor, self.predictor_source = _counterfactual_predictor(predictor, self.baseline, self.trace)
        self.predictor = predict.get(predictor, trace=self.trace)
        if features == "v2" and self.predictor.code != predict.LEARNED:
            raise ValueError("features='v2' describes the learned runtime predictor's history: pass "
                             "predictor='learned' (or learned:TRACE)")
        self.invalid_action = invalid_action
        window, slots = whole_number(window, "window"), whole_number(slots, "slots")
        if window < 2 or slots < 1:
            raise ValueError(f"window must be >= 2 and slots >= 1, not {window} and {slots}")
        self.machine = machines.get(machine)
        self.window, self.slots, self.split, self.objective = int(window), int(slots), split, objective
        self.backfill, self.kill_at_walltime, self.render_mode = backfill, kill_at_walltime, render_mode
        self.reward_kind = reward
        self.order: PriorityPolicy = FCFS_ORDER if order is None else resolve(order, self.trace, backfill)
        if isinstance(compare_with, (str, PriorityPolicy)):  # one heuristic, not a sequence of letters
            compare_with = (compare_with,)
        self.compare_with: tuple[PriorityPolicy, ...] = tuple(resolve(p, self.trace, backfill) for p in compare_with)
        self.action, self.hold_limit = action, int(hold_limit) if action == "hold" else 0
        self._credit = self._counterfactual() if reward == "counterfactual" else None
        self.source = self._workload(workload, split, train_fraction)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self.slots + 1, observation.WIDTH[features]),
                                            dtype=np.float32)
        self.action_space = spaces.Discrete(self.slots + (action == "hold"))
        self._obs = np.zeros(self.observation_space.shape, np.float32)
        self._mask = np.zeros(self.action_space.n, bool)
        table = self.source.table
        if table is None:
            table = self.source.sampler.sample(SCALE_SAMPLE_JOBS, seed=0)
        scales = Scales.of(longest_walltime(table) if time_scale is None else float(time_scale), self.machine.nodes)
        self.sim = self._simulator(Observer(self._obs, self._mask, scales, features))  # it builds the observation
        self._window: Window | None = None
        self._buffers: Buffers | None = None  # set by a vector environment: rows of its batch
        self.result: rewards.EpisodeResult | None = None
        self.invalid_actions = 0  # actions outside the mask this episode (mapped under invalid_action="wrap")

    def copy_for_vector(self, buffers: Buffers, obs: np.ndarray, mask: np.ndarray) -> SchedulingEnv:
        """A copy that shares this environment's workload but keeps its state in rows of a vector batch.

        The copy has its own simulator, random generator and episode; its simulation arrays, observation and mask
        are ``buffers``, ``obs`` and ``mask`` (views into the vector environment's arrays).
        """
        other = copy.copy(self)
        other.sim = self._simulator(Observer(obs, mask, self.scales, self.features))
        other._buffers, other._obs, other._mask = buffers, obs, mask
        other._window, other.result, other._np_random = None, None, None
        other._credit = None if self._credit is None else self._credit.copy()
        return other

    def _counterfactual(self) -> rewards.Counterfactual:
        """The credits of ``reward="counterfactual"``: forks finished under the baseline, on this env's estimates."""
        base = self.baseline
        if base is None:
            raise ValueError("reward='counterfactual' credits each decision against a baseline heuristic: pass "
                             "baseline=NAME (e.g. baseline='tuned')")
        if predict.get(base.predictor, trace=self.trace) != self.predictor:
            raise ValueError(f"reward='counterfactual' forks this environment's state, estimates included, so the "
                             f"baseline's runtime predictor ({base.predictor}) must be the environment's "
                             f"({self.predictor.name}): pass predictor={base.predictor!r}")
        same_order = self.order == base and self.order.key == base.key and base.scan is None
        return rewards.Counterfactual(base, self.objective, self.backfill, self.machine.nodes,
                                      shortcut=same_order and self.action == "pick")

    def __str__(self) -> str:
        """Gymnasium's ``<SchedulingEnv<id>>``, and the predictor when not the one given (``predictor_source``)."""
        text = super().__str__()
        if not self.predictor_source:
            return text
        return f"{text[:-1]} predictor={self.predictor.name}: {self.predictor_source}>"

    def _simulator(self, observer: Observer) -> Simulator:
        return Simulator(self.machine.nodes, self.backfill, self.order, self.kill_at_walltime, self.predictor,
                         self.action, self.slots, self.hold_limit, hook=observer)

    # ---- workloads -------------------------------------------------------------------------------------------
    def _workload(self, workload: Any, split: str, train_fraction: float) -> EpisodeSource:
        if isinstance(workload, str) and workload == "synthetic":
            workload = self._default_synthetic(train_fraction)
        elif isinstance(workload, str) and _MODULE_SPEC.fullmatch(workload) and not Path(workload).exists():
            workload = resolve(workload)
        elif isinstance(workload, (str, Path)):
            workload = traces.read(workload)
        if hasattr(workload, "sample") and not isinstance(workload, pd.DataFrame):
            return EpisodeSource(None, workload, self.window, self.machine, self.kill_at_walltime)
        if not isinstance(workload, pd.DataFrame):
            raise TypeError("workload must be a trace name or path, a job table, 'synthetic', or an object with "
                            f"sample(n_jobs, seed); got {type(workload).__name__}")
        # At construction: a bad job would otherwise fail only at the reset that meets it.
        jobtable.check_valid(workload, need_sorted=False, what="the workload's job table")
        table = traces.split(jobtable.finalize(workload.copy()), split, train_fraction)
        jobtable.check_valid(table, self.machine.nodes, self.machine.name, what=f"the {split} split")
        if len(table) < self.window:
            raise ValueError(f"the {split} split has {len(table)} jobs, fewer than window={self.window}")
        return EpisodeSource(table, None, self.window, self.machine, self.kill_at_walltime)

    def _default_synthetic(self, train_fraction: float) -> Any:
        """The generator behind ``workload="synthetic"``: the factory registered under that name.

        ``synth`` provides it (:func:`synth.defaults.default_workload`): its arrival-aware generator fitted on the
        train split of the machine's bundled trace, or a parametric model for a machine without one (Trinity).
        """
        source = next((name for name, t in traces.BUNDLED.items() if t.machine == self.machine.name), None)
        train = None if source is None else traces.split(traces.load(source), "train", train_fraction)
        return workload_factory("synthetic")(self.machine, train)

    @property
    def scales(self) -> Scales:
        """How the observation scales times, and the current window's clock (the time of day's origin)."""
        return self.sim.hook.scales

    @property
    def time_scale(self) -> float:
        """Seconds that the log-scaled time features map to 1 (see the ``time_scale`` argument)."""
        return self.scales.time_scale

    # ---- the Gymnasium API -----------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Draw a window and run to the first decision.

        Windows in which every job can start on arrival need no decision; they are redrawn (up to
        :data:`MAX_REDRAWS` times). ``options={"window_start": row}`` pins the window to rows
        ``row .. row + window - 1`` of the split (for evaluation on fixed windows); such a window is played even if
        it needs no decision, in which case the episode is already over: the observation is all padding and
        ``info["done"]`` is True. Any other option is an error.

        Raises:
            NoDecisionError: :data:`MAX_REDRAWS` random windows in a row needed no decision (a
                :class:`RuntimeError`; the workload is too light for the machine, or the window too short).
        """
        pinned = reset_options(options).get("window_start")
        if pinned is not None:
            pinned = whole_number(pinned, "options['window_start']")
        super().reset(seed=seed)
        self.invalid_actions = 0
        pending = self.load_window(self.np_random, pinned)
        if not pending:
            self.result = self.finish()
            return self._obs.copy(), self.step_info(self.result)
        return self._obs.copy(), self.step_info()

    def load_window(self, rng: np.random.Generator, pinned: int | None = None) -> bool:
        """Draw windows until one needs a decision (or take the pinned one); return whether one is pending."""
        self.result = None
        loads = []
        for _ in range(MAX_REDRAWS):
            self._window = w = self.source.draw(rng, pinned)
            self.sim.hook.scales = self.scales.at(w.clock0)  # the time of day's origin
            keys = self.source.keys(w, self.order)
            pending = self.sim.load(w.submit, w.wall, w.nodes, w.hold, keys, self._buffers, w.user)
            if pending or pinned is not None:
                if self._credit is not None:
                    self._credit.start(self.sim, self.source.keys(w, self.baseline), pending)
                return pending
            loads.append(window_load(w, self.machine.nodes))
        raise NoDecisionError(MAX_REDRAWS, len(w), float(np.mean(loads)))

    def step(self, action):
        """Schedule the job in slot ``action``; see the class docstring."""
        if self._window is None or self.sim.done:
            raise ValueError("the episode is over (or never started): call reset() before step()")
        action = whole_number(action, "action")
        if not 0 <= action < len(self._mask):
            raise ValueError(f"action {action} is outside the action space {self.action_space}")
        if not self._mask[action]:
            if self.invalid_action == "raise":
                raise ValueError(f"invalid action {action}: not allowed now (an empty slot, or a choice the action "
                                 f"mode does not offer; {int(self._mask.sum())} valid actions; the valid ones are "
                                 "info['action_mask'], or hpcgym.action_masks(env))")
            self.invalid_actions += 1
            action = int(np.flatnonzero(self._mask)[action % int(self._mask.sum())])  # the (a mod v)-th valid one
        sim = self.sim
        # The mask is the action mode's rule, checked above, so the simulator takes the choice unchecked (its
        # choose() would check it again, in hold mode a Python loop over the queue at every step). The
        # observation is built in the same compiled call.
        chosen = actions.HOLD_CHOICE if action == self.slots else int(sim.queue[action])
        credit = self._credit
        head = credit.head(sim) if credit is not None else -1
        sim.advance(chosen)
        obs = self._obs.copy()
        if not sim.done:
            return obs, 0.0 if credit is None else credit.credit(sim, chosen, head), False, False, self.step_info()
        self.result = self.finish()
        warn_if_unmasked(self.invalid_actions, sim.decisions)
        reward = self.result.reward if credit is None else credit.credit(sim, chosen, head)
        return obs, reward, True, False, self.step_info(self.result)

    def action_masks(self) -> np.ndarray:
        """Valid actions: the slots that hold a job the action mode allows (and, in hold mode, the hold)."""
        return self._mask.copy()

    def finish(self) -> rewards.EpisodeResult:
        """The result of the finished episode: objective, reward, heuristics on the same window, records."""
        w = self._window
        return rewards.finish(self.sim, w.job_id, self.machine.nodes, self.objective, self.reward_kind,
                              self.baseline, self.compare_with, self.backfill,
                              keys=lambda p: self.source.keys(w, p))

    @property
    def jobs(self) -> pd.DataFrame:
        """The current window's job table (submit times rebased to the window's first job)."""
        return self._window.table.reset_index(drop=True).assign(submit=self._window.submit)

    def step_info(self, result: rewards.EpisodeResult | None = None) -> dict[str, Any]:
        """The ``info`` of a step or reset (see the class docstring); ``result``: the episode's, at its end."""
        ended = _TRUE if result is not None else _FALSE
        # numpy scalars, not Python ints: clients that turn infos into tensors (TorchRL) need a dtype. The time and
        # the queue length are read from the engine's int64 scalars as they are (a conversion costs a step ~0.2 us).
        sc = self.sim.state.sc
        info: dict[str, Any] = {"time": sc[T], "waiting": sc[QE] - sc[QS], "decisions": np.int64(self.sim.decisions),
                                "window_done": ended, "done": ended, "invalid_actions": np.int64(self.invalid_actions),
                                "action_mask": self._mask.copy()}
        if result is not None:
            info.update(episode_info(result, self._window.start_row))
        return info

    def render(self):
        """``ansi``: a text view of the machine and the queue; ``rgb_array``: a Gantt picture of the episode."""
        if self.render_mode == "ansi":
            return self._render_text()
        if self.render_mode == "rgb_array":
            from hpcgym.gantt import gantt_rgb  # matplotlib only when asked for

            return gantt_rgb(self.sim, self.machine)
        return None

    def _render_text(self) -> str:
        sim = self.sim
        lines = [f"t={sim.now}s  free {sim.free}/{self.machine.nodes} nodes  running {len(sim.running)}  "
                 f"waiting {len(sim.queue)}  decisions {sim.decisions}",
                 f"{'slot':>4} {'job':>6} {'nodes':>6} {'walltime':>9} {'wait':>8} {'fits':>4}"]
        for k, j in enumerate(sim.queue[:min(self.slots, 10)]):
            fits = "yes" if sim.job_nodes[j] <= sim.free else ""
            lines.append(f"{k:4d} {j:6d} {sim.job_nodes[j]:6d} {sim.wall[j]:9d} {sim.now - sim.submit[j]:8d} {fits:>4}")
        if len(sim.queue) > 10:
            lines.append(f"... {len(sim.queue) - 10} more")
        return "\n".join(lines)


#: ``"package.module:attribute"``: a workload or policy to import (a path with a colon is read as a file).
_TRUE, _FALSE = np.bool_(True), np.bool_(False)
_MODULE_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


#: The share of an episode's actions outside the mask above which the environment warns (an unmasked learner), in
#: episodes of at least :data:`UNMASKED_MIN_DECISIONS` decisions (in shorter ones a few choices say little).
UNMASKED_SHARE, UNMASKED_MIN_DECISIONS = 0.5, 8


def warn_if_unmasked(invalid: int, decisions: int, where: str = "this episode") -> None:
    """Warn, at an episode's end, when most of its actions were outside the mask (and were wrapped to valid ones).

    An agent that does not read the mask (plain PPO) picks empty slots most of the time and is never told: each
    such action silently becomes another job's.
    """
    if decisions >= UNMASKED_MIN_DECISIONS and invalid > UNMASKED_SHARE * decisions:
        warn(f"{invalid} of the {decisions} actions of {where} were outside the action mask and were mapped to valid "
             "slots (invalid_action='wrap'), so the agent does not learn the choices it makes: give it the mask "
             "(info['action_mask'], hpcgym.action_masks(env); sb3-contrib's MaskablePPO reads action_masks()), or "
             "pass invalid_action='raise' to stop at the first one")


def whole_number(value: Any, name: str) -> int:
    """``value`` as an int, refusing floats with a fractional part (``2.5`` would silently become 2)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    try:
        whole = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
        raise TypeError(f"{name} must be an integer, not {value!r}") from None
    if whole != value:
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    return whole


#: The keys ``reset(options=...)`` takes.
RESET_OPTIONS = ("window_start",)


def window_load(w: Window, machine_nodes: int) -> float:
    """The offered load of a window as :func:`hpcgym.jobs.offered_load` (its hold times as the runtimes)."""
    span = float(w.submit[-1] - w.submit[0]) if len(w) > 1 else 0.0
    work = float(np.dot(w.nodes.astype(np.float64), w.hold.astype(np.float64)))
    return work / (machine_nodes * span) if span > 0 else float("inf")


def reset_options(options: Any) -> dict[str, Any]:
    """``reset``'s ``options`` checked: None (no options) or a dict of :data:`RESET_OPTIONS` keys."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"options must be a dict such as {{'window_start': 0}}, or None; not {options!r}")
    unknown = sorted(map(repr, set(options) - set(RESET_OPTIONS)))
    if unknown:
        raise ValueError(f"unknown reset option {', '.join(unknown)}: the options are {list(RESET_OPTIONS)}")
    return options


def longest_walltime(jobs: pd.DataFrame) -> float:
    """The default ``time_scale`` of a workload: its longest walltime in seconds, at least 60."""
    return float(max(jobs["walltime"].max(), 60))


def _counterfactual_predictor(predictor: Any, baseline: PriorityPolicy | None, trace: str | None) -> tuple[Any, str]:
    """The predictor of a ``reward="counterfactual"`` environment, and why when it is not ``predictor``.

    Its forks finish the window under the baseline on the environment's estimates, so the two must read one
    predictor. A predictor the user gave stays (a different one is refused later, naming the baseline's); none, or
    the one an id supplies (:class:`hpcgym.sim.predict.IdDefault`), becomes the baseline's, unless that one is
    clairvoyant (an environment never shows the agent the jobs' runtimes).
    """
    given = predictor is not None and not isinstance(predictor, predict.IdDefault)
    if baseline is None or given:
        return predictor, ""
    theirs = predict.get(baseline.predictor, trace=trace)
    if theirs.clairvoyant or theirs == predict.get(predictor, trace=trace):
        return predictor, ""
    was = f"the id's {predictor}" if predictor is not None else "the walltimes when none is given"
    return baseline.predictor, (f"the baseline {baseline.name}'s, since reward='counterfactual' forks on the "
                                f"baseline's estimates (instead of {was}; pass predictor= to choose)")


def _trace_name(workload: Any) -> str | None:
    """The trace a workload argument names, for a bare ``predictor="learned"`` (its model is that trace's)."""
    if isinstance(workload, str):
        return workload
    attrs = getattr(workload, "attrs", None)
    return attrs.get("name") if isinstance(attrs, dict) else None


def episode_info(result: rewards.EpisodeResult, window_start: int) -> dict[str, Any]:
    """The keys an episode's last ``info`` adds (see the class docstring), every value a numpy scalar or array.

    Clients that turn infos into tensors (TorchRL) need a dtype: a Python float has none (``np.float64`` is still a
    ``float`` to everyone else).
    """
    info = {"metrics": _numpy(result.metrics), "records": result.records, "window_start": np.int64(window_start),
            "compare": _numpy(result.compare)}
    if result.baseline is not None:  # only when set: a None has no dtype for clients that make tensors of infos
        info["baseline"] = np.float64(result.baseline)
    return info


def _numpy(values: dict[str, float]) -> dict[str, np.float64]:
    return {k: np.float64(v) for k, v in values.items()}


def heuristic_action(env: gym.Env, policy: PriorityPolicy) -> int:
    """The slot a priority heuristic picks: its best-scored visible job the mask allows (ties: the earlier arrival).

    In guarded mode, with the environment's ``order`` as ``policy``, that is the first eligible job in EASY's scan
    order, so the heuristic's choices give the heuristic's own EASY schedule; a heuristic never holds.

    A heuristic on the walltimes reads the walltimes; one on predictions reads the environment's estimates, so its
    predictor must be the environment's. A clairvoyant heuristic (the ``exact`` predictor) reads the jobs' own
    runtimes whatever the environment's predictor: a *teacher* that knows what the agent cannot
    (``experiments.train --clone tuned@exact``).
    """
    base = env.unwrapped
    sim = base.sim
    if policy.predictor == "walltime":
        estimate = sim.limit
    elif predict.get(policy.predictor, trace=base.trace) == sim.predictor:
        estimate = sim.wall
    elif predict.get(policy.predictor).clairvoyant:
        estimate = sim.hold
    else:
        raise ValueError(f"{policy.name} reads the {policy.predictor} predictor's estimates; this environment's are "
                         f"{sim.predictor.name!r} (pass predictor={policy.predictor!r})")
    q = sim.queue[:base.slots]
    keys = base.source.keys(base._window, policy)
    mask = base.action_masks()[:len(q)]
    scores = [priority(policy.code, sim.now, sim.submit[j], estimate[j], sim.job_nodes[j],
                    0.0 if keys is None else keys[j]) if ok else np.inf for j, ok in zip(q, mask, strict=True)]
    return int(np.argmin(scores))


__all__ = ["OBJECTIVES", "WAIT_SCALE", "SchedulingEnv", "episode_info", "heuristic_action", "resolve"]
