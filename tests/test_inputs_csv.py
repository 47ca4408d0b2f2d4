"""Real-world inputs: bad values in CSV traces, generic CSV layouts, machine specs and the CLIs' one-line errors."""

import gzip
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcgym import cli, machines, traces
from hpcgym.errors import EmptyTraceError, InvalidJobError, TraceFormatError, UnknownMachineError
from hpcgym.traces import read_alcf, read_csv_table
from hpcgym.traces.csvtable import parse_columns

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "csv"
INTERVAL_COLUMNS = {"interarrival": "interval", "run": "run_time", "nodes": "node_num", "walltime": "wall_time",
                    "user": "user", "status": "new_status", "job_id": "u_id"}
PROCS_COLUMNS = "job_id=Job_Number,interarrival=Interval,run=Run_Time,procs=Number_of_Allocated_Processors"


def quiet_read(reader, *args, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = reader(*args, **kw)
    return df, [str(w.message) for w in caught]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO)


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# ---- ALCF: out-of-range values are dropped with their own reason, or raise naming file, line and field ----------

def test_alcf_submit_zero_and_negative_are_dropped_not_a_19000_day_span():
    path = DATA / "alcf_submit_zero.csv"
    df, warned = quiet_read(read_alcf, path)
    assert len(df) == 18
    assert df.attrs["invalid"] == {"submit out of range": 1, "submit unknown": 1}
    assert df["submit"].max() == 19 * 60  # 20 minutes, not 19,357 days
    assert df.attrs["unix_start_time"] == 1672500060
    assert len(warned) == 1 and "1 submit out of range, 1 submit unknown" in warned[0]
    with pytest.raises(InvalidJobError) as exc:
        read_alcf(path, on_invalid="error")
    assert exc.value.line == 5 and exc.value.field == "submit_time"
    assert str(path) in str(exc.value) and "submit out of range" in str(exc.value)


def test_alcf_submit_huge_drops_only_the_bad_job():
    path = DATA / "alcf_submit_huge.csv"
    df, _ = quiet_read(read_alcf, path)
    assert len(df) == 19 and 10 not in df["job_id"].tolist()
    assert df.attrs["invalid"] == {"submit out of range": 1}
    assert df["submit"].max() == 19 * 60
    with pytest.raises(InvalidJobError) as exc:
        read_alcf(path, on_invalid="error")
    assert exc.value.line == 11 and exc.value.field == "submit_time" and "1e30" in str(exc.value)


def test_alcf_huge_walltime_is_not_silently_unknown():
    path = DATA / "alcf_walltime_huge.csv"
    df, warned = quiet_read(read_alcf, path)
    assert df.attrs["invalid"] == {"walltime out of range": 2}
    assert df["walltime_known"].all() and (df["walltime"] == 7200).all()
    assert "2 walltime out of range" in warned[0]
    with pytest.raises(InvalidJobError) as exc:
        read_alcf(path, on_invalid="error")
    assert exc.value.line == 4 and exc.value.field == "wall_time" and str(path) in str(exc.value)


def test_alcf_huge_runtime_has_its_own_reason():
    path = DATA / "alcf_run_huge.csv"
    df, _ = quiet_read(read_alcf, path)
    assert df.attrs["invalid"] == {"run out of range": 1, "run <= 0": 1}
    assert sorted(set(range(1, 21)) - set(df["job_id"])) == [6, 8]
    with pytest.raises(InvalidJobError) as exc:
        read_alcf(path, on_invalid="error")
    assert exc.value.line == 7 and exc.value.field == "run_time"


def test_alcf_id_beyond_exact_range_is_a_format_error(tmp_path):
    text = (DATA / "alcf_run_huge.csv").read_text().splitlines()
    text[3] = text[3].replace(",512,8,", ",512,1e30,")
    path = tmp_path / "nodes.csv"
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(TraceFormatError) as exc:
        read_alcf(path)
    assert exc.value.line == 4 and exc.value.field == "node_num" and "out of range" in str(exc.value)


def test_empty_csv_is_one_sentence_naming_the_file():
    path = DATA / "empty.csv"
    for reader in (read_alcf, traces.read):
        with pytest.raises(TraceFormatError) as exc:
            reader(path)
        assert str(path) in str(exc.value) and "empty" in str(exc.value) and "\n" not in str(exc.value)


# ---- generic CSV job tables through a column mapping -------------------------------------------------------------

def test_csv_interval_layout_values():
    df = traces.read(DATA / "interval_layout.csv", format="csv", columns=INTERVAL_COLUMNS, machine="64")
    assert df["job_id"].tolist() == [1, 2, 3, 4, 5]
    assert df["submit"].tolist() == [0, 10, 30, 35, 35]  # cumulative inter-arrival times
    assert df["nodes"].tolist() == [30, 5, 12, 1, 2]
    assert df["run"].tolist() == [100, 50, 10, 400, 7]
    assert df["walltime"].tolist() == [200, 50, 60, 300, 10]  # -1: unknown -> walltime = run
    assert df["walltime_known"].tolist() == [True, False, True, True, True]
    assert df["user"].tolist() == [0, 1, 0, 1, 0]  # names get codes in order of appearance
    assert set(df["status"]) == {"completed"} and df.attrs["invalid"] == {}
    assert df.attrs["machine"].nodes == 64


def test_csv_procs_layout_maps_processors_to_nodes_and_counts_drops():
    df, warned = quiet_read(traces.read, DATA / "procs_layout.csv", columns=PROCS_COLUMNS, machine="100x2")
    assert df["job_id"].tolist() == [1, 2, 3]
    assert df["procs"].tolist() == [4, 5, 1] and df["nodes"].tolist() == [2, 3, 1]
    assert not df["walltime_known"].any() and (df["walltime"] == df["run"]).all()
    assert df.attrs["invalid"] == {"run <= 0": 1, "nodes > machine": 1}
    assert "dropped 2 invalid jobs of 5" in warned[0]
    with pytest.raises(InvalidJobError) as exc:
        traces.read(DATA / "procs_layout.csv", columns=PROCS_COLUMNS, machine="100x2", on_invalid="error")
    assert exc.value.line == 5 and exc.value.field == "run"


def test_csv_malformed_value_names_file_line_and_field():
    with pytest.raises(TraceFormatError) as exc:
        traces.read(DATA / "procs_bad_value.csv", columns=PROCS_COLUMNS, machine="100x2")
    assert exc.value.line == 4 and exc.value.field == "Run_Time" and "procs_bad_value.csv" in str(exc.value)


@pytest.mark.parametrize("gz", [False, True])
def test_csv_line_with_more_fields_than_the_header_names_its_line(tmp_path, gz):
    """pandas drops the extra fields of a line when it reads chosen columns: such a line used to load silently."""
    text = "job_id,submit,run,nodes\n1,0,100,2\n\n2,10,50,4,999,888\n3,20,5,1\n"
    path = tmp_path / ("extra.csv.gz" if gz else "extra.csv")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    with pytest.raises(TraceFormatError, match="6 fields where the header has 4") as exc:
        traces.read(path, machine="8")
    assert exc.value.line == 4 and exc.value.field == "5"  # the blank line 3 counts: lines as in an editor


def test_csv_quoted_commas_are_not_extra_fields(tmp_path):
    path = tmp_path / "quoted.csv"
    path.write_text('job_id,name,submit,run,nodes\r\n1,"a,b",0,100,2\r\n2,"c",10,50,4\r\n')
    assert traces.read(path, machine="8")["run"].tolist() == [100, 50]
    path.write_text('job_id,name,submit,run,nodes\n1,"a,b",0,100,2\n2,"c",10,50,4,7\n')
    with pytest.raises(TraceFormatError, match="6 fields where the header has 5") as exc:
        traces.read(path, machine="8")
    assert exc.value.line == 3


def test_csv_user_names_beside_numeric_ids_leave_the_numbers_as_written(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text("job_id,submit,run,nodes,user\n1,0,100,2,0\n2,10,50,4,7\n3,20,30,1,alice\n4,30,30,1,bob\n"
                    "5,40,30,1,alice\n6,50,30,1,\n")
    # 0 and 7 stay (one name used to renumber them all: 7 became 1); names take 8, 9 above them; empty is -1
    assert traces.read(path, machine="8")["user"].tolist() == [0, 7, 8, 9, 8, -1]
    path.write_text("job_id,submit,run,nodes,user\n1,0,100,2,carol\n2,10,50,4,dave\n3,20,30,1,carol\n")
    assert traces.read(path, machine="8")["user"].tolist() == [0, 1, 0]  # names only: codes from 0


def test_csv_unsupported_layout_says_use_columns():
    path = DATA / "interval_layout.csv"
    with pytest.raises(TraceFormatError) as exc:
        traces.read(path)
    msg = str(exc.value)
    assert "unsupported layout" in msg and "--columns" in msg and "missing column" not in msg and str(path) in msg
    with pytest.raises(TraceFormatError, match="unsupported layout"):
        traces.read(DATA / "unsupported.csv", format="csv", machine="8")


def test_csv_mapping_errors():
    with pytest.raises(TraceFormatError) as exc:
        read_csv_table(DATA / "procs_layout.csv", {"submit": "Submit", "run": "Run_Time", "procs": "Job_Number"},
                       machine="8")
    assert exc.value.field == "Submit" and "no such column" in str(exc.value)
    with pytest.raises(ValueError, match="Did you mean 'walltime'"):
        parse_columns("walltme=x,run=y")
    with pytest.raises(ValueError, match="not both"):
        parse_columns({"submit": "a", "interarrival": "b"})
    with pytest.raises(ValueError, match="must map nodes|procs"):
        read_csv_table(DATA / "procs_layout.csv", "interarrival=Interval,run=Run_Time", machine="8")
    with pytest.raises(ValueError, match="needs a machine"):
        traces.read(DATA / "procs_layout.csv", columns=PROCS_COLUMNS)
    with pytest.raises(ValueError, match="columns= applies to CSV"):
        traces.read("sdsc-sp2", columns=PROCS_COLUMNS)


def test_canonical_table_csv_reads_back_without_mapping(tmp_path):
    df = traces.load("lublin-256").head(50)
    df.to_csv(tmp_path / "table.csv", index=False)
    back = traces.read(tmp_path / "table.csv", machine="lublin-256")
    pd.testing.assert_frame_equal(df[["job_id", "submit", "run", "walltime", "nodes", "procs", "user"]],
                                  back[["job_id", "submit", "run", "walltime", "nodes", "procs", "user"]])
    assert (back["status"].astype(str) == df["status"].astype(str)).all()


# ---- machines ----------------------------------------------------------------------------------------------------

def test_machine_parse_specs_and_errors():
    assert machines.parse("theta") is machines.get("theta")
    m = machines.parse("120x2")
    assert (m.nodes, m.cores_per_node, m.procs_to_nodes(5)) == (120, 2, 3)
    assert machines.parse("128").nodes == 128 and machines.parse("128").cores_per_node == 1
    for bad in ("0", "12x0", "12x", "1.5"):
        with pytest.raises(ValueError, match="NODES"):
            machines.parse(bad)
    with pytest.raises(UnknownMachineError, match="Did you mean 'theta'"):
        machines.parse("thta")
    with pytest.raises(UnknownMachineError, match="Did you mean 'theta'"):
        machines.get("thta")


def test_mixed_node_sizes_are_reported_and_mappable():
    path = DATA / "mixed_nodes.swf"
    m = machines.from_swf_header({"MaxNodes": "3", "MaxProcs": "10"})
    assert m.nodes == 10 and "mixed node sizes" in m.description
    out = run_cli("hpcgym.traces", "info", str(path))
    assert out.returncode == 0 and "machine note" in out.stdout and "--machine" in out.stdout
    mapped = run_cli("hpcgym.traces", "info", str(path), "--machine", "3x4")
    assert mapped.returncode == 0, mapped.stderr
    assert "3x4 (3 nodes x 4 cores)" in mapped.stdout and "machine note" not in mapped.stdout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.read(path, machine="3x4")
    assert df["nodes"].tolist() == [1, 2, 1]


# ---- CLIs: one-line errors, exit 2 -------------------------------------------------------------------------------

@pytest.mark.parametrize("args, needles", [
    (["info", "tests/data/csv/empty.csv"], ["empty.csv", "empty"]),
    (["info", "tests/data/csv/alcf_header_only.csv"], ["alcf_header_only.csv", "no valid jobs"]),
    (["info", "tests/data/csv/interval_layout.csv"], ["unsupported layout", "--columns"]),
    (["info", "sdsc-sp3"], ["Did you mean 'sdsc-sp2'"]),
    (["info", "sdsc-sp2", "--machine", "thta"], ["Did you mean 'theta'"]),
    (["info", "sdsc-sp2", "--machine", "12x0"], ["--machine", "positive"]),
    (["info", "missing.swf"], ["missing.swf"]),
    (["info", "tests/data/csv/procs_layout.csv", "--machine", "100x2", "--columns", "run=Run_Time"],
     ["must map"]),
])
def test_traces_info_errors_are_one_line(args, needles):
    assert_one_line_error(run_cli("hpcgym.traces", *args), *needles)


def test_traces_info_all_dropped(tmp_path):
    path = tmp_path / "dropped.csv"
    path.write_text((DATA / "alcf_header_only.csv").read_text() + "1,0,0,0,0,64,1,100,5,0,60,0,Pass\n")
    assert_one_line_error(run_cli("hpcgym.traces", "info", str(path)), "all 1 jobs were dropped", "run <= 0")


def test_traces_info_generic_csv():
    out = run_cli("hpcgym.traces", "info", "tests/data/csv/procs_layout.csv", "--machine", "100x2",
                  "--columns", PROCS_COLUMNS)
    assert out.returncode == 0, out.stderr
    assert "jobs                   3" in out.stdout and "100x2 (100 nodes x 2 cores)" in out.stdout


@pytest.mark.parametrize("args, needles", [
    (["--window", "0"], ["--window", "at least 1"]),
    (["--trace", "lublin-256", "--no-kill", "--backfill", "conservative"], ["--backfill conservative", "--no-kill"]),
    (["--trace", "lublin-256", "--seed", "-1"], ["--seed", "between 0 and"]),
    (["--window", "10", "--windows", "0"], ["--windows", "at least 1"]),
    (["--trace", "tests/data/csv/alcf_header_only.csv"], ["no valid jobs"]),
    (["--trace", "lublin-256", "--window", "100000"], ["longer than the trace"]),
    (["--trace", "lublin-265"], ["Did you mean 'lublin-256'"]),
])
def test_baselines_run_errors_are_one_line(args, needles):
    proc = run_cli("baselines.run", "--quiet", "--policy", "fcfs", "--backfill", "easy", *args)
    assert_one_line_error(proc, *needles)


def test_baselines_run_passes_machine_and_columns():
    proc = run_cli("baselines.run", "--quiet", "--policy", "fcfs", "--backfill", "easy", "--trace",
                   "tests/data/csv/procs_layout.csv", "--machine", "100x2", "--columns", PROCS_COLUMNS)
    assert proc.returncode == 0, proc.stderr
    assert "on 100x2 (100 nodes)" in proc.stdout and "1 run <= 0, 1 nodes > machine" in proc.stdout


def test_cli_run_keeps_tracebacks_of_bugs(capsys):
    def bad_input(argv):
        raise TraceFormatError("f.csv", 3, "x", "bad\nvalue")

    def bug(argv):
        return np.arange(0)[0]

    assert cli.run(bad_input) == 2
    assert capsys.readouterr().err == "error: f.csv, line 3: field x: bad value\n"
    with pytest.raises(IndexError):
        cli.run(bug)
    assert cli.run(lambda argv: None) == 0
    with pytest.raises(EmptyTraceError, match="no valid jobs"):
        raise EmptyTraceError("f.csv", {"run <= 0": 2})


def test_alcf_csv_machine_comes_from_the_name_or_a_warning(tmp_path):
    head = gzip.decompress((Path(traces.__file__).parent.parent / "data" / "data_mira.csv.gz").read_bytes())
    rows = head.decode().splitlines()[:50]
    named = tmp_path / "data_mira_part.csv"
    named.write_text("\n".join(rows) + "\n")
    assert machines.get(traces.read(named).attrs["machine"]).name == "mira"
    anonymous = tmp_path / "cluster.csv"
    anonymous.write_text("\n".join(rows) + "\n")
    with pytest.warns(UserWarning, match="does not say which machine"):
        traces.read(anonymous)
