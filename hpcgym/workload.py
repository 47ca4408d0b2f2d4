"""Where an environment's episodes come from: windows of a job table, or samples of a generator, as arrays.

:class:`EpisodeSource` turns a workload into :class:`Window` objects: the int64 arrays the simulator needs, drawn
with the environment's own generator. The single environment and the vector environment draw through the same
code, so that N single environments and one vector environment with the same seeds play the same episodes.
:class:`MixedWorkload` and :class:`PooledSampler` are workloads built on others (real windows alternating with
samples; windows of one large sample).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from hpcgym import jobs as jobtable
from hpcgym.errors import UnknownNameError
from hpcgym.machines import Machine
from hpcgym.sim import hold_times
from hpcgym.sim.policy import CUSTOM_CODES, PriorityPolicy
from hpcgym.traces.split import window as job_window

#: Draws of a seed for a sampled window come from ``[0, SEED_BOUND)``.
SEED_BOUND = 2**31 - 1


@runtime_checkable
class Workload(Protocol):
    """A job generator: anything with ``sample(n_jobs, seed)`` returning a canonical job table."""

    def sample(self, n_jobs: int, seed: int) -> pd.DataFrame:
        """``n_jobs`` jobs; the same seed gives the same table."""


#: The entry-point group through which other packages provide named workloads (``workload="synthetic"``).
ENTRY_POINTS = "hpcgym.workloads"
#: A named workload's factory: the machine, and the train split of its bundled trace (None when none ships).
WorkloadFactory = Callable[[Machine, "pd.DataFrame | None"], Workload]
_FACTORIES: dict[str, WorkloadFactory] = {}


def register(name: str, factory: WorkloadFactory) -> None:
    """Make ``workload=name`` build its workload with ``factory(machine, train)``.

    hpcgym imports no generator itself (they live in other packages, e.g. ``synth``): a package registers its
    factories here, or declares them in the ``hpcgym.workloads`` entry-point group of its ``pyproject.toml``,
    which is how ``synth`` provides ``"synthetic"``.
    """
    _FACTORIES[name] = factory


def factory(name: str) -> WorkloadFactory:
    """The factory registered as ``name`` (loaded from the entry points on first use)."""
    if name not in _FACTORIES:
        for point in entry_points(group=ENTRY_POINTS):
            _FACTORIES.setdefault(point.name, point.load())
    if name not in _FACTORIES:
        raise UnknownNameError("workload", name, _FACTORIES,
                               hint="Named workloads come from installed packages: pip install -e . provides synth's.")
    return _FACTORIES[name]


@dataclass
class Window:
    """One episode's jobs as arrays (submit times rebased to 0), and where they came from."""

    submit: np.ndarray
    wall: np.ndarray
    nodes: np.ndarray
    hold: np.ndarray
    job_id: np.ndarray
    user: np.ndarray  #: user ids (-1: unknown), for history predictors
    start_row: int  #: first row in the split, or -1 for a sampled window
    source: pd.DataFrame = field(repr=False)  #: the table the window's rows come from
    #: the trace clock (Unix seconds) at the window's first submit: its time 0 is this instant, not the trace's start
    clock0: int = 0

    def __len__(self) -> int:
        return len(self.submit)

    @property
    def table(self) -> pd.DataFrame:
        """The window's rows of the job table (built on demand: pandas copies the table's attrs at every slice)."""
        if self.start_row < 0:
            return self.source
        return self.source.iloc[self.start_row:self.start_row + len(self.submit)]


class EpisodeSource:
    """Draws episode windows from a job table (random or pinned starts) or from a :class:`Workload`.

    Args:
        table: a finalized, valid job table (the split to draw from), or None.
        sampler: a :class:`Workload`, or None (exactly one of ``table`` and ``sampler``).
        window: jobs per episode.
        machine: the machine (sampled windows are checked against it).
        kill_at_walltime: end jobs at their walltime.
    """

    def __init__(self, table: pd.DataFrame | None, sampler: Workload | None, window: int, machine: Machine,
                 kill_at_walltime: bool = True):
        if (table is None) == (sampler is None):
            raise ValueError("give exactly one of a job table and a sampler")
        self.table, self.sampler, self.window = table, sampler, int(window)
        self.machine, self.kill_at_walltime = machine, kill_at_walltime
        if table is not None:
            self._cols = _columns(table, kill_at_walltime)

    def draw(self, rng: np.random.Generator, start: int | None = None) -> Window:
        """A random window (or the one starting at row ``start`` of the table)."""
        if start is not None:
            if self.table is None:
                raise ValueError("options['window_start'] needs a trace workload, not a sampled one")
            if not 0 <= start <= len(self.table) - self.window:
                raise ValueError(f"window_start must be in [0, {len(self.table) - self.window}], not {start}")
            return self._slice(int(start))
        if self.sampler is not None:
            jobs = self.sampler.sample(self.window, seed=int(rng.integers(SEED_BOUND)))
            jobs = jobtable.finalize(jobs)
            jobtable.check_valid(jobs, self.machine.nodes, self.machine.name, what="a sampled window")
            cols = _columns(jobs, self.kill_at_walltime)
            first = int(cols[0][0]) if len(jobs) else 0
            return Window(cols[0] - first, *cols[1:], start_row=-1, source=jobs, clock0=_unix_start(jobs) + first)
        return self._slice(int(rng.integers(0, len(self.table) - self.window + 1)))

    def _slice(self, s: int) -> Window:
        e = s + self.window
        submit, wall, nodes, hold, job_id, user = (c[s:e] for c in self._cols)
        return Window(submit - submit[0], wall, nodes, hold, job_id, user, start_row=s, source=self.table,
                      clock0=_unix_start(self.table) + int(submit[0]))

    def keys(self, window: Window, policy: PriorityPolicy) -> np.ndarray | None:
        """The custom static keys of ``policy`` on ``window`` (None for compiled formulas)."""
        if policy.code not in CUSTOM_CODES:
            return None
        jobs = window.table.reset_index(drop=True).assign(submit=window.submit)
        return policy.keys(jobs)


def _columns(jobs: pd.DataFrame, kill_at_walltime: bool) -> tuple[np.ndarray, ...]:
    return (jobs["submit"].to_numpy(np.int64), jobs["walltime"].to_numpy(np.int64),
            jobs["nodes"].to_numpy(np.int64), hold_times(jobs, kill_at_walltime), jobs["job_id"].to_numpy(),
            jobs["user"].to_numpy(np.int64))


def _unix_start(jobs: pd.DataFrame) -> int:
    """The Unix time of a table's submit 0 (0 when the table does not know it)."""
    return int(jobs.attrs.get("unix_start_time", 0) or 0)


# ---- adapters: workloads made of other workloads ---------------------------------------------------------------
class MixedWorkload:
    """Windows of a real job table and samples of a generator, alternately (``sample(n_jobs, seed)``).

    Args:
        real: the job table whose windows alternate with the samples.
        model: any :class:`Workload` (a fitted synthesizer).
    """

    def __init__(self, real: pd.DataFrame, model: Workload):
        self.real, self.model, self.calls = real, model, 0

    def sample(self, n_jobs: int, seed: int) -> pd.DataFrame:
        """Odd calls (the first, the third, ...): a real window; even calls: a sample of the model.

        A real window is at most the whole real table: an environment's first call asks for the jobs its time scale
        comes from (1,024), more than a small trace's training part holds (a Mustang week's: 277).
        """
        self.calls += 1
        if self.calls % 2:
            return job_window(self.real, min(n_jobs, len(self.real)), rng=seed)
        return self.model.sample(n_jobs, seed=seed)


class PooledSampler:
    """Windows of one large sample of a generator (``sample(n_jobs, seed)`` is a window of it).

    One call to a slow sampler instead of one per episode: REaLTabFormer takes about 1 s per 256-job window on
    Theta, which made a 100,000-step run take hours. The pool is drawn with the given seed, so it is reproducible.

    Args:
        model: any :class:`Workload` (a fitted synthesizer).
        n_jobs: the pool's size.
        seed: the seed of the pool's one sample.
    """

    def __init__(self, model: Workload, n_jobs: int, seed: int):
        self.pool = jobtable.finalize(model.sample(n_jobs, seed=seed))

    def sample(self, n_jobs: int, seed: int) -> pd.DataFrame:
        """A window of ``n_jobs`` consecutive pooled jobs, from a start drawn with ``seed``."""
        return job_window(self.pool, n_jobs, rng=seed)
