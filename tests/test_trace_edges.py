"""Logs read right whatever their span or path (issue 55): relative times that span years, a catalogued log read
by its path, and the cleaning the catalog documents instead of a warning on every load."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcgym import traces
from hpcgym.errors import TraceFormatError

#: A submit time span of about 7 years (the issue's Lublin-model log: 10,000 jobs to about 2.2e8 s).
SPAN = 220_000_000
N = 10_000


def quiet(reader, *args, **kw):
    """The reader's table and the messages of the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = reader(*args, **kw)
    return df, [str(w.message) for w in caught]


def _spread(n: int = N, span: int = SPAN) -> np.ndarray:
    """``n`` sorted relative submit times from 0 to ``span``, evenly spread (no gap anywhere)."""
    return np.linspace(0, span, n).astype(np.int64)


def _swf(path: Path, submits: np.ndarray, header: str = "; MaxNodes: 128\n; MaxProcs: 128\n") -> Path:
    rows = "".join(f"{i + 1} {s} 0 100 4 -1 -1 4 200 -1 1 1 1 -1 -1 -1 -1 -1\n" for i, s in enumerate(submits))
    path.write_text(header + rows)
    return path


# ---- item 1: relative times are relative whatever their span ------------------------------------------------------

def test_a_relative_swf_log_of_seven_years_keeps_every_job(tmp_path):
    submits = _spread()
    df, warned = quiet(traces.read, _swf(tmp_path / "lublin-7y.swf", submits))
    assert len(df) == N and warned == []
    assert df["submit"].tolist() == submits.tolist()  # as written: relative, not rebased
    assert df.attrs["invalid"] == {}


def test_the_chunked_read_keeps_them_too(tmp_path):
    submits = _spread()
    chunks = list(traces.read_chunks(_swf(tmp_path / "lublin-7y.swf", submits), rows=N // 4))
    assert sum(len(c) for c in chunks) == N
    assert np.concatenate([c["submit"].to_numpy() for c in chunks]).tolist() == submits.tolist()


def test_a_relative_csv_table_of_seven_years_keeps_every_job(tmp_path):
    submits = _spread()
    path = tmp_path / "years.csv"
    pd.DataFrame({"submit": submits, "run": 100, "nodes": 2}).to_csv(path, index=False)
    df, warned = quiet(traces.read, path, machine="128")
    assert len(df) == N and warned == [] and df["submit"].tolist() == submits.tolist()


def test_a_relative_alcf_log_of_seven_years_keeps_every_job(tmp_path):
    submits = _spread(500)
    path = tmp_path / "theta_relative.csv"
    pd.DataFrame({"job": np.arange(1, 501), "user": 1, "project": 1, "state": 0, "gpu_num": 0, "cpu_num": 128,
                  "node_num": 2, "submit_time": submits, "wait_time": 10, "run_time": 100, "wall_time": 200,
                  "node_hour": 1.0, "new_status": "Pass"}).to_csv(path, index=False)
    df, warned = quiet(traces.read, path)
    assert len(df) == 500 and warned == [] and df["submit"].tolist() == (submits - submits[0]).tolist()


def test_unix_times_with_a_stray_zero_still_drop_only_the_stray(tmp_path):
    submits = 1_000_000_000 + _spread(100, 86400 * 30)
    submits[5] = 0  # a zeroed field among Unix times: out of range, as before
    df, warned = quiet(traces.read, _swf(tmp_path / "unix.swf", submits))
    assert len(df) == 99 and df.attrs["invalid"] == {"submit out of range": 1}
    assert df.attrs["unix_start_time"] == 1_000_000_000


def test_a_log_that_cannot_be_placed_in_time_is_refused_in_one_line(tmp_path):
    submits = np.concatenate([_spread(60, 86400 * 10), 1_000_000_000 + _spread(40, 86400 * 10)])
    with pytest.raises(TraceFormatError) as exc:
        quiet(traces.read, _swf(tmp_path / "mixed.swf", submits))
    text = str(exc.value)
    assert "\n" not in text and "mixed.swf" in text and "40 look like Unix times" in text and "60 lie below" in text
    assert "UnixStartTime" in text


def test_a_header_with_unix_start_time_keeps_times_relative(tmp_path):
    submits = np.concatenate([_spread(60, 86400 * 10), 1_000_000_000 + _spread(40, 86400 * 10)])
    header = "; UnixStartTime: 1000000000\n; MaxNodes: 128\n; MaxProcs: 128\n"
    df, _ = quiet(traces.read, _swf(tmp_path / "marked.swf", submits, header))
    assert len(df) == 100 and df["submit"].max() == submits.max()
