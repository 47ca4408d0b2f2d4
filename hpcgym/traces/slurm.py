r"""Reader for Slurm accounting: the output of ``sacct --parsable2`` (``-P``), pipe-separated under one header line.

Export a month of a cluster's jobs with::

    TZ=UTC sacct -a -X -P -S 2024-03-01 -E 2024-04-01 \
        --format JobIDRaw,User,Group,Partition,Submit,Start,End,Elapsed,Timelimit,NNodes,NCPUS,State > my.sacct

Fields are found by their header names (in any order and case; others, such as ``Eligible`` or ``JobName``, are
ignored). ``JobIDRaw`` (or ``JobID``), ``Submit``, ``Start``, ``End`` and ``NNodes`` are required. ``--parsable``
(``-p``, a ``|`` at each line's end) reads too; sacct's fixed-width output and ``--noheader`` do not.

How the log becomes the job table:

- **Steps and arrays.** Job steps (``123.batch``, ``123.extern``, ``123.0``) are parts of a job, not jobs: they
  are skipped and counted in ``attrs["steps_skipped"]`` (``-X`` leaves them out). Array tasks are jobs: ``JobIDRaw``
  gives each task its own number. A file with only ``JobID`` reads while its ids are plain numbers; an array task
  there (``123_4``) raises, asking for ``JobIDRaw``.
- **Times.** ``Submit``, ``Start`` and ``End`` are ``YYYY-MM-DDTHH:MM:SS`` as sacct prints them, or Unix seconds
  (``SLURM_TIME_FORMAT=%s``); ``Unknown``, ``None`` and empty are unknown. sacct prints local time, read here as
  UTC: export with ``TZ=UTC`` so that a daylight-saving change does not shift submit times by an hour (runtimes
  come from ``Elapsed`` and are exact either way). ``submit`` counts seconds from the first submit, which is kept
  in ``attrs["unix_start_time"]``; ``wait`` is ``Start - Submit``.
- **Runtime** is ``Elapsed`` (``[days-]hours:minutes:seconds``, e.g. ``1-02:03:04``), else ``End - Start``.
- **Walltime** is ``Timelimit``. ``UNLIMITED`` and ``Partition_Limit`` (the job set no limit of its own), an empty
  cell or no ``Timelimit`` field are unknown, as every reader treats a missing estimate: ``walltime = run``, and
  ``walltime_known`` is False.
- **Size.** ``nodes`` is ``NNodes`` (the allocated nodes of a job that ran), ``procs`` is ``NCPUS`` (-1 without it).
- **Names.** ``User``, ``Group`` and ``Partition`` (the queue) are numbered 1, 2, ... in order of first appearance
  (-1 when empty); ``attrs["names"]`` keeps the names (``names["user"][code - 1]``).
- **Status** is the first word of ``State`` (``CANCELLED by 1234`` is CANCELLED): COMPLETED -> completed,
  CANCELLED -> cancelled, TIMEOUT -> timeout, FAILED, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE -> failed,
  PREEMPTED, REQUEUED -> partial; the states of jobs that had not ended (PENDING, RUNNING, ...) and any other word
  -> unknown (other words are counted in ``attrs["unknown_states"]``, with a warning).
- **Jobs that never ran** are invalid jobs with reasons of their own, checked before the usual ones (and dropped
  or raised as ``on_invalid`` says): ``"cancelled before start"`` (CANCELLED with no start or no elapsed time: Slurm
  records a job cancelled while pending so), ``"never started"`` (no start: pending or held when the log was
  taken) and ``"still running"`` (a start but no end).
- **Machine.** ``machine=``, else one of as many nodes as the largest ``NNodes`` among the jobs that ran (with a
  warning: a month's log seldom fills the whole machine).
"""

from __future__ import annotations

import io
import re
from csv import QUOTE_NONE
from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import TraceFormatError, warn
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

#: Fields a file must have (besides ``JobIDRaw`` or ``JobID``).
REQUIRED = ("Submit", "Start", "End", "NNodes")
#: Slurm state -> canonical status (other states read as "unknown").
STATES = {"COMPLETED": "completed", "CANCELLED": "cancelled", "TIMEOUT": "timeout", "FAILED": "failed",
          "NODE_FAIL": "failed", "OUT_OF_MEMORY": "failed", "BOOT_FAIL": "failed", "DEADLINE": "failed",
          "PREEMPTED": "partial", "REQUEUED": "partial"}
#: States of jobs that had not ended when the log was taken: "unknown", and no warning.
UNFINISHED = ("PENDING", "RUNNING", "SUSPENDED", "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "REVOKED")
_NO_LIMIT = ("unlimited", "partition_limit")
_UNSET = ("", "unknown", "none")
_EXPORT = "sacct -P --format JobIDRaw,User,Group,Partition,Submit,Start,End,Elapsed,Timelimit,NNodes,NCPUS,State"


def looks_like(line: bytes) -> bool:
    """Whether a file's first line is a ``sacct --parsable2`` header."""
    return b"|" in line and re.search(rb"(?i)(^|\|)jobid(raw)?(\||$)", line) is not None


def _line_bounds(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Start and end offsets of every line (a final newline opens no line)."""
    arr = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(arr == ord("\n"))
    starts, stops = np.concatenate(([0], ends + 1)), np.concatenate((ends, [len(arr)]))
    if starts[-1] == len(arr):
        starts, stops = starts[:-1], stops[:-1]
    return starts, stops


def _check_fields(path: str | Path, data: bytes, names: list[str], starts, stops, numbers: np.ndarray) -> None:
    """Raise at the first data line whose field count differs from the header's (a truncated line, a stray '|')."""
    bars = np.flatnonzero(np.frombuffer(data, np.uint8) == ord("|"))
    counts = np.searchsorted(bars, stops) - np.searchsorted(bars, starts) + 1
    bad = np.flatnonzero(counts != len(names))
    if not bad.size:
        return
    found, line = int(counts[bad[0]]), int(numbers[bad[0]])
    if found < len(names):
        raise TraceFormatError(path, line, names[found], f"expected {len(names)} fields, found {found}: the line "
                               "is cut short (a truncated file?)")
    raise TraceFormatError(path, line, None, f"expected {len(names)} fields, found {found}: a value holds '|', "
                           "which sacct does not escape; leave such fields (JobName, Comment) out of --format")


def _table(path: str | Path) -> tuple[pd.DataFrame, np.ndarray]:
    """The file's fields as strings, and each row's 1-based line number."""
    data = read_log(path, "sacct --parsable2 output: a header line of field names, then one line per job")
    starts, stops = _line_bounds(data)
    filled = np.flatnonzero(stops > starts)
    head = data[starts[filled[0]]:stops[filled[0]]]
    if b"|" not in head:
        raise TraceFormatError(path, int(filled[0]) + 1, None, "not sacct --parsable2 output: the first line has no "
                               f"'|'. Export with sacct -P (--parsable2) and a header (no -n), e.g. {_EXPORT}")
    names = [n.strip() for n in head.decode(errors="replace").split("|")]
    names = [n if n not in names[:i] else f"{n}.{i}" for i, n in enumerate(names)]  # read_csv refuses repeats
    rows = filled[1:]
    _check_fields(path, data, names, starts[rows], stops[rows], rows + 1)
    raw = pd.read_csv(io.BytesIO(data), sep="|", dtype=str, keep_default_na=False, quoting=QUOTE_NONE,
                      engine="c", names=names, header=None, skiprows=int(filled[0]) + 1)
    if names[-1] == "" and (raw.iloc[:, -1] == "").all():  # --parsable ends each line with '|'
        raw = raw.iloc[:, :-1]
    return raw, rows + 1


def _columns(path: str | Path, raw: pd.DataFrame) -> dict[str, str]:
    """Lower-case field name -> the header's spelling; raises naming the required fields the header lacks."""
    cols = {str(c).strip().lower(): str(c) for c in raw.columns}
    lacking = [f for f in REQUIRED if f.lower() not in cols]
    if "jobidraw" not in cols and "jobid" not in cols:
        lacking.insert(0, "JobIDRaw")
    if lacking:
        raise TraceFormatError(path, 1, ",".join(lacking), f"missing from the header ({', '.join(raw.columns)}); "
                               f"export them, e.g. {_EXPORT}")
    return cols


def _times(locate, text: pd.Series, field: str) -> np.ndarray:
    """Timestamps -> float Unix seconds (sacct's local time read as UTC); NaN where unknown."""
    secs = _iso_seconds(text)
    rest = np.isnan(secs)  # Unknown, Unix seconds, blanks around a time, or a typo
    if rest.any():
        stripped = text[rest].str.strip()
        epoch = pd.to_numeric(stripped, errors="coerce").to_numpy(np.float64)
        secs[rest] = np.where(np.isfinite(epoch), epoch, _iso_seconds(stripped))
        unset = np.zeros(len(text), bool)
        unset[rest] = stripped.str.lower().isin(_UNSET).to_numpy()
        raise_at(locate, np.isnan(secs) & ~unset, field, text, "a time (YYYY-MM-DDTHH:MM:SS, Unix seconds or Unknown)")
    return secs


def _iso_seconds(text: pd.Series) -> np.ndarray:
    """``YYYY-MM-DDTHH:MM:SS`` -> float seconds since the epoch (read as UTC); NaN where the text is not one."""
    parsed = pd.to_datetime(text, format="%Y-%m-%dT%H:%M:%S", errors="coerce")
    secs = parsed.to_numpy("datetime64[s]").astype(np.int64).astype(np.float64)
    secs[parsed.isna().to_numpy()] = np.nan
    return secs


def _job_ids(locate, text: pd.Series, field: str) -> np.ndarray:
    """Job numbers; an array task or a heterogeneous component in ``JobID`` raises, asking for ``JobIDRaw``."""
    stripped = text.str.strip()
    split = stripped.str.fullmatch(r"\d+[_+].*").to_numpy()
    if field.lower() == "jobid" and split.any():
        raise_at(locate, split, field, text, "a job number: an array task (123_4) or a heterogeneous job's part "
                 "(123+1) has its own only in JobIDRaw; export JobIDRaw")
    ids = whole_numbers(locate, text, field)
    raise_at(locate, ids < 0, field, text, "a job number")
    return ids


def _status(state: pd.Series) -> tuple[pd.Categorical, dict[str, int]]:
    """Canonical statuses from the states' first words, and the counts of the words not understood."""
    status = state.map(STATES)
    odd = status.isna() & ~state.isin(UNFINISHED) & (state != "")
    counts = {str(k): int(v) for k, v in state[odd].value_counts().items()}
    return jobs.status_categorical(status.fillna("unknown").to_numpy()), counts


def _walltime(locate, raw: pd.DataFrame, cols: dict[str, str], check: np.ndarray,
              rounding: Rounding) -> tuple[np.ndarray, Flag | None]:
    """Timelimit in whole seconds (-1 unknown: UNLIMITED, Partition_Limit, empty), and its out-of-range flag."""
    if "timelimit" not in cols:
        return np.full(len(raw), -1, np.int64), None
    text = raw[cols["timelimit"]]
    secs = durations(text)
    stripped = text.str.strip()
    unset = (stripped.str.lower().isin(_NO_LIMIT) | (stripped == "")).to_numpy()
    raise_at(locate, np.isnan(secs) & ~unset & check, cols["timelimit"], text,
             "a time limit ([days-]hours:minutes:seconds, UNLIMITED or Partition_Limit)")
    wall, over = whole_seconds(secs, rounding, "walltime")
    flag = Flag("walltime out of range", cols["timelimit"], over, text.to_numpy(), f"at most {MAX_DURATION} s")
    return wall, flag


def _runtime(locate, raw: pd.DataFrame, cols: dict[str, str], start, end, check,
             rounding: Rounding) -> tuple[np.ndarray, Flag]:
    """Elapsed (else End - Start) in whole seconds, rounded up; -1 unknown; and its out-of-range flag."""
    if "elapsed" in cols:
        text = raw[cols["elapsed"]]
        secs = durations(text)
        raise_at(locate, np.isnan(secs) & (text.str.strip() != "").to_numpy() & check, cols["elapsed"], text,
                 "a duration ([days-]hours:minutes:seconds)")
        field, shown = cols["elapsed"], text.to_numpy()
    else:
        secs, field, shown = end - start, cols["end"], raw[cols["end"]].to_numpy()
    run, over = whole_seconds(secs, rounding, "run")
    return run, Flag("run out of range", field, over, shown, f"at most {MAX_DURATION} s")


def _never_ran(raw: pd.DataFrame, cols: dict[str, str], state: pd.Series, start, end, run) -> list[Flag]:
    """The reasons of the jobs that never ran, most specific first."""
    never = np.isnan(start)
    cancelled = (state == "CANCELLED").to_numpy() & (never | (run <= 0))
    shown_start, shown_end = raw[cols["start"]].to_numpy(), raw[cols["end"]].to_numpy()
    return [
        Flag("cancelled before start", cols["start"], cancelled, shown_start,
             "a start time and some elapsed time (the job was cancelled while it waited)"),
        Flag("never started", cols["start"], never & ~cancelled, shown_start,
             "a start time (the job was still waiting when the log was taken)"),
        Flag("still running", cols["end"], ~never & np.isnan(end), shown_end,
             "an end time (the job was still running when the log was taken)"),
    ]


def read_slurm(
    path: str | Path,
    machine: str | Machine | None = None,
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
    round: str | dict[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
    on_duplicate: jobs.OnDuplicate = "warn",
    compact: bool = False,
) -> pd.DataFrame:
    """Read ``sacct --parsable2`` output into the canonical job table (see the module docstring for the mapping).

    Args:
        path: the file, plain or gzipped.
        machine: a catalog name, a ``NODES[xCORES]`` spec or a :class:`~hpcgym.machines.Machine`; default: as many
            nodes as the largest ``NNodes`` of the jobs that ran (with a warning).
        on_invalid: ``"drop"`` (default: one warning counts the dropped jobs by reason) or ``"error"`` (raise
            :class:`~hpcgym.errors.InvalidJobError` at the first, naming its line and field).
        name: the trace name for ``attrs["name"]``.
        round: how to round fractions in fields that should be whole (``"ceil"``, or e.g. ``"nodes=ceil"``; fields
            ``run`` and ``walltime``, which round up by default, ``nodes`` and ``procs``, which must be whole
            without it, and ``submit``, which rounds down); see :mod:`hpcgym.traces._io`. What it changes is
            counted in ``attrs["repaired"]``.
        on_duplicate: ``"warn"`` (default: keep jobs whose id an earlier job has, with one warning naming the
            first one's line) or ``"error"``.
        compact: the canonical columns only, integers as int32 where they fit (see :mod:`hpcgym.jobs`).

    Raises:
        TraceFormatError: an empty or corrupt file, a header without '|' or without a required field, a line with
            another number of fields than the header (a truncated line), or a value that does not parse (a time, a
            duration, a number, a job id), naming the file, the line and the field.
        InvalidJobError: with ``on_invalid="error"``, the first invalid job.
    """
    raw, lines = _table(path)
    cols = _columns(path, raw)
    rounding = Rounding(round, path)
    ident = cols.get("jobidraw", cols.get("jobid"))
    step = raw[ident].str.contains(".", regex=False).to_numpy()
    raw, lines = raw.loc[~step].reset_index(drop=True), lines[~step]

    def locate(row: int) -> tuple[str, int]:
        return str(path), int(lines[row])

    state = (raw[cols["state"]] if "state" in cols else pd.Series("", index=raw.index)).str.split().str[0]
    state = state.fillna("").str.rstrip("+").str.upper()
    submit = _times(locate, raw[cols["submit"]], cols["submit"])
    start = _times(locate, raw[cols["start"]], cols["start"])
    end = _times(locate, raw[cols["end"]], cols["end"])
    ran = np.isfinite(start) & np.isfinite(end)
    run, run_flag = _runtime(locate, raw, cols, start, end, ran, rounding)
    never = _never_ran(raw, cols, state, start, end, run)
    ran &= ~never[0].mask
    nodes = whole_numbers(locate, raw[cols["nnodes"]], cols["nnodes"], check=ran, rounding=rounding, key="nodes")
    procs = (whole_numbers(locate, raw[cols["ncpus"]], cols["ncpus"], check=ran, rounding=rounding, key="procs")
             if "ncpus" in cols else np.full(len(raw), -1, np.int64))
    wall, wall_flag = _walltime(locate, raw, cols, ran, rounding)
    submit = rounding.whole(submit, "submit", cols["submit"], int, str)  # down unless the policy names submit
    rel, unix_start, submit_flag = submit_column(submit, raw[cols["submit"]].to_numpy(), cols["submit"],
                                                 path=path)
    status, odd_states = _status(state)
    values = {"job_id": _job_ids(locate, raw[ident], ident), "submit": rel, "run": run, "walltime": wall,
              "nodes": nodes, "procs": procs, "status": status,
              "wait": np.where(np.isfinite(submit) & np.isfinite(start), start - submit, -1).astype(np.int64)}
    people = {key: raw[cols[field]] if field in cols else pd.Series("", index=raw.index)
              for key, field in (("user", "user"), ("group", "group"), ("queue", "partition"))}
    flags = [*never, submit_flag, run_flag] + ([wall_flag] if wall_flag is not None else [])
    out = finish_log(path, values, people, machine=machine, field="NNodes", ran=ran, flags=flags,
                     unix_start=unix_start, locate=locate, on_invalid=on_invalid, name=name, id_field=ident,
                     rounding=rounding, on_duplicate=on_duplicate, compact=compact)
    if odd_states:
        warn(f"{path}: {sum(odd_states.values())} jobs have states hpcgym does not know "
             f"({', '.join(f'{k}: {v}' for k, v in odd_states.items())}); read as status \"unknown\"")
    out.attrs.update(steps_skipped=int(step.sum()), unknown_states=odd_states)
    return out
