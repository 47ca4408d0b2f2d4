"""SWF traces read in chunks: the same jobs, figures and errors as the whole read, a block of text at a time.

The oracle is the whole read (:func:`hpcgym.traces.read`) and ``traces info``'s :func:`summary` of its table. The
text block is shrunk to a few KB (``_scan.BLOCK``) so that small files span many chunks.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcgym import traces
from hpcgym.errors import HpcgymError
from hpcgym.traces import _scan
from hpcgym.traces.__main__ import Tally, summary

DATA = Path(__file__).resolve().parent / "data" / "swf"
REPO = Path(__file__).resolve().parents[1]
HEADER = "; MaxNodes: 64\n; MaxProcs: 256\n"


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(_scan, "BLOCK", 2048)


def _line(job: int, submit: int, run: int = 100, procs: int = 8, wall: int = 200, user: int = 1) -> str:
    return f"{job} {submit} 5 {run} {procs} -1 -1 {procs} {wall} -1 1 {user} 1 -1 1 -1 -1 -1"


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def _chunks(path, **kw) -> list[pd.DataFrame]:
    return _quiet(lambda: list(traces.read_chunks(path, **kw)))


def _tally(chunks: list[pd.DataFrame]) -> dict:
    tally = Tally()
    for c in chunks:
        tally.add(c)
    return tally.summary()


def _same_jobs(whole: pd.DataFrame, chunks: list[pd.DataFrame]) -> None:
    """The chunks hold the whole read's jobs (its Unix times rebased to its start), in submit order once sorted."""
    joined = pd.concat(chunks, ignore_index=True)
    said = str(whole.attrs["header"].get("UnixStartTime", "0")).split()[0]
    start = 0 if int(said) else whole.attrs["unix_start_time"]  # without the header's, Unix times stay in chunks
    joined["submit"] -= start
    joined = joined.sort_values(["submit", "job_id"], kind="stable", ignore_index=True)
    for col in whole.columns:
        assert joined[col].astype(str if col == "status" else np.int64).tolist() == \
               whole[col].astype(str if col == "status" else np.int64).tolist(), col


def _messy(tmp_path: Path, unix: int = 0) -> Path:
    """600 jobs in many chunks: invalid ones, an id repeated chunks later, submit times out of order."""
    rng = np.random.default_rng(3)
    lines = []
    for j in range(600):
        submit = unix + j * 50 + int(rng.integers(0, 400))  # out of order within and across chunks
        run = -1 if j % 97 == 5 else int(rng.integers(1, 5000))  # invalid: run <= 0
        procs = 1000 if j == 433 else int(rng.choice([4, 8, 64]))  # one job larger than the machine
        job = 17 if j == 510 else j + 1  # job 17's id again, far later
        lines.append(_line(job, submit, run, procs, int(rng.integers(100, 9000)), int(rng.integers(1, 30))))
    path = tmp_path / f"messy{unix}.swf"
    path.write_text(HEADER + "\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("unix", [0, 1_600_000_000])
def test_chunks_hold_the_whole_reads_jobs_and_info_figures(tmp_path, unix):
    path = _messy(tmp_path, unix)
    whole = _quiet(traces.read, path, compact=True)
    chunks = _chunks(path, rows=40)
    assert len(chunks) > 5 and sum(c.attrs["rows"] for c in chunks) == 600
    _same_jobs(whole, chunks)
    assert whole.attrs["duplicate_ids"] == 1 and whole.attrs["invalid"] == {"run <= 0": 7, "nodes > machine": 1}
    assert _tally(chunks) == summary(whole)


@pytest.mark.parametrize("name", ["lublin-256", "theta-2022", "sdsc-sp2"])
def test_bundled_traces_give_the_same_info_in_chunks(name, monkeypatch):
    monkeypatch.setattr(_scan, "BLOCK", 1 << 16)
    chunks = _chunks(name, rows=3000)
    assert len(chunks) > 3
    whole = _quiet(traces.read, name, compact=True)
    _same_jobs(whole, chunks)
    assert _tally(chunks) == summary(whole)


@pytest.mark.parametrize("path", sorted(DATA.iterdir()), ids=lambda p: p.name)
def test_every_crafted_file_reads_or_fails_as_the_whole_read(path):
    options = {"machine": "64x4"} if path.name in ("empty.swf",) else {}
    try:
        whole = _quiet(traces.read, path, compact=True, **options)
    except HpcgymError as exc:
        with pytest.raises(type(exc)) as got:
            _chunks(path, rows=1, **options)
        assert str(got.value) == str(exc)
        return
    chunks = _chunks(path, rows=1, **options)
    _same_jobs(whole, chunks)


def _errors(path: Path, **kw) -> tuple[str, str]:
    with pytest.raises(HpcgymError) as whole:
        _quiet(traces.read, path, **kw)
    with pytest.raises(HpcgymError) as chunked:
        _chunks(path, rows=5, **kw)
    return str(whole.value), str(chunked.value)


def test_errors_in_late_chunks_name_the_same_line_and_field(tmp_path):
    good = [_line(j, j * 10) for j in range(1, 400)]
    cases = {
        "text": (good[:300] + ["301 3000 5 1x0 8 -1 -1 8 200 -1 1 1 1 -1 1 -1 -1 -1"] + good[300:], {}),
        "fields": (good[:350] + ["351 3500 5 100 8"] + good[350:], {}),
        "fraction": (good[:250] + [_line(251, 2500, procs=8).replace(" 8 ", " 8.5 ", 1)] + good[250:], {}),
        "invalid": (good[:320] + [_line(321, 3200, run=0)] + good[320:], {"on_invalid": "error"}),
        "repeat": (good + [_line(7, 9000)], {"on_duplicate": "error"}),
        "run range": (good[:200] + [_line(201, 2000, run=2**40)] + good[200:], {"on_invalid": "error"}),
    }
    for name, (lines, kw) in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.swf"
        path.write_text(HEADER + "\n".join(lines) + "\n")
        whole, chunked = _errors(path, **kw)
        assert chunked == whole, name
        assert "line " in whole, whole


def test_rounding_and_counts_add_up_over_chunks(tmp_path):
    lines = [_line(j, j * 10 + (j % 3) * 0.5 if j % 4 else j * 10, procs=8) for j in range(1, 300)]
    path = tmp_path / "halves.swf"
    path.write_text(HEADER + "\n".join(str(x) for x in lines) + "\n")
    whole = _quiet(traces.read, path, compact=True, round="submit=ceil")
    chunks = _chunks(path, rows=7, round="submit=ceil")
    assert whole.attrs["repaired"] and chunks[-1].attrs["repaired"] == whole.attrs["repaired"]
    assert _tally(chunks) == summary(whole)


def test_other_formats_are_refused_with_a_hint():
    with pytest.raises(ValueError, match="only SWF traces are read in chunks"):
        traces.read_chunks("theta")


def test_info_cli_streams_and_prints_the_whole_reads_figures(tmp_path):
    path = _messy(tmp_path)
    done = subprocess.run([sys.executable, "-m", "hpcgym.traces", "info", str(path), "--rows", "50"],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = "".join(f"{k:22} {v}\n" for k, v in summary(_quiet(traces.read, path, compact=True)).items())
    assert done.stdout == expected
