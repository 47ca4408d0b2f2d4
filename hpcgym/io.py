"""Atomic file writes: every result, model and trace hpcgym writes goes to a temporary file, then is renamed.

A reader (or a resumed run) sees either the old file or the new one, never half of one. The new file gets the
permissions a plain ``open()`` would give it (``0o666`` less the umask), not ``mkstemp``'s private ``0o600``.
The rename replaces a symbolic link at ``path`` instead of writing through it, so nothing written here lands
outside the folder it names. :func:`atomic_folder` does the same for a whole folder (a saved model);
:func:`create_exclusive` makes a file that must not exist yet (a lock).
"""

from __future__ import annotations

import ctypes
import errno
import gzip
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["atomic_folder", "atomic_write", "create_exclusive", "write_bytes", "write_figure", "write_table",
           "write_text"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp)`` on a fresh temporary path beside ``path`` (same suffix), then rename it into place.

    Parent folders are created. If ``write`` fails, the temporary file is removed and ``path`` is untouched.

    Raises:
        IsADirectoryError: ``path`` is a folder (checked first, so the error names it).
    """
    path = Path(path)
    if path.is_dir() and not path.is_symlink():  # else the rename fails naming the hidden temporary file
        raise IsADirectoryError(errno.EISDIR, "is a folder; give a file name", str(path))
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


def write_figure(fig: Any, path: str | Path, **savefig: Any) -> Path:
    """Save a matplotlib figure atomically (the format from ``path``'s suffix; ``savefig`` goes to ``fig.savefig``)."""
    fmt = Path(path).suffix.lstrip(".") or None
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, **savefig))


def atomic_folder(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp)`` on a fresh temporary folder beside ``path``, then put it in place of ``path``.

    If ``write`` fails (or the process is killed), ``path`` is untouched and the temporary folder (a hidden
    ``.<name>.*.tmp``) is removed or left aside. An existing ``path`` is swapped with the new folder in one step
    where the system can (Linux), else renamed aside before the new one is renamed in; then it is removed. At every
    moment the old or the new folder is complete.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        write(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
        _swap_in(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _swap_in(new: Path, path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()  # a link is replaced, never followed
    elif path.is_dir() and any(path.iterdir()):
        if _exchange(new, path):  # one atomic step: ``new`` now holds the old folder, removed by the caller
            return
        old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
        os.replace(path, old)  # an empty folder is replaced by a rename: the old one moves aside whole
        os.replace(new, path)
        shutil.rmtree(old, ignore_errors=True)
        return
    os.replace(new, path)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux's ``renameat2`` with ``RENAME_EXCHANGE``); False where that is unavailable."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE
    return renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), exchange) == 0


def create_exclusive(path: str | Path, text: str) -> Path:
    """Create ``path`` holding ``text``; fail with ``FileExistsError`` if anything (a file, a link) is there.

    The file is created with ``O_EXCL``: of two processes racing for it, exactly one succeeds, and a symbolic
    link at ``path`` is never followed.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return Path(path)
