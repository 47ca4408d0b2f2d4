"""Reader for generic CSV job tables: any layout, through a column mapping onto the canonical job table.

The mapping goes from canonical names (:data:`KEYS`) to the file's column names, as a dict or as the command-line
text ``k=v,k=v``::

    traces.read("jobs.csv", format="csv", machine="120x2",
                columns={"interarrival": "interval", "run": "run_time", "nodes": "node_num",
                         "walltime": "wall_time", "user": "user"})

Required: ``submit`` (seconds) or ``interarrival`` (seconds since the previous job; ``submit`` is their cumulative
sum), ``run``, and ``nodes`` or ``procs`` (then ``nodes = ceil(procs / cores_per_node)``, or ``procs`` where the
machine's traces count nodes). Optional, with defaults: ``walltime`` (missing, empty or <= 0: unknown, so
``walltime = run`` and ``walltime_known`` is False), ``job_id`` (the row number), ``user``, ``group``, ``queue``
(-1; names that are not numbers get codes in order of first appearance), ``status`` (``unknown``; SWF codes, the
canonical names, ALCF ``Pass``/``Failed``/``Killed`` and Slurm states are understood) and ``wait`` (-1).

Without a mapping, the columns that carry canonical names map to themselves (a job table written with
``DataFrame.to_csv`` reads back). Fractional seconds round up for ``run`` and ``walltime`` and down for submit times.
Submit times that are Unix times are rebased to the first (kept in ``attrs["unix_start_time"]``); relative ones
are kept as they are, as is the cumulative sum of inter-arrival times.
Values out of range become invalid jobs with their own reason, as in the ALCF reader (:mod:`hpcgym.traces._io`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import TraceFormatError
from hpcgym.machines import SPEC_HELP, Machine, parse
from hpcgym.traces._io import MAX_DURATION, csv_columns, duration_column, finish, numeric_column, submit_column

#: Canonical names a mapping may use, with what each means.
KEYS: dict[str, str] = {
    "submit": "submit time in seconds",
    "interarrival": "seconds since the previous job's submit",
    "run": "actual runtime in seconds",
    "nodes": "requested nodes",
    "procs": "requested processors",
    "walltime": "requested time in seconds",
    "job_id": "job number",
    "user": "user id or name",
    "group": "group id or name",
    "queue": "queue id or name",
    "status": "job status",
    "wait": "wait time in seconds",
}
EXAMPLE = "submit=SUBMIT_COL,run=RUN_COL,nodes=NODES_COL (or interarrival=, procs=)"
_STATUS_NAMES = {s: s for s in jobs.STATUSES} | {
    "pass": "completed", "killed": "killed", "timeout": "timeout", "node_fail": "failed", "out_of_memory": "failed",
    "preempted": "partial", "canceled": "cancelled",
}


def parse_columns(spec: str | Mapping[str, str] | None) -> dict[str, str]:
    """A column mapping from a dict or from ``"k=v,k=v"`` text, checked against :data:`KEYS`.

    Raises:
        ValueError: malformed text, an unknown canonical name (with the closest ones), or both ``submit`` and
            ``interarrival``.
    """
    if spec is None:
        return {}
    if isinstance(spec, str):
        pairs = [p for p in (part.strip() for part in spec.split(",")) if p]
        bad = [p for p in pairs if "=" not in p or not p.split("=", 1)[0].strip() or not p.split("=", 1)[1].strip()]
        if bad:
            raise ValueError(f"columns {spec!r}: {bad[0]!r} is not KEY=COLUMN; expected e.g. {EXAMPLE}")
        spec = {k.strip(): v.strip() for k, v in (p.split("=", 1) for p in pairs)}
    mapping = {str(k): str(v) for k, v in dict(spec).items()}
    for key in mapping:
        if key not in KEYS:
            close = difflib.get_close_matches(key, list(KEYS), n=2, cutoff=0.5)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(f"columns: unknown key {key!r}.{hint} Keys: {', '.join(KEYS)}")
    if "submit" in mapping and "interarrival" in mapping:
        raise ValueError("columns: map either submit or interarrival, not both")
    return mapping


def missing_keys(mapping: Mapping[str, str]) -> list[str]:
    """The required canonical names a mapping lacks (``submit|interarrival``, ``run``, ``nodes|procs``)."""
    need = [("submit", "interarrival"), ("run",), ("nodes", "procs")]
    return ["|".join(alts) for alts in need if not any(a in mapping for a in alts)]


def identity_mapping(header: list[str]) -> dict[str, str]:
    """The mapping of the header's columns that already carry canonical names."""
    return {c: c for c in header if c in KEYS}


def _ids(path: str | Path, raw: pd.DataFrame, col: str | None, default: np.ndarray | int) -> np.ndarray:
    """Integer ids; names that are not numbers get codes 0, 1, ... in order of first appearance; empty -> -1."""
    if col is None:
        return np.broadcast_to(np.asarray(default, np.int64), (len(raw),)).copy()
    text = raw[col].str.strip()
    values = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
    empty = (text == "").to_numpy()
    if ((np.isfinite(values) & (np.floor(values) == values)) | empty).all():
        numeric_column(path, raw, col, whole=True, optional=True)  # range check
        return np.where(empty, -1, np.nan_to_num(values, nan=-1)).astype(np.int64)
    codes, _ = pd.factorize(text.where(~empty))
    return codes.astype(np.int64)


def _status(path: str | Path, raw: pd.DataFrame, col: str | None) -> pd.Categorical:
    if col is None:
        return jobs.status_categorical(np.full(len(raw), "unknown", dtype=object))
    text = raw[col].str.strip()
    words = text.str.split().str[0].fillna("").str.lower()
    mapped = words.map(_STATUS_NAMES)
    codes = pd.to_numeric(text, errors="coerce")
    by_code = codes.map(lambda c: jobs.SWF_STATUS.get(int(c)) if c == c and float(c).is_integer() else None)
    mapped = mapped.fillna(by_code).where(text != "", "unknown")
    if mapped.isna().any():
        row = int(np.flatnonzero(mapped.isna().to_numpy())[0])
        raise TraceFormatError(path, row + 2, col, f"unknown status {text.iat[row]!r}; expected an SWF code "
                               f"{sorted(jobs.SWF_STATUS)} or one of {sorted(_STATUS_NAMES)}")
    return jobs.status_categorical(mapped.to_numpy())


def _submit(path: str | Path, raw: pd.DataFrame, cols: Mapping[str, str]):
    if "submit" in cols:
        col = cols["submit"]
        values = np.floor(numeric_column(path, raw, col, whole=False, limit=None))
        return submit_column(values, raw[col].to_numpy(), col, rebase=False)
    col = cols["interarrival"]
    gaps = numeric_column(path, raw, col, whole=False, limit=None)
    bad = (gaps < 0) | (gaps > MAX_DURATION)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(path, row + 2, col, f"inter-arrival time {raw[col].iat[row]!r} is out of range "
                               f"(0 to {MAX_DURATION} s); every later job's submit time depends on it")
    submit = np.floor(np.cumsum(gaps))
    return submit_column(submit, raw[col].to_numpy(), col, rebase=False)


def read_csv_table(
    path: str | Path,
    columns: str | Mapping[str, str] | None = None,
    machine: str | Machine | None = None,
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
) -> pd.DataFrame:
    """Read a CSV job table of any layout through a column mapping (see the module docstring).

    Args:
        path: the CSV file, plain or gzipped.
        columns: canonical name -> the file's column, as a dict or ``"k=v,k=v"``; ``None`` maps the columns that
            carry canonical names.
        machine: the machine (catalog name, ``NODES[xCORES]`` spec or :class:`Machine`); required.
        on_invalid: ``"drop"`` or ``"error"``, as in :func:`hpcgym.jobs.apply_invalid_policy`.
        name: the trace name for ``attrs["name"]``.

    Raises:
        ValueError: no machine, or a malformed mapping.
        TraceFormatError: an empty file, an unsupported layout, a mapped column that is not in the file, or a
            malformed value, naming the line and column.
        InvalidJobError: with ``on_invalid="error"``, the first invalid job.
    """
    if machine is None:
        raise ValueError(f"{path}: a generic CSV trace needs a machine: pass machine= (--machine {SPEC_HELP})")
    mach = parse(machine)
    raw = csv_columns(path, ())
    cols = parse_columns(columns) if columns is not None else identity_mapping(list(raw.columns))
    lacking = missing_keys(cols)
    if lacking:
        if columns is None:
            raise TraceFormatError(path, 1, None, unsupported_layout(list(raw.columns)))
        raise ValueError(f"columns= must map {', '.join(lacking)}; expected e.g. {EXAMPLE}")
    for key, col in cols.items():
        if col not in raw.columns:
            raise TraceFormatError(path, 1, col, f"no such column (mapped from {key!r}); the header has: "
                                   f"{', '.join(map(str, raw.columns))}")
    submit, start, submit_flag = _submit(path, raw, cols)
    run, run_flag = duration_column(path, raw, cols["run"], "run out of range")
    if "walltime" in cols:
        wall, wall_flag = duration_column(path, raw, cols["walltime"], "walltime out of range", optional=True)
    else:
        wall, wall_flag = np.full(len(raw), -1, np.int64), None
    procs = (numeric_column(path, raw, cols["procs"]).astype(np.int64) if "procs" in cols
             else np.full(len(raw), -1, np.int64))
    if "nodes" in cols:
        nodes = numeric_column(path, raw, cols["nodes"]).astype(np.int64)
    elif mach.procs_are_nodes:
        nodes = procs.copy()
    else:
        nodes = np.where(procs > 0, -(-procs // mach.cores_per_node), procs)
    df = pd.DataFrame({
        "job_id": _ids(path, raw, cols.get("job_id"), np.arange(1, len(raw) + 1)),
        "submit": submit,
        "run": run,
        "walltime": np.where(wall > 0, wall, run),
        "nodes": nodes,
        "procs": procs,
        "user": _ids(path, raw, cols.get("user"), -1),
        "group": _ids(path, raw, cols.get("group"), -1),
        "queue": _ids(path, raw, cols.get("queue"), -1),
        "status": _status(path, raw, cols.get("status")),
        "walltime_known": wall > 0,
    })
    if "wait" in cols:
        df["wait"] = np.nan_to_num(numeric_column(path, raw, cols["wait"], optional=True), nan=-1).astype(np.int64)
    flags = [f for f in (submit_flag, run_flag, wall_flag) if f is not None]
    return finish(df, mach, on_invalid, path, name, start, np.arange(len(df), dtype=np.int64) + 2, flags=flags)


def unsupported_layout(header: list[str]) -> str:
    """The message for a CSV that is neither an ALCF, a LANL Mustang nor a canonical job table."""
    from hpcgym.traces import alcf, mustang

    hint = "neither an ALCF nor a LANL Mustang CSV"
    for label, required in (("an ALCF CSV", alcf.REQUIRED), ("a LANL Mustang CSV", mustang.REQUIRED)):
        lacking = [c for c in required if c not in header]
        if len(lacking) <= len(required) // 2:
            hint = f"{label} would also need {', '.join(lacking)}"
    return (f"unsupported layout (columns: {', '.join(header)}); {hint}. Map the columns onto the job table with "
            f"columns= / --columns, e.g. --columns {EXAMPLE}")
