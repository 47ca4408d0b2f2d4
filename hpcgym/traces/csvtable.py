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
``DataFrame.to_csv`` reads back). Fractional seconds round up for ``run`` and ``walltime`` and down for submit times;
fractional node and processor counts (as in samples of generators that do not round, such as CTGAN's) raise unless
``round=`` says how to round them (:mod:`hpcgym.traces._io`), e.g. ``round="nodes=ceil"``.
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
from hpcgym.traces._io import (
    MAX_DURATION,
    MAX_EXACT,
    CsvSource,
    Rounding,
    csv_header,
    finish,
    integral,
    seconds,
    submit_column,
)

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
_STATUS_NAMES: dict[str, str] = {s: s for s in jobs.STATUSES} | {
    "pass": "completed", "killed": "killed", "timeout": "timeout", "node_fail": "failed", "out_of_memory": "failed",
    "preempted": "partial", "canceled": "cancelled",
}
_STATUS_EXPECTED = f"an SWF code {sorted(jobs.SWF_STATUS)} or one of {sorted(_STATUS_NAMES)}"


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


def _ids(src: CsvSource, col: str | None, default: np.ndarray | int) -> np.ndarray:
    """Integer ids; names that are not numbers get codes in order of first appearance; empty -> -1.

    The codes start at 0, or, in a column that mixes whole numbers with names, above its largest number, so that a
    numeric id keeps its value and no name takes it. The work is done on the column's distinct values (a
    categorical), not per row.
    """
    if col is None:
        return np.broadcast_to(np.asarray(default, np.int64), (src.rows,)).copy()
    if src.has_numbers(col):  # read as numbers by the fast path
        return np.nan_to_num(src.number(col, whole=True, optional=True), nan=-1).astype(np.int64)
    cat = src.text(col)
    cat = cat if isinstance(cat.dtype, pd.CategoricalDtype) else cat.astype("category")
    names = pd.Index(cat.cat.categories.astype(str)).str.strip()
    codes = cat.cat.codes.to_numpy()
    values = pd.to_numeric(names, errors="coerce").to_numpy(np.float64)
    empty = np.asarray(names == "")
    lookup = np.append(np.where(empty, np.nan, values), np.nan)  # the last entry: empty cells (code -1)
    if (integral(values) | empty).all():
        per_row = lookup[codes]
        if (np.abs(values[~empty]) > MAX_EXACT).any():
            src.number(col, whole=True, optional=True)  # raises naming the row
        return np.where(np.isnan(per_row), -1, per_row).astype(np.int64)
    numeric = integral(values) & ~empty
    if (np.abs(values[numeric]) > MAX_EXACT).any():
        src.number(col, whole=True, optional=True)  # raises naming the row
    base = int(values[numeric].max()) + 1 if numeric.any() else 0
    named = ~numeric & ~empty
    distinct, _ = pd.factorize(names.where(named))  # categories that differ only in blanks are one name
    sid = np.append(distinct, -1)[codes]
    found = sid >= 0
    uniq, first = np.unique(sid[found], return_index=True)
    rank = np.full(len(names) + 1, -1, np.int64)
    rank[uniq] = base + np.argsort(np.argsort(first))  # codes in order of first appearance, above the numbers
    kept = np.append(np.where(numeric, values, np.nan), np.nan)[codes]  # numeric ids as written
    return np.where(found, rank[np.maximum(sid, 0)], np.where(np.isnan(kept), -1, kept)).astype(np.int64)


def _status_name(text: str) -> str | None:
    """A status name from SWF codes, the canonical names, ALCF and Slurm words; empty -> ``unknown``."""
    text = text.strip()
    if not text:
        return "unknown"
    name = _STATUS_NAMES.get(text.split()[0].lower())
    if name is None:
        code = pd.to_numeric(text, errors="coerce")
        if code == code and float(code).is_integer():
            name = jobs.SWF_STATUS.get(int(code))
    return name


def _submit(src: CsvSource, cols: Mapping[str, str], rounding: Rounding):
    if "submit" in cols:
        col = cols["submit"]
        values = src.whole(col, "submit", rounding)
        return submit_column(values, src.value_text(col), col, rebase=False, path=src.path)
    col = cols["interarrival"]
    gaps = src.number(col, whole=False, limit=None)
    bad = (gaps < 0) | (gaps > MAX_DURATION)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(src.path, src.line(row), col, f"inter-arrival time {src.value_text(col)(row)!r} is "
                               f"out of range (0 to {MAX_DURATION} s); every later job's submit time depends on it")
    submit = rounding.whole(np.cumsum(gaps), "submit", col, src.line, src.value_text(col))
    return submit_column(submit, src.value_text(col), col, rebase=False, path=src.path)


def read_csv_table(
    path: str | Path,
    columns: str | Mapping[str, str] | None = None,
    machine: str | Machine | None = None,
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
    round: str | Mapping[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
    on_duplicate: jobs.OnDuplicate = "warn",
    compact: bool = False,
) -> pd.DataFrame:
    """Read a CSV job table of any layout through a column mapping (see the module docstring).

    Args:
        path: the CSV file, plain or gzipped.
        columns: canonical name -> the file's column, as a dict or ``"k=v,k=v"``; ``None`` maps the columns that
            carry canonical names.
        machine: the machine (catalog name, ``NODES[xCORES]`` spec or :class:`Machine`); required.
        on_invalid: ``"drop"`` or ``"error"``, as in :func:`hpcgym.jobs.apply_invalid_policy`.
        name: the trace name for ``attrs["name"]``.
        round: the rounding policy for fractional values (``"ceil"``, ``"nodes=ceil,run=nearest"``; see
            :mod:`hpcgym.traces._io`), counted in ``attrs["repaired"]``. Without it a fractional node or processor
            count raises, naming the option.
        on_duplicate: ``"warn"`` (default) or ``"error"`` for jobs whose id an earlier job has.
        compact: the canonical columns only, integers as int32 where they fit (see :mod:`hpcgym.jobs`).

    Raises:
        ValueError: no machine, or a malformed mapping or rounding policy.
        TraceFormatError: an empty file, an unsupported layout, a mapped column that is not in the file, or a
            malformed value, naming the line and column.
        InvalidJobError: with ``on_invalid="error"``, the first invalid job.
    """
    if machine is None:
        raise ValueError(f"{path}: a generic CSV trace needs a machine: pass machine= (--machine {SPEC_HELP})")
    mach = parse(machine)
    rounding = Rounding(round, path)
    header = csv_header(path)
    cols = parse_columns(columns) if columns is not None else identity_mapping(header)
    lacking = missing_keys(cols)
    if lacking:
        if columns is None:
            raise TraceFormatError(path, 1, None, unsupported_layout(header))
        raise ValueError(f"columns= must map {', '.join(lacking)}; expected e.g. {EXAMPLE}")
    for key, col in cols.items():
        if col not in header:
            raise TraceFormatError(path, 1, col, f"no such column (mapped from {key!r}); the header has: "
                                   f"{', '.join(header)}")
    text = ("user", "group", "queue", "status")
    src = CsvSource(path, numeric=tuple(c for k, c in cols.items() if k not in text),
                    text=tuple(cols[k] for k in text if k in cols))
    table, start, flags = table_columns(src, cols, mach, rounding)
    return finish(table, mach, on_invalid, path, name, start, src.line, flags=flags, on_duplicate=on_duplicate,
                  compact=compact, repaired=rounding.repaired, id_field=cols.get("job_id", "job_id"))


def table_columns(src: CsvSource, cols: Mapping[str, str], mach: Machine, rounding: Rounding):
    """(the reader's columns, the Unix start, the range flags) of a mapped CSV (or of an added format's table)."""
    submit, start, submit_flag = _submit(src, cols, rounding)
    run, run_flag = seconds(src.whole(cols["run"], "run", rounding), "run", cols["run"],
                            src.value_text(cols["run"]))
    if "walltime" in cols:
        col = cols["walltime"]
        wall, wall_flag = seconds(src.whole(col, "walltime", rounding, optional=True), "walltime", col,
                                  src.value_text(col))
    else:
        wall, wall_flag = np.full(src.rows, -1, np.int64), None
    procs = src.ints(cols["procs"], "procs", rounding) if "procs" in cols else np.full(src.rows, -1, np.int64)
    if "nodes" in cols:
        nodes = src.ints(cols["nodes"], "nodes", rounding)
    elif mach.procs_are_nodes:
        nodes = procs.copy()
    else:
        nodes = np.where(procs > 0, -(-procs // mach.cores_per_node), procs)
    table = {
        "job_id": _ids(src, cols.get("job_id"), np.arange(1, src.rows + 1)),
        "submit": submit,
        "run": run,
        "walltime": np.where(wall > 0, wall, run),
        "nodes": nodes,
        "procs": procs,
        "user": _ids(src, cols.get("user"), -1),
        "group": _ids(src, cols.get("group"), -1),
        "queue": _ids(src, cols.get("queue"), -1),
        "status": (src.status(cols["status"], _status_name, _STATUS_EXPECTED) if "status" in cols
                   else pd.Categorical.from_codes(np.full(src.rows, jobs.STATUSES.index("unknown"), np.int8),
                                                  categories=jobs.STATUSES)),
        "walltime_known": wall > 0,
    }
    if "wait" in cols:
        wait = src.whole(cols["wait"], "wait", rounding, optional=True)
        table["wait"] = np.nan_to_num(wait, nan=-1).astype(np.int64)
    return table, start, [f for f in (submit_flag, run_flag, wall_flag) if f is not None]


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
