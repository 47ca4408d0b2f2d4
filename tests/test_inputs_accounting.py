"""Batch-system accounting logs: Slurm's sacct output and PBS/Torque E records, odd and broken, and the SWF converter.

The crafted files under ``tests/data/slurm`` and ``tests/data/pbs`` follow the documented formats (the sacct man page;
PBS Pro and Torque accounting records). Every expected value below was worked out by hand from those files.
"""

import gzip
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from hpcgym import jobs, testing, traces
from hpcgym.errors import InvalidJobError, TraceFormatError
from hpcgym.traces import read_pbs, read_slurm
from hpcgym.traces.convert import anonymize, convert

REPO = Path(__file__).resolve().parent.parent
SLURM = REPO / "tests" / "data" / "slurm"
PBS = REPO / "tests" / "data" / "pbs" / "daily"
CLUSTER = SLURM / "cluster.sacct"
COMPARED = ["job_id", "submit", "run", "walltime", "nodes", "procs", "user", "group", "queue", "walltime_known", "wait"]

# cluster.sacct, by hand: 12 jobs (4 steps skipped); kept in submit order
SLURM_IDS = [1001, 1002, 1004, 1005, 1006, 1007, 1008, 1012]
SLURM_SUBMIT = [0, 300, 600, 600, 3600, 5400, 7200, 12600]  # from 2024-03-01T08:00:00
SLURM_RUN = [3600, 180184, 300, 150, 3600, 600, 1200, 42]  # 1002: 2-02:03:04; 1005: "02:30" is MM:SS
SLURM_WALL = [7200, 259200, 1800, 1800, 3600, 600, 3600, 900]  # 1006 UNLIMITED, 1007 Partition_Limit: = run
SLURM_STATUS = ["completed", "timeout", "completed", "failed", "completed", "completed", "cancelled", "failed"]


def quiet(reader, *args, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = reader(*args, **kw)
    return df, [str(w.message) for w in caught]


def edited(tmp_path, lines: dict[int, str] | None = None, drop_fields: tuple[str, ...] = (), name="edit.sacct"):
    """A copy of cluster.sacct with some lines (1-based) replaced and some fields removed."""
    rows = [r.split("|") for r in CLUSTER.read_text().splitlines()]
    keep = [i for i, f in enumerate(rows[0]) if f not in drop_fields]
    text = ["|".join(r[i] for i in keep) for r in rows]
    for number, line in (lines or {}).items():
        text[number - 1] = line
    path = tmp_path / name
    path.write_text("\n".join(text) + "\n")
    return path


def cli(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO)


def one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# ---- Slurm: the crafted log, value by value ------------------------------------------------------------------------

def test_sacct_reads_to_the_hand_computed_table():
    df, warned = quiet(read_slurm, CLUSTER)
    assert df["job_id"].tolist() == SLURM_IDS  # 1003_1 -> JobIDRaw 1004, 1003_2 -> 1005
    assert df["submit"].tolist() == SLURM_SUBMIT
    assert df["run"].tolist() == SLURM_RUN
    assert df["walltime"].tolist() == SLURM_WALL
    assert df["walltime_known"].tolist() == [True, True, True, True, False, False, True, True]
    assert df["nodes"].tolist() == [2, 4, 1, 1, 8, 1, 16, 1]
    assert df["procs"].tolist() == [64, 128, 8, 8, 256, 1, 512, 4]
    assert df["wait"].tolist() == [10, 60, 5, 5, 0, 60, 60, 900]
    assert df["status"].astype(str).tolist() == SLURM_STATUS  # "CANCELLED by 5001" is cancelled
    assert df["user"].tolist() == [1, 2, 1, 1, 3, 2, 1, 5]  # alice, bob, carol, (dave dropped), erin
    assert df["group"].tolist() == [1, 2, 1, 1, 3, 2, 1, 3]
    assert df["queue"].tolist() == [1, 1, 2, 2, 3, 1, 1, 1]
    assert df.attrs["names"] == {"user": ["alice", "bob", "carol", "dave", "erin"], "group": ["phys", "chem", "bio"],
                                 "queue": ["normal", "debug", "long"]}
    assert df.attrs["unix_start_time"] == 1709280000  # 2024-03-01T08:00:00 UTC
    assert df.attrs["steps_skipped"] == 4  # 1001.batch, 1001.extern, 1004.batch, 1008.0
    assert df.attrs["invalid"] == {"cancelled before start": 2, "never started": 1, "still running": 1}
    jobs.validate(df, max_nodes=16)


def test_sacct_machine_is_the_largest_job_with_a_warning_unless_given():
    df, warned = quiet(read_slurm, CLUSTER)
    mach = df.attrs["machine"]
    assert (mach.nodes, mach.cores_per_node, mach.name) == (16, 32, "16x32")  # 1008: 16 nodes; 32 CPUs per node
    assert any("no machine given" in w and "16 nodes x 32 cores" in w for w in warned)
    assert any("2 cancelled before start, 1 never started, 1 still running" in w for w in warned)
    small, warned = quiet(read_slurm, CLUSTER, machine="8x32")
    assert not any("no machine given" in w for w in warned)
    assert small.attrs["invalid"]["nodes > machine"] == 1 and 1008 not in small["job_id"].tolist()


def test_sacct_never_ran_raise_at_their_line_with_on_invalid_error():
    with pytest.raises(InvalidJobError) as exc:
        read_slurm(CLUSTER, machine="64", on_invalid="error")
    assert exc.value.line == 9 and exc.value.field == "Start"  # 1003_[3-4], PENDING, Start Unknown
    assert "never started" in str(exc.value) and "cluster.sacct" in str(exc.value)
    assert CLUSTER.read_text().splitlines()[8].startswith("1003_[3-4]|")


def test_sacct_cancelled_while_pending_has_its_own_reason(tmp_path):
    path = edited(tmp_path, {9: CLUSTER.read_text().splitlines()[1].replace("1001|1001", "1003|1003")})
    with pytest.raises(InvalidJobError) as exc:
        read_slurm(path, machine="64", on_invalid="error")
    assert exc.value.line == 14 and exc.value.field == "Start" and "cancelled before start" in str(exc.value)


def test_sacct_truncated_last_line_names_line_and_first_missing_field():
    with pytest.raises(TraceFormatError) as exc:
        read_slurm(SLURM / "truncated.sacct")
    assert exc.value.line == 5 and exc.value.field == "Elapsed"
    assert "expected 14 fields, found 9" in str(exc.value) and "truncated.sacct" in str(exc.value)


@pytest.mark.parametrize("variant", ["parsable", "crlf_gzip", "reordered_lowercase", "unix_seconds", "no_elapsed",
                                     "no_steps"])
def test_sacct_variants_read_to_the_same_table(tmp_path, variant):
    want, _ = quiet(read_slurm, CLUSTER)
    lines = CLUSTER.read_text().splitlines()
    path = tmp_path / "v.sacct"
    if variant == "parsable":  # sacct -p: a '|' ends every line
        path.write_text("\n".join(ln + "|" for ln in lines) + "\n")
    elif variant == "crlf_gzip":
        path = tmp_path / "v.sacct.gz"
        path.write_bytes(gzip.compress(("\r\n".join(lines) + "\r\n").encode()))
    elif variant == "reordered_lowercase":
        rows = [ln.split("|") for ln in lines]
        order = list(reversed(range(len(rows[0]))))
        path.write_text("\n".join("|".join(r[i] for i in order) for r in [[c.lower() for c in rows[0]]] + rows[1:]))
    elif variant == "unix_seconds":  # SLURM_TIME_FORMAT=%s
        text = CLUSTER.read_text()
        for stamp in sorted(set(pd.Series(text.replace("\n", "|").split("|")).loc[lambda s: s.str.match(r"\d{4}-")])):
            text = text.replace(stamp, str(int(pd.Timestamp(stamp, tz="UTC").timestamp())))
        path.write_text(text)
    elif variant == "no_elapsed":  # runtimes from End - Start
        path = edited(tmp_path, drop_fields=("Elapsed",))
    else:  # sacct -X: no steps
        path.write_text("\n".join(ln for ln in lines if "." not in ln.split("|")[0]) + "\n")
    got, _ = quiet(read_slurm, path)
    pd.testing.assert_frame_equal(got, want)


def test_sacct_jobid_alone_reads_plain_ids_and_asks_for_jobidraw_on_array_tasks(tmp_path):
    path = edited(tmp_path, drop_fields=("JobIDRaw",))
    with pytest.raises(TraceFormatError) as exc:
        read_slurm(path)
    assert exc.value.line == 6 and exc.value.field == "JobID" and "JobIDRaw" in str(exc.value)
    plain = [ln for ln in path.read_text().splitlines() if not ln.startswith("1003_")]
    path.write_text("\n".join(plain) + "\n")
    df, _ = quiet(read_slurm, path)
    assert df["job_id"].tolist() == [1001, 1002, 1006, 1007, 1008, 1012]


@pytest.mark.parametrize("line, field, needle", [
    (2, "Submit", "2024-13-01T08:00:00"),  # month 13
    (5, "Elapsed", "2-02:xx:04"),
    (5, "Timelimit", "soon"),
    (2, "NNodes", "2.5"),
    (2, "NCPUS", "many"),
])
def test_sacct_bad_value_names_file_line_and_field(tmp_path, line, field, needle):
    rows = [r.split("|") for r in CLUSTER.read_text().splitlines()]
    rows[line - 1][rows[0].index(field)] = needle
    path = tmp_path / "bad.sacct"
    path.write_text("\n".join("|".join(r) for r in rows) + "\n")
    with pytest.raises(TraceFormatError) as exc:
        read_slurm(path)
    assert (exc.value.line, exc.value.field) == (line, field) and needle in str(exc.value)
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_sacct_values_of_jobs_that_never_ran_are_not_checked(tmp_path):
    rows = [r.split("|") for r in CLUSTER.read_text().splitlines()]
    rows[8][rows[0].index("NNodes")] = "1-4"  # the pending array record: a range, unused
    path = tmp_path / "pending.sacct"
    path.write_text("\n".join("|".join(r) for r in rows) + "\n")
    df, _ = quiet(read_slurm, path)
    assert df["job_id"].tolist() == SLURM_IDS


@pytest.mark.parametrize("text, line, field, needle", [
    ("JobID      JobName  State\n---------- -------- ---------\n1001       run      COMPLETED\n", 1, None,
     "sacct -P"),
    ("JobIDRaw|Submit|Start|End\n1|2024-03-01T08:00:00|2024-03-01T08:00:00|2024-03-01T08:01:00\n", 1, "NNodes",
     "missing from the header"),
    ("1001|alice|2024-03-01T08:00:00\n", 1, "JobIDRaw,Submit,Start,End,NNodes", "missing from the header"),
])
def test_sacct_wrong_layouts_say_how_to_export(tmp_path, text, line, field, needle):
    path = tmp_path / "layout.sacct"
    path.write_text(text)
    with pytest.raises(TraceFormatError) as exc:
        read_slurm(path)
    assert (exc.value.line, exc.value.field) == (line, field) and needle in str(exc.value)


def test_sacct_stray_bar_and_empty_file(tmp_path):
    lines = CLUSTER.read_text().splitlines()
    path = tmp_path / "bar.sacct"
    path.write_text("\n".join(lines[:5] + [lines[5].replace("debug", "de|bug")] + lines[6:]) + "\n")
    with pytest.raises(TraceFormatError) as exc:
        read_slurm(path)
    assert exc.value.line == 6 and "found 15" in str(exc.value) and "JobName" in str(exc.value)
    path.write_text("\n \n")
    with pytest.raises(TraceFormatError, match="empty"):
        read_slurm(path)


def test_sacct_unknown_state_reads_as_unknown_with_a_warning(tmp_path):
    rows = [r.split("|") for r in CLUSTER.read_text().splitlines()]
    rows[1][-1] = "SPECIAL_EXIT"
    path = tmp_path / "state.sacct"
    path.write_text("\n".join("|".join(r) for r in rows) + "\n")
    df, warned = quiet(read_slurm, path)
    assert df["status"].astype(str).iat[0] == "unknown" and df.attrs["unknown_states"] == {"SPECIAL_EXIT": 1}
    assert any("SPECIAL_EXIT: 1" in w for w in warned)


def test_sacct_header_only_is_an_empty_table(tmp_path):
    path = tmp_path / "none.sacct"
    path.write_text(CLUSTER.read_text().splitlines()[0] + "\n")
    df, _ = quiet(read_slurm, path, machine="4")
    assert len(df) == 0 and list(df.columns)[:len(jobs.COLUMNS)] == list(jobs.COLUMNS)


@pytest.mark.parametrize("writer, reader", [(testing.write_sacct, read_slurm), (testing.write_pbs, read_pbs)])
def test_log_writers_round_trip_on_a_bundled_trace(tmp_path, writer, reader):
    """testing's writers format, the readers parse: a bundled trace goes through both unchanged."""
    src = quiet(traces.load, "sdsc-sp2")[0].iloc[:3000].reset_index(drop=True)
    path = tmp_path / "sp2.log"
    writer(src, path)
    back, _ = quiet(reader, path, machine="sdsc-sp2")
    assert len(back) == len(src) and back.attrs["invalid"] == {}
    assert (back["submit"].to_numpy() == src["submit"].to_numpy() - src["submit"].iat[0]).all()
    for col in ("job_id", "run", "walltime", "walltime_known", "nodes", "procs", "wait"):
        assert (back[col].to_numpy() == src[col].to_numpy()).all(), col
    for col in ("user", "group"):  # names u<id>, g<id> numbered again (in file order): one number per id
        pairs = set(zip(back[col], src[col], strict=True))
        assert len(pairs) == src[col].nunique() == back[col].nunique(), col


# ---- PBS / Torque: a directory of two daily logs -------------------------------------------------------------------

def test_pbs_directory_reads_to_the_hand_computed_table():
    df, warned = quiet(read_pbs, PBS)
    assert df["job_id"].tolist() == [2001, 2007, 2008, 2003, 2005, 2006]  # 2002[2] -> 2007, 2002[1] -> 2008
    assert df["submit"].tolist() == [0, 300, 300, 3600, 10800, 28800]
    assert df["run"].tolist() == [3600, 150, 300, 93784, 3600, 30000]  # 2003: 26:03:04; 2006: end - start
    assert df["walltime"].tolist() == [7200, 1800, 1800, 360000, 14400, 30000]  # 2003: 100:00:00
    assert df["walltime_known"].tolist() == [True, True, True, True, True, False]
    assert df["nodes"].tolist() == [2, 1, 1, 2, 2, 4]  # 2005: no nodect, exec_host on n03 and n04
    assert df["procs"].tolist() == [64, 8, 8, 32, 16, 128]  # 2003 (Torque): nodes=2:ppn=16
    assert df["wait"].tolist() == [10, 60, 60, 60, 10, 120]
    assert df["status"].astype(str).tolist() == ["completed", "failed", "completed", "completed", "completed",
                                                 "failed"]
    assert df["user"].tolist() == [2, 1, 1, 6, 4, 5]  # bob, alice, dave, carol, erin, frank in file order
    assert df["queue"].tolist() == [1, 1, 1, 3, 2, 2]
    assert df.attrs["unix_start_time"] == 1709280000
    assert df.attrs["invalid"] == {"never started": 1} and df.attrs["array_records_skipped"] == 1
    assert (df.attrs["machine"].nodes, df.attrs["machine"].cores_per_node) == (4, 32)
    assert any("no machine given" in w for w in warned)


def test_pbs_one_file_and_a_gzipped_copy(tmp_path):
    day2, _ = quiet(read_pbs, PBS / "20240302", machine="4x32")
    assert day2["job_id"].tolist() == [2003, 2006] and day2["submit"].tolist() == [0, 25200]
    gz = tmp_path / "20240302.gz"
    gz.write_bytes(gzip.compress((PBS / "20240302").read_bytes()))
    again, _ = quiet(traces.read, gz, format="pbs", machine="4x32")
    assert again[COMPARED].equals(day2[COMPARED])


def test_pbs_invalid_job_error_names_the_daily_file_and_line():
    with pytest.raises(InvalidJobError) as exc:
        read_pbs(PBS, machine="16", on_invalid="error")
    assert exc.value.path.endswith("20240301") and exc.value.line == 15 and exc.value.field == "start"


@pytest.mark.parametrize("day, line, text, field, needle", [
    ("20240302", 2, "garbage without separators", "record", "PBS accounting record"),
    ("20240302", 1, None, "resources_used.walltime", "1:xx:00"),
    ("20240302", 1, None, "Resource_List.nodect", "node count"),
    ("20240301", 7, None, "job id", "job.id"),
])
def test_pbs_bad_record_names_file_line_and_field(tmp_path, day, line, text, field, needle):
    logs = tmp_path / "logs"
    shutil.copytree(PBS, logs)
    lines = (logs / day).read_text().splitlines()
    if field == "resources_used.walltime":
        text = lines[0] + " resources_used.walltime=1:xx:00"
    elif field == "Resource_List.nodect":
        text = lines[0].replace(" Resource_List.nodect=4", "").replace(" exec_host=n01/0*32+n02/0*32+n03/0*32+n04/0*32",
                                                                       "")
    elif field == "job id":
        text = lines[6].replace(";2002[2].pbs01;", ";job.id;")
    lines[line - 1] = text
    (logs / day).write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError) as exc:
        read_pbs(logs)
    assert exc.value.path.endswith(day) and (exc.value.line, exc.value.field) == (line, field)
    assert needle in str(exc.value)


def test_pbs_empty_directory_and_directory_detection(tmp_path):
    with pytest.raises(TraceFormatError, match="no files"):
        read_pbs(tmp_path)
    assert traces.detect_format(PBS) == "pbs" and traces.detect_format(PBS / "20240301") == "pbs"
    assert traces.detect_format(CLUSTER) == "slurm"
    txt = tmp_path / "jobs.txt"
    shutil.copy(CLUSTER, txt)
    assert traces.detect_format(txt) == "slurm"
    with pytest.raises(IsADirectoryError):
        traces.read(tmp_path)


# ---- conversion to SWF, anonymised --------------------------------------------------------------------------------

def test_convert_slurm_rereads_to_the_same_table_with_anonymised_ids(tmp_path):
    out = tmp_path / "cluster.swf"
    written, _ = quiet(convert, CLUSTER, out, format="slurm")
    back, _ = quiet(traces.read, out)
    source, _ = quiet(read_slurm, CLUSTER)
    assert back[COMPARED].equals(written[COMPARED])
    same = [c for c in COMPARED if c not in ("user", "group")]
    assert back[same].equals(source[same])
    # anonymised in submit order: alice 1, bob 2, carol 3, erin 4 (dave's jobs never ran)
    assert back["user"].tolist() == [1, 2, 1, 1, 3, 2, 1, 4]
    assert back["group"].tolist() == [1, 2, 1, 1, 3, 2, 1, 3]
    swf_status = source["status"].astype(str).replace({"timeout": "failed"})  # SWF has no timeout code
    assert back["status"].astype(str).tolist() == swf_status.tolist()
    assert (back.attrs["machine"].nodes, back.attrs["machine"].cores_per_node) == (16, 32)
    text = out.read_text()
    assert "alice" not in text and "; Queue: 2 debug" in text and "2 cancelled before start" in text


def test_convert_pbs_directory_keep_ids_and_a_machine_whose_cores_do_not_fit(tmp_path):
    out = tmp_path / "pbs.swf.gz"
    written, _ = quiet(convert, PBS, out, machine="8x64", anonymize_ids=False)
    back, _ = quiet(traces.read, out)
    source, _ = quiet(read_pbs, PBS, machine="8x64")
    assert back["user"].tolist() == source["user"].tolist() == [2, 1, 1, 6, 4, 5]
    assert back["nodes"].tolist() == source["nodes"].tolist()  # nodes always read back
    # procs kept where ceil(procs / 64) gives the nodes, else written as nodes x 64: 2001 has 64 CPUs on 2 nodes
    # (128), 2003 32 on 2 (128), 2005 16 on 2 (128), 2006 128 on 4 (256); the subjobs' 8 on 1 are kept
    assert back["procs"].tolist() == [128, 8, 8, 128, 128, 256]


def test_anonymize_numbers_known_ids_by_first_appearance():
    df = testing.make_jobs(testing.TOY_ROWS[:5])
    df["user"] = [42, 7, 42, -1, 9]
    df["group"] = [3, 3, 5, 5, -1]
    df.attrs["names"] = {"user": ["x"], "queue": ["q"]}
    out = anonymize(df)
    assert out["user"].tolist() == [1, 2, 1, -1, 3] and out["group"].tolist() == [1, 1, 2, 2, -1]
    assert out.attrs["names"] == {"queue": ["q"]} and df["user"].tolist() == [42, 7, 42, -1, 9]


def test_convert_cli_writes_and_reports(tmp_path):
    out = tmp_path / "c.swf"
    proc = cli("hpcgym.traces", "convert", str(CLUSTER), "--format", "slurm", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "wrote 8 jobs" in proc.stdout and "anonymised" in proc.stdout
    assert "warning: " in proc.stderr and "no machine given" in proc.stderr
    one_line_error(cli("hpcgym.traces", "convert", str(CLUSTER), "--out", str(tmp_path / "c.csv")), ".swf")
    one_line_error(cli("hpcgym.traces", "convert", str(SLURM / "truncated.sacct"), "--out", str(out)),
                   "truncated.sacct, line 5", "Elapsed")


def test_info_cli_on_slurm_and_pbs():
    proc = cli("hpcgym.traces", "info", str(CLUSTER), "--format", "slurm")
    assert proc.returncode == 0, proc.stderr
    assert "16x32 (16 nodes x 32 cores)" in proc.stdout and "sized from the log" in proc.stdout
    proc = cli("hpcgym.traces", "info", str(PBS), "--machine", "4x32")
    assert proc.returncode == 0 and "jobs                   6" in proc.stdout and "sized" not in proc.stdout


# ---- the options every reader takes: round, on_duplicate, compact ----------------------------------------------------

def _cluster_line(number: int) -> str:
    return CLUSTER.read_text().splitlines()[number - 1]


def test_sacct_fractions_round_as_the_policy_says(tmp_path):
    line = _cluster_line(2).replace("|01:00:00|02:00:00|2|64|", "|01:00:00.4|02:00:00|1.5|64|")  # job 1001
    path = edited(tmp_path, {2: line})
    with pytest.raises(TraceFormatError) as exc:
        quiet(read_slurm, path)
    assert (exc.value.line, exc.value.field) == (2, "NNodes") and "--round nodes=ceil" in str(exc.value)
    df, _ = quiet(read_slurm, path, round="nodes=ceil")
    assert (df["nodes"].iat[0], df["run"].iat[0]) == (2, 3601)  # runtimes round up by default, uncounted
    assert df.attrs["repaired"] == {"nodes rounded (ceil)": 1}
    df, _ = quiet(traces.read, path, format="slurm", round="nodes=floor,run=nearest")
    assert (df["nodes"].iat[0], df["run"].iat[0]) == (1, 3600)
    assert df.attrs["repaired"] == {"nodes rounded (floor)": 1, "run rounded (nearest)": 1}


def test_sacct_duplicate_ids_name_the_line(tmp_path):
    path = edited(tmp_path, {6: _cluster_line(6).replace("1003_1|1004|", "1003_1|1001|")})  # 1001 again
    df, warned = quiet(read_slurm, path, machine="16x32")
    assert df["job_id"].tolist().count(1001) == 2 and df.attrs["duplicate_ids"] == 1
    assert [w for w in warned if "line 6 repeats job 1001" in w and w.startswith(str(path))]
    with pytest.raises(TraceFormatError) as exc:
        quiet(traces.read, path, format="slurm", machine="16x32", on_duplicate="error")
    assert (exc.value.path, exc.value.line, exc.value.field) == (str(path), 6, "JobIDRaw")


def test_pbs_duplicate_ids_name_the_daily_file_and_line(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(PBS, logs)
    day2 = (logs / "20240302").read_text().replace(";E;2006.pbs01;", ";E;2001.pbs01;")  # 2001 ended on day 1
    (logs / "20240302").write_text(day2)
    df, warned = quiet(read_pbs, logs, machine="4x32")  # 2004 (never started, day 1) is dropped before the check
    assert df.attrs["duplicate_ids"] == 1 and df["job_id"].tolist().count(2001) == 2
    assert [w for w in warned if f"{logs / '20240302'}, line 1 repeats job 2001" in w]
    with pytest.raises(TraceFormatError) as exc:
        quiet(read_pbs, logs, machine="4x32", on_duplicate="error")
    assert exc.value.path == str(logs / "20240302") and exc.value.line == 1 and exc.value.field == "job id"


@pytest.mark.parametrize("reader, path", [(read_slurm, CLUSTER), (read_pbs, PBS)])
def test_accounting_compact_tables_hold_the_same_values(reader, path):
    full, _ = quiet(reader, path, machine="16x32")
    small, _ = quiet(reader, path, machine="16x32", compact=True)
    assert list(small.columns) == list(jobs.COLUMNS)
    for col in jobs.COLUMNS:
        assert (full[col].to_numpy() == small[col].to_numpy()).all(), col
        if col not in ("status", "walltime_known"):
            assert small[col].dtype == "int32", col
    assert small.attrs["names"] == full.attrs["names"]


def test_round_and_on_duplicate_reach_the_accounting_readers_from_the_clis(tmp_path):
    line = _cluster_line(2).replace("|01:00:00|02:00:00|2|64|", "|01:00:00|02:00:00|1.5|64|")
    path = edited(tmp_path, {2: line, 6: _cluster_line(6).replace("1003_1|1004|", "1003_1|1001|")})
    proc = cli("hpcgym.traces", "info", str(path), "--machine", "16x32", "--round", "nodes=ceil")
    assert proc.returncode == 0, proc.stderr
    assert "nodes rounded (ceil)" in proc.stdout and "1 jobs repeat" in proc.stdout
    one_line_error(cli("baselines.run", "--trace", str(path), "--machine", "16x32", "--round", "nodes=ceil",
                       "--on-duplicate", "error"), "line 6", "JobIDRaw", "job id 1001 was used before")


@pytest.mark.slow
def test_train_smoke_on_a_slurm_log(tmp_path):
    """The README's command, ``experiments.train --trace my.sacct --format slurm``, with a tiny budget."""
    log = tmp_path / "my.sacct"
    testing.write_sacct(traces.load("lublin-256"), log)
    tiny = ["--envs", "2", "--n-steps", "64", "--batch-size", "64", "--window", "64", "--slots", "32",
            "--eval-windows", "1", "--eval-window", "128", "--val-windows", "1", "--val-window", "128",
            "--val-every", "128", "--clone", "", "--timesteps", "128", "--runs-dir", str(tmp_path / "runs")]
    proc = subprocess.run([sys.executable, "-m", "experiments.train", "--workload", "real", "--trace", str(log),
                           "--format", "slurm", *tiny], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / "runs" / "my-real-ppo-s0"
    assert (run_dir / "model.zip").exists() and "fcfs+easy" in proc.stdout
