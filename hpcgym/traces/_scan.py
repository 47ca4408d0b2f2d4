"""Whitespace-separated numbers (SWF) in bounded memory: a file streamed in blocks, each parsed in one compiled pass.

Why a compiled pass and not a library: pandas' C tokenizer reads CEA-Curie's SWF (whitespace runs as separators)
at about 0.7 million lines/s, ``np.loadtxt`` and ``np.fromstring`` at 0.3 million (their float parsing), and pyarrow
and polars take one separator byte only (SWF aligns its columns with runs of spaces). :func:`scan` reads about
3 million lines/s on one core, without a Python object per line.

:func:`blocks` yields a file (plain or gzipped, streamed) in blocks of whole lines. :func:`scan` parses one block:
each data line's numbers into one row of a float64 table, its 1-based line number, and a status per line
(:data:`OK`; :data:`FIELDS` when it has the wrong number of fields; :data:`SLOW` when a token is not a plain decimal
number that the fast path converts exactly, such as ``1e30``, ``nan`` or a typo, or has a fraction where the caller
wants a whole number: the caller parses such lines with Python's ``float`` and reports the bad ones). Comment lines
(first non-blank byte ``;``) are returned as byte ranges. Numbers are exact: a plain decimal token of at most 15
digits is converted with one correctly rounded division (Clinger's fast path); every other token goes the slow way.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import numba as nb
import numpy as np

#: Line statuses from :func:`scan`.
OK, FIELDS, SLOW = 0, 1, 2
#: Bytes per block read (whole lines are carried over to the next block).
BLOCK = 1 << 24
_POW10 = np.array([10.0**k for k in range(16)])


def open_bytes(path: str | Path):
    """The file opened for binary reading, through gzip when its first bytes are gzip's magic number."""
    fh = open(path, "rb")  # noqa: SIM115 - handed to the caller
    if fh.read(2) == b"\x1f\x8b":
        fh.close()
        return gzip.open(path, "rb")
    fh.seek(0)
    return fh


def blocks(fh, size: int | None = None) -> Iterator[bytearray]:
    """Yield the stream's bytes in blocks of about ``size`` (default :data:`BLOCK`) that end after a line end.

    A CR byte at a block's end stays for the next block, where an LF may follow it (one CRLF line end). Each block
    is read into its own buffer (no copy of a whole block is made). The last block may lack a line end.
    """
    size = size or BLOCK
    tail = b""
    while True:
        buf = bytearray(len(tail) + size)
        buf[:len(tail)] = tail
        got = fh.readinto(memoryview(buf)[len(tail):])
        if not got:
            if tail:
                yield bytearray(tail)
            return
        end = len(tail) + got
        del buf[end:]
        cut = max(buf.rfind(b"\n"), buf.rfind(b"\r", 0, end - 1)) + 1
        if cut == 0:  # no line end yet: read on
            tail = bytes(buf)
            continue
        tail = bytes(buf[cut:])
        del buf[cut:]
        yield buf


@nb.njit(cache=True, nogil=True, inline="always")
def _blank(c):  # pragma: no cover - compiled
    return c == 32 or c == 9 or c == 11 or c == 12


@nb.njit(cache=True, nogil=True, inline="always")
def _end(c):  # pragma: no cover - compiled
    return c == 10 or c == 13


# One loop, whose branches are the grammar: split into inlined helpers returning tuples, it ran 2 to 4 times slower.
@nb.njit(cache=True, nogil=True)
def scan(buf, rows, width, whole, line0, pow10):  # noqa: C901  # pragma: no cover - compiled
    """Parse a block of whole lines (uint8 array, at most ``rows`` lines) whose first line is number ``line0 + 1``.

    ``whole[f]`` says whether field ``f`` must hold a whole number: a fraction there makes the line :data:`SLOW`,
    so that the lines the caller need not look at are exactly the :data:`OK` ones.

    Returns ``(values, lines, status, starts, ends, low, high, comments, last_line)``: the numbers as a float64
    table with one row per field (each field contiguous) and one column per data line; per data line its 1-based
    line number, status (:data:`OK`, :data:`FIELDS`, :data:`SLOW`) and byte range; per field the smallest and
    largest value read (of the :data:`OK` lines); the byte ranges of the comment lines (an (m, 2) array); and the
    number of the block's last line.
    The current byte lives in ``c``; past the end it reads as a line end.
    """
    n = len(buf)
    values = np.empty((width, rows))
    lines = np.empty(rows, np.int64)
    status = np.zeros(rows, np.uint8)
    starts = np.empty(rows, np.int64)
    ends = np.empty(rows, np.int64)
    comments = np.empty((rows, 2), np.int64)
    low = np.full(width, np.inf)
    high = np.full(width, -np.inf)
    r = nc = 0
    line = line0
    i = 0
    while i < n:
        line += 1
        c = buf[i]
        while _blank(c):
            i += 1
            c = buf[i] if i < n else 10
        if c == 59:  # ';' a comment line
            comments[nc, 0] = i
            while i < n and not _end(buf[i]):
                i += 1
            comments[nc, 1] = i
            nc += 1
        elif not _end(c):
            starts[r] = i
            f = 0
            st = OK
            while True:  # one token per turn, c is its first byte
                neg = c == 45
                if c == 45 or c == 43:  # '-' '+'
                    i += 1
                    c = buf[i] if i < n else 10
                mant = 0
                scale = 0
                digits = 0
                while 48 <= c <= 57:
                    mant = mant * 10 + (c - 48)
                    digits += 1
                    i += 1
                    c = buf[i] if i < n else 10
                if c == 46:  # '.'
                    i += 1
                    c = buf[i] if i < n else 10
                    while 48 <= c <= 57:
                        mant = mant * 10 + (c - 48)
                        digits += 1
                        scale += 1
                        i += 1
                        c = buf[i] if i < n else 10
                # 15 digits stay below 2**53: float(mant) is exact, and one division rounds correctly.
                if scale and f < width and whole[f]:
                    st = SLOW
                if digits == 0 or digits > 15 or not (_blank(c) or _end(c)):
                    st = SLOW
                    while not (_blank(c) or _end(c)):
                        i += 1
                        c = buf[i] if i < n else 10
                value = float(mant)
                if scale:
                    value /= pow10[scale]
                if neg:
                    value = -value
                if f < width:
                    values[f, r] = value
                    if value < low[f]:
                        low[f] = value
                    if value > high[f]:
                        high[f] = value
                f += 1
                while _blank(c):
                    i += 1
                    c = buf[i] if i < n else 10
                if _end(c):
                    break
            ends[r] = min(i, n)
            lines[r] = line
            status[r] = FIELDS if f != width else st
            r += 1
        if i + 1 < n and buf[i] == 13 and buf[i + 1] == 10:  # CRLF: one line end
            i += 1
        i += 1
    return values[:, :r], lines[:r], status[:r], starts[:r], ends[:r], low, high, comments[:nc], line


def parse_block(block: bytes | bytearray, width: int, line0: int, whole: np.ndarray | None = None):
    """:func:`scan` of a bytes block (see there); ``whole`` defaults to no field."""
    buf = np.frombuffer(block, np.uint8)
    rows = int(np.count_nonzero(buf == 10)) + int(np.count_nonzero(buf == 13)) + 1
    whole = np.zeros(width, np.bool_) if whole is None else whole
    return scan(buf, rows, width, whole, line0, _POW10)
