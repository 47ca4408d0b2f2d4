"""One log of the bench: every row on the log's disjoint test windows and on its whole test split, cached.

:func:`run_log` is what a worker of ``python -m experiments.bench`` runs for one log (:class:`Task` in,
:class:`LogResult` out; both pickle). It reads the log, applies the suite's rule (:func:`experiments.suite.admit`,
on FCFS+EASY), and, for a log in the suite, schedules on every disjoint test window and on the whole test split:

- the rows asked for (heuristic specs, each resolved for this log: ``tuned`` is this log's fit);
- FCFS+EASY (the baseline) and the clairvoyant row (the classic heuristic that does best on these windows when
  told every runtime: the top of each log's headroom);
- ``--draws`` near-copies of each reference, its runtime estimates jittered by ``--sd`` in its priority
  (:func:`experiments.noise_floor.jittered`): the noise floor;
- the networks of trained runs (``--model``).

A row that cannot run here is skipped with its reason (a log without requested times skips the rows that read
runtime predictions; a log without a ``tuned`` fit skips ``tuned``), never silently.

**The cache.** Each row's scores on a log are one small CSV under ``<cache>/<log>-<hash>/``: the log's hash covers
the file's bytes, the read options and the window length; the row's file name covers its resolved policy (its
weights, predictor and the model file's bytes for a learned one) and the simulator's sources
(:func:`hpcgym.jit.sources_hash`). A row added later costs only its own runs; a refit or an edit of the simulator
makes new files, never stale scores. The stream's per-block sums (:data:`BLOCK` jobs a block) sit beside them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from baselines.grid import window_records
from experiments import suite
from experiments.noise_floor import jittered
from experiments.results import CLAIRVOYANT, HEURISTIC
from experiments.suite import Admission, LogSpec, Split
from hpcgym import io as hpcgym_io
from hpcgym import jit, metrics
from hpcgym.sim import PriorityPolicy, heuristics, predict
from hpcgym.sim.heuristics import CLASSIC

#: jobs per bootstrap block of the whole-split stream
BLOCK = 1024
#: the kind of a near-copy's rows (they make the noise floor; no table ranks them)
NEAR_COPY = "near-copy"
BASELINE = "fcfs+easy"
CLAIRVOYANT_ROW = f"{CLAIRVOYANT}+easy"


@dataclass(frozen=True)
class Row:
    """A row of the bench: a heuristic spec (anything :func:`hpcgym.sim.heuristics.resolve` takes) and a backfill.

    ``{log}`` in the spec stands for each log's name (a fit per log: ``tuned:fits/{log}-easy.json``); ``name``, when
    given, is the row's label instead of ``<spec>+<backfill>``.
    """

    spec: str
    backfill: str
    name: str = ""

    @property
    def label(self) -> str:
        """The row's name in every table: its ``name``, else ``<spec>+<backfill>``."""
        return self.name or f"{self.spec}+{self.backfill}"

    def on(self, log: str) -> str:
        """The spec on ``log`` (``{log}`` filled in)."""
        return self.spec.replace("{log}", log)

    @classmethod
    def parse(cls, text: str) -> Row:
        """``[LABEL=]SPEC+BACKFILL`` (``saf+easy``, ``mine=tuned:fits/{log}.json+none``); a bare ``SPEC`` is ``+easy``.

        Raises:
            ValueError: an unknown backfill mode, or an empty label.
        """
        name, eq, rest = text.partition("=")
        if not eq:
            name, rest = "", text
        elif not name.strip():
            raise ValueError(f"{text!r}: the label before '=' is empty")
        spec, plus, backfill = rest.rpartition("+")
        if not plus:
            return cls(rest, "easy", name.strip())
        if backfill not in ("none", "easy", "conservative"):
            raise ValueError(f"{text!r}: the backfilling after '+' must be none, easy or conservative, not "
                             f"{backfill!r}")
        return cls(spec, backfill, name.strip())


@dataclass(frozen=True)
class Model:
    """A trained network to judge: its row label, the run folder (or SB3 zip), and the logs it may act on."""

    label: str
    path: str
    logs: tuple[str, ...] = ()  #: empty: every log


@dataclass(frozen=True)
class Task:
    """What a worker does for one log."""

    log: LogSpec
    rows: tuple[Row, ...]
    references: tuple[Row, ...]
    models: tuple[Model, ...] = ()
    length: int = suite.WINDOW
    draws: int = 20
    sd: float = 0.05
    seed: int = 0
    stream: bool = True
    cache: str = "bench/cache"


@dataclass
class LogResult:
    """What one log gave: its admission, every row's per-window scores and stream blocks, and the rows skipped."""

    name: str
    admission: Admission
    machine: str = ""
    requested_times: bool = True
    jobs: int = 0  #: jobs kept on reading
    dropped: int = 0  #: invalid jobs the reader dropped (the catalog's notes say which)
    windows: pd.DataFrame = field(default_factory=pd.DataFrame)  #: one row per scheduler x window
    blocks: pd.DataFrame = field(default_factory=pd.DataFrame)  #: one row per scheduler x stream block
    skipped: dict[str, str] = field(default_factory=dict)  #: row label -> why it did not run here
    notes: dict[str, str] = field(default_factory=dict)  #: row label -> what it stands for here
    seconds: float = 0.0
    ran: int = 0  #: rows simulated now (the rest came from the cache)


def fingerprint(policy: PriorityPolicy) -> str:
    """A hash of what a policy does: its formula, key, predictor (a learned model's bytes) and scan order."""
    key = policy.key
    if key is None or dataclasses.is_dataclass(key):
        key_text = repr(key)
    else:  # a user's key function: its code
        try:
            key_text = inspect.getsource(key)
        except (OSError, TypeError):
            key_text = f"{getattr(key, '__module__', '')}.{getattr(key, '__qualname__', repr(type(key)))}"
    parts = [policy.name, policy.code, policy.description, policy.predictor, policy.scan, key_text]
    if policy.predictor.lower().startswith(predict.LEARNED_NAME):
        parts.append(_file_hash(predict.model_path(policy.predictor.split(":", 1)[1])))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def _file_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Cache:
    """The scores of one log's rows: a CSV per row and kind of run (windows, stream) in the log's folder."""

    def __init__(self, root: str | Path, log: LogSpec, length: int):
        key = hashlib.sha256(f"{log.fingerprint()}|{length}".encode()).hexdigest()[:12]
        self.folder = Path(root) / f"{log.name}-{key}"
        self.sim = jit.sources_hash()

    def path(self, label: str, key: str, what: str) -> Path:
        """The file of a row (``label``, hashed ``key``) for ``what`` (``windows`` or ``stream``)."""
        slug = "".join(c if c.isalnum() or c in "+-._" else "_" for c in label)[:60]
        digest = hashlib.sha256(f"{key}|{self.sim}".encode()).hexdigest()[:12]
        return self.folder / f"{slug}-{digest}.{what}.csv"

    def get(self, path: Path) -> pd.DataFrame | None:
        """The cached table, or None."""
        return pd.read_csv(path) if path.is_file() else None

    def put(self, path: Path, table: pd.DataFrame) -> pd.DataFrame:
        """Write a table atomically; return it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        hpcgym_io.write_table(table, path)
        return table


class Runner:
    """Runs policies on one log's windows and stream, through the cache."""

    def __init__(self, split: Split, task: Task):
        self.split, self.task = split, task
        self.cache = Cache(task.cache, split.spec, task.length)
        self.tables = split.windows(task.length)
        self.whole = split.stream() if task.stream else None
        self.ran = 0

    def windows(self, label: str, policy: PriorityPolicy, backfill: str) -> pd.DataFrame:
        """A policy's mean bsld, mean wait and utilization on each window."""
        path = self.cache.path(label, f"{fingerprint(policy)}|{backfill}", "windows")
        found = self.cache.get(path)
        if found is not None and found["start"].tolist() == self.split.starts:
            return found
        rows = []
        for k, (start, jobs) in enumerate(zip(self.split.starts, self.tables, strict=True)):
            s = metrics.summarize(window_records(jobs, self.split.machine, policy, backfill), self.split.machine.nodes)
            rows.append({"window": k, "start": start, "bsld": s["bsld_mean"], "wait": s["wait_mean"],
                         "utilization": s["utilization"]})
        self.ran += 1
        return self.cache.put(path, pd.DataFrame(rows))

    def stream(self, label: str, policy: PriorityPolicy, backfill: str) -> pd.DataFrame | None:
        """A policy's bsld sums over blocks of :data:`BLOCK` consecutive jobs of the whole test split (or None)."""
        if self.whole is None:
            return None
        path = self.cache.path(label, f"{fingerprint(policy)}|{backfill}", "stream")
        found = self.cache.get(path)
        if found is not None and int(found["jobs"].sum()) == len(self.whole):
            return found
        bsld = window_records(self.whole, self.split.machine, policy, backfill)["bsld"]
        return self.cache.put(path, blocks_of(bsld))


def blocks_of(bsld: np.ndarray, block: int = BLOCK) -> pd.DataFrame:
    """Per-job bsld (in submit order) as sums over blocks of ``block`` consecutive jobs.

    >>> blocks_of(np.array([1.0, 2.0, 3.0]), 2).to_dict("list")
    {'block': [0, 1], 'jobs': [2, 1], 'bsld_sum': [3.0, 3.0]}
    """
    index = np.arange(len(bsld)) // block
    return pd.DataFrame({"block": np.unique(index), "jobs": np.bincount(index),
                         "bsld_sum": np.bincount(index, weights=np.asarray(bsld, np.float64))})


def run_log(task: Task) -> LogResult:
    """Every row of ``task`` on one log (module docstring)."""
    began = time.perf_counter()
    split = Split.of(task.log, task.length)
    result = LogResult(task.log.name, suite.admit(0, float("nan")), _machine_text(split), split.requested_times,
                       len(split.jobs), int(sum(split.jobs.attrs.get("invalid", {}).values())))
    if not split.starts:
        result.seconds = time.perf_counter() - began
        return result
    runner = Runner(split, task)
    frames: list[pd.DataFrame] = []
    blocks: list[pd.DataFrame] = []

    def add(label: str, kind: str, policy: PriorityPolicy, backfill: str) -> pd.DataFrame:
        scores = runner.windows(label, policy, backfill)
        frames.append(scores.assign(scheduler=label, kind=kind, backfill=backfill))
        streamed = runner.stream(label, policy, backfill)
        if streamed is not None:
            blocks.append(streamed.assign(scheduler=label, kind=kind))
        return scores

    fcfs = add(BASELINE, HEURISTIC, heuristics.get("fcfs"), "easy")
    result.admission = suite.admit(len(split.starts), float(fcfs["bsld"].mean()))
    if result.admission.status != suite.IN_SUITE:
        result.windows = _tagged(frames, task.log.name)
        result.seconds = time.perf_counter() - began
        return result
    result.notes[CLAIRVOYANT_ROW] = _clairvoyant(runner, add)
    for row in dict.fromkeys((*task.rows, *task.references)):
        if row.label == BASELINE:
            continue
        policy = _resolved(row, split, result.skipped)
        if policy is not None:
            add(row.label, HEURISTIC, policy, row.backfill)
    for ref in task.references:
        _near_copies(ref, split, task, add, result)
    for model in task.models:
        _play(model, split, task, frames, blocks, result)
    result.windows = _tagged(frames, task.log.name)
    result.blocks = _tagged(blocks, task.log.name)
    result.ran, result.seconds = runner.ran, time.perf_counter() - began
    return result


def _machine_text(split: Split) -> str:
    m = split.machine
    return f"{m.nodes:,} x {m.cores_per_node}" if m.cores_per_node > 1 else f"{m.nodes:,} nodes"


def _tagged(frames: list[pd.DataFrame], log: str) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True).assign(log=log) if frames else pd.DataFrame()


def _clairvoyant(runner: Runner, add: Any) -> str:
    """The clairvoyant row: of the classic heuristics told every runtime, the one best on these windows."""
    exact = {p.name: dataclasses.replace(p, predictor="exact") for p in CLASSIC}
    means = {name: float(runner.windows(f"{name}@exact+easy", pol, "easy")["bsld"].mean())
             for name, pol in exact.items()}
    best = min(means, key=means.__getitem__)
    add(CLAIRVOYANT_ROW, CLAIRVOYANT, exact[best], "easy")
    return f"{best} told every job's runtime: not implementable"


def _resolved(row: Row, split: Split, skipped: dict[str, str]) -> PriorityPolicy | None:
    """The row's policy on this log, or None with the reason in ``skipped``."""
    try:
        policy = heuristics.resolve(row.on(split.spec.name), split.spec.name, row.backfill)
    except (ValueError, FileNotFoundError) as exc:
        skipped[row.label] = " ".join(str(exc).split())
        return None
    if suite.reads_predictions(policy) and not split.requested_times:
        skipped[row.label] = (f"reads {policy.predictor} runtime predictions, and this log has no requested times "
                              "(its walltimes are the runtimes)")
        return None
    return policy


def _near_copies(ref: Row, split: Split, task: Task, add: Any, result: LogResult) -> None:
    """The reference's jittered copies on this log's windows (none where it did not run or is no weighted sum)."""
    if ref.label in result.skipped or task.draws == 0:
        return
    policy = heuristics.resolve(ref.on(split.spec.name), split.spec.name, ref.backfill)
    try:
        copies = [jittered(policy, task.sd, task.seed + j, f"{policy.name}~{j}") for j in range(task.draws)]
    except ValueError as exc:
        result.skipped[f"{ref.label} near-copies"] = str(exc)
        return
    for j, copy in enumerate(copies):
        add(near_copy_label(ref.label, j), NEAR_COPY, copy, ref.backfill)


def near_copy_label(reference: str, j: int) -> str:
    """The row label of near-copy ``j`` of ``reference`` (``saf+easy~3``)."""
    return f"{reference}~{j}"


def _play(model: Model, split: Split, task: Task, frames: list[pd.DataFrame], blocks: list[pd.DataFrame],
          result: LogResult) -> None:
    """A trained run's networks (the agent and its cloned start) on this log, where it may act here (uncached)."""
    if model.logs and split.spec.name not in model.logs:
        return
    from experiments.evaluation import per_window_table, run_agent

    try:
        played = agents_of(model)
        for label, agent in played.items():
            recs = run_agent(agent, label, split.jobs, split.machine, split.starts, task.length, "test")
            table = per_window_table(pd.concat(recs, ignore_index=True).assign(backfill=agent.backfill),
                                     split.machine.nodes)
            frames.append(table.assign(start=[split.starts[w] for w in table["window"]]))
            if task.stream:
                whole = run_agent(agent, label, split.jobs, split.machine, [0], len(split.test), "test")[0]
                blocks.append(blocks_of(whole.sort_values(["submit", "job_id"])["bsld"].to_numpy())
                              .assign(scheduler=label, kind=agent.kind))
    except (ValueError, FileNotFoundError, KeyError) as exc:
        result.skipped[model.label] = " ".join(str(exc).split())


def agents_of(model: Model) -> dict[str, Any]:
    """The networks of a run folder (the agent kept, and its cloned start) or of a bare SB3 zip, by row label.

    A bare zip is loaded with sb3-contrib's MaskablePPO and plays with the environment's defaults (no backfilling,
    128 slots): give its run folder where it has one, whose settings say how it trained.
    """
    from experiments.runs import Agent, RunFolder

    path = Path(model.path)
    if path.is_dir() or (path.suffix == ".zip" and (path.parent / "args.json").is_file()):
        run = RunFolder(path if path.is_dir() else path.parent)
        found = run.agents()
        names = {run.name: model.label, f"{run.name} (cloned, no RL)": f"{model.label} (cloned, no RL)"}
        return {names[k]: v for k, v in found.items() if k in names}
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no run folder or model zip")
    from sb3_contrib import MaskablePPO

    return {model.label: Agent(MaskablePPO.load(path, device="cpu"))}
