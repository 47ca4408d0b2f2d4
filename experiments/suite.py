"""The benchmark suite: the logs a verdict pools, the rule that admits a log, and each log's disjoint test windows.

Every log of the catalog (:data:`hpcgym.traces.BUNDLED`) is a candidate, and so is any file a user adds
(:func:`from_file`). A log is judged on its *test split* (the last 30% of its jobs, :func:`hpcgym.traces.split`) cut
into every disjoint window of :data:`WINDOW` consecutive jobs (:func:`disjoint_starts`): disjoint, so that the
windows of one log are as independent as its jobs allow, and all of them, since a few dozen can mislead (HPC2N's
SAF/SJF was 1.047 on 30 windows and 0.976 on all 59).

**The rule** (:func:`admit`). A log enters the suite when its test windows form queues: FCFS+EASY's mean bounded
slowdown over its disjoint test windows is at least :data:`QUEUE` (the average job is slowed by at least 10% by
waiting). On a log where nobody waits every scheduler gives the same schedule, and a ratio of 1.000 there would
only dilute the pooled verdict. Measured on the catalog's logs (``python -m experiments.bench``, ``logs.csv``), the
logs below the bar sit at 1.00-1.02 and those above it at 1.6 or more, so the bar's exact value decides nothing.
A log also needs at least one whole window. The rule reads no scheduler's result but FCFS+EASY's, the baseline of
every table, so it cannot favour a row being judged. A log that fails it is listed with the reason, never dropped
silently.

**Predictions.** A log without requested times (:attr:`hpcgym.traces.TraceInfo.requested_times`) has walltimes
equal to runtimes, so every estimate there is exact: rows that read a runtime predictor (``tuned``, ``*-learned``,
``saf@last2``, ...) skip it, and the bench says so (:func:`reads_predictions`).
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hpcgym import machines, traces
from hpcgym.machines import Machine
from hpcgym.sim import PriorityPolicy

#: jobs per window
WINDOW = 1024
#: the rule: FCFS+EASY's mean bsld over a log's disjoint test windows must reach this for the log to enter the suite
QUEUE = 1.1
#: a log "has requested times" when at least this share of its jobs gives one (the catalog's flags use the same)
REQUESTED_SHARE = 0.9
IN_SUITE, EXCLUDED = "suite", "excluded"


@dataclass(frozen=True)
class LogSpec:
    """A log the bench can judge on: a catalogued name, or a file and how to read it.

    Attributes:
        name: the log's name in every table (the catalog's name, or the file's name without extensions).
        source: what :func:`hpcgym.traces.read` is given (the catalog's name, or the path).
        read: :func:`hpcgym.traces.read`'s options for a file (``format``, ``machine``, ...), as sorted pairs.
    """

    name: str
    source: str
    read: tuple[tuple[str, Any], ...] = field(default=())

    @property
    def info(self) -> traces.TraceInfo | None:
        """The catalog's entry for the log (None for a user's file)."""
        return traces.BUNDLED.get(self.source)

    def load(self) -> pd.DataFrame:
        """The log as a compact canonical job table, read quietly (its drops are the catalog's notes)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return traces.read(self.source, compact=True, **dict(self.read))

    def fingerprint(self) -> str:
        """A hash of the file's bytes and the read options: results cached under it belong to these jobs."""
        path = traces.path_of(self.source) if self.info is not None else Path(self.source)
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(repr(self.read).encode())
        return digest.hexdigest()[:16]


def catalog() -> list[LogSpec]:
    """Every catalogued log, in the catalog's order."""
    return [LogSpec(name, name) for name in traces.BUNDLED]


def named(names: list[str]) -> list[LogSpec]:
    """The catalogued logs of ``names`` (aliases too).

    Raises:
        UnknownNameError: a name the catalog does not hold (with the closest names).
    """
    return [LogSpec(traces.name_of(name), traces.name_of(name)) for name in names]


def from_file(path: str | Path, **read: Any) -> LogSpec:
    """A user's log file, read with ``read`` (:func:`hpcgym.traces.read`'s options; ``None`` values dropped).

    Raises:
        FileNotFoundError: no such file.
    """
    if not Path(path).is_file():
        raise FileNotFoundError(2, "no such log file (--trace-file takes a file)", str(path))
    options = tuple(sorted((k, str(v) if isinstance(v, Machine) else v) for k, v in read.items() if v is not None))
    return LogSpec(Path(path).name.split(".")[0], str(path), options)


def disjoint_starts(jobs: int, length: int = WINDOW) -> list[int]:
    """The starts of every disjoint window of ``length`` consecutive jobs among ``jobs`` (the tail left over).

    >>> disjoint_starts(3000, 1024)
    [0, 1024]
    """
    return list(range(0, jobs - length + 1, length))


@dataclass
class Split:
    """A log's test split as the bench uses it: its machine, jobs, windows and what its jobs record."""

    spec: LogSpec
    machine: Machine
    jobs: pd.DataFrame  #: the whole log (an agent's environment reads its split itself)
    test: pd.DataFrame
    starts: list[int]
    requested_times: bool
    train_jobs: int

    @classmethod
    def of(cls, spec: LogSpec, length: int = WINDOW) -> Split:
        """Read ``spec`` and cut its test split into disjoint windows of ``length`` jobs."""
        jobs = spec.load()
        jobs.attrs["name"] = spec.name  # the name fits are found by (a file's stem; the catalog's name)
        test = traces.split(jobs, "test")
        info = spec.info
        requested = info.requested_times if info is not None else \
            bool(jobs["walltime_known"].mean() >= REQUESTED_SHARE) if "walltime_known" in jobs else True
        return cls(spec, machines.get(jobs.attrs["machine"]), jobs, test, disjoint_starts(len(test), length),
                   requested, len(jobs) - len(test))

    def windows(self, length: int = WINDOW) -> list[pd.DataFrame]:
        """The disjoint test windows (submit times rebased to each window's first job)."""
        return [traces.window(self.test, length, start=s) for s in self.starts]

    def stream(self) -> pd.DataFrame:
        """The whole test split as one stream (submit times rebased to its first job)."""
        return traces.window(self.test, len(self.test), start=0)


@dataclass(frozen=True)
class Admission:
    """Whether a log is in the suite, and why."""

    status: str  #: :data:`IN_SUITE` or :data:`EXCLUDED`
    reason: str
    windows: int
    fcfs_bsld: float  #: FCFS+EASY's mean bsld over the disjoint test windows (NaN without a window)


def admit(windows: int, fcfs_bsld: float, queue: float = QUEUE) -> Admission:
    """The suite's rule (module docstring) on a log with ``windows`` disjoint test windows.

    >>> admit(15, 89.3).status, admit(10, 1.02).reason
    ('suite', 'FCFS+EASY mean bsld 1.02 < 1.1: its test windows do not queue')
    >>> admit(0, float("nan")).reason
    'no whole test window'
    """
    if windows == 0:
        return Admission(EXCLUDED, "no whole test window", 0, fcfs_bsld)
    if not fcfs_bsld >= queue:
        return Admission(EXCLUDED, f"FCFS+EASY mean bsld {fcfs_bsld:.2f} < {queue:g}: its test windows do not queue",
                         windows, fcfs_bsld)
    return Admission(IN_SUITE, f"FCFS+EASY mean bsld {fcfs_bsld:.2f} >= {queue:g}", windows, fcfs_bsld)


def reads_predictions(policy: PriorityPolicy) -> bool:
    """Whether a policy reads a runtime predictor's estimates (so that a log without requested times cannot judge it).

    The clairvoyant row reads the true runtimes (``exact``): it is an upper bound, and runs everywhere.
    """
    return policy.predictor not in ("walltime", "exact")
