"""The canonical job table: column names, dtypes, status codes and validation.

Every reader produces, and every consumer accepts, a :class:`pandas.DataFrame` with one row per job, sorted by
submit time (ties by job id), in integer seconds relative to the trace start:

========== ======= ============================================================================
column     dtype   meaning
========== ======= ============================================================================
job_id     int64   the job's number in the source
submit     int64   submit time, seconds since the trace start
run        int64   actual runtime in seconds (rounded up to whole seconds)
walltime   int64   requested time (the user's estimate); equals ``run`` when unknown
nodes      int64   requested whole nodes
procs      int64   the processors the source recorded (-1 when unknown)
user       int64   user id (-1 when unknown)
group      int64   group id (-1 when unknown)
queue      int64   queue id (-1 when unknown)
status     category one of :data:`STATUSES`
walltime_known bool False where the estimate was missing and set to ``run`` (a perfect estimate)
========== ======= ============================================================================

Readers may add the optional SWF columns of :data:`OPTIONAL_COLUMNS`; the SWF writer writes them back.
The table's ``attrs`` carry the metadata: ``name``, ``machine`` (a :class:`~hpcgym.machines.Machine`),
``header`` (dict), ``unix_start_time`` (int), ``invalid`` (reason -> count of dropped jobs), ``repaired`` (what
a reader's rounding policy changed -> count) and ``duplicate_ids`` (jobs whose id an earlier job has).

**Compact tables.** A reader called with ``compact=True`` keeps only the columns above and stores every integer
column as int32 where all its values fit (:func:`compact_ints`), else int64: 38 bytes per job instead of 154 and
more. They are for whole-trace runs of the simulator, which casts to int64 itself; code that multiplies such
columns must cast first (``nodes * walltime`` overflows int32). :func:`validate` accepts both widths.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from hpcgym import errors
from hpcgym.errors import InvalidJobError

OnInvalid = Literal["drop", "error"]
OnDuplicate = Literal["warn", "error"]

COLUMNS: dict[str, str] = {
    "job_id": "int64",
    "submit": "int64",
    "run": "int64",
    "walltime": "int64",
    "nodes": "int64",
    "procs": "int64",
    "user": "int64",
    "group": "int64",
    "queue": "int64",
    "status": "category",
    "walltime_known": "bool",
}

#: Extra SWF fields kept when a reader has them (name -> SWF field number, 1-based).
OPTIONAL_COLUMNS: dict[str, int] = {
    "wait": 3,
    "alloc_procs": 5,
    "cpu_time": 6,
    "mem_used": 7,
    "req_procs": 8,
    "mem_req": 10,
    "executable": 14,
    "partition": 16,
    "preceding_job": 17,
    "think_time": 18,
}

#: Canonical job statuses. SWF codes map onto the first six; ``killed`` (ALCF) and ``timeout`` (LANL) are
#: jobs ended at their walltime, written to SWF as 0 (failed).
STATUSES: tuple[str, ...] = (
    "failed",
    "completed",
    "partial",
    "partial_completed",
    "partial_failed",
    "cancelled",
    "killed",
    "timeout",
    "unknown",
)
SWF_STATUS = {0: "failed", 1: "completed", 2: "partial", 3: "partial_completed", 4: "partial_failed",
              5: "cancelled", -1: "unknown"}
STATUS_TO_SWF = {v: k for k, v in SWF_STATUS.items()} | {"killed": 0, "timeout": 0}

#: Invalid-job reasons, in the order they are checked, with the field each one names.
INVALID_REASONS: dict[str, str] = {
    "submit unknown": "submit",
    "run <= 0": "run",
    "nodes <= 0": "nodes",
    "nodes > machine": "nodes",
}


def status_categorical(values: Sequence[str] | np.ndarray) -> pd.Categorical:
    """Return ``values`` as the canonical status categorical."""
    return pd.Categorical(values, categories=STATUSES)


def finalize(df: pd.DataFrame) -> pd.DataFrame:
    """Cast to the canonical dtypes, order the columns, and sort by (submit, job_id)."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"job table lacks the columns {missing}; see hpcgym.jobs.COLUMNS")
    for col, dtype in COLUMNS.items():
        if col == "status":
            if not isinstance(df[col].dtype, pd.CategoricalDtype) or list(df[col].cat.categories) != list(
                STATUSES
            ):
                df[col] = status_categorical(df[col].astype(str))
        elif df[col].dtype != dtype:
            df[col] = df[col].astype(dtype)
    extra = [c for c in OPTIONAL_COLUMNS if c in df.columns]
    out = df[list(COLUMNS) + extra]
    order = np.lexsort((out["job_id"].to_numpy(), out["submit"].to_numpy()))
    if not np.all(order[1:] > order[:-1]):
        out = out.iloc[order]
    return out.reset_index(drop=True)


def compact_ints(values: np.ndarray) -> np.ndarray:
    """Integers as int32 when every value fits, else as int64 (the integer columns of a compact table)."""
    values = np.asarray(values)
    small = np.iinfo(np.int32)
    fits = not len(values) or (values.min() >= small.min and values.max() <= small.max)
    return values.astype(np.int32 if fits else np.int64, copy=False)


def invalid_reasons(df: pd.DataFrame | dict[str, np.ndarray], max_nodes: int | None) -> np.ndarray:
    """Return, per row, the index into :data:`INVALID_REASONS` of its first failed check, or -1 if valid.

    ``df`` is a job table, or a dict of its ``submit``, ``run`` and ``nodes`` columns as arrays.
    """
    nodes = np.asarray(df["nodes"])
    reason = np.full(len(nodes), -1, dtype=np.int8)
    checks = [
        np.asarray(df["submit"]) < 0,
        np.asarray(df["run"]) <= 0,
        nodes <= 0,
        (nodes > max_nodes) if max_nodes else None,
    ]
    for i, bad in reversed(list(enumerate(checks))):
        if bad is not None:
            reason[bad] = i
    return reason


def invalid_job_error(reason: int, job_id: object, nodes: int, max_nodes: int | None, path: str | Path,
                      line: int | None) -> InvalidJobError:
    """The error for one invalid job (``reason``: its index into :data:`INVALID_REASONS`), naming its line."""
    name = list(INVALID_REASONS)[reason]
    detail = name if name != "nodes > machine" else f"{nodes} nodes > {max_nodes}"
    return InvalidJobError(path, line, INVALID_REASONS[name], f"job {job_id}: {detail}")


def apply_invalid_policy(
    df: pd.DataFrame,
    max_nodes: int | None,
    on_invalid: OnInvalid,
    path: str | Path,
    lines: np.ndarray | None = None,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Drop invalid jobs with one warning that counts them by reason, or raise on the first one.

    Args:
        df: a job table (not yet sorted: row order must match ``lines``).
        max_nodes: the machine size; ``None`` skips the size check.
        on_invalid: ``"drop"`` (warn and drop) or ``"error"`` (raise :class:`InvalidJobError`).
        path: the source file, for messages.
        lines: the 1-based source line of each row, for messages.

    Returns:
        The valid rows and a dict ``reason -> count`` of the dropped ones.
    """
    if on_invalid not in ("drop", "error"):
        raise ValueError(f'on_invalid must be "drop" or "error", not {on_invalid!r}')
    reason = invalid_reasons(df, max_nodes)
    bad = reason >= 0
    if not bad.any():
        return df, {}
    names = list(INVALID_REASONS)
    if on_invalid == "error":
        first = int(np.flatnonzero(bad)[0])
        raise invalid_job_error(int(reason[first]), df["job_id"].iat[first], df["nodes"].iat[first], max_nodes, path,
                                int(lines[first]) if lines is not None else None)
    counts = {names[i]: int(c) for i, c in enumerate(np.bincount(reason[bad], minlength=len(names))) if c}
    warn_dropped(path, counts, len(df))
    return df.loc[~bad], counts


def warn_dropped(path: object, counts: dict[str, int], total: int) -> None:
    """The one warning a reader gives about the invalid jobs it dropped, with their counts by reason."""
    summary = ", ".join(f"{n} {r}" for r, n in counts.items())
    errors.warn(f"{path}: dropped {sum(counts.values())} invalid jobs of {total} ({summary}). "
                'Pass on_invalid="error" to stop at the first one.')


def validate(df: pd.DataFrame, max_nodes: int | None = None) -> None:
    """Raise ``ValueError`` unless ``df`` is a canonical job table (columns, dtypes) that :func:`check_valid` passes."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"job table lacks the columns {missing}; see hpcgym.jobs.COLUMNS")
    for col, dtype in COLUMNS.items():
        if col != "status" and str(df[col].dtype) != dtype and not (dtype == "int64" and df[col].dtype == np.int32):
            raise ValueError(f"column {col!r} has dtype {df[col].dtype}, expected {dtype}")
    check_valid(df, max_nodes)


#: The columns a simulation reads, each with its smallest valid value (submit times start at 0).
SIMULATED: dict[str, int] = {"submit": 0, "run": 1, "walltime": 1, "nodes": 1}


def problems(df: pd.DataFrame, max_nodes: int | None = None, machine: str = "the machine",
             need_sorted: bool = True) -> list[str]:
    """What keeps ``df`` from being simulated, one phrase per kind of problem (empty: nothing).

    The one rule of a simulable job table (the simulator, the environments and the workloads all check it here):
    the :data:`SIMULATED` columns are present, numbers and within their ranges, every job fits in ``max_nodes``
    nodes (when given) and, with ``need_sorted``, submit times do not decrease. Tables before :func:`finalize`
    (object or float columns, missing values) are read as numbers.
    """
    found = []
    for col, low in SIMULATED.items():
        if col not in df:
            found.append(f"no {col!r} column")
            continue
        values = _numbers(df[col])
        bad = int(np.isnan(values).sum() if values.dtype.kind == "f" else 0) + int((values < low).sum())
        if bad:
            found.append(f"{bad} jobs with a missing or {'negative' if low == 0 else 'non-positive'} {col}")
    if need_sorted and "submit" in df and np.any(np.diff(_numbers(df["submit"])) < 0):
        found.append("jobs not sorted by submit time (pass them through hpcgym.jobs.finalize)")
    if max_nodes is not None and "nodes" in df:
        nodes = _numbers(df["nodes"])
        too_big = int((nodes > max_nodes).sum())
        if too_big:
            found.append(f"{too_big} jobs need more than the {max_nodes} nodes of {machine} (the widest asks for "
                         f"{int(np.nanmax(nodes))} nodes but the machine has {max_nodes})")
    return found


def check_valid(df: pd.DataFrame, max_nodes: int | None = None, machine: str = "the machine",
                need_sorted: bool = True, what: str = "the job table") -> None:
    """Raise ``ValueError`` naming every problem :func:`problems` finds in ``df`` (``what`` names the table)."""
    found = problems(df, max_nodes, machine, need_sorted)
    if found:
        raise ValueError(f"{what} is not valid: {'; '.join(found)}. Drop invalid jobs first "
                         "(hpcgym.jobs.apply_invalid_policy; hpcgym.traces.read does it), or pick a bigger machine")


def _numbers(column: pd.Series) -> np.ndarray:
    """A column's values as numbers (what is not a number becomes NaN); integer columns as they are."""
    if column.dtype.kind in "iub":
        return column.to_numpy()
    return pd.to_numeric(column, errors="coerce").to_numpy(np.float64)


def empty() -> pd.DataFrame:
    """Return an empty canonical job table."""
    df = pd.DataFrame({c: pd.Series(dtype="int64" if d == "category" else d) for c, d in COLUMNS.items()})
    df["status"] = status_categorical([])
    return df


def offered_load(df: pd.DataFrame, machine_nodes: int) -> float:
    """Node-seconds of work submitted per node-second of the submit span (>1 means overloaded)."""
    if len(df) < 2:
        return float("nan")
    span = float(df["submit"].iat[-1] - df["submit"].iat[0])
    work = float(np.dot(df["nodes"].to_numpy(np.float64), df["run"].to_numpy(np.float64)))
    return work / (machine_nodes * span) if span > 0 else float("inf")
