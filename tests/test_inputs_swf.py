"""Real-world SWF inputs: odd status codes, broken bytes, header vs machine, and sampled files that re-read.

The crafted files live in ``tests/data/swf``; each is a few lines.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import warnings
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcgym import cli, traces
from hpcgym import jobs as jobtable
from hpcgym.errors import InvalidJobError, TraceFormatError
from hpcgym.traces import read_header, read_swf, write_swf
from synth import sample as sample_cli
from synth.lublin import LublinSynthesizer

DATA = Path(__file__).resolve().parent / "data" / "swf"
ROOT = Path(__file__).resolve().parent.parent
LF_TABLE = {"job_id": [1, 2, 3], "submit": [0, 5, 9], "nodes": [2, 2, 2],
            "status": ["completed", "completed", "failed"]}


def _read_quietly(path, **kw) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # these files must read without any warning
        return read_swf(path, **kw)


def _columns(df: pd.DataFrame, names) -> dict:
    return {c: df[c].astype(str if c == "status" else object).tolist() for c in names}


# ---- 1. status codes outside SWF's -1..5 -----------------------------------------------------------------------
def test_exit_codes_in_status_are_read_counted_in_one_warning():
    path = DATA / "exit_codes.swf"
    with pytest.warns(UserWarning) as record:
        df = read_swf(path)
    ours = [str(w.message) for w in record if "exit_codes.swf" in str(w.message)]
    assert len(ours) == 1, ours  # one warning: the drop count and the status codes together
    msg = ours[0]
    assert "dropped 1 invalid jobs of 6 (1 run <= 0)" in msg
    assert "3 jobs have status codes outside SWF's -1..5 (265: 2 jobs, 127: 1 job)" in msg
    assert df["job_id"].tolist() == [1, 2, 3, 4, 5]  # job 6 (code 137) has run -1: dropped, not counted
    assert df["status"].astype(str).tolist() == ["completed", "unknown", "unknown", "unknown", "failed"]
    assert df.attrs["status_codes"] == {265: 2, 127: 1}
    jobtable.validate(df, 8)
    with pytest.raises(InvalidJobError) as exc:  # the only error left is the invalid job, on its own line
        read_swf(path, on_invalid="error")
    assert exc.value.line == 10 and exc.value.field == "run"


def test_standard_codes_keep_an_empty_status_code_count(tmp_path):
    df = _read_quietly(DATA / "bom.swf")
    assert df.attrs["status_codes"] == {}
    out = tmp_path / "again.swf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_swf(read_swf(DATA / "exit_codes.swf"), out)
    again = _read_quietly(out)  # "unknown" is written as -1, a standard code
    assert again["status"].astype(str).tolist()[1:4] == ["unknown"] * 3 and again.attrs["status_codes"] == {}


def test_traces_info_cli_reads_exit_codes():
    run = subprocess.run([sys.executable, "-m", "hpcgym.traces", "info", "tests/data/swf/exit_codes.swf"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "jobs                   5" in run.stdout


# ---- 2. bytes: gzip damage, empty files, BOM, CR line ends --------------------------------------------------------
@pytest.mark.parametrize("name, cause", [("truncated.swf.gz", EOFError), ("bad_crc.swf.gz", gzip.BadGzipFile),
                                         ("corrupt.swf.gz", zlib.error)])
def test_damaged_gzip_names_the_file(name, cause):
    for reader in (read_swf, read_header):
        with pytest.raises(TraceFormatError) as exc:
            reader(DATA / name)
        assert name in str(exc.value) and "gzip" in str(exc.value)
        assert exc.value.path.endswith(name) and exc.value.line is None
        assert isinstance(exc.value.__cause__, cause)


@pytest.mark.parametrize("machine", [None, "sdsc-sp2"])
def test_empty_file_says_it_is_empty(machine):
    with pytest.raises(TraceFormatError, match=r"empty\.swf: the file is empty"):
        read_swf(DATA / "empty.swf", machine=machine)


def test_empty_gzip_says_it_is_empty(tmp_path):
    p = tmp_path / "nothing.swf.gz"
    p.write_bytes(gzip.compress(b"\n  \n"))
    with pytest.raises(TraceFormatError, match=r"nothing\.swf\.gz: the file is empty"):
        read_swf(p)


@pytest.mark.parametrize("name", ["bom.swf", "cr_only.swf", "crlf.swf"])
def test_bom_and_line_ends_read_like_plain_lf(name):
    df = _read_quietly(DATA / name)
    assert _columns(df, LF_TABLE) == LF_TABLE
    assert df.attrs["machine"].nodes == 8 and df.attrs["machine"].cores_per_node == 2
    assert read_header(DATA / name)["MaxProcs"] == "16"


def test_cr_only_errors_name_the_right_line():
    with pytest.raises(TraceFormatError) as exc:
        read_swf(DATA / "bad_cr_only.swf")
    assert exc.value.line == 4 and exc.value.field.startswith("8 (requested processors)")
    assert "bad_cr_only.swf, line 4" in str(exc.value)


def test_utf16_is_a_clear_error(tmp_path):
    p = tmp_path / "wide.swf"
    p.write_bytes((DATA / "bom.swf").read_bytes()[3:].decode().encode("utf-16"))
    with pytest.raises(TraceFormatError, match=r"wide\.swf, line 1: the text is UTF-16"):
        read_swf(p)


# ---- 3. header vs an explicit machine --------------------------------------------------------------------------
def test_header_machine_conflict_warns_and_uses_the_machine():
    path = DATA / "nodes_header.swf"
    with pytest.warns(UserWarning) as record:
        df = read_swf(path, machine="mira")
    assert len(record) == 1
    msg = str(record[0].message)
    for part in ("nodes_header.swf", "MaxNodes 49152, MaxProcs 49152", "machine='mira' has 49152 nodes x 16 cores",
                 "Used the machine='mira' passed", "ceil(procs / 16)"):
        assert part in msg, (part, msg)
    assert df["nodes"].tolist() == [32, 64]  # behaviour kept: the explicit machine maps the processors
    assert _read_quietly(path)["nodes"].tolist() == [512, 1024]  # the header alone: one processor per node


@pytest.mark.parametrize("header, machine", [("; MaxNodes: 240\n; MaxProcs: 240\n", "hpc2n"),  # PWA HPC2N header
                                             ("; MaxNodes: 4360\n; MaxProcs: 4360\n", "theta"),  # Theta 2022 SWF
                                             ("; MaxNodes: 128\n; MaxProcs: 128\n", "sdsc-sp2"),
                                             ("; MaxNodes: 256\n", "lublin-256")])
def test_matching_headers_do_not_warn(tmp_path, header, machine):
    p = tmp_path / "ok.swf"
    p.write_text(header + "1 0 0 10 4 -1 -1 4 60 -1 1 1 1 -1 1 -1 -1 -1\n")
    assert len(_read_quietly(p, machine=machine)) == 1


# ---- 4. sampled SWF files describe their machine ---------------------------------------------------------------
def _fit(tmp_path: Path, nodes: int, cores: int) -> Path:
    rng = np.random.default_rng(0)
    n = 60
    size = rng.integers(1, 9, n)
    df = pd.DataFrame({
        "job_id": np.arange(1, n + 1), "submit": np.cumsum(rng.integers(10, 500, n)), "run": rng.integers(5, 900, n),
        "walltime": np.full(n, 1000), "nodes": size, "procs": size * cores, "user": rng.integers(0, 5, n),
        "group": -1, "queue": -1, "status": "completed", "walltime_known": True,
    })
    model_dir = tmp_path / f"model-{nodes}x{cores}"
    LublinSynthesizer(max_nodes=nodes).fit(jobtable.finalize(df)).save(model_dir)
    return model_dir


KEEP = ("submit", "run", "walltime", "nodes")


@pytest.mark.parametrize("nodes, cores, machine, expect", [
    (100, 3, None, "lublin-100x3"),  # no catalog machine of that shape: one built from the model
    (4392, 64, None, "theta"),       # the shape of Theta (ALCF CSV, 64 cores per node): the catalog's Theta
    (4392, 64, "theta", "theta"),
    (100, 3, "mira", "mira"),
])
def test_sampled_swf_rereads_without_machine(tmp_path, capsys, nodes, cores, machine, expect):
    model_dir, out = _fit(tmp_path, nodes, cores), tmp_path / "sample.swf.gz"
    argv = ["--model", str(model_dir), "--jobs", "200", "--seed", "3", "--out", str(out)]
    assert sample_cli.main(argv + (["--machine", machine] if machine else [])) == 0
    assert f"for {expect} " in capsys.readouterr().out
    header = read_header(out)
    assert {"MaxNodes", "MaxProcs", "Note"} <= set(header)
    expected = LublinSynthesizer.load(model_dir).sample(200, seed=3)
    back = _read_quietly(out)  # no machine=: the header describes it
    assert _columns(back, KEEP) == _columns(expected, KEEP)
    assert back.attrs["machine"].nodes == int(header["MaxNodes"])
    named = _read_quietly(out, machine=expect) if expect != "lublin-100x3" else back  # and no header conflict
    assert _columns(named, KEEP) == _columns(expected, KEEP)


def test_sample_refuses_a_machine_too_small(tmp_path, capsys):
    model_dir, out = _fit(tmp_path, 4392, 64), tmp_path / "small.swf"
    argv = ["--model", str(model_dir), "--jobs", "300", "--machine", "kth-sp2", "--out", str(out)]
    assert cli.run(sample_cli.main, argv) == 2  # one error line, exit 2, as from the command line
    assert "more than the 100 nodes of 'kth-sp2'" in capsys.readouterr().err and not out.exists()


def test_bundled_reader_is_unchanged_for_standard_files():
    jobs = traces.load("lublin-256")
    assert len(jobs) == 10_000 and jobs.attrs["status_codes"] == {}
