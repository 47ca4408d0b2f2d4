"""Byte-level helpers shared by the trace readers: open plain or gzipped files, split off line numbers."""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

import numpy as np


def read_bytes(path: str | Path) -> bytes:
    """Return the file's bytes, decompressed when it is gzipped (detected by magic number, not name)."""
    raw = Path(path).read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def integral(values: np.ndarray) -> np.ndarray:
    """Boolean mask of the entries that are whole numbers (NaN is not)."""
    return np.isfinite(values) & (np.floor(values) == values)


def csv_columns(path: str | Path, required: tuple[str, ...]):
    """Read a (plain or gzipped) CSV as strings, checking that the ``required`` columns are there."""
    import io

    import pandas as pd

    from hpcgym.errors import TraceFormatError

    try:
        raw = pd.read_csv(io.BytesIO(read_bytes(path)), dtype=str, keep_default_na=False, engine="c")
    except pd.errors.ParserError as exc:
        raise TraceFormatError(path, None, None, f"not a well-formed CSV: {exc}") from None
    missing = [c for c in required if c not in raw.columns]
    if missing:
        raise TraceFormatError(path, 1, ",".join(missing), "missing column(s) in the CSV header")
    return raw


def numeric_column(path: str | Path, raw, col: str, whole: bool = True) -> np.ndarray:
    """A CSV column as float64; a value that is not a (whole) number raises naming its line and column."""
    import pandas as pd

    from hpcgym.errors import TraceFormatError

    values = pd.to_numeric(raw[col], errors="coerce").to_numpy(np.float64)
    ok = integral(values) if whole else np.isfinite(values)
    if not ok.all():
        row = int(np.flatnonzero(~ok)[0])
        what = "a whole number" if whole else "a number"
        raise TraceFormatError(path, row + 2, col, f"{raw[col].iat[row]!r} is not {what}")
    return values


def finish(df, machine, on_invalid: str, path: str | Path, name: str | None, unix_start: int, lines: np.ndarray,
           header: dict | None = None):
    """Apply the invalid-job policy, sort into the canonical table, and attach the metadata attrs."""
    from hpcgym import jobs

    df, dropped = jobs.apply_invalid_policy(df, machine.nodes, on_invalid, path, lines)
    out = jobs.finalize(df)
    out.attrs.update(name=name or Path(path).name.split(".")[0], machine=machine, header=header or {},
                     unix_start_time=int(unix_start), invalid=dropped, source=str(path))
    return out
