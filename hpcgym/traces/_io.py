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
