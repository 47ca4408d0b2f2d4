"""Bad and odd values every reader meets the same way: the range check, the rounding policy, duplicate job ids.

Each case is a small crafted file; the expected tables are written out by hand from the file's lines.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from baselines import run as baselines_run
from hpcgym import jobs as jobtable
from hpcgym import traces
from hpcgym.errors import InvalidJobError, TraceFormatError
from hpcgym.traces import read_csv_table, read_mustang, read_swf

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "tests" / "data" / "csv" / "seed_fractional.csv"
SEED_COLUMNS = "job_id=u_id,user=user,interarrival=interval,run=run_time,nodes=node_num,walltime=wall_time," \
               "status=new_status"
HEADER = "; MaxNodes: 8\n; MaxProcs: 8\n"
GOOD = "{id} {submit} 0 10 4 -1 -1 4 20 -1 1 1 1 -1 -1 -1 -1 -1\n"


def quiet(fn, *args, **kw):
    """Call ``fn`` with every warning recorded; numpy's RuntimeWarnings (a cast overflow) fail the test."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", RuntimeWarning)
        out = fn(*args, **kw)
    return out, [str(w.message) for w in caught]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO, timeout=300)


# ---- the range check: one reason, one message, every reader --------------------------------------------------------

def _swf_with_huge_values(tmp_path: Path) -> Path:
    p = tmp_path / "huge.swf"
    p.write_text(HEADER + GOOD.format(id=1, submit=0)
                 + "2 5 0 1e30 4 -1 -1 4 20 -1 1 1 1 -1 -1 -1 -1 -1\n"     # line 4: runtime overflows int64
                 + "3 9 0 10 4 -1 -1 4 1e30 -1 1 1 1 -1 -1 -1 -1 -1\n"     # line 5: walltime
                 + "4 1e30 0 10 4 -1 -1 4 20 -1 1 1 1 -1 -1 -1 -1 -1\n"    # line 6: submit
                 + "5 12 0 -1 4 -1 -1 4 20 -1 1 1 1 -1 -1 -1 -1 -1\n")     # line 7: the usual run <= 0
    return p


def test_swf_huge_values_are_out_of_range_not_wrapped(tmp_path):
    df, warned = quiet(read_swf, _swf_with_huge_values(tmp_path))
    assert df["job_id"].tolist() == [1]
    assert df.attrs["invalid"] == {"submit out of range": 1, "run out of range": 1, "walltime out of range": 1,
                                   "run <= 0": 1}
    assert len(warned) == 1 and "1 run out of range, 1 walltime out of range" in warned[0]
    with pytest.raises(InvalidJobError) as exc:
        read_swf(_swf_with_huge_values(tmp_path), on_invalid="error")
    assert exc.value.line == 4 and exc.value.field == "4 (run time)"
    assert "job 2: run out of range: '1e30', expected at most 2147483647 s" in str(exc.value)


def test_swf_huge_id_is_a_format_error(tmp_path):
    p = tmp_path / "id.swf"
    p.write_text(HEADER + GOOD.format(id=1, submit=0) + GOOD.format(id="1e30", submit=3))
    with pytest.raises(TraceFormatError) as exc:
        quiet(read_swf, p)
    assert exc.value.line == 4 and exc.value.field == "1 (job number)" and "'1e30' is out of range" in str(exc.value)


def test_csv_huge_runtime_has_the_same_reason_and_message(tmp_path):
    p = tmp_path / "huge.csv"
    p.write_text("id,t,r,n\n1,0,10,2\n2,5,1e30,2\n3,9,-1,2\n")
    cols = {"job_id": "id", "submit": "t", "run": "r", "nodes": "n"}
    df, warned = quiet(read_csv_table, p, cols, machine="8")
    assert df["job_id"].tolist() == [1] and df.attrs["invalid"] == {"run out of range": 1, "run <= 0": 1}
    with pytest.raises(InvalidJobError) as exc:
        read_csv_table(p, cols, machine="8", on_invalid="error")
    assert exc.value.line == 3 and exc.value.field == "r"
    assert "job 2: run out of range: '1e30', expected at most 2147483647 s" in str(exc.value)


def test_mustang_runtime_from_far_apart_timestamps_is_out_of_range(tmp_path):
    p = tmp_path / "m.csv"
    row = "1,1,2012-02-07 00:00:28+00:00,2012-02-07 00:01:00+00:00,{end},0 days 00:40:00,COMPLETED,2,48\n"
    p.write_text("user_ID,group_ID,submit_time,start_time,end_time,wallclock_limit,job_status,node_count,"
                 "tasks_requested\n" + row.format(end="2012-02-07 00:02:00+00:00")
                 + row.format(end="2200-02-07 00:02:00+00:00"))
    df, _ = quiet(read_mustang, p)
    assert df["run"].tolist() == [60] and df.attrs["invalid"] == {"run out of range": 1}


# ---- the rounding policy: the seed authors' CSV layout with fractional values ---------------------------------------

def test_seed_layout_with_fractions_needs_the_rounding_option():
    with pytest.raises(TraceFormatError) as exc:
        traces.read(SEED, columns=SEED_COLUMNS, machine="theta")
    assert exc.value.line == 2 and exc.value.field == "node_num"
    assert "'266.93' is not a whole number" in str(exc.value) and "round=" in str(exc.value)
    assert "--round nodes=ceil" in str(exc.value)


def test_seed_layout_reads_with_rounding_up():
    df = traces.read(SEED, columns=SEED_COLUMNS, machine="theta", round="nodes=ceil")
    # rows by hand: nodes 266.93, 2.01, 1.5, 8.0; runtimes 3602.41, 59.5, 10.0, 86399.6 round up (the default);
    # submit = floor of the running sum of the intervals 0, 12.7, 30.2, 0.4; wall_time -1 is unknown (= run).
    assert df["nodes"].tolist() == [267, 3, 2, 8]
    assert df["run"].tolist() == [3603, 60, 10, 86400]
    assert df["submit"].tolist() == [0, 12, 42, 43]
    assert df["walltime"].tolist() == [3600, 600, 10, 86400]
    assert df["walltime_known"].tolist() == [True, True, False, True]
    assert df["user"].tolist() == [0, 1, 0, 2]
    assert df["status"].astype(str).tolist() == ["completed", "completed", "failed", "killed"]
    assert df.attrs["repaired"] == {"nodes rounded (ceil)": 3}


def test_seed_layout_nearest_for_nodes_and_runtimes():
    df = traces.read(SEED, columns=SEED_COLUMNS, machine="theta", round="nodes=nearest,run=nearest")
    assert df["nodes"].tolist() == [267, 2, 2, 8]  # halves round up
    assert df["run"].tolist() == [3602, 60, 10, 86400]
    assert df.attrs["repaired"] == {"run rounded (nearest)": 3, "nodes rounded (nearest)": 3}
    assert traces.read(SEED, columns=SEED_COLUMNS, machine="theta", round="floor")["nodes"].tolist() == [266, 2, 1, 8]


def test_rounding_policy_errors_name_fields_and_modes():
    for bad, needle in (("nodes=up", "unknown mode 'up'"), ("cores=ceil", "unknown field 'cores'"),
                        ("sideways", "unknown mode 'sideways'")):
        with pytest.raises(ValueError, match=needle):
            traces.read(SEED, columns=SEED_COLUMNS, machine="theta", round=bad)


def test_swf_fractional_processors_round_with_the_policy(tmp_path):
    p = tmp_path / "frac.swf"
    p.write_text(HEADER + "1 0 0 10 4 -1 -1 3.5 20 -1 1 1 1 -1 -1 -1 -1 -1\n")
    with pytest.raises(TraceFormatError) as exc:
        read_swf(p)
    assert exc.value.line == 3 and exc.value.field.startswith("8 (requested processors)")
    assert "--round procs=ceil" in str(exc.value)
    df = read_swf(p, round="procs=ceil")
    assert df["procs"].tolist() == [4] and df.attrs["repaired"] == {"procs rounded (ceil)": 1}


def test_swf_fractional_times_take_the_documented_defaults(tmp_path):
    """Without round=, submit times round down and walltimes up, as in CSV logs (SWF used to refuse both)."""
    p = tmp_path / "times.swf"
    p.write_text(HEADER + "1 0 0 100 4 -1 -1 4 200.5 -1 1 1 1 -1 -1 -1 -1 -1\n"
                 "2 0.5 0 100.2 4 -1 -1 4 300 -1 1 1 1 -1 -1 -1 -1 -1\n"
                 "3 7.9 0 100 4 -1 -1 4 300 -1 1 1 1 -1 -1 -1 -1 -1\n")
    df = read_swf(p)
    assert df[["submit", "run", "walltime"]].to_numpy().tolist() == [[0, 100, 201], [0, 101, 300], [7, 100, 300]]
    assert df.attrs["repaired"] == {}  # defaults are not repairs (as the runtime's never were)
    nearest = read_swf(p, round="submit=nearest")
    assert nearest["submit"].tolist() == [0, 1, 8] and nearest.attrs["repaired"] == {"submit rounded (nearest)": 2}
    p.write_text(HEADER + "1 0 5.5 100 4 -1 -1 4 200 -1 1 1 1 -1 -1 -1 -1 -1\n")
    with pytest.raises(TraceFormatError, match="--round wait=ceil"):  # no default for the wait
        read_swf(p, compact=False)


def test_round_on_the_clis():
    args = ["--machine", "theta", "--columns", SEED_COLUMNS]
    out = run_cli("hpcgym.traces", "info", str(SEED), *args, "--round", "nodes=ceil")
    assert out.returncode == 0, out.stderr
    assert "values rounded" in out.stdout and "'nodes rounded (ceil)': 3" in out.stdout
    bad = run_cli("hpcgym.traces", "info", str(SEED), *args)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "--round" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    ran = run_cli("baselines.run", "--trace", str(SEED), *args, "--round", "ceil", "--policy", "fcfs",
                  "--backfill", "easy", "--quiet")
    assert ran.returncode == 0, ran.stderr


# ---- duplicate job ids: a warning and a policy; unambiguous --out rows ---------------------------------------------

def _duplicates(tmp_path: Path) -> Path:
    p = tmp_path / "dup.swf"
    p.write_text(HEADER + "".join(GOOD.format(id=i, submit=s) for i, s in ((1, 0), (2, 4), (2, 6), (3, 8), (1, 9))))
    return p


def test_duplicate_ids_warn_once_and_are_kept(tmp_path):
    df, warned = quiet(read_swf, _duplicates(tmp_path))
    assert df["job_id"].tolist() == [1, 2, 2, 3, 1] and df.attrs["duplicate_ids"] == 2
    assert len(warned) == 1 and "2 jobs have an id an earlier job has (line 5 repeats job 2)" in warned[0]
    with pytest.raises(TraceFormatError) as exc:
        read_swf(_duplicates(tmp_path), on_duplicate="error")
    assert exc.value.line == 5 and exc.value.field == "1 (job number)" and "job id 2 was used before" in str(exc.value)
    with pytest.raises(ValueError, match="on_duplicate"):
        read_swf(_duplicates(tmp_path), on_duplicate="drop")


def test_unique_ids_in_any_order_do_not_warn(tmp_path):
    p = tmp_path / "shuffled.swf"
    p.write_text(HEADER + "".join(GOOD.format(id=i, submit=s) for i, s in ((3, 0), (1, 4), (2, 6))))
    df, warned = quiet(read_swf, p)
    assert warned == [] and df.attrs["duplicate_ids"] == 0


def test_baselines_run_out_rows_are_unambiguous(tmp_path, capsys):
    out = tmp_path / "jobs.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert baselines_run.main(["--trace", str(_duplicates(tmp_path)), "--policy", "fcfs", "--backfill", "none",
                                   "--quiet", "--out", str(out)]) == 0
    assert "2 jobs have an id an earlier job has" in capsys.readouterr().out
    rows = pd.read_csv(out)
    assert rows["job_id"].tolist() == [1, 2, 2, 3, 1] and rows["row"].tolist() == [0, 1, 2, 3, 4]
    assert not rows.duplicated(["policy", "backfill", "window", "row"]).any()


def test_duplicate_policy_on_the_clis(tmp_path):
    path = str(_duplicates(tmp_path))
    out = run_cli("hpcgym.traces", "info", path)
    assert out.returncode == 0 and "duplicate job ids" in out.stdout and "2 jobs repeat" in out.stdout
    bad = run_cli("hpcgym.traces", "info", path, "--on-duplicate", "error")
    assert bad.returncode == 2 and "job id 2 was used before" in bad.stderr


# ---- compact tables -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["sdsc-sp2", "theta", "mustang-2012-02"])
def test_compact_tables_hold_the_same_values_in_fewer_bytes(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = traces.load(name)
        small = traces.read(name, compact=True)
    assert list(small.columns) == list(jobtable.COLUMNS)
    for col in jobtable.COLUMNS:
        assert (full[col].to_numpy() == small[col].to_numpy()).all(), col
        if col not in ("status", "walltime_known"):
            expected = np.int32 if full[col].abs().max() < 2**31 else np.int64
            assert small[col].dtype == expected, col
    jobtable.validate(small)
    widths = sum(small[c].dtype.itemsize for c in jobtable.COLUMNS if c != "status") + 1  # status: int8 codes
    assert small.memory_usage(index=False, deep=True).sum() <= widths * len(small) + 2000  # + the categories
    if name == "sdsc-sp2":  # SWF: 18 fields kept as int64 against 9 int32 columns
        assert small.memory_usage(deep=True).sum() < 0.3 * full.memory_usage(deep=True).sum()


def test_clis_import_no_torch_sdv_or_matplotlib():
    code = ("import sys, baselines.run, hpcgym.traces.__main__; "
            "print(sorted(m for m in ('torch', 'sdv', 'matplotlib', 'stable_baselines3') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_rounded_values_count_as_repaired_in_the_fidelity_validity():
    from synth import validity

    sample = traces.read(SEED, columns=SEED_COLUMNS, machine="theta", round="nodes=ceil")
    clean, result = validity.check(sample, 4392)
    assert len(clean) == 4 and result["repaired"] == 3 and result["dropped"] == 0
    assert result["reasons"] == {"repaired by the reader: nodes rounded (ceil)": 3}
