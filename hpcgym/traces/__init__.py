"""Job traces: readers for SWF and the ALCF and LANL CSVs, the bundled real traces, and train/test splits.

>>> from hpcgym import traces
>>> jobs = traces.load("sdsc-sp2")
>>> len(jobs) > 50_000
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hpcgym.errors import UnknownMachineError
from hpcgym.jobs import OnInvalid
from hpcgym.machines import Machine
from hpcgym.traces.alcf import read_alcf
from hpcgym.traces.mustang import read_mustang
from hpcgym.traces.split import split, window, window_starts
from hpcgym.traces.swf import read_header, read_swf, write_swf

__all__ = ["BUNDLED", "TraceInfo", "load", "read", "path_of", "split", "window", "window_starts", "read_swf",
           "write_swf", "read_alcf", "read_mustang", "read_header"]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
_PWA = "Parallel Workloads Archive (Feitelson, Tsafrir, Krakov, JPDC 74(10), 2014)"
_ALCF = "ALCF job data (DIM_JOB_COMPOSITE), restructured by DIR-LAB, UNC Charlotte"
_LANL = "LANL ATLAS release: Amvrosiadis et al., USENIX ATC 2018"


@dataclass(frozen=True)
class TraceInfo:
    """A trace shipped in ``hpcgym/data``."""

    file: str
    format: str
    machine: str
    citation: str
    description: str


BUNDLED: dict[str, TraceInfo] = {
    "theta": TraceInfo("data_theta.csv.gz", "alcf", "theta", _ALCF, "ALCF Theta, 2022-11 to 2023-07"),
    "theta-2022": TraceInfo("theta_2022.swf.gz", "swf", "theta", _ALCF + "; SWF by the CQSim group",
                            "ALCF Theta, all of 2022 (SWF, nodes in the processor fields)"),
    "mira": TraceInfo("data_mira.csv.gz", "alcf", "mira", _ALCF, "ALCF Mira, 2018-08 to 2018-12"),
    "sdsc-sp2": TraceInfo("SDSC-SP2-1998-4.2-cln.swf.gz", "swf", "sdsc-sp2", _PWA + "; Acknowledge: Victor Hazlewood",
                          "SDSC IBM SP2, 1998-2000"),
    "hpc2n": TraceInfo("HPC2N-2002-2.2-cln.swf.gz", "swf", "hpc2n", _PWA + "; Acknowledge: Ake Sandgren",
                       "HPC2N Seth, 2002-2006"),
    "lublin-256": TraceInfo("lublin_256.swf.gz", "swf", "lublin-256",
                            "Lublin & Feitelson, JPDC 63(11), 2003", "Lublin-Feitelson model sample, 10,000 jobs"),
    "mustang": TraceInfo("mustang_2015-08-06_week_fraction.csv.gz", "mustang", "mustang", _LANL,
                         "LANL Mustang, the week from 2015-08-06"),
    "mustang-2012-02": TraceInfo("mustang_2012-02-07_week_fraction.csv", "mustang", "mustang", _LANL,
                                 "LANL Mustang, the week from 2012-02-07"),
    "mustang-2012-12": TraceInfo("mustang_2012-12-13_week_fraction.csv", "mustang", "mustang", _LANL,
                                 "LANL Mustang, the week from 2012-12-13"),
}
_ALIASES = {"sdsc_sp2": "sdsc-sp2", "lublin256": "lublin-256", "lublin": "lublin-256"}
_READERS = {"swf": read_swf, "alcf": read_alcf, "mustang": read_mustang}


def _key(name: str) -> str:
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key not in BUNDLED:
        raise UnknownMachineError(name, list(BUNDLED), what="trace")
    return key


def path_of(name: str) -> Path:
    """The file of a bundled trace."""
    return DATA_DIR / BUNDLED[_key(name)].file


@functools.lru_cache(maxsize=16)
def _load_cached(key: str, on_invalid: OnInvalid) -> pd.DataFrame:
    info = BUNDLED[key]
    return _READERS[info.format](path_of(key), machine=info.machine, on_invalid=on_invalid, name=key)


def load(name: str, on_invalid: OnInvalid = "drop") -> pd.DataFrame:
    """Load a bundled trace by name (see :data:`BUNDLED`) as a canonical job table (a fresh copy)."""
    df = _load_cached(_key(name), on_invalid)
    out = df.copy()
    out.attrs = {k: (dict(v) if isinstance(v, dict) else v) for k, v in df.attrs.items()}
    return out


def detect_format(path: str | Path) -> str:
    """Guess a file's format from its name: ``swf``, ``alcf`` or ``mustang``."""
    name = Path(path).name.lower()
    if ".swf" in name:
        return "swf"
    if "mustang" in name or "week_fraction" in name:
        return "mustang"
    if name.endswith((".csv", ".csv.gz")):
        return "alcf"
    raise ValueError(f"cannot tell the format of {path}; pass format='swf'|'alcf'|'mustang'")


def read(
    path: str | Path,
    format: str | None = None,
    machine: str | Machine | None = None,
    on_invalid: OnInvalid = "drop",
) -> pd.DataFrame:
    """Read a trace file, or a bundled trace when ``path`` is one of its names."""
    if isinstance(path, str) and _ALIASES.get(path.lower(), path.lower()) in BUNDLED and not Path(path).exists():
        return load(path, on_invalid)
    fmt = format or detect_format(path)
    if fmt not in _READERS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {sorted(_READERS)}")
    if fmt == "swf":
        return read_swf(path, machine=machine, on_invalid=on_invalid)
    return _READERS[fmt](path, machine=machine or ("mustang" if fmt == "mustang" else "theta"),
                         on_invalid=on_invalid)
