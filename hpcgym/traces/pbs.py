"""Reader for PBS Professional (OpenPBS) and Torque accounting logs: their ``E`` (job ended) records.

PBS writes one log a day (``$PBS_HOME/server_priv/accounting/YYYYMMDD``) of lines
``MM/DD/YYYY HH:MM:SS;TYPE;JOB ID;ATTRIBUTES``, the attributes being space-separated ``key=value`` pairs::

    03/01/2024 12:30:05;E;1234.pbs01;user=alice group=phys queue=workq ctime=1709293800 qtime=1709293800
    etime=1709293800 start=1709294400 exec_host=n01/0*8+n02/0*8 Resource_List.ncpus=16 Resource_List.nodect=2
    Resource_List.walltime=02:00:00 session=4242 end=1709296205 Exit_status=0 resources_used.walltime=00:30:05

(one line in the log). Pass one file or the directory of daily files, read in name order (hidden files skipped);
messages name the file and line. Only ``E`` records are read: a job's other records (Q, S, D, A, R, ...) repeat
what its ``E`` record says. How the records become the job table:

- **Ids.** ``job_id`` is the number before the server name (``1234.pbs01`` -> 1234). An array's subjobs
  (``1234[5].pbs01``) are jobs without a number of their own: they are numbered after the log's largest job number,
  in the order they appear. The array's own record (``1234[].pbs01``) sums its subjobs up: skipped, and counted in
  ``attrs["array_records_skipped"]``.
- **Times** are Unix seconds: ``submit`` is ``ctime`` (when the job was created; else ``qtime``), from the first;
  ``wait`` is ``start - ctime``; ``run`` is ``resources_used.walltime`` (``[hours:]minutes:seconds``, rounded up),
  else ``end - start``.
- **Walltime** is ``Resource_List.walltime``; without it, unknown (``walltime = run``, ``walltime_known`` False).
- **Size.** ``nodes`` is ``Resource_List.nodect``, else the distinct hosts of ``exec_host``. ``procs`` is
  ``Resource_List.ncpus``, else N x M from Torque's ``Resource_List.nodes=N:ppn=M``, else -1.
- **Names.** ``user``, ``group`` and ``queue`` are numbered 1, 2, ... in order of first appearance (-1 when absent);
  ``attrs["names"]`` keeps the names.
- **Status.** ``Exit_status`` 0 -> completed, any other value -> failed (a job killed at its walltime or deleted
  while it ran has a non-zero code too, and the codes differ between PBS versions), none -> unknown.
- **Jobs that never ran** (no ``start``, or ``start=0``) are invalid with their own reason, ``"never started"``,
  checked before the usual ones.
- **Machine.** ``machine=``, else one of as many nodes as the largest ``Resource_List.nodect`` among the jobs that
  ran, with a warning.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import TraceFormatError
from hpcgym.machines import Machine
from hpcgym.traces._accounting import (
    durations,
    finish_log,
    raise_at,
    read_log,
    whole_numbers,
    whole_seconds,
)
from hpcgym.traces._io import MAX_DURATION, Flag, Rounding, submit_column

_RECORD = re.compile(rb"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Z];")
_ID = r"^(\d+)(?:\[(\d*)\])?(?:\..*)?$"
_FORM = "a PBS accounting record (MM/DD/YYYY HH:MM:SS;TYPE;JOB ID;ATTRIBUTES)"
_KEYS = ("user", "group", "queue", "ctime", "qtime", "start", "end", "Exit_status", "exec_host",
         "Resource_List.nodect", "Resource_List.ncpus", "Resource_List.nodes", "Resource_List.walltime",
         "resources_used.walltime")


def looks_like(line: bytes) -> bool:
    """Whether a file's first line is a PBS accounting record."""
    return _RECORD.match(line) is not None


def _files(path: str | Path) -> list[Path]:
    """The log files: the file itself, or a directory's files in name order."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise TraceFormatError(path, None, None, "the directory holds no files; expected PBS accounting logs (one "
                               "a day, named YYYYMMDD, from $PBS_HOME/server_priv/accounting)")
    return files


def _end_records(number: int, path: Path) -> pd.DataFrame:
    """One file's ``E`` records: file number, line, job id and attributes (checking every line's form)."""
    text = read_log(path, _FORM).decode("utf-8", errors="replace")
    lines = pd.Series(text.split("\n"))
    lines = lines[lines.str.strip() != ""]
    bad = ~lines.str.match(_RECORD.pattern.decode()).to_numpy(bool)
    raise_at(lambda row: (str(path), int(lines.index[row]) + 1), bad, "record", lines, _FORM)
    ended = lines[lines.str.slice(20, 21) == "E"]  # after "MM/DD/YYYY HH:MM:SS;"
    rest = [line[22:].partition(";") for line in ended]
    return pd.DataFrame({"file": number, "line": ended.index.to_numpy() + 1,
                         "id": pd.Series([r[0].strip() for r in rest], dtype=object),
                         "text": pd.Series([" " + r[2] for r in rest], dtype=object)})


def _attributes(text: pd.Series) -> dict[str, pd.Series]:
    """Each of the wanted keys' value per record, ``""`` where the record lacks it.

    ``str.partition`` on each record finds a ``" key="`` four times faster than a regular expression does.
    """
    records = text.to_numpy()
    return {key: pd.Series([r.partition(f" {key}=")[2].partition(" ")[0] for r in records], dtype=object)
            for key in _KEYS}


def _job_ids(locate, ids: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(job numbers, array-summary mask): subjobs numbered after the largest number, in order of appearance."""
    parts = ids.str.extract(_ID)
    raise_at(locate, parts[0].isna().to_numpy(), "job id", ids, "a PBS job id (1234.server or 1234[5].server)")
    base = parts[0].astype(np.int64).to_numpy()
    sub = parts[1].notna().to_numpy()
    summary = sub & (parts[1] == "").to_numpy()
    subjob = sub & ~summary
    numbers = base.copy()
    numbers[subjob] = (base.max() if len(base) else 0) + 1 + np.arange(int(subjob.sum()))
    return numbers, summary


def _epoch(locate, text: pd.Series, field: str, check: np.ndarray) -> np.ndarray:
    """Unix seconds as float; NaN where absent or 0 (PBS's "not yet")."""
    values = whole_numbers(locate, text, field, check=check).astype(np.float64)
    values[values <= 0] = np.nan
    return values


def _seconds(locate, text: pd.Series, field: str, check: np.ndarray, rounding: Rounding) -> tuple[np.ndarray, Flag]:
    """Durations in whole seconds (-1 where absent), and the :class:`Flag` of those out of range.

    Fractions round as ``rounding`` says (up unless the policy names ``run`` or ``walltime``).
    """
    secs = durations(text)
    bad = np.isnan(secs) & (text != "").to_numpy() & check
    raise_at(locate, bad, field, text, "a duration (hours:minutes:seconds)")
    what = "run" if field.startswith("resources_used") else "walltime"
    values, over = whole_seconds(secs, rounding, what)
    return values, Flag(f"{what} out of range", field, over, text.to_numpy(), f"at most {MAX_DURATION} s")


def _size(locate, attrs: dict[str, pd.Series], check: np.ndarray, rounding: Rounding) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (nodect, else exec_host's distinct hosts) and processors (ncpus, else Torque's nodes=N:ppn=M)."""
    nodes = whole_numbers(locate, attrs["Resource_List.nodect"], "Resource_List.nodect", check=check,
                          rounding=rounding, key="nodes")
    hosts = attrs["exec_host"][(nodes < 0) & (attrs["exec_host"] != "").to_numpy()]
    if len(hosts):
        nodes[hosts.index] = hosts.str.split("+").map(lambda parts: len({p.split("/")[0] for p in parts}))
    raise_at(locate, (nodes < 0) & check, "Resource_List.nodect", attrs["Resource_List.nodect"],
             "a node count (and the record has no exec_host to count them from)")
    procs = whole_numbers(locate, attrs["Resource_List.ncpus"], "Resource_List.ncpus", check=check,
                          rounding=rounding, key="procs")
    ppn = attrs["Resource_List.nodes"].str.extract(r"^(\d+):ppn=(\d+)$").astype(np.float64).to_numpy()
    torque = (procs < 0) & np.isfinite(ppn).all(axis=1)
    procs[torque] = (ppn[torque, 0] * ppn[torque, 1]).astype(np.int64)
    return nodes, procs


def _status(locate, text: pd.Series) -> pd.Categorical:
    codes = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
    raise_at(locate, np.isnan(codes) & (text != "").to_numpy(), "Exit_status", text, "an exit status (a number)")
    named = np.where(np.isnan(codes), "unknown", np.where(codes == 0, "completed", "failed"))
    return jobs.status_categorical(named)


def read_pbs(
    path: str | Path,
    machine: str | Machine | None = None,
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
    round: str | dict[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
    on_duplicate: jobs.OnDuplicate = "warn",
    compact: bool = False,
) -> pd.DataFrame:
    """Read a PBS Pro / Torque accounting log (a file, or a directory of daily files) into the canonical job table.

    Args:
        path: a log file (plain or gzipped) or a directory of them.
        machine: a catalog name, a ``NODES[xCORES]`` spec or a :class:`~hpcgym.machines.Machine`; default: as many
            nodes as the largest ``Resource_List.nodect`` of the jobs that ran (with a warning).
        on_invalid: ``"drop"`` (default: one warning counts the dropped jobs by reason) or ``"error"`` (raise
            :class:`~hpcgym.errors.InvalidJobError` at the first, naming its file, line and field).
        name: the trace name for ``attrs["name"]``.
        round: how to round fractions in fields that should be whole (``"ceil"``, or e.g. ``"nodes=ceil"``; fields
            ``run`` and ``walltime``, which round up by default, ``nodes`` and ``procs``, which must be whole
            without it); see :mod:`hpcgym.traces._io`. What it changes is counted in ``attrs["repaired"]``.
        on_duplicate: ``"warn"`` (default: keep jobs whose id an earlier job has, with one warning naming the
            first one's file and line) or ``"error"``.
        compact: the canonical columns only, integers as int32 where they fit (see :mod:`hpcgym.jobs`).

    Raises:
        TraceFormatError: an empty or corrupt file, an empty directory, a line that is not an accounting record, or
            an ``E`` record with a value that does not parse or without a node count, naming the file, the line and
            the field.
        InvalidJobError: with ``on_invalid="error"``, the first invalid job.
    """
    files = _files(path)
    rounding = Rounding(round, path)
    rec = pd.concat([_end_records(i, f) for i, f in enumerate(files)], ignore_index=True)

    def locate(row: int) -> tuple[str, int]:  # reads ``rec`` as it is when called (rows drop out below)
        return str(files[rec["file"].iat[row]]), int(rec["line"].iat[row])

    job_id, summary = _job_ids(locate, rec["id"])
    rec, job_id = rec.loc[~summary].reset_index(drop=True), job_id[~summary]
    attrs = _attributes(rec["text"])
    start = _epoch(locate, attrs["start"], "start", np.ones(len(rec), bool))
    end = _epoch(locate, attrs["end"], "end", np.isfinite(start))
    ran = np.isfinite(start)
    created = np.where(attrs["ctime"] != "", attrs["ctime"], attrs["qtime"])
    submit = _epoch(locate, pd.Series(created, dtype=object), "ctime", np.ones(len(rec), bool))
    used, run_flag = _seconds(locate, attrs["resources_used.walltime"], "resources_used.walltime", ran, rounding)
    run = np.where(attrs["resources_used.walltime"] != "", used, np.nan_to_num(end - start, nan=-1)).astype(np.int64)
    wall, wall_flag = _seconds(locate, attrs["Resource_List.walltime"], "Resource_List.walltime", ran, rounding)
    nodes, procs = _size(locate, attrs, ran, rounding)
    rel, unix_start, submit_flag = submit_column(np.nan_to_num(submit, nan=-1), created, "ctime", path=path)
    values = {"job_id": job_id, "submit": rel, "run": run, "walltime": wall, "nodes": nodes, "procs": procs,
              "status": _status(locate, attrs["Exit_status"]),
              "wait": np.where(ran & np.isfinite(submit), start - submit, -1).astype(np.int64)}
    flags = [Flag("never started", "start", ~ran, attrs["start"].to_numpy(), "a start time (the job never ran)"),
             submit_flag, run_flag, wall_flag]
    out = finish_log(path, values, {k: attrs[k] for k in ("user", "group", "queue")}, machine=machine,
                     field="Resource_List.nodect", ran=ran, flags=flags, unix_start=unix_start, locate=locate,
                     on_invalid=on_invalid, name=name, id_field="job id", rounding=rounding,
                     on_duplicate=on_duplicate, compact=compact)
    out.attrs["array_records_skipped"] = int(summary.sum())
    return out
