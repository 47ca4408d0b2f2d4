"""Catalogued logs: a bundled trace's file told when it is read by its path, and the cleaning the catalog states.

A log is known by its bytes once decompressed: first the digest of its first :data:`PREFIX` bytes (cheap, compared
with every bundled file's), then, for a file whose start matches, the digest of the whole. The bundled files'
digests are computed from the files themselves (once per process and file), so any entry of
:data:`hpcgym.traces.BUNDLED` is recognised without anything stated for it. A file that starts as a bundled one, or
has its name, without the same content is *near* it: it is read as a file of its own, and :func:`match` says why.

The catalog states the invalid jobs each bundled trace's reading drops (its known cleaning,
:attr:`hpcgym.traces.TraceInfo.dropped`). While a catalogued file is read, :func:`expecting` holds those counts, and a
reader whose drops are exactly these gives no warning (:func:`is_expected`): the cleaning is documented, not news. Any
other count (another machine, another file) warns as usual.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import zlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

#: The bytes of a file's start compared first (headers and the first jobs of a log).
PREFIX = 1 << 16
_PIECE = 1 << 20


def _pieces(path: Path, limit: int | None) -> Iterator[bytes]:
    """The file's bytes (decompressed when it is gzipped, by magic number), up to ``limit``, in pieces."""
    with open(path, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    left = limit
    with (gzip.open(path, "rb") if gz else open(path, "rb")) as fh:
        while left is None or left > 0:
            piece = fh.read(_PIECE if left is None else min(_PIECE, left))
            if not piece:
                return
            if left is not None:
                left -= len(piece)
            yield piece


def digest(path: str | Path, whole: bool = False) -> str:
    """SHA-256 of the file's decompressed bytes: its first :data:`PREFIX` bytes, or (``whole``) all of them."""
    path = Path(path)
    stat = path.stat()
    return _digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns, whole)


@functools.lru_cache(maxsize=256)
def _digest(path: str, size: int, mtime: int, whole: bool) -> str:
    """:func:`digest`, cached on the file's path, size and time (an edited file is digested again)."""
    h = hashlib.sha256()
    try:
        for piece in _pieces(Path(path), None if whole else PREFIX):
            h.update(piece)
    except (OSError, EOFError, zlib.error):  # a damaged file is no bundled one; its reader says what is wrong
        return f"unreadable:{path}"
    return h.hexdigest()


@dataclass(frozen=True)
class Match:
    """What :func:`match` found: the bundled trace with the same content, or the one a file is near and why not."""

    key: str | None = None
    near: str | None = None
    why: str = ""


def _base(name: str) -> str:
    return name[:-3] if name.endswith(".gz") else name


def match(path: str | Path, files: Mapping[str, Path]) -> Match:
    """The entry of ``files`` (key -> bundled file) whose content ``path`` has, else the one it is near, and why.

    Missing bundled files are skipped.
    """
    path = Path(path)
    if not path.is_file():
        return Match()
    mine = digest(path)
    present = {k: f for k, f in files.items() if f.is_file()}
    start = [k for k, f in present.items() if digest(f) == mine]
    for key in start:
        if digest(path, whole=True) == digest(present[key], whole=True):
            return Match(key)
    if start:
        return Match(None, start[0], f"its first {PREFIX // 1024} KiB are those of the bundled trace {start[0]!r} "
                     f"({present[start[0]].name}), but the rest differs")
    named = [k for k, f in present.items() if _base(f.name) == _base(path.name)]
    if named:
        return Match(None, named[0], f"it has the name of the bundled trace {named[0]!r}'s file, but not its content")
    return Match()


_EXPECTED: ContextVar[dict[str, int] | None] = ContextVar("hpcgym_expected_drops", default=None)


@contextlib.contextmanager
def expecting(counts: Mapping[str, int] | None) -> Iterator[None]:
    """While the block runs, drops of exactly ``counts`` (invalid jobs by reason) are the known cleaning."""
    token = _EXPECTED.set(None if counts is None else dict(counts))
    try:
        yield
    finally:
        _EXPECTED.reset(token)


def is_expected(counts: Mapping[str, int]) -> bool:
    """Whether ``counts`` are the drops :func:`expecting` holds (then no warning is given about them)."""
    expected = _EXPECTED.get()
    return expected is not None and dict(counts) == expected
