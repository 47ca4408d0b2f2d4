import gzip
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcgym import jobs, traces
from hpcgym.errors import InvalidJobError, TraceFormatError
from hpcgym.machines import get
from hpcgym.traces import read_alcf, read_mustang, read_swf, write_swf

EXPECTED = {  # name: (rows in the file, valid jobs after the default drop)
    "theta": (23387, 23387),
    "theta-2022": (23911, 23911),
    "mira": (22508, 22508),
    "sdsc-sp2": (59715, 54034),
    "hpc2n": (202871, 202871),
    "lublin-256": (10000, 10000),
    "mustang": (22059, 21939),
    "mustang-2012-02": (518, 494),
    "mustang-2012-12": (1023, 965),
    "thetagpu": (22606, 22606),
    "cea-curie": (312826, 295540),
    "lanl-cm5": (122060, 122055),
    "llnl-atlas": (43778, 36600),
    "llnl-thunder": (121039, 113613),
    "metacentrum": (103656, 99944),
    "nasa-ipsc": (18239, 18066),
    "osc-clust": (36097, 35592),
    "ricc": (447794, 447784),
    "sdsc-ds": (96069, 84893),
    "sdsc-par": (32135, 32128),
    "sandia-ross": (57882, 55595),
    "unilu-gaia": (51987, 51859),
}


@pytest.mark.parametrize("name", list(traces.BUNDLED))
def test_bundled_trace_loads_canonical_and_sorted(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(name)
    rows, valid = EXPECTED[name]
    assert len(df) == valid
    assert len(df) + sum(df.attrs["invalid"].values()) == rows
    jobs.validate(df, get(df.attrs["machine"]).nodes)
    assert df["submit"].iat[0] >= 0  # PWA logs count from UnixStartTime; cleaned logs start later
    assert (df["walltime"] > 0).all()


def test_theta_csv_is_sorted_by_submit_although_file_is_not():
    raw = pd.read_csv(traces.path_of("theta"))
    assert (np.diff(raw["submit_time"].to_numpy()) < 0).any()
    df = traces.load("theta")
    assert (np.diff(df["submit"].to_numpy()) >= 0).all()
    assert df.attrs["unix_start_time"] == raw["submit_time"].min()
    assert (df["procs"] == 64 * df["nodes"]).all()
    assert set(df["status"].unique()) == {"completed", "failed", "killed"}


def test_swf_header_metadata():
    hdr = traces.load("sdsc-sp2").attrs["header"]
    assert hdr["MaxNodes"] == "128" and hdr["MaxProcs"] == "128"
    assert hdr["UnixStartTime"] == "893466664"
    assert hdr["TimeZoneString"] == "US/Pacific"
    assert hdr["Installation"] == "SDSC" and hdr["Computer"] == "IBM SP2"
    assert hdr["Queue"][0] == "0  interactive" and len(hdr["Queue"]) == 7
    assert "Copyright 2000" in hdr["Copyright"]  # continuation lines are kept
    assert traces.read_header(traces.path_of("hpc2n"))["TimeZoneString"] == "Europe/Stockholm"


def test_procs_to_nodes_mapping():
    hpc2n = traces.load("hpc2n")  # 2 cores per node: nodes = ceil(procs / 2)
    assert (hpc2n["nodes"] == -(-hpc2n["procs"] // 2)).all()
    assert (hpc2n["procs"] % 2 == 1).any()  # odd processor counts round up
    theta = traces.load("theta-2022")  # its processor fields hold nodes
    assert (theta["nodes"] == theta["procs"]).all()
    assert theta.attrs["unix_start_time"] == 1641021254  # absolute times rebased


def test_requested_procs_preferred_then_allocated(tmp_path):
    p = tmp_path / "t.swf"
    p.write_text("; MaxNodes: 64\n; MaxProcs: 128\n"
                 "1 0 0 10 8 -1 -1 6 20 -1 1 1 1 -1 -1 -1 -1 -1\n"
                 "2 5 0 10 8 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
    df = read_swf(p)
    assert df["procs"].tolist() == [6, 8]
    assert df["nodes"].tolist() == [3, 4]
    assert df["walltime"].tolist() == [20, 10] and df["walltime_known"].tolist() == [True, False]


@pytest.mark.parametrize(
    "line, number, field",
    [
        ("1 0 0 10 8 -1 -1 6 20 -1 1 1 1 -1 -1 -1", 4, "17"),
        ("1 0 0 10 8 -1 -1 six 20 -1 1 1 1 -1 -1 -1 -1 -1", 4, "8 (requested processors)"),
        ("1 0 0 10 8.5 -1 -1 6 20 -1 1 1 1 -1 -1 -1 -1 -1", 4, "5 (allocated processors)"),
        ("1 0 0 10 8 -1 -1 6 20 -1 done 1 1 -1 -1 -1 -1 -1", 4, "11 (status)"),  # a code is a number
    ],
)
def test_malformed_swf_line_names_file_line_field(tmp_path, line, number, field):
    p = tmp_path / "bad.swf.gz"
    good = "2 0 0 10 8 -1 -1 6 20 -1 1 1 1 -1 -1 -1 -1 -1"
    p.write_bytes(gzip.compress(f"; MaxNodes: 64\n; MaxProcs: 128\n\n{line}\n{good}\n".encode()))
    with pytest.raises(TraceFormatError) as exc:
        read_swf(p)
    assert exc.value.line == number
    assert exc.value.field.startswith(field)
    assert "bad.swf.gz" in str(exc.value) and f"line {number}" in str(exc.value)


def test_headerless_swf_needs_machine(tmp_path):
    p = tmp_path / "plain.swf"
    p.write_text("1 0 0 10 8 -1 -1 6 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    with pytest.raises(TraceFormatError, match="machine="):
        read_swf(p)
    assert read_swf(p, machine="sdsc-sp2")["nodes"].tolist() == [6]


def test_invalid_policy_drop_counts_and_error_names_line(tmp_path):
    p = tmp_path / "inv.swf"
    p.write_text("; MaxNodes: 8\n; MaxProcs: 8\n"
                 "1 0 0 10 8 -1 -1 4 20 -1 1 1 1 -1 -1 -1 -1 -1\n"
                 "2 1 0 -1 8 -1 -1 4 20 -1 5 1 1 -1 -1 -1 -1 -1\n"
                 "3 2 0 10 8 -1 -1 16 20 -1 1 1 1 -1 -1 -1 -1 -1\n"
                 "4 3 0 10 0 -1 -1 -1 20 -1 1 1 1 -1 -1 -1 -1 -1\n"
                 "5 4 0 0 8 -1 -1 4 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    with pytest.warns(UserWarning, match=r"dropped 4 invalid jobs of 5 \(2 run <= 0, 1 nodes <= 0, 1 nodes > "):
        df = read_swf(p)
    assert df["job_id"].tolist() == [1]
    assert df.attrs["invalid"] == {"run <= 0": 2, "nodes <= 0": 1, "nodes > machine": 1}
    with pytest.raises(InvalidJobError) as exc:
        read_swf(p, on_invalid="error")
    assert exc.value.line == 4 and exc.value.field == "run"
    with pytest.raises(ValueError, match="on_invalid"):
        read_swf(p, on_invalid="fix")


def test_alcf_malformed_and_unknown_status(tmp_path):
    head = "job,user,project,state,gpu_num,cpu_num,node_num,submit_time,wait_time,run_time,wall_time,new_status\n"
    p = tmp_path / "a.csv"
    p.write_text(head + "1,0,0,0,0,64,1,100,5,10.5,60,Pass\n2,0,0,0,0,64,x,200,5,10,60,Pass\n")
    with pytest.raises(TraceFormatError) as exc:
        read_alcf(p)
    assert exc.value.line == 3 and exc.value.field == "node_num"
    p.write_text(head + "1,0,0,0,0,64,1,100,5,10.5,60,Maybe\n")
    with pytest.raises(TraceFormatError, match="line 2: field new_status"):
        read_alcf(p)
    p.write_text(head + "1,0,0,0,0,64,1,100,5,10.5,60,Pass\n")
    df = read_alcf(p)
    assert df["run"].tolist() == [11]  # runtimes round up to whole seconds


def test_mustang_cancelled_without_start_is_invalid(tmp_path):
    df = traces.load("mustang-2012-02")
    assert df.attrs["invalid"] == {"run <= 0": 24}
    assert set(df["status"].unique()) <= {"completed", "cancelled", "timeout"}
    p = tmp_path / "m.csv"
    p.write_text("user_ID,group_ID,submit_time,start_time,end_time,wallclock_limit,job_status,node_count,"
                 "tasks_requested\n1,1,2012-02-07 00:00:28+00:00,,2012-02-07 00:00:44+00:00,0 days 00:40:00,"
                 "CANCELLED,2,48\n")
    with pytest.raises(InvalidJobError, match="line 2: field run"):
        read_mustang(p, on_invalid="error")
    p.write_text(p.read_text().replace("0 days 00:40:00", "forty minutes"))
    with pytest.raises(TraceFormatError, match="wallclock_limit"):
        read_mustang(p)


def test_bundled_swf_round_trip_is_exact(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load("sdsc-sp2")
        write_swf(df, tmp_path / "out.swf.gz")
        back = read_swf(tmp_path / "out.swf.gz", machine="sdsc-sp2")
    pd.testing.assert_frame_equal(df, back)
    assert back.attrs["header"]["Installation"] == "SDSC"


SWF_STATUSES = [s for s in jobs.STATUSES if s not in ("killed", "timeout")]


@st.composite
def job_tables(draw):
    n = draw(st.integers(1, 40))
    ints = lambda lo, hi: st.lists(st.integers(lo, hi), min_size=n, max_size=n)  # noqa: E731
    submit = np.sort(np.asarray(draw(ints(0, 10**7)), np.int64))
    run = np.asarray(draw(ints(1, 10**6)), np.int64)
    known = np.asarray(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    wall = np.where(known, np.asarray(draw(ints(1, 10**6)), np.int64), run)
    procs = np.asarray(draw(ints(1, 240)), np.int64)
    df = pd.DataFrame({
        "job_id": np.arange(1, n + 1), "submit": submit, "run": run, "walltime": wall,
        "nodes": -(-procs // 2), "procs": procs, "user": draw(ints(-1, 500)), "group": draw(ints(-1, 50)),
        "queue": draw(ints(-1, 9)), "status": draw(st.lists(st.sampled_from(SWF_STATUSES), min_size=n, max_size=n)),
        "walltime_known": known,
    })
    out = jobs.finalize(df)
    out.attrs.update(machine=get("hpc2n"), unix_start_time=draw(st.integers(0, 2 * 10**9)))
    return out


@settings(max_examples=60, deadline=None)
@given(df=job_tables())
def test_swf_round_trip_property(tmp_path_factory, df):
    path = tmp_path_factory.mktemp("rt") / "t.swf"
    write_swf(df, path)
    back = read_swf(path, machine="hpc2n")
    pd.testing.assert_frame_equal(df, back[list(jobs.COLUMNS)])
    assert back.attrs["unix_start_time"] == df.attrs["unix_start_time"]
    write_swf(back, path)
    pd.testing.assert_frame_equal(back, read_swf(path, machine="hpc2n"))


def test_split_is_chronological_and_window_rebases():
    df = traces.load("lublin-256")
    train, test = traces.split(df, "train"), traces.split(df, "test")
    assert len(train) == 7000 and len(test) == 3000
    assert train["submit"].max() <= test["submit"].min()
    w = traces.window(df, 256, rng=1)
    assert len(w) == 256 and w["submit"].iat[0] == 0
    assert w.equals(traces.window(df, 256, rng=1))


def test_a_window_never_comes_back_shorter_than_asked():
    df = traces.load("sdsc-sp2").iloc[:10].reset_index(drop=True)
    assert traces.window(df, 5, start=5)["job_id"].tolist() == df["job_id"].iloc[5:].tolist()  # the last one that fits
    with pytest.raises(ValueError, match="a window of 5 jobs starting at job 8 does not fit in a table of 10"):
        traces.window(df, 5, start=8)  # it used to hand back 2 jobs
    for bad in (0, -3):
        with pytest.raises(ValueError, match="whole number of jobs >= 1"):
            traces.window(df, bad)
    with pytest.raises(ValueError, match="starting at job -1"):
        traces.window(df, 5, start=-1)


def test_info_cli():
    out = subprocess.run([sys.executable, "-m", "hpcgym.traces", "info", "sdsc-sp2"], capture_output=True,
                         text=True, check=True).stdout
    assert "jobs                   54034" in out
    assert "offered load" in out and "run <= 0" in out and "sdsc-sp2 (128 nodes" in out


def test_unknown_trace_suggests():
    with pytest.raises(KeyError, match="Did you mean 'sdsc-sp2'"):
        traces.load("sdsc-sp3")
