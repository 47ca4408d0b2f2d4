"""Standard Workload Format (SWF) reader and writer.

The reader keeps all 18 fields (the canonical columns plus :data:`hpcgym.jobs.OPTIONAL_COLUMNS`) and parses the
``; Key: value`` header into a dict. Parsing goes through pandas' C tokenizer; only when that fails does a slow
line-by-line scan run, to name the exact line and field of the problem.

What the reader accepts, and what it refuses:

- **Status (field 11).** The SWF standard knows -1 (unknown) and 0 to 5 (failed, completed, partial,
  partial_completed, partial_failed, cancelled). Cleaned Parallel Workloads Archive logs also carry the jobs' real
  exit codes there (127, 126, 137, 255, 265, 267, ...). The simulator does not use the status, so such a code never
  fails the file: the job's ``status`` is ``"unknown"`` (what the code means depends on the log), the raw codes are
  counted in ``attrs["status_codes"]`` (code -> number of jobs in the table; empty when every code is standard),
  and the reader's one warning counts them.
- **Bytes.** A truncated or corrupt gzip file, an empty file and text in UTF-16 raise
  :class:`~hpcgym.errors.TraceFormatError` naming the file. A UTF-8 byte-order mark is skipped. Line ends may be
  LF, CRLF or CR alone (old Mac files); line numbers count each of them as one line.
- **Header vs machine.** With an explicit ``machine=``, the machine is used as given. If the header's ``MaxProcs``
  (or ``MaxNodes`` when it has no ``MaxProcs``) does not fit it, i.e. divided by the machine's nodes it differs by
  more than a quarter from the processors the machine maps onto one node (its cores per node, or 1 when its logs
  count nodes), every job's node count would differ from what the header implies: a warning names the file, both
  sets of values and the one used. Smaller differences (a log that covers a few nodes fewer than the machine, as
  Theta's does) pass silently.
"""

from __future__ import annotations

import gzip
import io
import re
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.errors import TraceFormatError, warn
from hpcgym.machines import Machine, from_swf_header, get, header_int
from hpcgym.traces._io import atomic_write_bytes, finish, integral, read_bytes

FIELDS: tuple[str, ...] = (
    "job number", "submit time", "wait time", "run time", "allocated processors", "average CPU time",
    "used memory", "requested processors", "requested time", "requested memory", "status", "user id",
    "group id", "executable id", "queue id", "partition id", "preceding job", "think time",
)
#: Fields (0-based) that may hold fractions; all others must be whole numbers.
_FRACTIONAL = {3, 5, 6, 9}
_KEY = re.compile(rb"^; ?([A-Za-z]\w*):\s*(.*?)\s*$")
#: Submit times above this are taken as absolute Unix times (1973 onwards) when UnixStartTime is 0 or absent.
_EPOCH_THRESHOLD = 100_000_000
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
#: How far (as a fraction) the header's processors per machine node may be from the machine's own mapping.
_HEADER_TOLERANCE = 0.25


def _field_name(i: int) -> str:
    return f"{i + 1} ({FIELDS[i]})"


def parse_header(lines: list[bytes]) -> dict[str, Any]:
    """Parse ``; Key: value`` comment lines. Repeated keys (Queue, Partition, Note) become lists.

    Lines without a key continue the previous key's value.
    """
    header: dict[str, Any] = {}
    last: str | None = None
    for raw in lines:
        m = _KEY.match(raw)
        if m:
            key, value = m.group(1).decode(), m.group(2).decode(errors="replace")
            if key in header:
                prev = header[key]
                header[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
            else:
                header[key] = value
            last = key
        elif last is not None and raw[1:].strip():
            text = raw[1:].strip().decode(errors="replace")
            prev = header[last]
            if isinstance(prev, list):
                prev[-1] = f"{prev[-1]}\n{text}"
            else:
                header[last] = f"{prev}\n{text}"
    return header


def _read(path: str | Path) -> bytes:
    """The file's text as bytes with LF line ends; unreadable bytes raise :class:`TraceFormatError` naming it."""
    try:
        raw = read_bytes(path)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        cls = type(exc)
        kind = cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"
        raise TraceFormatError(path, None, None, f"truncated or corrupt gzip data ({kind}: {exc}). "
                               "Check the download (gzip -t) and fetch the file again.") from exc
    if raw[:2] in _UTF16_BOMS:
        raise TraceFormatError(path, 1, None, "the text is UTF-16; SWF is ASCII. Convert it, e.g. with "
                               "iconv -f UTF-16 -t UTF-8.")
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM):]
    if not raw.strip():
        raise TraceFormatError(path, None, None, "the file is empty: no header and no jobs"
                               + (f" ({len(raw)} blank bytes)" if raw else ""))
    if b"\r" in raw:  # CRLF (Windows) or CR alone (classic Mac): one line end each
        raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return raw


def read_header(path: str | Path) -> dict[str, Any]:
    """Return the parsed header of an SWF file."""
    lines = _read(path).split(b"\n")
    return parse_header([ln for ln in lines if ln.lstrip().startswith(b";")])


def _split(raw: bytes) -> tuple[list[bytes], list[bytes], np.ndarray]:
    """Split into comment lines, data lines and the 1-based line number of each data line."""
    lines = raw.split(b"\n")
    comments, data, numbers = [], [], []
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s:
            continue
        if s[:1] == b";":
            comments.append(s)
        else:
            data.append(s)
            numbers.append(i + 1)
    return comments, data, np.asarray(numbers, dtype=np.int64)


def _locate_error(path: str | Path, data: list[bytes], numbers: np.ndarray) -> None:
    """Scan line by line and raise a :class:`TraceFormatError` at the first malformed line."""
    for ln, number in zip(data, numbers, strict=True):
        parts = ln.split()
        if len(parts) != len(FIELDS):
            field = _field_name(min(len(parts), len(FIELDS) - 1)) if len(parts) < len(FIELDS) else None
            raise TraceFormatError(path, int(number), field,
                                   f"expected {len(FIELDS)} fields, found {len(parts)}")
        for i, tok in enumerate(parts):
            try:
                value = float(tok)
            except ValueError:
                raise TraceFormatError(path, int(number), _field_name(i),
                                       f"{tok.decode(errors='replace')!r} is not a number") from None
            if i not in _FRACTIONAL and not value.is_integer():
                raise TraceFormatError(path, int(number), _field_name(i), f"{value} is not a whole number")


def _parse_numbers(path: str | Path, data: list[bytes], numbers: np.ndarray) -> np.ndarray:
    """Parse the data lines into an (n, 18) float array with the C tokenizer."""
    if not data:
        return np.empty((0, len(FIELDS)))
    try:
        table = pd.read_csv(io.BytesIO(b"\n".join(data)), sep=r"\s+", header=None, names=range(len(FIELDS)),
                            dtype=np.float64, engine="c").to_numpy()
    except (ValueError, pd.errors.ParserError):
        _locate_error(path, data, numbers)
        raise
    whole = integral(table)
    whole[:, list(_FRACTIONAL)] = np.isfinite(table[:, list(_FRACTIONAL)])
    if not whole.all():
        _locate_error(path, data, numbers)
        row, col = np.argwhere(~whole)[0]
        raise TraceFormatError(path, int(numbers[row]), _field_name(int(col)), "missing or not a whole number")
    return table


def _resolve_machine(machine: str | Machine | None, header: dict[str, Any], path: str | Path) -> Machine:
    if machine is not None:
        return get(machine)
    try:
        return from_swf_header(header, name=Path(path).name.split(".")[0])
    except ValueError:
        said = {k: header[k] for k in ("MaxNodes", "MaxProcs") if k in header}
        what = f"no usable MaxNodes/MaxProcs header (it says {said})" if said else "no MaxNodes/MaxProcs header"
        raise TraceFormatError(path, None, None, f"the file has {what}; pass machine=") from None


def _header_conflict(header: dict[str, Any], mach: Machine, path: str | Path) -> str | None:
    """A message if the header's machine maps processors onto nodes differently from ``mach``, else ``None``."""
    max_nodes, max_procs = header_int(header, "MaxNodes"), header_int(header, "MaxProcs")
    procs = max_procs or max_nodes
    if procs is None:
        return None
    width = 1 if mach.procs_are_nodes else mach.cores_per_node
    if abs(procs / mach.nodes / width - 1) <= _HEADER_TOLERANCE:
        return None
    said = ", ".join(f"{k} {v}" for k, v in (("MaxNodes", max_nodes), ("MaxProcs", max_procs)) if v)
    own = from_swf_header(header)
    logged = "nodes" if mach.procs_are_nodes else "processors"
    return (f"{path}: the header says {said} (a machine of {own.nodes} nodes x {own.cores_per_node} processors), "
            f"but machine={mach.name!r} has {mach.nodes} nodes x {mach.cores_per_node} cores and its logs count "
            f"{logged} (MaxProcs {mach.nodes * width} expected). Used the machine={mach.name!r} passed: "
            f"nodes = ceil(procs / {width}). Pass machine=None to use the header, or a machine that matches it.")


_STATUS_CODES = np.array(sorted(jobs.SWF_STATUS), dtype=np.int64)  # -1 .. 5


def _status(codes: np.ndarray) -> pd.Categorical:
    """SWF status codes as the canonical categorical; codes outside the standard become ``"unknown"``."""
    standard = (codes >= _STATUS_CODES[0]) & (codes <= _STATUS_CODES[-1])
    lookup = np.array([jobs.SWF_STATUS[int(c)] for c in _STATUS_CODES], dtype=object)
    return jobs.status_categorical(lookup[np.where(standard, codes - _STATUS_CODES[0], 0)])


def _nonstandard_counts(codes: np.ndarray) -> dict[int, int]:
    """Count the codes outside the SWF standard, most frequent first."""
    odd = codes[(codes < _STATUS_CODES[0]) | (codes > _STATUS_CODES[-1])]
    values, counts = np.unique(odd, return_counts=True)
    order = np.lexsort((values, -counts))
    return {int(values[i]): int(counts[i]) for i in order}


def _status_note(counts: dict[int, int], limit: int = 8) -> str:
    shown = ", ".join(f"{code}: {n} job{'s' * (n != 1)}" for code, n in list(counts.items())[:limit])
    more = f", and {len(counts) - limit} more codes" if len(counts) > limit else ""
    return (f"{sum(counts.values())} jobs have status codes outside SWF's -1..5 ({shown}{more}); "
            'read as status "unknown", the raw counts are in attrs["status_codes"].')


def _to_table(t: np.ndarray, machine: Machine) -> pd.DataFrame:
    as_int = t.astype(np.int64)
    run = np.where(t[:, 3] > 0, np.ceil(t[:, 3]), t[:, 3]).astype(np.int64)
    procs = np.where(as_int[:, 7] > 0, as_int[:, 7], as_int[:, 4])
    if machine.procs_are_nodes:
        nodes = procs.copy()
    else:
        nodes = np.where(procs > 0, -(-procs // machine.cores_per_node), procs)
    known = as_int[:, 8] > 0
    df = pd.DataFrame({
        "job_id": as_int[:, 0], "submit": as_int[:, 1], "run": run,
        "walltime": np.where(known, as_int[:, 8], run), "nodes": nodes, "procs": procs,
        "user": as_int[:, 11], "group": as_int[:, 12], "queue": as_int[:, 14],
        "status": _status(as_int[:, 10]), "walltime_known": known,
    })
    for name, field in jobs.OPTIONAL_COLUMNS.items():
        df[name] = t[:, field - 1] if (field - 1) in _FRACTIONAL and name == "cpu_time" else as_int[:, field - 1]
    return df


def read_swf(
    path: str | Path,
    machine: str | Machine | None = None,
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
) -> pd.DataFrame:
    """Read an SWF file (plain or gzipped) into the canonical job table.

    Args:
        path: the file.
        machine: the machine, by catalog name or object. ``None`` builds it from the ``MaxNodes``/``MaxProcs``
            header, so header-less files need it.
        on_invalid: ``"drop"`` (default) drops impossible jobs with one warning counting them by reason;
            ``"error"`` raises :class:`~hpcgym.errors.InvalidJobError` at the first, naming its line.
        name: the trace name stored in ``attrs["name"]``.

    Returns:
        The job table, sorted by submit time. Absolute Unix submit times (``UnixStartTime`` 0 or absent) are
        rebased to the first submit, which is kept in ``attrs["unix_start_time"]``. Status codes outside the SWF
        standard read as ``"unknown"`` and are counted in ``attrs["status_codes"]``; dropped jobs and such codes
        are counted in one warning.

    Raises:
        TraceFormatError: a malformed line (wrong field count, a non-number), naming the line and field; an
            empty, truncated or corrupt (gzip) file, naming the file.

    Warns:
        UserWarning: once, counting dropped invalid jobs and non-standard status codes; and once when the header's
            MaxNodes/MaxProcs contradict an explicit ``machine`` (the machine is used).
    """
    comments, data, numbers = _split(_read(path))
    header = parse_header(comments)
    mach = _resolve_machine(machine, header, path)
    conflict = _header_conflict(header, mach, path) if machine is not None else None
    if conflict:
        warn(conflict)
    table = _parse_numbers(path, data, numbers)
    df = _to_table(table, mach)
    try:
        unix_start = int(str(header.get("UnixStartTime", "0")).split()[0])
    except (ValueError, IndexError):
        unix_start = 0
    submitted = df["submit"].to_numpy()
    first = int(submitted[submitted >= 0].min()) if (submitted >= 0).any() else 0
    if unix_start == 0 and first > _EPOCH_THRESHOLD:
        unix_start = first
        df["submit"] = np.where(submitted >= 0, submitted - first, submitted)
    kept = jobs.invalid_reasons(df, mach.nodes) < 0
    codes = _nonstandard_counts(table[kept, 10].astype(np.int64))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = finish(df, mach, on_invalid, path, name, unix_start, numbers, header)
    notes = []
    for w in caught:  # fold the invalid-job count into the reader's one warning
        text = str(w.message)
        if w.category is UserWarning and text.startswith(f"{path}: dropped "):
            notes.append(text[len(f"{path}: "):])
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if codes:
        notes.append(_status_note(codes))
    if notes:
        warn(f"{path}: " + " ".join(notes))
    out.attrs["status_codes"] = codes
    return out


def _column(df: pd.DataFrame, name: str, default: np.ndarray | int) -> np.ndarray:
    if name in df.columns:
        return df[name].to_numpy()
    return np.broadcast_to(np.asarray(default), (len(df),))


def _header_lines(header: dict[str, Any]) -> list[str]:
    out = []
    for key, value in header.items():
        for v in value if isinstance(value, list) else [value]:
            first, *rest = str(v).split("\n")
            out.append(f"; {key}: {first}".rstrip())
            out.extend(f";   {r}" for r in rest)
    return out


def write_swf(df: pd.DataFrame, path: str | Path, machine: str | Machine | None = None,
              header: dict[str, Any] | None = None) -> None:
    """Write a job table as SWF (gzipped if ``path`` ends in ``.gz``), atomically.

    The header comes from ``header`` or else ``df.attrs["header"]``; ``UnixStartTime``, ``MaxNodes`` and
    ``MaxProcs`` are set from the table's attrs and the machine. Statuses ``killed`` and ``timeout`` have no SWF
    code and are written as 0 (failed). Processor fields hold what the machine's reader maps back to the same
    nodes (nodes themselves for a machine whose logs count nodes, such as Theta). A table read from SWF and
    written back reads as the same table.
    """
    machine = machine or df.attrs.get("machine")
    mach = get(machine) if machine else None
    hdr = dict(header if header is not None else df.attrs.get("header", {}))
    hdr["UnixStartTime"] = str(int(df.attrs.get("unix_start_time", 0)))
    if mach is not None:
        hdr["MaxNodes"], hdr["MaxProcs"] = str(mach.nodes), str(mach.nodes if mach.procs_are_nodes else mach.cores)
    procs, nodes = df["procs"].to_numpy(), df["nodes"].to_numpy()
    if mach is not None:  # write what the reader maps back to the same nodes on this machine
        width = 1 if mach.procs_are_nodes else mach.cores_per_node
        consistent = (procs > 0) & (-(-procs // width) == nodes)
        procs = np.where(consistent, procs, nodes * width)
    status = df["status"].astype(str).map(jobs.STATUS_TO_SWF).fillna(-1).to_numpy(np.int64)
    cols = [
        df["job_id"].to_numpy(), df["submit"].to_numpy(), _column(df, "wait", -1), df["run"].to_numpy(),
        _column(df, "alloc_procs", procs), _column(df, "cpu_time", -1), _column(df, "mem_used", -1),
        _column(df, "req_procs", procs), np.where(df["walltime_known"].to_numpy(), df["walltime"].to_numpy(), -1),
        _column(df, "mem_req", -1), status, df["user"].to_numpy(), df["group"].to_numpy(),
        _column(df, "executable", -1), df["queue"].to_numpy(), _column(df, "partition", -1),
        _column(df, "preceding_job", -1), _column(df, "think_time", -1),
    ]
    body = pd.DataFrame({i: c for i, c in enumerate(cols)})
    text = body.to_csv(sep=" ", header=False, index=False, float_format="%.10g", lineterminator="\n")
    head = "\n".join(_header_lines(hdr))
    atomic_write_bytes(path, (head + "\n" + text if head else text).encode())
