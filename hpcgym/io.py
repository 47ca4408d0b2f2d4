"""Atomic file writes: every result, model and trace hpcgym writes goes to a temporary file, then is renamed.

A reader (or a resumed run) sees either the old file or the new one, never half of one. The new file gets the
permissions a plain ``open()`` would give it (``0o666`` less the umask), not ``mkstemp``'s private ``0o600``.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["atomic_write", "write_bytes", "write_table", "write_text"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp)`` on a fresh temporary path beside ``path`` (same suffix), then rename it into place.

    Parent folders are created. If ``write`` fails, the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_bytes(path: str | Path, data: bytes, gzip_by_suffix: bool = False) -> Path:
    """Write ``data`` atomically (gzipped, reproducibly, when ``gzip_by_suffix`` and ``path`` ends in ``.gz``)."""
    if gzip_by_suffix and Path(path).suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text))


def write_table(df: Any, path: str | Path) -> Path:
    """Write a DataFrame atomically: parquet for ``.parquet``, else CSV (no index)."""
    if Path(path).suffix == ".parquet":
        return atomic_write(path, lambda tmp: df.to_parquet(tmp, index=False))
    return atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))
