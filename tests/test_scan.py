"""The SWF reader's compiled scan: exact numbers, the lines it leaves to Python, and blocks cut anywhere."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcgym.errors import TraceFormatError
from hpcgym.traces import _scan, read_swf

DATA = Path(__file__).resolve().parent / "data" / "swf"


def test_plain_decimals_parse_exactly_like_python():
    rng = np.random.default_rng(0)
    tokens = [f"{v:.{d}f}" for v, d in zip(rng.uniform(-1e6, 1e6, 3000), rng.integers(0, 9, 3000), strict=True)]
    tokens += ["0", "-0", "+7", ".5", "5.", "-.25", "123456789012345", "0.00000000000001", "999999999999999"]
    text = "\n".join(tokens).encode() + b"\n"
    values, lines, status, *_ = _scan.parse_block(text, 1, 0)
    assert (status == _scan.OK).all()
    assert values[0].tobytes() == np.array([float(t) for t in tokens]).tobytes()  # bit for bit, signs of 0 too
    assert lines.tolist() == list(range(1, len(tokens) + 1))


@pytest.mark.parametrize("token", ["1e3", "nan", "inf", "1234567890123456", "0.000000000000001", "1_000", "x", "-",
                                   ".", "5-", "0x10"])
def test_other_tokens_are_left_to_python(token):
    _, _, status, *_ = _scan.parse_block(f"1 {token} 3\n".encode(), 3, 0)
    assert status.tolist() == [_scan.SLOW]


def test_field_counts_comments_blank_lines_and_line_ends():
    text = b"; a: 1\r\n\r\n  1 2 3\r4 5\n\t; b\n6 7 8 9\n10 11 12"
    values, lines, status, starts, ends, low, high, comments, last = _scan.parse_block(text, 3, 0)
    assert lines.tolist() == [3, 4, 6, 7] and last == 7
    assert status.tolist() == [_scan.OK, _scan.FIELDS, _scan.FIELDS, _scan.OK]
    assert [bytes(text[a:b]) for a, b in comments] == [b"; a: 1", b"; b"]
    assert [bytes(text[a:b]) for a, b in zip(starts, ends, strict=True)] == [b"1 2 3", b"4 5", b"6 7 8 9", b"10 11 12"]
    assert values[:, 3].tolist() == [10, 11, 12] and low.tolist() == [1, 2, 3] and high.tolist() == [10, 11, 12]


def test_a_fraction_where_a_whole_number_belongs_is_left_to_python():
    whole = np.array([True, False])
    _, _, status, *_ = _scan.parse_block(b"1 2.5\n1.5 2\n1.0 2\n", 2, 0, whole)
    assert status.tolist() == [_scan.OK, _scan.SLOW, _scan.SLOW]


def test_digit_separators_are_not_numbers(tmp_path):
    p = tmp_path / "sep.swf"
    p.write_text("; MaxNodes: 8\n1 0 0 1_000 4 -1 -1 4 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    with pytest.raises(TraceFormatError) as exc:
        read_swf(p)
    assert exc.value.line == 2 and exc.value.field == "4 (run time)" and "'1_000' is not a number" in str(exc.value)


@pytest.mark.parametrize("name", ["crlf.swf", "cr_only.swf", "bom.swf", "exit_codes.swf"])
@pytest.mark.parametrize("size", [7, 40, 101])
def test_blocks_cut_anywhere_read_the_same(monkeypatch, name, size):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = read_swf(DATA / name)
        monkeypatch.setattr(_scan, "BLOCK", size)
        cut = read_swf(DATA / name)
    pd.testing.assert_frame_equal(whole, cut)
    assert whole.attrs["header"] == cut.attrs["header"] and whole.attrs["status_codes"] == cut.attrs["status_codes"]


@pytest.mark.parametrize("size", [5, 33, 64])
def test_errors_name_the_same_line_when_blocks_are_cut(monkeypatch, size):
    with pytest.raises(TraceFormatError) as exc:
        read_swf(DATA / "bad_cr_only.swf")
    monkeypatch.setattr(_scan, "BLOCK", size)
    with pytest.raises(TraceFormatError) as cut:
        read_swf(DATA / "bad_cr_only.swf")
    assert (cut.value.line, cut.value.field, str(cut.value)) == (exc.value.line, exc.value.field, str(exc.value))


def test_a_gzipped_file_streams_in_blocks_like_the_plain_one(monkeypatch, tmp_path):
    import gzip

    packed = tmp_path / "exit_codes.swf.gz"
    packed.write_bytes(gzip.compress((DATA / "exit_codes.swf").read_bytes()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = read_swf(DATA / "exit_codes.swf")
        monkeypatch.setattr(_scan, "BLOCK", 23)
        pd.testing.assert_frame_equal(plain, read_swf(packed))
