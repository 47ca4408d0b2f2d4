"""Conversion of any trace hpcgym reads (a Slurm or PBS log, a CSV, an SWF file) to SWF, fit to be shared.

``python -m hpcgym.traces convert my.sacct --format slurm --out my.swf`` reads the log as :func:`hpcgym.traces.read`
does and writes its job table with :func:`hpcgym.traces.write_swf`; the SWF file reads back to the same table.

**Anonymisation** (on unless ``--keep-ids``): user and group ids become 1, 2, 3, ... in order of first appearance in
the submit-sorted table, the Parallel Workloads Archive's convention; an unknown id (-1) stays -1. The names never
reach the file. Queue (partition) names are not personal: the header lists them (``; Queue: 1 normal``).

What SWF cannot hold changes as :func:`~hpcgym.traces.write_swf` says: statuses ``timeout`` and ``killed`` become
0 (failed), and a job's processor count is kept where it maps back to its nodes on the machine (``nodes =
ceil(procs / cores_per_node)``), else written as nodes x cores per node. The header records the machine
(``MaxNodes``, ``MaxProcs``), the conversion, and the jobs dropped while reading, by reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from hpcgym.jobs import OnDuplicate, OnInvalid
from hpcgym.machines import Machine


def anonymize(df: pd.DataFrame) -> pd.DataFrame:
    """A copy with user and group ids renumbered 1, 2, ... in order of first appearance (-1 stays -1).

    The names a reader kept for them (``attrs["names"]``) are left out of the copy's attrs.
    """
    out = df.copy()
    for col in ("user", "group"):
        ids = out[col].to_numpy()
        known = ids >= 0
        codes, _ = pd.factorize(ids[known])
        ids = ids.copy()
        ids[known] = codes + 1
        out[col] = ids
    names = {k: v for k, v in df.attrs.get("names", {}).items() if k not in ("user", "group")}
    out.attrs = {**df.attrs, "names": names}
    return out


def _add(header: dict[str, Any], key: str, value: str) -> None:
    """Add a header line; a repeated key holds a list (as :func:`hpcgym.traces.swf.parse_header` reads it)."""
    if key not in header:
        header[key] = value
    else:
        prev = header[key]
        header[key] = [*prev, value] if isinstance(prev, list) else [prev, value]


def swf_header(df: pd.DataFrame, source: str | Path, fmt: str, anonymized: bool) -> dict[str, Any]:
    """The SWF header of a converted table: the source's own header, then the conversion's notes."""
    header = dict(df.attrs.get("header") or {})
    header.setdefault("Version", "2.2")
    _add(header, "Conversion", f"python -m hpcgym.traces convert, from the {fmt} trace {Path(source).name}")
    header["MaxJobs"] = header["MaxRecords"] = str(len(df))
    queues = df.attrs.get("names", {}).get("queue") or []
    if queues:
        header["MaxQueues"] = str(len(queues))
        header["Queues"] = "queue numbers are the partitions (queues) in order of first appearance"
        for i, queue in enumerate(queues, 1):
            _add(header, "Queue", f"{i} {queue}")
    if anonymized:
        _add(header, "Note", "user and group ids are anonymised: 1, 2, ... in order of first appearance")
    dropped = df.attrs.get("invalid") or {}
    if dropped:
        counts = ", ".join(f"{n} {reason}" for reason, n in dropped.items())
        _add(header, "Note", f"{sum(dropped.values())} jobs of the source were left out ({counts})")
    return header


def convert(
    source: str | Path,
    out: str | Path,
    format: str | None = None,
    machine: str | Machine | None = None,
    columns: str | Mapping[str, str] | None = None,
    anonymize_ids: bool = True,
    on_invalid: OnInvalid = "drop",
    round: str | Mapping[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
    on_duplicate: OnDuplicate = "warn",
) -> pd.DataFrame:
    """Read ``source`` (as :func:`hpcgym.traces.read`) and write it to ``out`` as SWF; return the table written.

    Args:
        source: the trace (a file, a directory of PBS logs, or a bundled name).
        out: the SWF file (``.swf``, or ``.swf.gz`` for gzip), written atomically.
        format: the source's format (:data:`hpcgym.traces.FORMATS`); default: detected.
        machine: the machine (see :func:`hpcgym.traces.read`); it becomes the header's ``MaxNodes``/``MaxProcs``.
        columns: for a generic CSV, its column mapping.
        anonymize_ids: renumber user and group ids (:func:`anonymize`).
        on_invalid: ``"drop"`` or ``"error"``, for the invalid jobs of the source.
        round: how the reader rounds fractions in fields that should be whole (see :func:`hpcgym.traces.read`).
        on_duplicate: ``"warn"`` or ``"error"``, for jobs whose id an earlier job has.

    Raises:
        ValueError: ``out`` is not named ``.swf``/``.swf.gz``, or is the source itself. The readers' errors.
    """
    from hpcgym import traces

    if ".swf" not in Path(out).name.lower():
        raise ValueError(f"{out}: the output is SWF: name it .swf (or .swf.gz to gzip it)")
    if Path(source).exists() and Path(out).exists() and Path(out).resolve() == Path(source).resolve():
        raise ValueError(f"{out}: the output would overwrite the trace being converted; name another file")
    df = traces.read(source, format=format, machine=machine, on_invalid=on_invalid, columns=columns, round=round,
                     on_duplicate=on_duplicate)
    table = anonymize(df) if anonymize_ids else df
    fmt = format or (traces.detect_format(source, columns) if Path(source).exists() else "bundled")
    traces.write_swf(table, out, header=swf_header(table, source, fmt, anonymize_ids))
    return table
