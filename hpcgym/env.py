"""Gymnasium environments in which an agent picks, at each real decision, the job to schedule next."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from hpcgym import jobs as jobtable
from hpcgym import machines, metrics, observation, traces
from hpcgym.sim import PriorityPolicy, Simulator, simulate
from hpcgym.sim.engine import FCFS_ORDER
from hpcgym.sim.policy import KEY, score

OBJECTIVES = ("bsld", "wait", "turnaround", "util")


def resolve(spec: Any, default_module: str = "baselines.priorities") -> Any:
    """Resolve a ``"module:attribute"`` string lazily; a bare name is looked up with ``default_module:get``."""
    if not isinstance(spec, str):
        return spec
    if ":" in spec:
        module, _, attr = spec.partition(":")
        return getattr(importlib.import_module(module), attr)
    return importlib.import_module(default_module).get(spec)


class SchedulingEnv(gym.Env):
    """Pick the next job to schedule on a node-granular HPC machine.

    ## Description
    A window of ``window`` consecutive jobs (from a random start in the chosen split of a trace, or freshly sampled
    from a generator) arrives on an empty machine of ``machine`` nodes. Time advances from event to event (job ends
    and arrivals; see ``docs/simulation.md``). At each *decision* the agent sees the first ``slots`` waiting jobs in
    arrival order and picks one. If it fits in the free nodes it starts now and the agent decides again at the same
    time; if not, it becomes the blocked head: with ``backfill="easy"`` it gets a reservation at its shadow time
    and the other waiting jobs are backfilled around it (scanned in the order of ``order``), then time advances.

    Decisions that cannot change the schedule are skipped (the simulator resolves them itself):
    1. no job waits;
    2. no waiting job fits in the free nodes (whatever the choice, nothing starts before the next event); under
       ``backfill="rlscheduler"`` this case is *not* skipped, since that mode remembers the chosen head's shadow;
    3. exactly one job waits (it is chosen: it starts if it fits, else it blocks).

    ## Action space
    ``Discrete(slots)``: the slot (row) of the job to schedule. :meth:`action_masks` marks the slots that hold a
    job, as sb3-contrib's ``MaskablePPO`` expects. An empty slot raises ``ValueError`` (``invalid_action="raise"``,
    the default). For algorithms without masks, and for checkers that sample unmasked actions,
    ``invalid_action="wrap"`` maps action ``a`` to the ``a mod v``-th valid slot instead (``v`` valid slots).

    ## Observation space
    ``Box(0, 1, shape=(slots + 1, 8), float32)``. Rows ``0..slots-1`` are waiting jobs (padding rows are all zero,
    with ``present = 0``); the last row is the machine. Times are log-scaled against the workload's longest walltime.

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

    ## Rewards
    0 at every step. At the end of the episode: ``-mean(objective)`` over the window's jobs for ``bsld``
    (bounded slowdown, tau 10 s), ``wait`` or ``turnaround`` (seconds), or ``+utilization`` for ``util``. With
    ``baseline`` (a heuristic), the final reward is the improvement relative to that heuristic on the same window
    and backfill mode: ``(baseline - agent) / baseline`` (for ``util``: ``(agent - baseline) / baseline``).

    ## Starting state
    The window's first job arrives at time 0 on an empty machine; ``reset`` runs to the first decision.

    ## Episode end
    Terminated when every job of the window has finished. Never truncated.

    ## Info
    Every step: ``time``, ``waiting``, ``decisions``, ``done``. At the end also ``metrics`` (see
    :func:`hpcgym.metrics.summarize`), ``compare`` (the objective of each ``compare_with`` heuristic on the same
    window and backfill mode), ``records`` (per-job columns as numpy arrays: ``pd.DataFrame(records)``
    gives the table), ``window_start`` (row of the split, or
    -1 for sampled workloads) and ``baseline`` (its objective value, when set).

    ## Arguments
    - ``machine``: catalog name or :class:`~hpcgym.machines.Machine`.
    - ``workload``: a bundled trace name, a trace path, a job table, ``"synthetic"``, a ``"module:attribute"``
      string, or any object with ``sample(n_jobs, seed)``. ``"synthetic"`` fits hpcgym's arrival-aware generator
      (:mod:`synth.arrivals`) on the train split of the machine's bundled trace; for a machine without one
      (Trinity) it is the Lublin-Feitelson model scaled to the machine (:mod:`synth.lublin`).
    - ``backfill``: ``"none"``, ``"easy"`` or ``"rlscheduler"``.
    - ``window`` (256), ``slots`` (128), ``split`` (``"train"``, ``"test"`` or ``"all"``; chronological 70/30;
      ignored for sampled workloads), ``objective`` (``"bsld"``), ``baseline`` (None), ``order`` (the backfill scan
      order: FCFS; a policy or a name such as ``"wfp3"``), ``kill_at_walltime`` (True), ``invalid_action``
      (``"raise"`` or ``"wrap"``), ``compare_with`` (heuristics, e.g. ``("fcfs",)``, to report in the final info),
      ``render_mode``.

    ## Version history
    - v0: first release.

    >>> import hpcgym
    >>> env = hpcgym.make("lublin256-v0")
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape
    (129, 8)
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, machine: str | machines.Machine = "lublin-256", workload: Any = "lublin-256",
                 backfill: str = "none", window: int = 256, slots: int = 128, split: str = "train",
                 objective: str = "bsld", baseline: Any = None, order: Any = None, kill_at_walltime: bool = True,
                 train_fraction: float = 0.7, invalid_action: str = "raise", compare_with: tuple = (),
                 render_mode: str | None = None):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        if invalid_action not in ("raise", "wrap"):
            raise ValueError(f"invalid_action must be 'raise' or 'wrap', not {invalid_action!r}")
        self.invalid_action = invalid_action
        if window < 2 or slots < 1:
            raise ValueError("window must be >= 2 and slots >= 1")
        self.machine = machines.get(machine)
        self.window, self.slots, self.split, self.objective = int(window), int(slots), split, objective
        self.backfill, self.kill_at_walltime, self.render_mode = backfill, kill_at_walltime, render_mode
        self.order: PriorityPolicy = FCFS_ORDER if order is None else resolve(order)
        self.baseline: PriorityPolicy | None = None if baseline is None else resolve(baseline)
        self.compare_with: tuple[PriorityPolicy, ...] = tuple(resolve(p) for p in compare_with)
        self.sim = Simulator(self.machine.nodes, backfill, self.order, kill_at_walltime)
        self._table, self._sampler = self._workload(workload, split, train_fraction)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self.slots + 1, observation.N_FEATURES),
                                            dtype=np.float32)
        self.action_space = spaces.Discrete(self.slots)
        self._obs = np.zeros(self.observation_space.shape, np.float32)
        self._mask = np.zeros(self.slots, bool)
        self._set_scales(self._table if self._table is not None else self._sampler.sample(1024, seed=0))
        self._jobs: pd.DataFrame | None = None

    # ---- workloads -------------------------------------------------------------------------------------------
    def _workload(self, workload: Any, split: str, train_fraction: float):
        if isinstance(workload, str) and workload == "synthetic":
            workload = self._default_synthetic(train_fraction)
        elif isinstance(workload, str) and ":" in workload:
            workload = resolve(workload)
        elif isinstance(workload, (str, Path)):
            workload = traces.read(workload)
        if hasattr(workload, "sample") and not isinstance(workload, pd.DataFrame):
            return None, workload
        if not isinstance(workload, pd.DataFrame):
            raise TypeError("workload must be a trace name or path, a job table, 'synthetic', or an object with "
                            f"sample(n_jobs, seed); got {type(workload).__name__}")
        table = traces.split(jobtable.finalize(workload.copy()), split, train_fraction)
        self._check_fits(table)
        if len(table) < self.window:
            raise ValueError(f"the {split} split has {len(table)} jobs, fewer than window={self.window}")
        return table, None

    def _default_synthetic(self, train_fraction: float) -> Any:
        """The generator behind ``workload="synthetic"``.

        It is hpcgym's arrival-aware generator fitted on the train split of the machine's bundled trace (a fraction
        of a second), or the Lublin-Feitelson model scaled to the machine when no trace of it ships (Trinity).
        """
        source = next((name for name, t in traces.BUNDLED.items() if t.machine == self.machine.name), None)
        if source is None:
            return resolve("synth.lublin:LublinModel")(self.machine.nodes)
        train = traces.split(traces.load(source), "train", train_fraction)
        return resolve("synth.arrivals:ArrivalAwareSynthesizer")(max_nodes=self.machine.nodes).fit(train)

    def _check_fits(self, table: pd.DataFrame) -> None:
        too_big = int((table["nodes"] > self.machine.nodes).sum())
        if too_big:
            raise ValueError(f"{too_big} jobs need more than the {self.machine.nodes} nodes of {self.machine.name}; "
                             "drop them (hpcgym.jobs.apply_invalid_policy) or pick a bigger machine")

    def _set_scales(self, table: pd.DataFrame) -> None:
        time_scale = float(max(table["walltime"].max(), 60))
        self._inv_time = 1.0 / np.log1p(time_scale)
        self._inv_wait = 1.0 / np.log1p(10.0 * time_scale)
        self._inv_area = 1.0 / np.log1p(time_scale * self.machine.nodes)
        self._clock0 = int(table.attrs.get("unix_start_time", 0) or 0)

    def _draw_window(self, start: int | None = None) -> tuple[pd.DataFrame, int]:
        if start is not None:
            if self._table is None:
                raise ValueError("options['window_start'] needs a trace workload, not a sampled one")
            if not 0 <= start <= len(self._table) - self.window:
                raise ValueError(f"window_start must be in [0, {len(self._table) - self.window}], not {start}")
            return traces.window(self._table, self.window, start=start), start
        if self._sampler is not None:
            jobs = self._sampler.sample(self.window, seed=int(self.np_random.integers(2**31 - 1)))
            self._check_fits(jobs)
            return jobtable.finalize(jobs), -1
        start = int(self.np_random.integers(0, len(self._table) - self.window + 1))
        return traces.window(self._table, self.window, start=start), start

    # ---- the Gymnasium API -----------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Draw a window and run to the first decision.

        Windows in which every job can start on arrival need no decision; they are redrawn (up to 100 times).
        ``options={"window_start": row}`` pins the window to rows ``row .. row + window - 1`` of the split (for
        evaluation on fixed windows); such a window is played even if it needs no decision, in which case the
        episode is already over: the observation is all padding and ``info["done"]`` is True.
        """
        super().reset(seed=seed)
        pinned = None if options is None else options.get("window_start")
        for _ in range(100):
            self._jobs, self._window_start = self._draw_window(pinned)
            pending = self.sim.reset(self._jobs)
            if pending or pinned is not None:
                break
        else:
            raise RuntimeError("100 windows in a row needed no decision; use a longer window or a busier workload")
        if not pending:
            self._final_reward()
            return self._observe(), self._info(final=True)
        return self._observe(), self._info()

    def step(self, action):
        """Schedule the job in slot ``action``; see the class docstring."""
        action = int(action)
        if not (0 <= action < self.slots) or not self._mask[action]:
            if self.invalid_action == "wrap":
                action = int(np.flatnonzero(self._mask)[action % int(self._mask.sum())])
                return self.step(action)
            raise ValueError(f"invalid action {action}: slot is empty or out of range "
                             f"({int(self._mask.sum())} valid slots; use env.action_masks())")
        pending = self.sim.choose(int(self.sim.queue[action]))
        obs = self._observe()
        if pending:
            return obs, 0.0, False, False, self._info()
        return obs, self._final_reward(), True, False, self._info(final=True)

    def action_masks(self) -> np.ndarray:
        """Valid actions: the slots that hold a waiting job."""
        return self._mask.copy()

    # ---- internals -------------------------------------------------------------------------------------------
    def _observe(self) -> np.ndarray:
        sim = self.sim
        observation.build(self._obs, self._mask, sim.queue, sim.now, sim.free, self.machine.nodes, sim.submit,
                          sim.wall, sim.job_nodes, sim.running, sim.estimated_ends(), sim.finished, self._clock0,
                          self._inv_wait, self._inv_time, self._inv_area)
        return self._obs.copy()

    def _objective(self, rec: pd.DataFrame) -> float:
        if self.objective == "util":
            return metrics.utilization(rec, self.machine.nodes)
        if self.objective == "turnaround":
            return float((rec["end"] - rec["submit"]).mean())
        return float(rec[self.objective].mean())

    def _final_reward(self) -> float:
        self._records = self.sim.records()
        value = self._objective(self._records)
        self._baseline_value = None
        if self.baseline is None:
            return value if self.objective == "util" else -value
        base = simulate(self._jobs, self.machine, self.baseline, self.backfill, self.kill_at_walltime)
        self._baseline_value = self._objective(base)
        gain = (value - self._baseline_value) if self.objective == "util" else (self._baseline_value - value)
        return gain / max(abs(self._baseline_value), 1e-9)

    def _info(self, final: bool = False) -> dict[str, Any]:
        info: dict[str, Any] = {"time": self.sim.now, "waiting": len(self.sim.queue), "decisions": self.sim.decisions,
                                "done": final}
        if final:
            info.update(metrics=metrics.summarize(self._records, self.machine.nodes),
                        records={c: self._records[c].to_numpy() for c in self._records.columns},
                        window_start=self._window_start, baseline=self._baseline_value,
                        compare={p.name: self._objective(simulate(self._jobs, self.machine, p, self.backfill,
                                                                  self.kill_at_walltime))
                                 for p in self.compare_with})
        return info

    def render(self):
        """``ansi``: a text view of the machine and the queue; ``rgb_array``: a Gantt picture of the episode."""
        if self.render_mode == "ansi":
            return self._render_text()
        if self.render_mode == "rgb_array":
            from hpcgym.render import gantt_rgb  # matplotlib only when asked for

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


def heuristic_action(env: gym.Env, policy: PriorityPolicy) -> int:
    """The slot a priority heuristic picks: its best-scored visible job (ties: the earlier arrival)."""
    base = env.unwrapped
    sim = base.sim
    q = sim.queue[:base.slots]
    keys = policy.keys(base._jobs) if policy.code == KEY else None
    scores = [score(policy.code, sim.now, sim.submit[j], sim.wall[j], sim.job_nodes[j],
                    0.0 if keys is None else keys[j]) for j in q]
    return int(np.argmin(scores))


__all__ = ["OBJECTIVES", "SchedulingEnv", "heuristic_action", "resolve"]
