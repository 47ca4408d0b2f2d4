"""Helpers shared by the readers of batch-system accounting logs (Slurm's ``sacct``, PBS and Torque).

They parse the logs' durations (``[days-][[hours:]minutes:]seconds``), number user, group and queue names, check
whole-number columns naming the line and field of a bad value, and size a machine from the jobs when none is given.
Every value is parsed column-wise (pandas' vectorised string and number parsers); a row only becomes a Python
object when it is reported in an error.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym.errors import TraceFormatError, warn
from hpcgym.machines import Machine, parse
from hpcgym.traces._io import MAX_DURATION, MAX_EXACT, Flag, Locate, Rounding, finish, integral, read_bytes

_DURATION = r"^(?:(\d+)-)?(?:(?:(\d+):)?(\d+):)?(\d+(?:\.\d*)?)$"


def first_line(path: str | Path, limit: int = 65536) -> bytes:
    """The first non-blank line of a (plain or gzipped) file, or of the first file of a directory, for sniffing."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            return b""
        path = files[0]
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as fh:
            head = fh.read(limit)
    except (OSError, EOFError):
        return b""
    return next((ln.strip() for ln in head.splitlines() if ln.strip()), b"")


def read_log(path: str | Path, expected: str) -> bytes:
    """A log's bytes, un-gzipped, without a UTF-8 byte-order mark, with LF line ends (CRLF and CR alone count as one).

    Raises :class:`TraceFormatError` naming the file when it is empty (``expected`` says what it should hold) or its
    gzip data are truncated or corrupt.
    """
    try:
        raw = read_bytes(path)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceFormatError(path, None, None, f"truncated or corrupt gzip data ({exc}); check the file with "
                               "gzip -t and copy it again") from exc
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    if not raw.strip():
        raise TraceFormatError(path, None, None, f"the file is empty; expected {expected}")
    return raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in raw else raw


def raise_at(locate: Locate, bad: np.ndarray, field: str, text: pd.Series, expected: str) -> None:
    """Raise :class:`TraceFormatError` at the first row where ``bad`` holds (nothing if none)."""
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        path, line = locate(row)
        raise TraceFormatError(path, line, field, f"{text.iat[row]!r} is not {expected}")


def durations(text: pd.Series) -> np.ndarray:
    """``[days-][[hours:]minutes:]seconds[.fraction]`` (``1-02:03:04``, ``100:00:00``, ``05:00``) -> seconds.

    NaN where the text is not such a duration (an empty cell, ``UNLIMITED``, a typo): the caller decides.
    """
    codes, uniques = pd.factorize(text)  # a log repeats its limits and runtimes: parse each text once
    parts = pd.Series(uniques, dtype=object).str.strip().str.extract(_DURATION)
    days, hours, minutes = (pd.to_numeric(parts[i]).fillna(0).to_numpy(np.float64) for i in range(3))
    seconds = ((days * 24 + hours) * 60 + minutes) * 60 + pd.to_numeric(parts[3]).to_numpy(np.float64)
    return np.where(codes >= 0, seconds[codes] if len(seconds) else np.nan, np.nan)


def whole_seconds(secs: np.ndarray, rounding: Rounding | None = None,
                  key: str = "run") -> tuple[np.ndarray, np.ndarray]:
    """Seconds (float, NaN unknown) -> (int64, -1 where unknown or above ``MAX_DURATION``; that mask).

    Fractions round as ``rounding`` says for ``key`` (``run`` or ``walltime``: up unless the policy names them).
    """
    if rounding is not None:
        secs = rounding.whole(secs, key, key, int, str)  # runs and walltimes have a default mode: this never raises
    over = np.nan_to_num(secs) > MAX_DURATION
    return np.where(np.isfinite(secs) & ~over, np.ceil(np.nan_to_num(secs)), -1).astype(np.int64), over


def whole_numbers(locate: Locate, text: pd.Series, field: str, check: np.ndarray | None = None,
                  rounding: Rounding | None = None, key: str | None = None) -> np.ndarray:
    """A column of whole numbers as int64; empty cells are -1 (unknown).

    Raises :class:`TraceFormatError` at the first other value that is not a whole number (of magnitude at most
    2**53), among the rows where ``check`` holds (default: all); the other rows' bad values become -1. Where the
    ``rounding`` policy names ``key`` (a count: ``nodes``, ``procs``), fractions are rounded (and counted) instead.
    """
    values = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)  # it skips surrounding blanks
    if rounding is not None and key in rounding.policy:
        values = rounding.whole(values, key, field, int, str)  # the policy names the key: this never raises
    ok = integral(values) & (np.abs(values) <= MAX_EXACT)
    bad = ~ok
    bad[bad] = (text[bad].str.strip() != "").to_numpy()
    hint = f" (pass round= to round such values: --round {key}=ceil, floor or nearest)" if key else ""
    raise_at(locate, bad if check is None else bad & check, field, text, "a whole number" + hint)
    return np.where(ok, values, -1).astype(np.int64)


def name_codes(text: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Names -> 1, 2, ... in order of first appearance (the Parallel Workloads Archive's numbering); empty -> -1.

    Returns the codes and the names, ``names[code - 1]`` being a code's name.
    """
    stripped = text.fillna("").str.strip()
    codes, names = pd.factorize(stripped.where(stripped != ""))
    return np.where(codes >= 0, codes + 1, -1).astype(np.int64), [str(n) for n in names]


def sized_note(field: str) -> str:
    """The ``attrs["machine_note"]`` of a table whose machine :func:`infer_machine` sized."""
    return f"sized from the log (the largest {field} of the jobs that ran); pass --machine for the real machine"


def infer_machine(path: str | Path, nodes: np.ndarray, procs: np.ndarray, ran: np.ndarray, field: str) -> Machine:
    """The machine of a log read without ``machine=``: the largest node count among the jobs that ran, with a warning.

    Its cores per node are the most CPUs per node any such job had (1 when the log has no CPU counts). The name is
    the ``NODESxCORES`` spec, so :func:`hpcgym.machines.parse` rebuilds the same machine from it.
    """
    use = ran & (nodes > 0)
    count = int(nodes[use].max()) if use.any() else max(int(nodes.max(initial=1)), 1)
    both = use & (procs > 0)
    cores = max(int(np.ceil(procs[both] / nodes[both]).max()), 1) if both.any() else 1
    warn(f"{path}: no machine given; read for {count:,} nodes x {cores} cores, the largest {field} (and CPUs per node) "
         "of the jobs that ran. Pass machine= (--machine NAME|NODES[xCORES]) if the machine is larger")
    return Machine(f"{count}x{cores}", count, cores, f"the largest {field} in {Path(path).name}",
                   description=f"{count:,} nodes x {cores} cores (sized from {Path(path).name})")


def finish_log(path: str | Path, values: dict[str, object], people: dict[str, pd.Series], *, machine, field: str,
               ran: np.ndarray, flags: list[Flag], unix_start: int, locate: Locate, on_invalid: str,
               name: str | None, id_field: str, rounding: Rounding | None = None, on_duplicate: str = "warn",
               compact: bool = False) -> pd.DataFrame:
    """The job table of an accounting log, from its parsed columns.

    Args:
        path: the log (a file or a directory), for messages and ``attrs``.
        values: ``job_id, submit, run, walltime, nodes, procs, status, wait`` per row; a walltime <= 0 is unknown.
        people: ``user``, ``group`` and ``queue`` names per row, numbered by :func:`name_codes`.
        machine: the machine given, or None to size one (:func:`infer_machine`) from the jobs that ``ran``.
        field: the log's node-count field, for messages.
        ran: per row, whether the job ran (the machine is sized from those).
        flags: the log's own invalid-job reasons (:class:`~hpcgym.traces._io.Flag`), checked first.
        unix_start: the first submit time, for ``attrs["unix_start_time"]``.
        locate: row -> (file, line), for the invalid-job error and the duplicate-id warning or error.
        on_invalid: ``"drop"`` or ``"error"``.
        name: the trace name for ``attrs["name"]``.
        id_field: the log's job-id field, for the duplicate-id error.
        rounding: the reader's rounding policy, whose changes ``attrs["repaired"]`` counts.
        on_duplicate: ``"warn"`` or ``"error"`` (:func:`hpcgym.traces._io.duplicate_policy`).
        compact: the canonical columns only, integers as int32 where they fit.
    """
    codes, names = {}, {}
    for key, text in people.items():
        codes[key], names[key] = name_codes(text)
    wall, run = values["walltime"], values["run"]
    df = pd.DataFrame({**values, "walltime": np.where(wall > 0, wall, run), **codes, "walltime_known": wall > 0})
    nodes, procs = np.asarray(values["nodes"]), np.asarray(values["procs"])
    mach = parse(machine) if machine is not None else infer_machine(path, nodes, procs, ran, field)
    out = finish(df, mach, on_invalid, path, name, unix_start, lambda row: locate(row)[1], flags=flags,
                 on_duplicate=on_duplicate, compact=compact, repaired=rounding.repaired if rounding else None,
                 id_field=id_field, locate=locate)
    out.attrs["names"] = names
    if machine is None:
        out.attrs["machine_note"] = sized_note(field)
    return out
