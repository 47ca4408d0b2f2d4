"""Job traces: readers (SWF, ALCF and LANL CSVs, CSV tables, Slurm and PBS accounting), bundled traces, splits.

Other formats plug in through :mod:`hpcgym.traces.formats` (a registry, and the ``hpcgym.readers`` entry points).
A bundled trace's file read by its path is read with its catalog entry, and the cleaning the catalog states
(:attr:`TraceInfo.dropped`) is not warned about (:mod:`hpcgym.traces.known`).

>>> from hpcgym import traces
>>> jobs = traces.load("sdsc-sp2")
>>> len(jobs) > 50_000
True
"""

from __future__ import annotations

import contextlib
import errno
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hpcgym import errors, machines
from hpcgym.errors import TraceFormatError, UnknownNameError
from hpcgym.jobs import OnDuplicate, OnInvalid
from hpcgym.machines import Machine
from hpcgym.traces import alcf, formats, known, mustang, pbs, slurm
from hpcgym.traces._accounting import first_line
from hpcgym.traces._io import csv_header, spooled
from hpcgym.traces.alcf import read_alcf
from hpcgym.traces.chunks import ROWS, read_swf_chunks
from hpcgym.traces.csvtable import identity_mapping, missing_keys, read_csv_table, unsupported_layout
from hpcgym.traces.mustang import read_mustang
from hpcgym.traces.pbs import read_pbs
from hpcgym.traces.slurm import read_slurm
from hpcgym.traces.split import split, window, window_starts
from hpcgym.traces.swf import FIELDS, read_header, read_swf, write_swf

__all__ = ["BUNDLED", "FORMATS", "ROWS", "TraceInfo", "load", "read", "read_chunks", "name_of", "path_of", "split",
           "window",
           "window_starts", "read_swf", "write_swf", "read_alcf", "read_mustang", "read_csv_table", "read_slurm",
           "read_pbs", "read_header", "detect_format", "formats"]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
_PWA = "Parallel Workloads Archive (Feitelson, Tsafrir, Krakov, JPDC 74(10), 2014)"
_ALCF = "ALCF job data (DIM_JOB_COMPOSITE), restructured by DIR-LAB, UNC Charlotte"
_LANL = "LANL ATLAS release: Amvrosiadis et al., USENIX ATC 2018"
_NEVER_RAN = "jobs that never ran (cancelled before they started: no start time) or ended as they started"


@dataclass(frozen=True)
class TraceInfo:
    """A trace shipped in ``hpcgym/data``: its file, machine, provenance, what its jobs record, its known cleaning.

    ``requested_times``, ``wait_times`` and ``user_ids`` say whether at least 90% of the log's jobs record a requested
    time (a walltime), a wait time and a user id (``tests/test_catalog.py`` checks each against the file). A log
    without requested times cannot judge runtime predictions (its walltimes are the runtimes: every estimate is
    exact); one without wait times has no real arrival process (NASA-iPSC's submit times are its start times).

    Its file read by its path (gzipped or not) is recognised by its content and read as the entry says
    (:mod:`hpcgym.traces.known`): nothing needs stating for that. ``dropped`` states the log's known cleaning.
    """

    file: str
    format: str
    machine: str
    citation: str
    description: str
    requested_times: bool = True
    wait_times: bool = True
    user_ids: bool = True
    #: other quirks a user of the log should know (mappings of nodes, stripped headers, blank fields)
    notes: str = ""
    #: ``"log"``: a real machine's accounting; ``"model"``: a sample of a workload model
    kind: str = "log"
    #: the invalid jobs its reading (with ``machine``) drops, by reason as in ``attrs["invalid"]``: the known
    #: cleaning, said here, by ``list`` and ``info``, and not warned about on each load. None: not stated (drops
    #: warn, as for any file).
    dropped: Mapping[str, int] | None = None
    #: what the dropped jobs are, in a few words
    cleaning: str = ""


_RUN0 = "jobs with a run time of 0 or less (cancelled before they started, or no record)"
BUNDLED: dict[str, TraceInfo] = {
    "theta": TraceInfo("data_theta.csv.gz", "alcf", "theta", _ALCF, "ALCF Theta, 2022-11 to 2023-07",
                       notes="rows come in job-id order and are sorted by submit; user ids are hashed, many are 0"),
    "theta-2022": TraceInfo("theta_2022.swf.gz", "swf", "theta", _ALCF + "; SWF by the CQSim group",
                            "ALCF Theta, all of 2022 (SWF, nodes in the processor fields)", user_ids=False,
                            notes="the processor fields hold nodes; user, status and queue fields are blank"),
    "thetagpu": TraceInfo("data_thetagpu.csv.gz", "alcf", "thetagpu", _ALCF, "ALCF ThetaGPU, 2022-09 to 2023-07",
                          notes="node_num equals gpu_num on every row, so a job's 'nodes' may count GPUs; read as "
                          "nodes of the 24-node machine (every job fits)"),
    "mira": TraceInfo("data_mira.csv.gz", "alcf", "mira", _ALCF, "ALCF Mira, 2018-08 to 2018-12"),
    "sdsc-sp2": TraceInfo("SDSC-SP2-1998-4.2-cln.swf.gz", "swf", "sdsc-sp2", _PWA + "; Acknowledge: Victor Hazlewood",
                          "SDSC IBM SP2, 1998-2000", notes="cleaned PWA version", dropped={"run <= 0": 5681},
                          cleaning="cancelled jobs (status 5) that never ran: runtime -1 (5,671) or 0 (10)"),
    "hpc2n": TraceInfo("HPC2N-2002-2.2-cln.swf.gz", "swf", "hpc2n", _PWA + "; Acknowledge: Ake Sandgren",
                       "HPC2N Seth, 2002-2006", notes="cleaned PWA version"),
    "lublin-256": TraceInfo("lublin_256.swf.gz", "swf", "lublin-256",
                            "Lublin & Feitelson, JPDC 63(11), 2003", "Lublin-Feitelson model sample, 10,000 jobs",
                            requested_times=False, wait_times=False, user_ids=False, kind="model",
                            notes="a sample of a workload model, not a machine's log: no requested times (walltime = "
                            "run), no waits, no users"),
    "mustang": TraceInfo("mustang_2015-08-06_week_fraction.csv.gz", "mustang", "mustang", _LANL,
                         "LANL Mustang, the week from 2015-08-06", notes="one week of the release",
                         dropped={"run <= 0": 120}, cleaning=_NEVER_RAN),
    "mustang-2012-02": TraceInfo("mustang_2012-02-07_week_fraction.csv", "mustang", "mustang", _LANL,
                                 "LANL Mustang, the week from 2012-02-07", notes="one week of the release, 518 jobs",
                                 dropped={"run <= 0": 24}, cleaning=_NEVER_RAN),
    "mustang-2012-12": TraceInfo("mustang_2012-12-13_week_fraction.csv", "mustang", "mustang", _LANL,
                                 "LANL Mustang, the week from 2012-12-13", notes="one week of the release, 1,023 jobs",
                                 dropped={"run <= 0": 42, "nodes <= 0": 16},
                                 cleaning=_NEVER_RAN + "; jobs with a node count of 0"),
    "cea-curie": TraceInfo("CEA-Curie-2011-2.1-cln.swf.gz", "swf", "cea-curie",
                           _PWA + "; Acknowledge: Joseph Emeras, CEA/CNRS", "CEA Curie (Slurm), 2011-02 to 2012-10",
                           notes="cleaned PWA version; thin, fat and hybrid nodes mapped as 16-core nodes",
                           dropped={"run <= 0": 17286}, cleaning=_RUN0),
    "lanl-cm5": TraceInfo("LANL-CM5-1994-4.1-cln.swf.gz", "swf", "lanl-cm5", _PWA + "; Acknowledge: Curt Canada",
                          "LANL Thinking Machines CM-5, 1994-10 to 1996-09",
                          notes="cleaned PWA version (79,327 flurry jobs removed by the archive); 9% of jobs give no "
                          "requested time (walltime = run for them); many small jobs ran in non-dedicated mode",
                          dropped={"run <= 0": 2, "nodes <= 0": 3}, cleaning=_RUN0 + "; jobs of no processors"),
    "llnl-atlas": TraceInfo("LLNL-Atlas-2006-2.1-cln.swf.gz", "swf", "llnl-atlas", _PWA + "; Acknowledge: Moe Jette, "
                            "LLNL", "LLNL Atlas (Slurm), 2006-11 to 2007-06", requested_times=False,
                            wait_times=False, notes="cleaned PWA version; wait times are -1 on every line; 19% of "
                            "jobs give no requested time", dropped={"run <= 0": 7178}, cleaning=_RUN0),
    "llnl-thunder": TraceInfo("LLNL-Thunder-2007-1.1-cln.swf.gz", "swf", "llnl-thunder",
                              _PWA + "; Acknowledge: Moe Jette, LLNL", "LLNL Thunder (Slurm), 2007-01 to 2007-06",
                              requested_times=False, wait_times=False,
                              notes="cleaned PWA version; wait times are -1 on every line; 68% of jobs give no "
                              "requested time", dropped={"submit unknown": 1190, "run <= 0": 6236},
                              cleaning="jobs without a submit time; " + _RUN0),
    "metacentrum": TraceInfo("METACENTRUM-2009-2.swf.gz", "swf", "metacentrum", _PWA + "; MetaCentrum, Czech "
                             "national grid infrastructure", "MetaCentrum grid, 2009 (about 6 months)",
                             requested_times=False,
                             notes="the header was stripped from this copy: the machine (806 processors) comes from "
                             "the archive's log page; a grid of clusters simulated as one machine; no requested "
                             "times", dropped={"run <= 0": 3712}, cleaning=_RUN0),
    "nasa-ipsc": TraceInfo("NASA-iPSC-1993-3.1-cln.swf.gz", "swf", "nasa-ipsc", _PWA + "; Acknowledge: Bill "
                           "Nitzberg", "NASA Ames iPSC/860, 1993-10 to 1993-12", requested_times=False,
                           wait_times=False,
                           notes="cleaned PWA version; no wait times: the submit time is the start time (header note), "
                           "so the arrivals are not the users'; no requested times", dropped={"run <= 0": 173},
                           cleaning=_RUN0),
    "osc-clust": TraceInfo("OSC-Clust-2000-3.1-cln.swf.gz", "swf", "osc-clust", _PWA + "; Acknowledge: "
                           "SuperCluster HPC Workload/Resource Trace Repository",
                           "OSC Linux cluster, 2000-01 to 2001-11", requested_times=False,
                           notes="cleaned PWA version; nodes of 4 and 2 processors mapped one node per processor; no "
                           "requested times", dropped={"run <= 0": 505}, cleaning=_RUN0),
    "ricc": TraceInfo("RICC-2010-2.swf.gz", "swf", "ricc", _PWA + "; RIKEN Integrated Cluster of Clusters",
                      "RIKEN RICC, 2010 (about 5 months)",
                      notes="the header was stripped from this copy: the machine (1,024 nodes x 8 cores) comes from "
                      "the archive's log page; not a cleaned version", dropped={"run <= 0": 10}, cleaning=_RUN0),
    "sdsc-ds": TraceInfo("SDSC-DS-2004-2.1-cln.swf.gz", "swf", "sdsc-ds", _PWA + "; Acknowledge: Victor Hazlewood",
                         "SDSC DataStar, 2004-03 to 2005-04",
                         notes="cleaned PWA version; 8- and 32-way nodes mapped as 8-core nodes",
                         dropped={"run <= 0": 11176}, cleaning=_RUN0),
    "sdsc-par": TraceInfo("SDSC-Par-1996-3.1-cln.swf.gz", "swf", "sdsc-par", _PWA + "; Acknowledge: Reagan Moore and "
                          "Allen Downey", "SDSC Intel Paragon, 1996", requested_times=False,
                          notes="cleaned PWA version; no requested times; interactive and batch partitions "
                          "simulated as one machine of 400 nodes", dropped={"run <= 0": 7}, cleaning=_RUN0),
    "sandia-ross": TraceInfo("Sandia-Ross-2001-1.1-cln.swf.gz", "swf", "sandia-ross",
                             _PWA + "; Acknowledge: Jon Stearley", "Sandia CPlant/Ross, 2001-11 to 2005-01",
                             notes="cleaned PWA version; 1,286 jobs have status codes outside SWF's -1..5 (read as "
                             "status 'unknown')", dropped={"run <= 0": 2277, "nodes <= 0": 10},
                             cleaning=_RUN0 + "; jobs of no processors"),
    "unilu-gaia": TraceInfo("UniLu-Gaia-2014-1.swf.gz", "swf", "unilu-gaia", _PWA + "; Acknowledge: Joseph Emeras, "
                            "SnT", "University of Luxembourg Gaia (OAR), 2014-05 to 2014-08",
                            notes="the uncleaned version (its header says so); nodes of several sizes mapped one node "
                            "per core; best-effort (preemptible) jobs are kept as ordinary jobs",
                            dropped={"run <= 0": 128}, cleaning=_RUN0),
}
_ALIASES = {"sdsc_sp2": "sdsc-sp2", "lublin256": "lublin-256", "lublin": "lublin-256"}
_READERS = {"swf": read_swf, "alcf": read_alcf, "mustang": read_mustang, "slurm": read_slurm, "pbs": read_pbs}
#: The formats :func:`read` knows itself; :func:`hpcgym.traces.formats.names` adds the registered and installed ones.
FORMATS = formats.BUILTIN


def _key(name: str) -> str:
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key not in BUNDLED:
        raise UnknownNameError("trace", name, list(BUNDLED) + list(_ALIASES), hint="Or give the path of a trace file.")
    return key


def _bundled(path: str | Path) -> str | None:
    """The bundled trace ``path`` names (a name or an alias that is not also a file), else None."""
    if not isinstance(path, str) or Path(path).exists():
        return None
    key = _ALIASES.get(path.lower(), path.lower())
    return key if key in BUNDLED else None


def name_of(name: str) -> str:
    """The catalog's name for a bundled trace's name or alias (``"SDSC_SP2"`` -> ``"sdsc-sp2"``).

    Raises:
        UnknownNameError: neither a name nor an alias of the catalog (the message lists the closest).
    """
    return _key(name)


def path_of(name: str) -> Path:
    """The file of a bundled trace."""
    return DATA_DIR / BUNDLED[_key(name)].file


@functools.lru_cache(maxsize=16)
def _load_cached(key: str, on_invalid: OnInvalid) -> pd.DataFrame:
    return _catalogued(key, path_of(key), None, {"on_invalid": on_invalid})


def _catalogued(key: str, path: str | Path, mach: Machine | None, options: dict[str, object]) -> pd.DataFrame:
    """A bundled trace's file (at ``path``) read as its entry says.

    Its machine unless ``mach``, its name, and no warning about the drops its entry states; ``attrs["catalog"]``
    names the entry, ``attrs["cleaning"]`` the cleaning when the drops are those.
    """
    info = BUNDLED[key]
    with known.expecting(info.dropped):
        df = _READERS[info.format](path, machine=mach or info.machine, name=key, **options)
    df.attrs["catalog"] = key
    note = known_cleaning(df.attrs)
    if note:
        counts = ", ".join(f"{n:,} {reason}" for reason, n in df.attrs["invalid"].items())
        df.attrs["cleaning"] = f"{counts} dropped: {note}"
    return df


def known_cleaning(attrs: Mapping[str, object]) -> str | None:
    """A table's drops as its catalog entry states them (``TraceInfo.dropped``), in words; else None.

    The words are "the known cleaning of NAME (what the jobs are)"; None for a file the catalog does not know, or
    for other drops than those stated.
    """
    info = BUNDLED.get(str(attrs.get("catalog")))
    if info is None or info.dropped is None or dict(attrs.get("invalid") or {}) != dict(info.dropped):
        return None
    return f"the known cleaning of {attrs['catalog']}" + (f" ({info.cleaning})" if info.cleaning else "")


def recognise(path: str | Path) -> known.Match:
    """Which bundled trace a file is (the same content, gzipped or not), or is near and why not.

    See :func:`hpcgym.traces.known.match`.
    """
    return known.match(path, {key: DATA_DIR / info.file for key, info in BUNDLED.items()})


def _copy(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out.attrs = {k: (dict(v) if isinstance(v, dict) else v) for k, v in df.attrs.items()}
    return out


def load(name: str, on_invalid: OnInvalid = "drop") -> pd.DataFrame:
    """Load a bundled trace by name (see :data:`BUNDLED`) as a canonical job table (a fresh copy)."""
    return _copy(_load_cached(_key(name), on_invalid))


def detect_format(path: str | Path, columns: object = None) -> str:
    """Guess a file's format from its name, its first line, or its CSV header.

    ``.swf`` in the name is ``swf``, ``.sacct`` is ``slurm``, and an added format's suffix is that format
    (:mod:`hpcgym.traces.formats`). Else the first line decides: a ``sacct --parsable2`` header is ``slurm``, a PBS
    accounting record ``pbs`` (also for a directory of such files), a line an added format recognises is that
    format, an SWF comment (``;``) or data line of 18 numbers ``swf`` (a pipe has no name to go by). Else a CSV's
    header does: ``alcf``, ``mustang`` or ``csv``.

    With a column mapping, a non-SWF file is ``csv``. A CSV whose header fits no known layout raises
    :class:`~hpcgym.errors.TraceFormatError` ("unsupported layout"), which says to map its columns with ``columns=``.
    """
    name = Path(path).name.lower()
    if ".swf" in name:
        return "swf"
    if ".sacct" in name:
        return "slurm"
    if columns is not None:
        return "csv"
    found = _by_first_line(path)
    if found:
        return found
    if Path(path).is_dir():
        raise IsADirectoryError(errno.EISDIR, "a trace must be a file (or a directory of PBS logs)", str(path))
    if not name.endswith((".csv", ".csv.gz", ".txt", ".txt.gz")):
        raise ValueError(f"cannot tell the format of {path}; pass format= one of {', '.join(formats.names())} "
                         "(--format)")
    header = csv_header(path)
    if all(c in header for c in alcf.REQUIRED):
        return "alcf"
    if all(c in header for c in mustang.REQUIRED):
        return "mustang"
    if not missing_keys(identity_mapping(header)):
        return "csv"
    raise TraceFormatError(path, 1, None, unsupported_layout(header))


def _by_first_line(path: str | Path) -> str | None:
    """An added format's suffix, else the format the first line shows (Slurm, PBS, an added one), else None."""
    found = formats.detect(path, None)
    if found:
        return found
    line = first_line(path)
    for fmt, module in (("slurm", slurm), ("pbs", pbs)):
        if module.looks_like(line):
            return fmt
    return formats.detect(path, line) or ("swf" if _looks_like_swf(line) else None)


def _looks_like_swf(line: bytes) -> bool:
    """An SWF header comment (``; Key: value``) or a data line of 18 numbers (a file without ``.swf`` in its name)."""
    if line.startswith(b";"):
        return True
    tokens = line.split()
    return len(tokens) == len(FIELDS) and all(t.lstrip(b"-").replace(b".", b"", 1).isdigit() for t in tokens)


def read(
    path: str | Path,
    format: str | None = None,
    machine: str | Machine | None = None,
    on_invalid: OnInvalid = "drop",
    columns: str | Mapping[str, str] | None = None,
    round: str | Mapping[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
    on_duplicate: OnDuplicate = "warn",
    compact: bool = False,
) -> pd.DataFrame:
    """Read a trace file, or a bundled trace when ``path`` is one of its names.

    Args:
        path: the file (for PBS logs, also a directory of them), or a bundled name (:data:`BUNDLED`).
        format: one of :func:`hpcgym.traces.formats.names` (the built-in :data:`FORMATS` and those registered or
            installed); default: :func:`detect_format`.
        machine: a catalog name, a ``NODES[xCORES]`` spec (:func:`hpcgym.machines.parse`) or a :class:`Machine`;
            default: for a bundled trace's file (recognised by its content, gzipped or not: :func:`recognise`) its
            catalog entry's, else the SWF header's, the largest node count of a Slurm or PBS log's jobs, or the
            format's machine (Theta for ALCF, Mustang for LANL). A generic CSV needs one.
        on_invalid: ``"drop"`` or ``"error"``, as in :func:`hpcgym.jobs.apply_invalid_policy`.
        columns: for ``format="csv"``, canonical name -> column (a dict or ``"k=v,k=v"``); see
            :mod:`hpcgym.traces.csvtable`.
        round: how to round values that should be whole and are not: ``"ceil"`` (every field) or per field, e.g.
            ``"nodes=ceil,run=nearest"`` (modes ``ceil``, ``floor``, ``nearest``; see :mod:`hpcgym.traces._io`).
            What it changes is counted in ``attrs["repaired"]``.
        on_duplicate: ``"warn"`` (default: jobs whose id an earlier job has are kept, with one warning) or
            ``"error"``.
        compact: the canonical columns only, integers as int32 where they fit (see :mod:`hpcgym.jobs`): for
            whole-trace runs of large traces.

    Raises:
        FileNotFoundError: no such file. UnknownNameError: a name that is neither a bundled trace nor a file
            (with the closest names), or an unknown machine. TraceFormatError, InvalidJobError: see the readers.
    """
    mach = machines.parse(machine) if machine is not None else None
    if format is not None and format not in formats.names():
        raise ValueError(f"unknown format {format!r}; expected one of {', '.join(formats.names())}")
    if columns is not None and format not in (None, "csv"):
        raise ValueError(f"columns= applies to format='csv', not {format!r}")
    options = {"on_invalid": on_invalid, "round": round, "on_duplicate": on_duplicate, "compact": compact}
    key = _bundled(path)
    if key is not None:
        if columns is not None:
            raise ValueError(f"columns= applies to CSV files, not to the bundled trace {path!r}")
        if mach is None and not (round or compact or on_duplicate != "warn"):
            return load(path, on_invalid)
        return _catalogued(key, path_of(key), mach, options)
    if not Path(path).exists():
        text = str(path)
        if not any(sep in text for sep in "/\\.") and not Path(path).suffix:
            _key(text)  # a misspelled bundled name: raises with the closest ones
        raise FileNotFoundError(errno.ENOENT, "no such trace file (nor a bundled trace name)", text)
    with spooled(path) as local:  # a pipe is read once (the readers open a file more than once)
        fmt = format or detect_format(local, columns)
        if Path(path).is_dir() and fmt != "pbs":
            raise IsADirectoryError(errno.EISDIR, "a trace must be a file (or a directory of PBS logs)", str(path))
        if columns is not None and fmt != "csv":
            raise ValueError(f"columns= applies to CSV files (format='csv'), not to the {fmt} file {path}")
        found = recognise(local) if columns is None else known.Match()
        if found.key is not None and BUNDLED[found.key].format == fmt:
            return _catalogued(found.key, local, mach, options)
        df = _read_file(local, fmt, mach, columns, options)
        return _near(df, found, path, own_machine=mach is None)


def read_chunks(
    path: str | Path,
    rows: int = ROWS,
    format: str | None = None,
    machine: str | Machine | None = None,
    on_invalid: OnInvalid = "drop",
    columns: str | Mapping[str, str] | None = None,
    round: str | Mapping[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
    on_duplicate: OnDuplicate = "warn",
) -> Iterator[pd.DataFrame]:
    """Read an SWF trace (a file or a bundled name) in chunks of about ``rows`` jobs, in bounded memory.

    The options are :func:`read`'s; the chunks are compact tables (see :mod:`hpcgym.traces.chunks` for what differs
    from the whole read). A file of another format raises ``ValueError`` (convert it to SWF first:
    ``python -m hpcgym.traces convert``).
    """
    mach = machines.parse(machine) if machine is not None else None
    name = _bundled(path)
    if name is None and not Path(path).exists():
        read(path)  # raises what read() says of a missing file or a misspelled name
    stack = contextlib.ExitStack()  # a pipe's copy lives while the chunks are read
    local = stack.enter_context(spooled(path_of(name) if name is not None else path))
    with _closed_on_error(stack):
        found = recognise(local) if name is None and columns is None else known.Match()
        if found.key is not None and BUNDLED[found.key].format == "swf":
            name = found.key
        if name is not None:
            info = BUNDLED[name]
            fmt, mach, expected = info.format, mach or info.machine, info.dropped
        else:
            fmt, expected = format or detect_format(local, columns), None
        if fmt != "swf" or columns is not None:
            raise ValueError(f"{path}: only SWF traces are read in chunks, not {fmt}; convert it first "
                             "(python -m hpcgym.traces convert)")
        chunks = read_swf_chunks(local, machine=mach, on_invalid=on_invalid, name=name, round=round,
                                 on_duplicate=on_duplicate, rows=rows, expected=expected)
    return _then_close(stack, _labelled(chunks, name, found, path, own_machine=mach is None))


@contextlib.contextmanager
def _closed_on_error(stack: contextlib.ExitStack) -> Iterator[None]:
    try:
        yield
    except BaseException:
        stack.close()
        raise


def _then_close(stack: contextlib.ExitStack, chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    with stack:
        yield from chunks


def _labelled(chunks: Iterator[pd.DataFrame], key: str | None, found: known.Match, path: str | Path,
              own_machine: bool) -> Iterator[pd.DataFrame]:
    """The chunks, each naming its catalog entry (``attrs["catalog"]``), or why not when it is near one.

    See :func:`_near`.
    """
    note = None
    for chunk in chunks:
        if key is not None:
            chunk.attrs["catalog"] = key
        elif note is not None:
            chunk.attrs["machine_note"] = note
        else:
            note = _near(chunk, found, path, own_machine).attrs.get("machine_note")
        yield chunk


def _near(df: pd.DataFrame, found: known.Match, path: str | Path, own_machine: bool) -> pd.DataFrame:
    """``df``, saying why the catalog's machine was not used when the file is near a bundled trace.

    Near: its start or its name is a bundled file's. When its machine came from the file rather than the catalog,
    a warning and ``attrs["machine_note"]`` say why and how to use the catalog's.
    """
    if found.near is None or not own_machine:
        return df
    mach, other = df.attrs["machine"], machines.get(BUNDLED[found.near].machine)
    note = (f"{found.why}, so it is read as a file of its own, on the machine it gives ({mach.nodes:,} nodes x "
            f"{mach.cores_per_node} cores); the catalog's {found.near} has {other.nodes:,} x {other.cores_per_node}: "
            f"pass machine={other.name!r} (--machine {other.name}) to use it")
    if "machine_note" not in df.attrs:  # the first of a file's chunks warns; each carries the note
        errors.warn(f"{path}: {note}")
    df.attrs["machine_note"] = note
    return df


def _read_file(path: str | Path, fmt: str, mach: Machine | None, columns: object,
               options: dict[str, object]) -> pd.DataFrame:
    """A file of a known format, read by its reader with :func:`read`'s options."""
    if fmt == "csv":
        return read_csv_table(path, columns, machine=mach, **options)
    if fmt not in FORMATS:
        return formats.read_with(formats.get(fmt), path, machine=mach, **options)
    if fmt in ("swf", "slurm", "pbs"):  # their machine comes from the file when none is given
        return _READERS[fmt](path, machine=mach, **options)
    return _READERS[fmt](path, machine=mach or _default_machine(path, fmt), **options)


def _default_machine(path: str | Path, fmt: str) -> str:
    """The machine of a CSV log read without ``machine=``.

    It is the catalog machine the file's name names, else the format's own, with a warning (ALCF's CSVs do not say
    which machine they come from).
    """
    default = "mustang" if fmt == "mustang" else "theta"
    words = set(re.split(r"[^a-z0-9]+", Path(path).name.lower()))
    named = sorted(words & {"theta", "mira", "mustang"})
    if len(named) == 1:
        return named[0]
    errors.warn(f"{path}: the file does not say which machine it comes from; reading it for {default}. Pass "
                "machine= (--machine NAME|NODES[xCORES]) if it is another")
    return default
