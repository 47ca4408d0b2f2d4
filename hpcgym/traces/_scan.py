"""Whitespace-separated numbers (SWF) in bounded memory: a file streamed in blocks, each parsed in one compiled pass.

Why a compiled pass and not a library: pandas' C tokenizer reads CEA-Curie's SWF (whitespace runs as separators)
at about 0.7 million lines/s, ``np.loadtxt`` and ``np.fromstring`` at 0.3 million (their float parsing), and pyarrow
and polars take one separator byte only (SWF aligns its columns with runs of spaces). The reader built on
:func:`scan` reads 3 to 4 million lines per CPU second (``benchmarks/scale.py``), without a Python object per line.

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

from hpcgym.traces._io import is_gzip


class BinaryDataError(ValueError):
    """A stream holds NUL bytes: it is binary data, not a text trace (raised by :func:`blocks`)."""


#: Line statuses from :func:`scan`.
OK, FIELDS, SLOW = 0, 1, 2
#: Bytes per block read (whole lines are carried over to the next block).
BLOCK = 1 << 24
_POW10 = np.array([10.0**k for k in range(16)])


def open_bytes(path: str | Path):
    """The file opened for binary reading, through gzip when its first bytes are gzip's magic number."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")  # noqa: SIM115 - the caller closes it


def blocks(fh, size: int | None = None) -> Iterator[memoryview]:
    """Yield the stream's bytes in blocks of about ``size`` (default :data:`BLOCK`) that end after a line end.

    A CR byte at a block's end stays for the next block, where an LF may follow it (one CRLF line end). The last
    block may lack a line end. Every block is a view of one buffer that the next block overwrites: use it (or copy
    what you keep) before asking for the next. Reusing the buffer spares the kernel a page fault per page per block.
    """
    size = size or BLOCK
    buf = bytearray(size)
    tail = 0  # bytes carried over, at the buffer's start
    while True:
        if len(buf) < tail + size:  # a line longer than a block: a buffer twice as big (views of the old live on)
            buf = buf[:tail] + bytearray(max(size, tail))
        got = fh.readinto(memoryview(buf)[tail:tail + size])
        end = tail + got
        if not got:
            if tail:
                yield memoryview(buf)[:tail]
            return
        start = max(tail - 1, 0)  # the carried bytes hold no line end (a CR at their end may pair with an LF)
        cut = max(buf.rfind(b"\n", start, end), buf.rfind(b"\r", start, end - 1)) + 1
        if cut == 0:  # no line end yet: read on, unless these are binary bytes (say so now, not after gigabytes)
            if buf.find(0, tail, end) >= 0:
                raise BinaryDataError(f"no line end in the first {end:,} bytes and a NUL byte among them: a binary "
                                      "file, not a text trace (check the file name, or unpack it first)")
            tail = end
            continue
        yield memoryview(buf)[:cut]
        buf[:end - cut] = buf[cut:end]
        tail = end - cut


@nb.njit(cache=True, nogil=True, inline="always")
def _blank(c):  # pragma: no cover - compiled
    return c == 32 or c == 9 or c == 11 or c == 12


@nb.njit(cache=True, nogil=True, inline="always")
def _end(c):  # pragma: no cover - compiled
    return c == 10 or c == 13


# One loop, whose branches are the grammar: split into inlined helpers returning tuples, it ran 2 to 4 times slower.
@nb.njit(cache=True, nogil=True)
def scan(buf, width, whole, line0, pow10, values, lines, status, starts, ends, low, high, comments):  # noqa: C901
    """Parse a block of whole lines (uint8 array) whose first line is number ``line0 + 1``, into the given arrays.

    ``whole[f]`` says whether field ``f`` must hold a whole number: a fraction there makes the line :data:`SLOW`,
    so that the lines the caller need not look at are exactly the :data:`OK` ones.

    It fills: ``values``, the numbers as a float64 table with one row per field (each field contiguous) and one
    column per data line; per data line its 1-based line number (``lines``), status (:data:`OK`, :data:`FIELDS`,
    :data:`SLOW`) and byte range (``starts``, ``ends``); per field the smallest and largest value read (``low``,
    ``high``, of the :data:`OK` lines); the byte ranges of the comment lines (``comments``, (m, 2)). They must
    hold a row per line of the block. Returns (data lines, comment lines, the number of the block's last line).
    The current byte lives in ``c``; past the end it reads as a line end.
    """
    n = len(buf)
    low[:] = np.inf
    high[:] = -np.inf
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
    return r, nc, line


class Scanner:
    """:func:`scan` with its output arrays kept from one block to the next (grown when a block has more lines).

    Args:
        width: fields per data line.
        whole: per field, whether it must hold whole numbers (default: none).
    """

    def __init__(self, width: int, whole: np.ndarray | None = None):
        self.width = width
        self.whole = np.zeros(width, np.bool_) if whole is None else np.asarray(whole, np.bool_)
        self.low, self.high = np.empty(width), np.empty(width)
        self._grow(0)

    def _grow(self, rows: int) -> None:
        self.rows = rows
        self.values = np.empty((self.width, rows))
        self.lines, self.starts, self.ends = (np.empty(rows, np.int64) for _ in range(3))
        self.status = np.empty(rows, np.uint8)
        self.comments = np.empty((rows, 2), np.int64)

    def parse(self, block, line0: int):
        """Parse a block (bytes-like) whose first line is ``line0 + 1``.

        Returns ``(values, lines, status, starts, ends, low, high, comments, last_line)`` (see :func:`scan`), as
        views of the scanner's arrays: the next :meth:`parse` overwrites them.
        """
        buf = np.frombuffer(block, np.uint8)
        rows = int(np.count_nonzero(buf == 10)) + int(np.count_nonzero(buf == 13)) + 1
        if rows > self.rows:
            self._grow(rows + rows // 4)
        r, nc, last = scan(buf, self.width, self.whole, line0, _POW10, self.values, self.lines, self.status,
                           self.starts, self.ends, self.low, self.high, self.comments)
        return (self.values[:, :r], self.lines[:r], self.status[:r], self.starts[:r], self.ends[:r], self.low,
                self.high, self.comments[:nc], last)


def parse_block(block, width: int, line0: int, whole: np.ndarray | None = None):
    """:meth:`Scanner.parse` of one block, into fresh arrays (see :func:`scan`); ``whole`` defaults to no field."""
    return Scanner(width, whole).parse(block, line0)
