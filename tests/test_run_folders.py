"""Bad run folders, for every tool that reads or writes one: one ``error:`` line, exit 2, before any work, and
nothing left behind.

A tool that takes run folders joins :data:`READERS`, and inherits every case: a folder that is missing (or
misspelled among good ones), not a run, unreadable, damaged, or missing what the tool reads. The training script
makes its folder only once its flags, its inputs and the disk are known to be good, so that a corrected command is
not refused with "the run folder is not empty".
"""

from __future__ import annotations

import errno
import json
import os
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from experiments import compare, evaluate, seeds, train
from experiments.runs import BASELINE
from hpcgym import cli, traces

SETTINGS = {"trace": "lublin-256", "workload": "real", "synthesizer": "arrivals", "algo": "ppo", "seed": 0,
            "backfill": "easy", "slots": 32, "order": "saf", "eval_windows": 2, "eval_length": 128}


def make_run(path: Path, evaluated: bool = False, bsld: float = 5.0, **settings) -> Path:
    """A run folder as experiments.train leaves it: args.json, an intact model.zip, maybe an evaluation."""
    path.mkdir(parents=True)
    (path / "args.json").write_text(json.dumps({**SETTINGS, **settings}))
    with zipfile.ZipFile(path / "model.zip", "w") as z:
        z.writestr("data", "{}")
    if evaluated:
        rows = [{"scheduler": s, "kind": k, "backfill": "easy", "window": w, "bsld": b + w, "wait": 1.0,
                 "utilization": 0.5} for w in (0, 1)
                for s, k, b in ((BASELINE, "heuristic", 10.0), (path.name, "agent", bsld))]
        (path / "eval").mkdir()
        pd.DataFrame(rows).to_csv(path / "eval" / "per_window.csv", index=False)
    return path


def run_cli(main, argv, capsys):
    """``main``'s exit code through hpcgym.cli.run, and its stderr's lines."""
    code = cli.run(main, [str(a) for a in argv])
    return code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a tool reads a trace or loads a network: its checks were to stop it first."""
    def refuse(*args, **kwargs):
        raise AssertionError("the tool started working before it refused its input")

    monkeypatch.setattr(traces, "read", refuse)
    monkeypatch.setattr(evaluate.RunFolder, "load_network", refuse)


def read_only_below(monkeypatch, root: Path) -> None:
    """Make ``os.mkdir`` fail as a read-only file system does (EROFS) for every folder below ``root``."""
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):
        if Path(path).resolve().is_relative_to(root.resolve()):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)


# ---- every tool that reads run folders ---------------------------------------------------------------------------
#: (tool, its arguments around the run folder(s), what it needs of a run)
READERS = [
    (evaluate.main, lambda runs, tmp: ["--model", *runs, "--windows", "2", "--window", "64"], "model"),
    (compare.main, lambda runs, tmp: [*runs], "evaluation"),
    (seeds.main, lambda runs, tmp: [*runs, "--out", tmp / "table"], "evaluation"),
]
IDS = ["evaluate", "compare", "seeds"]


def _missing(tmp):
    return tmp / "runs" / "nope"


def _not_a_run(tmp):
    (tmp / "runs" / "photos").mkdir(parents=True)
    return tmp / "runs" / "photos"


def _unreadable_settings(tmp):
    run = make_run(tmp / "runs" / "r", evaluated=True)
    (run / "args.json").write_text('{"algo": "ppo", ')  # cut short
    return run


BAD_FOLDERS = {"missing": (_missing, "no run folder"), "not a run": (_not_a_run, "not a training run folder"),
               "unreadable settings": (_unreadable_settings, "args.json: unreadable")}


@pytest.mark.parametrize("main, argv, need", READERS, ids=IDS)
@pytest.mark.parametrize("case", list(BAD_FOLDERS))
def test_a_bad_run_folder_is_one_line_before_any_work(main, argv, need, case, tmp_path, capsys, no_work):
    make, needle = BAD_FOLDERS[case]
    folder = make(tmp_path)
    before = tree(tmp_path)
    code, lines = run_cli(main, argv([folder], tmp_path), capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines
    assert tree(tmp_path) == before  # no eval/ folder for a run that does not exist


@pytest.mark.parametrize("main, argv, need", READERS, ids=IDS)
def test_a_misspelled_run_among_good_ones_does_not_disappear(main, argv, need, tmp_path, capsys, no_work):
    good = [make_run(tmp_path / "runs" / f"real-s{s}", evaluated=True, seed=s) for s in (0, 1)]
    code, lines = run_cli(main, argv([*good, tmp_path / "runs" / "real-s2x"], tmp_path), capsys)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: no run folder {tmp_path / 'runs' / 'real-s2x'} (did you mean real-s"), lines


@pytest.mark.parametrize("main, argv, need", READERS, ids=IDS)
def test_a_run_without_what_the_tool_reads_is_named(main, argv, need, tmp_path, capsys, no_work):
    run = make_run(tmp_path / "runs" / "r")  # trained, never evaluated
    if need == "model":
        (run / "model.zip").unlink()  # killed before its training ended
    code, lines = run_cli(main, argv([run], tmp_path), capsys)
    expected = "has no model.zip" if need == "model" else "has no evaluation"
    assert code == 2 and len(lines) == 1 and expected in lines[0], lines
    assert "--resume" in lines[0] if need == "model" else "experiments.evaluate --model" in lines[0]


@pytest.mark.parametrize("main, argv, need", READERS, ids=IDS)
def test_the_same_run_twice_is_refused(main, argv, need, tmp_path, capsys, no_work):
    run = make_run(tmp_path / "runs" / "r", evaluated=True)
    code, lines = run_cli(main, argv([run, run], tmp_path), capsys)
    assert code == 2 and "is given twice" in lines[0], lines
    twin = make_run(tmp_path / "elsewhere" / "r", evaluated=True, seed=1)  # another run of the same name
    code, lines = run_cli(main, argv([run, twin], tmp_path), capsys)
    assert code == 2 and "two runs are named r" in lines[0], lines


# ---- evaluate --------------------------------------------------------------------------------------------------
def test_a_damaged_model_says_what_to_do(tmp_path, capsys, no_work):
    run = make_run(tmp_path / "runs" / "r")
    (run / "model.zip").write_bytes((run / "model.zip").read_bytes()[:20])  # a copy cut short
    code, lines = run_cli(evaluate.main, ["--model", run], capsys)
    assert code == 2 and len(lines) == 1 and "damaged" in lines[0], lines
    assert "--overwrite" in lines[0] and "--resume" in lines[0]


@pytest.mark.parametrize("content", [b"not a zip", None])
def test_a_damaged_model_found_while_loading_says_what_to_do(content, tmp_path):
    run = make_run(tmp_path / "runs" / "r")  # None: a complete zip, but not a model
    if content is not None:
        (run / "model.zip").write_bytes(content)
    with pytest.raises(cli.UsageError, match="damaged.*--resume"):
        evaluate.RunFolder(run).load_network(run / "model.zip")


def test_evaluating_a_read_only_run_fails_before_the_computing(tmp_path, capsys, monkeypatch, no_work):
    run = make_run(tmp_path / "runs" / "r")
    read_only_below(monkeypatch, tmp_path / "runs")
    code, lines = run_cli(evaluate.main, ["--model", run, "--windows", "2"], capsys)
    assert code == 2 and len(lines) == 1 and "Read-only file system" in lines[0] and str(run / "eval") in lines[0]


# ---- compare and seeds: one seed counted once --------------------------------------------------------------------
def test_compare_refuses_two_runs_of_one_source_and_seed(tmp_path, capsys):
    real = make_run(tmp_path / "a" / "real-s0", evaluated=True)
    again = make_run(tmp_path / "b" / "real-s0-again", evaluated=True, bsld=4.0)
    code, lines = run_cli(compare.main, [real, again], capsys)
    assert code == 2 and len(lines) == 1 and "both trained on real with seed 0" in lines[0], lines
    synthetic = make_run(tmp_path / "c" / "synthetic-s0", evaluated=True, workload="synthetic", bsld=6.0)
    other_seed = make_run(tmp_path / "d" / "real-s1", evaluated=True, seed=1, bsld=4.0)
    assert run_cli(compare.main, [real, synthetic, other_seed], capsys)[0] == 0  # other sources, other seeds
    windows = compare.load_runs([real, synthetic, other_seed])
    assert windows.groupby("trained_on")["run"].nunique().to_dict() == {"real": 2, "synthetic:arrivals": 1}


def test_the_seed_table_refuses_a_seed_given_twice(tmp_path, capsys):
    first = make_run(tmp_path / "a" / "r-s3", evaluated=True, seed=3)
    second = make_run(tmp_path / "b" / "r-s3-copy", evaluated=True, seed=3, bsld=4.0)
    code, lines = run_cli(seeds.main, [first, second, "--out", tmp_path / "t"], capsys)
    assert code == 2 and len(lines) == 1 and "both have seed 3" in lines[0], lines
    assert not (tmp_path / "t").exists()


# ---- train: the folder is made once everything is known to be good ----------------------------------------------
def _bad_csv(tmp: Path) -> str:
    (tmp / "jobs.csv").write_text("a,b\n1,2\n")
    return str(tmp / "jobs.csv")


FAILED_TRAINING = {  # argv (given the temporary folder), what the line says
    "unknown trace": (lambda tmp: ["--trace", "nosuch"], "unknown trace"),
    "unreadable csv": (lambda tmp: ["--trace", _bad_csv(tmp)], "jobs.csv, line 1"),
    "seed -1": (lambda tmp: ["--seed", "-1"], "--seed must be between 0 and"),
    "machine 0": (lambda tmp: ["--machine", "0"], "--machine"),
    "test windows too long": (lambda tmp: ["--trace", "lublin-256", "--eval-window", "9000"],
                              "--eval-window 9000 is longer than the trace's test split"),
    "training windows too long": (lambda tmp: ["--trace", "lublin-256", "--workload", "real", "--window", "9000"],
                                  "--window 9000 is longer than the trace's training part"),
    "validation windows too long": (lambda tmp: ["--trace", "lublin-256", "--val-window", "9000"],
                                    "raise --val-fraction"),
    "validation periods too short": (lambda tmp: ["--trace", "lublin-256", "--val-periods", "40"],
                                     "or lower --val-periods"),
    "no validation period": (lambda tmp: ["--val-periods", "0"], "--val-periods must be at least 1"),
}


@pytest.mark.parametrize("case", list(FAILED_TRAINING))
def test_a_failed_training_leaves_no_run_folder(case, tmp_path, capsys):
    argv, needle = FAILED_TRAINING[case]
    code, lines = run_cli(train.main, [*argv(tmp_path), "--runs-dir", tmp_path / "runs", "--run-name", "r"], capsys)
    assert code == 2 and len(lines) == 1 and needle.lower() in lines[0].lower(), lines
    assert not (tmp_path / "runs" / "r").exists()  # so that the corrected command is not refused as "not empty"


def test_training_into_a_read_only_folder_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, no_work):
    read_only_below(monkeypatch, tmp_path)  # the whole file system, as a read-only mount is
    code, lines = run_cli(train.main, ["--runs-dir", tmp_path / "runs", "--run-name", "r"], capsys)
    assert code == 2 and lines == [f"error: cannot write the run folder {tmp_path / 'runs' / 'r'}: {tmp_path}: "
                                   "Read-only file system"], lines


def test_a_folder_that_is_not_empty_is_refused_before_any_work(tmp_path, capsys, no_work):
    make_run(tmp_path / "runs" / "r")
    code, lines = run_cli(train.main, ["--runs-dir", tmp_path / "runs", "--run-name", "r"], capsys)
    assert code == 2 and len(lines) == 1 and "is not empty" in lines[0], lines


@pytest.mark.parametrize("name", ["..", ".", "a/b", "x" * 256])
def test_a_run_name_is_one_folder_name(name, tmp_path, capsys, no_work):
    code, lines = run_cli(train.main, ["--runs-dir", tmp_path / "runs", "--run-name", name, "--overwrite"], capsys)
    assert code == 2 and len(lines) == 1 and "--run-name" in lines[0], lines
    assert tree(tmp_path) == []  # "--run-name .. --overwrite" would have emptied the runs folder's parent


def test_an_evaluation_on_another_trace_keeps_the_runs_own_scores(tmp_path):
    """``evaluate --trace OTHER`` overwrote ``<run>/eval``, which compare and seeds report as the run's trace."""
    from experiments.evaluate import default_out
    from experiments.runs import RunFolder

    run = tmp_path / "run-s0"
    run.mkdir()
    (run / "args.json").write_text(json.dumps({"trace": "lublin-256", "algo": "ppo"}))
    folder = RunFolder(run)
    assert default_out([folder], None) == run / "eval"
    assert default_out([folder], "lublin-256") == run / "eval"
    assert default_out([folder], "sdsc-sp2") == run / "eval-sdsc-sp2"
    assert default_out([folder], "/data/my log.swf") == run / "eval-my_log.swf"
    assert default_out([], "sdsc-sp2") == Path("eval")
