"""Logs read right whatever their span or path (issue 55): relative times that span years, a catalogued log read
by its path, and the cleaning the catalog documents instead of a warning on every load."""

from __future__ import annotations

import contextlib
import gzip
import io
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcgym import traces
from hpcgym.errors import TraceFormatError
from hpcgym.traces.__main__ import main

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


# ---- item 2: a catalogued log read by its path gets its catalog entry ----------------------------------------------

def _rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[["job_id", "submit", "run", "walltime", "nodes"]].reset_index(drop=True)


@pytest.mark.parametrize("gz", [True, False], ids=["gzipped", "plain"])
def test_the_bundled_hpc2n_file_read_by_path_is_the_bundled_trace(tmp_path, gz):
    data = traces.path_of("hpc2n").read_bytes()
    path = tmp_path / ("copy.swf.gz" if gz else "HPC2N-2002-2.2-cln.swf")  # any name: the content decides
    path.write_bytes(data if gz else gzip.decompress(data))
    df, warned = quiet(traces.read, path)
    mach = df.attrs["machine"]
    assert (mach.name, mach.nodes, mach.cores_per_node) == ("hpc2n", 120, 2)  # the header alone says 240 x 1
    assert df.attrs["catalog"] == "hpc2n" and df.attrs["name"] == "hpc2n" and warned == []
    pd.testing.assert_frame_equal(_rows(df), _rows(traces.load("hpc2n")))  # the same jobs, the same node counts
    chunked = list(traces.read_chunks(path))
    assert chunked[0].attrs["machine"].name == "hpc2n" and chunked[0].attrs["catalog"] == "hpc2n"


def test_a_file_near_a_bundled_one_says_why_the_header_machine_is_used(tmp_path):
    lines = gzip.decompress(traces.path_of("hpc2n").read_bytes()).splitlines(keepends=True)
    path = tmp_path / "hpc2n-edited.swf"
    path.write_bytes(b"".join(lines[:-100]))  # the same start, 100 jobs fewer
    df, warned = quiet(traces.read, path)
    assert df.attrs["machine"].nodes == 240 and "catalog" not in df.attrs  # a file of its own: its header's machine
    assert len(warned) == 1 and "'hpc2n'" in warned[0] and "the rest differs" in warned[0]
    assert "machine='hpc2n'" in warned[0] and "240 nodes x 1 cores" in warned[0]
    assert df.attrs["machine_note"] in warned[0]


def test_info_names_the_catalog_entry_of_a_file(tmp_path):
    path = tmp_path / "seth.swf.gz"
    shutil.copy(traces.path_of("hpc2n"), path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["info", str(path)]) == 0
    text = out.getvalue()
    assert "catalogued as          hpc2n" in text and "hpc2n (120 nodes x 2 cores)" in text


# ---- item 8: the catalog states a bundled log's known cleaning; a load does not warn about it ---------------------

def _swf_runtimes(path: Path) -> list[float]:
    """Field 4 of every data line, read by plain Python (independent of the reader)."""
    with gzip.open(path, "rt") as fh:
        return [float(line.split()[3]) for line in fh if line.strip() and not line.startswith(";")]


def test_loading_sdsc_sp2_does_not_warn_and_says_the_cleaning_once():
    runs = _swf_runtimes(traces.path_of("sdsc-sp2"))
    no_runtime = sum(r <= 0 for r in runs)
    assert (len(runs), no_runtime) == (59_715, 5_681)
    df, warned = quiet(traces.load, "sdsc-sp2")
    assert warned == [] and len(df) == len(runs) - no_runtime
    assert traces.BUNDLED["sdsc-sp2"].dropped == {"run <= 0": no_runtime}
    assert "5,681 run <= 0" in df.attrs["cleaning"] and "known cleaning of sdsc-sp2" in df.attrs["cleaning"]


def test_the_catalog_states_the_cleaning_of_every_bundled_log_that_drops_jobs():
    """Every bundled log's entry states what its reading drops (a new log: fill in what the message says)."""
    for key, info in traces.BUNDLED.items():
        df, warned = quiet(traces.load, key)
        stated = f"{key}: state TraceInfo(..., dropped={df.attrs['invalid']!r}, cleaning='what those jobs are')"
        assert dict(info.dropped or {}) == df.attrs["invalid"], stated  # what the catalog says is what a read drops
        assert not [w for w in warned if "dropped" in w], key


def test_list_and_info_say_the_cleaning():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["list"])
        main(["info", "sdsc-sp2"])
    listed = next(line for line in out.getvalue().splitlines() if line.startswith("sdsc-sp2 "))
    assert "5,681 run <= 0" in listed and "cancelled" in listed
    assert "{'run <= 0': 5681}: the known cleaning of sdsc-sp2" in out.getvalue()


def test_drops_the_catalog_does_not_state_still_warn(tmp_path):
    _, warned = quiet(traces.read, "sdsc-sp2", machine="64")  # another machine: jobs above 64 nodes drop too
    assert "dropped 6174 invalid jobs of 59715 (5681 run <= 0, 493 nodes > machine)" in warned[-1]
    runs = np.array([100] * 20)
    runs[3] = -1
    path = tmp_path / "mine.swf"
    path.write_text("; MaxNodes: 8\n; MaxProcs: 8\n" + "".join(
        f"{i + 1} {i * 10} 0 {r} 2 -1 -1 2 200 -1 1 1 1 -1 -1 -1 -1 -1\n" for i, r in enumerate(runs)))
    df, warned = quiet(traces.read, path)
    assert len(df) == 19 and len(warned) == 1 and "dropped 1 invalid jobs of 20 (1 run <= 0)" in warned[0]
