"""Odd inputs and faults from issue 45: saves that cannot lose a model, writes that stay in their folder, one-line
errors, readers fed pipes and binary files, and the environments driven from other RL code (TorchRL).

Every test is in-process and uses tiny data, except the one that needs a fresh interpreter (a numba cache).
"""

import errno
import json
import os
import pickle
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments import runs
from hpcgym import cli
from hpcgym import io as hpcgym_io
from synth.base import Synthesizer


# ---- item 1: a synthesizer folder is replaced whole, never written over in place --------------------------------
class _Tiny(Synthesizer):
    """A fitted-looking synthesizer whose state is one number (no fit needed)."""

    name = "tiny"

    def __init__(self, max_nodes=None, value=0, **params):
        super().__init__(max_nodes=max_nodes or 4, **params)
        self.value, self.fitted = value, True


def test_a_save_killed_while_it_writes_keeps_the_model_it_replaces(tmp_path, monkeypatch):
    _Tiny(value=1).save(tmp_path / "m")

    def killed(*args, **kwargs):  # the process dies while state.pkl is half written
        raise KeyboardInterrupt

    monkeypatch.setattr(pickle, "dump", killed)
    with pytest.raises(KeyboardInterrupt):
        _Tiny(value=2).save(tmp_path / "m")
    monkeypatch.undo()
    assert Synthesizer.load(tmp_path / "m").value == 1
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no temporary folder left behind
    _Tiny(value=3).save(tmp_path / "m")  # a save over a saved model replaces it (swapped in one step on Linux)
    assert Synthesizer.load(tmp_path / "m").value == 3 and [p.name for p in tmp_path.iterdir()] == ["m"]
    monkeypatch.setattr(hpcgym_io, "_exchange", lambda a, b: False)  # systems without an atomic swap
    _Tiny(value=4).save(tmp_path / "m")
    assert Synthesizer.load(tmp_path / "m").value == 4 and [p.name for p in tmp_path.iterdir()] == ["m"]


def test_a_save_refuses_a_folder_of_other_files(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="no saved synthesizer"):
        _Tiny().save(tmp_path / "notes")
    assert (tmp_path / "notes" / "todo.txt").read_text() == "mine"


def test_a_model_whose_plugin_is_gone_is_one_line(tmp_path):
    _Tiny().save(tmp_path / "m")
    manifest = tmp_path / "m" / "manifest.json"
    manifest.write_text(manifest.read_text().replace("test_edges:_Tiny", "gone_plugin_pkg:Model"))
    with pytest.raises(ValueError, match=r"manifest.json: the model's class gone_plugin_pkg:Model cannot be imported"):
        Synthesizer.load(tmp_path / "m")


# ---- item 2: nothing follows a symbolic link out of a run folder; the lock is exclusive ------------------------
def test_atomic_writes_replace_a_link_instead_of_writing_through_it(tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("keep")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.md").symlink_to(outside)
    hpcgym_io.write_text(tmp_path / "run" / "summary.md", "new")
    assert outside.read_text() == "keep" and not (tmp_path / "run" / "summary.md").is_symlink()


def test_summaries_and_figures_are_written_atomically(tmp_path):
    from agents.curves import plot_learning_curves
    from experiments.evaluate import write_results

    outside = tmp_path / "outside"
    outside.write_text("keep")
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    for name in ("eval/summary.md", "learning_curve.png"):
        (run / name).symlink_to(outside)
    per_window = pd.DataFrame({"scheduler": ["fcfs+easy"] * 2, "kind": ["heuristic"] * 2, "backfill": ["easy"] * 2,
                               "window": [0, 1], "bsld": [2.0, 3.0], "wait": [1.0, 2.0], "utilization": [0.5, 0.5]})
    write_results(run / "eval", per_window, pd.DataFrame({"job": [1]}))
    curve = run / "curve.csv"
    curve.write_text("timesteps,val_bsld,network\n0,3.0,start\n10,2.0,ppo\n")
    plot_learning_curves({"r": curve}, run / "learning_curve.png")
    assert outside.read_text() == "keep"
    assert not any(p.is_symlink() for p in run.rglob("*"))


def test_a_run_folder_holding_a_link_is_refused(tmp_path):
    folder = runs.RunFolder(tmp_path / "r")
    folder.path.mkdir()
    (folder.path / "learning_curve.csv").symlink_to(tmp_path)
    with pytest.raises(cli.UsageError, match="learning_curve.csv is a symbolic link"):
        folder.check_usable(resume=True, overwrite=False)
    linked = runs.RunFolder(tmp_path / "linked")
    linked.path.symlink_to(tmp_path / "r")
    with pytest.raises(cli.UsageError, match="linked is a symbolic link"):  # --overwrite would rmtree it
        with linked.owned(resume=False, overwrite=True):
            pass


def test_the_lock_is_created_exclusively(tmp_path, monkeypatch):
    folder = runs.RunFolder(tmp_path / "r")
    real_open = os.open
    flags = []
    monkeypatch.setattr(os, "open", lambda path, flag, *a: flags.append(flag) or real_open(path, flag, *a))
    with folder.owned(resume=False, overwrite=False):
        pass
    assert flags and all(f & os.O_EXCL for f in flags)
    monkeypatch.undo()
    folder.lock.symlink_to(tmp_path / "elsewhere")  # a dangling link where the lock goes is never followed
    with pytest.raises(cli.UsageError, match=r"\.lock is a symbolic link"):
        with folder.owned(resume=True, overwrite=False):
            pass
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(FileExistsError):
        hpcgym_io.create_exclusive(folder.lock, "1")


# ---- item 10: locks that name their file and say when they may go ----------------------------------------------
def test_a_stale_lock_whose_pid_was_reused_is_taken_over(tmp_path):
    folder = runs.RunFolder(tmp_path / "r")
    folder.path.mkdir()
    folder.lock.write_text(str(os.getppid()))  # a live process, but started before the lock was written
    with pytest.raises(cli.UsageError, match=r"in use by process .* remove the lock file"):
        folder.check_usable(resume=True, overwrite=False)
    old = time.time() - 10 * 365 * 86400  # a lock from long before that process started: its pid was reused
    os.utime(folder.lock, (old, old))
    with folder.owned(resume=True, overwrite=False):
        assert folder.lock.read_text() == str(os.getpid())


def test_a_garbage_lock_names_its_file(tmp_path):
    folder = runs.RunFolder(tmp_path / "r")
    folder.path.mkdir()
    folder.lock.write_text("\x00garbage")
    with pytest.raises(cli.UsageError, match=r"\.lock: not a lock written by a run .* remove that file"):
        folder.check_usable(resume=True, overwrite=False)


# ---- items 3 and 4: one line instead of a traceback ------------------------------------------------------------
def _one_line(main, capsys) -> str:
    assert cli.run(main) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_a_full_disk_and_a_missing_plugin_are_one_line(capsys):
    def full(argv):
        raise OSError(errno.ENOSPC, "No space left on device")

    assert "no space left" in _one_line(full, capsys)

    def plugin(argv):
        import gone_plugin_pkg  # noqa: F401

    assert "install the package that provides 'gone_plugin_pkg'" in _one_line(plugin, capsys)


def test_writing_to_a_folder_names_the_folder(tmp_path, capsys):
    err = _one_line(lambda argv: hpcgym_io.write_text(tmp_path, "x"), capsys)
    assert f"{tmp_path}: is a folder" in err and ".tmp" not in err


def test_a_plugin_that_exits_at_import_is_left_out_with_a_warning(monkeypatch):
    from importlib.metadata import EntryPoint

    from hpcgym import plugins

    point = EntryPoint("quits", "sys:exit", "hpcgym.heuristics")
    monkeypatch.setattr(plugins, "points", lambda group: [point])
    monkeypatch.setattr(EntryPoint, "load", lambda self: (_ for _ in ()).throw(SystemExit(3)))
    with pytest.warns(UserWarning, match="'quits'.*called sys.exit"):
        assert plugins.load("hpcgym.heuristics") == {}


def test_an_infinite_action_is_named():
    from hpcgym.testing import toy_env

    env = toy_env()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="action must be an integer, not inf"):
        env.step(float("inf"))


def test_an_out_folder_is_refused_before_the_simulations(tmp_path, capsys, monkeypatch):
    from baselines import run

    monkeypatch.setattr(run, "simulate_grid", lambda *a, **k: pytest.fail("simulated before checking --out"))
    err = _one_line(lambda argv: run.main(["--trace", "lublin-256", "--out", str(tmp_path)]), capsys)
    assert f"{tmp_path} is a folder; give a file name" in err


# ---- items 5 to 8: readers fed pipes, binary files, impossible waits and units ----------------------------------
def _swf(rows, header=("; MaxNodes: 8", "; MaxProcs: 8")) -> str:
    """SWF text: each row (submit, wait, run, procs, walltime) as an 18-field line."""
    lines = [*header]
    for i, (submit, wait, run, procs, walltime) in enumerate(rows, 1):
        lines.append(f"{i} {submit} {wait} {run} {procs} -1 -1 {procs} {walltime} -1 1 1 1 -1 1 -1 -1 -1")
    return "\n".join(lines) + "\n"


ROWS = [(10 * i, 5, 100, 2, 200) for i in range(12)]


def _through_pipe(text: str, reader):
    """``reader(path)`` on a pipe that ``text`` is written into by a thread (as ``<(cat x.swf)`` is)."""
    import threading

    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, text.encode()), os.close(w)))
    writer.start()
    try:
        return reader(f"/dev/fd/{r}")
    finally:
        writer.join()
        os.close(r)


def test_an_swf_file_reads_through_a_pipe_and_a_fifo(tmp_path):
    import threading

    from hpcgym import traces

    df = _through_pipe(_swf(ROWS), traces.read)  # <(cat jobs.swf): no name to go by, the first line says SWF
    assert len(df) == 12 and df.attrs["machine"].nodes == 8
    from hpcgym.traces.__main__ import main

    assert _through_pipe(_swf(ROWS), lambda p: main(["info", p])) in (0, None)  # info <(cat jobs.swf)
    chunks = _through_pipe(_swf(ROWS), lambda p: list(traces.read_chunks(p, rows=5, format="swf")))
    assert sum(len(c) for c in chunks) == 12
    fifo = tmp_path / "jobs.swf"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(_swf(ROWS)))
    writer.start()
    assert len(traces.read(fifo)) == 12  # a FIFO named .swf: no hang, no "empty file"
    writer.join()


def test_a_binary_file_is_named_so_after_one_block(tmp_path, monkeypatch):
    from hpcgym import traces
    from hpcgym.errors import TraceFormatError
    from hpcgym.traces import _scan

    monkeypatch.setattr(_scan, "BLOCK", 1 << 10)
    path = tmp_path / "disk.swf"
    path.write_bytes(b"\0" * (1 << 20))
    read = []
    real = _scan.open_bytes

    class Counted:  # the file, counting the bytes read from it
        def __init__(self, p):
            self.fh = real(p)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def readinto(self, view):
            read.append(self.fh.readinto(view))
            return read[-1]

    monkeypatch.setattr(_scan, "open_bytes", Counted)
    with pytest.raises(TraceFormatError, match="disk.swf: no line end .* binary file"):
        traces.read(path)
    assert sum(read) <= 1 << 11  # it stopped after the first block, not at the end of the file


def test_blocks_cost_linear_time_on_a_line_without_end():
    import io

    from hpcgym.traces import _scan

    data = b"7" * (4 << 20)  # one 4 MiB line read in 1 KiB blocks: re-copying and re-searching it per block took
    started = time.process_time()  # about 8 GB of memory traffic (tens of seconds); linear work takes milliseconds
    assert bytes(next(_scan.blocks(io.BytesIO(data), size=1 << 10))) == data
    assert time.process_time() - started < 1.5


def test_negative_waits_are_unknown_and_counted():
    from hpcgym.machines import Machine
    from hpcgym.traces._io import NEGATIVE_WAIT, finish

    cols = {"job_id": np.arange(1, 4), "submit": np.array([0, 10, 20]), "run": np.array([5, 5, 5]),
            "walltime": np.array([9, 9, 9]), "nodes": np.ones(3, int), "user": np.ones(3, int),
            "group": np.ones(3, int), "queue": np.ones(3, int), "status": pd.Categorical(["completed"] * 3),
            "procs": np.ones(3, int), "wait": np.array([3, -2400, -1]), "walltime_known": np.ones(3, bool)}
    df = finish(cols, Machine("m", 4), "drop", "log", None, 0, np.arange(1, 4))
    assert df["wait"].tolist() == [3, -1, -1] and df.attrs["repaired"] == {NEGATIVE_WAIT: 1}


def test_a_slurm_log_across_the_fall_back_reports_the_negative_wait(tmp_path):
    from hpcgym import traces
    from hpcgym.traces._io import NEGATIVE_WAIT

    head = "JobIDRaw|User|Group|Partition|Submit|Start|End|Elapsed|Timelimit|NNodes|NCPUS|State"
    rows = [f"{i}|u|g|p|2024-11-03T01:{10 + i}:00|2024-11-03T01:{20 + i}:00|2024-11-03T01:{30 + i}:00|00:10:00|"
            f"01:00:00|1|1|COMPLETED" for i in range(3)]
    # local times: the clock fell back from 02:00 to 01:00, so this job "started" 40 minutes before its submit
    rows.append("9|u|g|p|2024-11-03T01:55:00|2024-11-03T01:15:00|2024-11-03T01:25:00|00:10:00|01:00:00|1|1|COMPLETED")
    path = tmp_path / "log.sacct"
    path.write_text("\n".join([head, *rows]) + "\n")
    df = traces.read(path, machine="8")
    assert df.attrs["repaired"][NEGATIVE_WAIT] == 1 and (df["wait"] >= -1).all()


def test_most_jobs_outliving_their_walltime_warns(tmp_path):
    from hpcgym import traces

    path = tmp_path / "units.swf"
    path.write_text(_swf([(10 * i, 0, 600, 2, 10) for i in range(12)]))  # walltimes in minutes, runs in seconds
    with pytest.warns(UserWarning, match="12 of 12 jobs ran longer than their requested walltime"):
        traces.read(path)
    path.write_text(_swf(ROWS))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traces.read(path)


def test_two_maxnodes_lines_that_disagree_are_refused(tmp_path):
    from hpcgym import traces
    from hpcgym.errors import TraceFormatError

    path = tmp_path / "two.swf"
    path.write_text(_swf(ROWS, header=("; MaxNodes: 8", "; MaxNodes: 16")))
    with pytest.raises(TraceFormatError, match="field MaxNodes: the header gives MaxNodes 2 times"):
        traces.read(path)
    path.write_text(_swf(ROWS, header=("; MaxNodes: 8", "; MaxNodes: 8")))
    assert traces.read(path).attrs["machine"].nodes == 8


def test_info_says_why_there_is_no_load(tmp_path, capsys):
    from hpcgym.traces.__main__ import main

    path = tmp_path / "one.swf"
    path.write_text(_swf(ROWS[:1]))
    assert main(["info", str(path)]) in (0, None)
    assert "n/a (one job)" in capsys.readouterr().out
    path.write_text(_swf([(0, 0, 100, 2, 200)] * 3))
    assert main(["info", str(path)]) in (0, None)
    assert "n/a (every job submitted at the same second)" in capsys.readouterr().out


# ---- item 11: infos that tensor-making clients can read --------------------------------------------------------
def test_infos_hold_numpy_counters_and_no_unset_baseline():
    from hpcgym.testing import toy_env

    env = toy_env()
    _, info = env.reset(seed=0)
    done = info["window_done"]
    while not done:
        _, _, done, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert "baseline" not in info and info["window_done"] and info["done"]
    for key in ("time", "waiting", "decisions", "invalid_actions", "window_start"):
        assert isinstance(info[key], np.integer), key


# ---- item 13: an unmasked learner is told ------------------------------------------------------------------------
def test_an_episode_of_mostly_unmasked_actions_warns():
    from hpcgym.testing import toy_env

    env = toy_env(slots=32)  # many empty slots to pick
    _, info = env.reset(seed=0)
    with pytest.warns(UserWarning, match=r"of the \d+ actions of this episode were outside the action mask"):
        done = False
        while not done:
            empty = np.flatnonzero(~info["action_mask"])
            _, _, done, _, info = env.step(int(empty[-1]) if len(empty) else 0)
    _, info = env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a masked agent hears nothing
        done = False
        while not done:
            _, _, done, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))


# ---- item 15: the compiled cache follows the sources ------------------------------------------------------------
def test_an_edited_kernel_runs_although_its_caller_is_cached(tmp_path):
    """A caller cached by numba in one file keeps its callee's old code unless the cache follows every source."""
    import shutil
    import subprocess
    import sys

    import hpcgym

    package = tmp_path / "src" / "hpcgym"
    shutil.copytree(Path(hpcgym.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__", "data"))
    callee = package / "sim" / "probe_callee.py"
    callee.write_text("import numba as nb\n\n\n@nb.njit(cache=True)\ndef value():\n    return 1\n")
    (package / "sim" / "probe_caller.py").write_text(
        "import numba as nb\n\nfrom hpcgym.sim.probe_callee import value\n\n\n"
        "@nb.njit(cache=True)\ndef twice():\n    return 2 * value()\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(package.parent), XDG_CACHE_HOME=str(tmp_path / "cache"))
    play = [sys.executable, "-c", "import hpcgym\nfrom hpcgym.sim.probe_caller import twice\nprint(twice())"]

    def run() -> str:
        return subprocess.run(play, env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()

    assert run() == "2"
    callee.write_text(callee.read_text().replace("return 1", "return 5"))  # edit the callee, not its caller
    assert run() == "10"
    assert len(list((tmp_path / "cache" / "hpcgym" / "numba").iterdir())) == 2  # one folder per source


def test_a_cache_folder_set_by_the_user_is_kept(monkeypatch):
    from hpcgym import jit

    monkeypatch.setenv("NUMBA_CACHE_DIR", "/mine")
    assert jit.use_source_keyed_cache() is None and os.environ["NUMBA_CACHE_DIR"] == "/mine"


# ---- item 9: a failed run leaves nothing that refuses the corrected command ---------------------------------------
def test_a_run_without_decisions_leaves_no_folder(tmp_path, monkeypatch):
    from experiments import train
    from experiments.training import loop
    from hpcgym.errors import NoDecisionError

    def too_light(recipe, named, run, *rest):
        hpcgym_io.write_text(run.args_json, "{}")  # the run had started writing
        raise NoDecisionError(5, recipe.environment.window, 0.01)

    monkeypatch.setattr(loop, "_train", too_light)
    recipe = train.parse_args(["--trace", "lublin-256", "--workload", "real", "--runs-dir", str(tmp_path),
                               "--run-name", "r", "--envs", "1", "--timesteps", "64", "--val-windows", "1",
                               "--val-window", "64", "--window", "64", "--eval-windows", "0"]).recipe
    with pytest.raises(NoDecisionError, match="needed no decision"):
        loop.train_and_evaluate(recipe)  # what the command line runs
    assert not (tmp_path / recipe.name).exists()


def test_a_trace_whose_jobs_were_all_dropped_says_so_before_the_validation_check(tmp_path):
    from experiments import protocol
    from experiments.recipe import Recipe
    from hpcgym.errors import EmptyTraceError

    path = tmp_path / "big.swf"
    path.write_text(_swf([(10 * i, 0, 100, 16, 200) for i in range(12)]))  # 16 processors on an 8-node machine
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(EmptyTraceError, match="no valid jobs to train: all 12 jobs were dropped"):
            recipe = Recipe.from_settings({"trace": str(path)})  # no file is read until the run reads it
            protocol.run_data(recipe.source, recipe.selection)


# ---- item 10: Ctrl-C checkpoints and says how to resume; old checkpoints are pruned --------------------------------
def _checkpointing(tmp_path, monkeypatch, keep=2):
    import zipfile

    from agents import resume
    from agents.callbacks import AtomicCheckpointCallback

    class Model:  # what the callback calls on SB3's model
        def save(self, path):
            with zipfile.ZipFile(path, "w") as z:
                z.writestr("data", "{}")

    monkeypatch.setattr(resume, "save_state", lambda path, *a: Path(path).write_bytes(b"state"))
    cb = AtomicCheckpointCallback(100, str(tmp_path), "model", keep=keep)
    cb.model = Model()
    return cb


def test_only_the_newest_checkpoints_are_kept(tmp_path, monkeypatch):
    cb = _checkpointing(tmp_path, monkeypatch, keep=2)
    for steps in (100, 200, 300, 400):
        cb.num_timesteps = steps
        cb._on_rollout_start()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_300_steps.zip", "model_400_steps.zip",
                                                          "model_state_300_steps.pkl.gz",
                                                          "model_state_400_steps.pkl.gz"]


def test_ctrl_c_checkpoints_at_the_next_rollout_and_names_resume(tmp_path, monkeypatch, capsys):
    import signal

    from experiments.training import loop

    cb = _checkpointing(tmp_path, monkeypatch)
    cb.num_timesteps = 150
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN where pytest runs as a background job (nohup, &)
    with loop._checkpoint_on_interrupt(cb):
        signal.raise_signal(signal.SIGINT)  # the first Ctrl-C: no exception, a stop is asked for
        assert cb.stop_requested and cb._on_step()
        with pytest.raises(KeyboardInterrupt):
            cb._on_rollout_start()  # the next rollout: a checkpoint, then learn() stops
        assert (tmp_path / "model_150_steps.zip").exists() and cb.stopped
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # a second Ctrl-C stops at once
    assert signal.getsignal(signal.SIGINT) is before  # the handler it found is put back

    def interrupted(argv):
        raise KeyboardInterrupt(loop._resume_hint(runs.RunFolder(tmp_path / "r"), 150))

    assert cli.run(interrupted) == 130
    err = capsys.readouterr().err
    assert "newest checkpoint is at 150 steps" in err and "--run-name r --resume" in err


def test_evaluate_refuses_a_run_folder_whose_eval_is_a_link(tmp_path, capsys):
    from experiments import evaluate

    run = tmp_path / "r"
    run.mkdir()
    import zipfile

    (run / "args.json").write_text(json.dumps({"algo": "ppo", "trace": "lublin-256"}))
    with zipfile.ZipFile(run / "model.zip", "w") as z:  # passes the intact-model check; never loaded
        z.writestr("data", "{}")
    (tmp_path / "elsewhere").mkdir()
    (run / "eval").symlink_to(tmp_path / "elsewhere")
    err = _one_line(lambda argv: evaluate.main(["--model", str(run), "--windows", "1"]), capsys)
    assert "eval is a symbolic link" in err and not any((tmp_path / "elsewhere").iterdir())
