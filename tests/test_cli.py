"""Every command-line tool: a user's mistake is one ``error:`` line and exit 2; files are written atomically."""

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcgym import io

REPO = Path(__file__).resolve().parents[1]

BAD = [
    (["hpcgym.traces", "info", "sdsc-sp3"], "did you mean"),
    (["baselines.run", "--trace", "nosuch"], "unknown trace"),
    (["synth.fit", "--trace", "nosuch", "--out", "x"], "unknown trace"),
    (["synth.sample", "--model", "/nonexistent", "--jobs", "5", "--out", "x.swf"], "nonexistent"),
    (["synth.report", "--real", "nosuch", "--synthetic", "arrivals", "--out", "x"], "nosuch"),
    (["experiments.train", "--machine", "12x0"], "positive"),
    (["experiments.train", "--ranks", "walltime,cores"], "unknown job column"),
    (["experiments.train", "--run-name", "never-trained", "--resume", "--runs-dir", "/nonexistent"], "no run"),
    (["experiments.train", "--seed", "-1"], "--seed must be between 0 and"),
    (["experiments.train", "--seeds", "0", "4294967296"], "--seeds must be between 0 and"),
    (["experiments.train", "--envs", "0"], "--envs must be at least 1"),
    (["experiments.train", "--run-name", ".."], "one folder's name"),
    (["experiments.train", "--run-name", "x" * 256], "more than the 255"),
    (["experiments.evaluate", "--model", "/nonexistent"], "no run folder /nonexistent"),
    (["experiments.evaluate", "--windows", "0"], "--windows: must be at least 1"),
    (["experiments.evaluate", "--seed", "-1"], "a seed is between 0 and"),
    (["experiments.evaluate", "--window", "1"], "--window must be at least 2, not 1"),
    (["baselines.tune", "--trace", "lublin-256", "--window", "99999999"], "longer than the train split"),
    (["baselines.tune", "--seed", "-1"], "--seed: a seed is between 0 and"),
    (["synth.fit", "--seed", "-1", "--out", "x"], "--seed: a seed is between 0 and"),
    (["experiments.compare", "/nonexistent"], "no run folder /nonexistent"),
    (["experiments.seeds", "/nonexistent", "--out", "x"], "no run folder /nonexistent"),
    (["experiments.sweep", "--backend", "slurm"], "invalid choice"),
    (["experiments.recipe_sweep", "--variants", "best"], "invalid choice"),
]


@pytest.mark.parametrize("argv, needle", BAD, ids=[b[0][0] + "-" + b[0][1] for b in BAD])
def test_user_errors_are_one_line(argv, needle, tmp_path):
    done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = [line for line in done.stderr.splitlines() if line.strip() and "it/s" not in line]
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and lines[-1].startswith("error:"), done.stderr[-2000:]
    assert needle in lines[-1].lower(), lines[-1]


@pytest.mark.filterwarnings("ignore:.*dropped")
def test_report_refuses_a_model_of_another_machine(tmp_path):
    import synth
    from hpcgym import traces
    from synth.report import check_machine

    small = traces.load("sdsc-sp2").iloc[:200]  # a 128-node machine
    model = synth.get("lublin", max_nodes=128).fit(small)
    model.save(tmp_path / "sp2-model")
    done = subprocess.run([sys.executable, "-m", "synth.report", "--real", "theta", "--jobs", "500", "--synthetic",
                           str(tmp_path / "sp2-model"), "--out", str(tmp_path / "report")], capture_output=True,
                          text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].startswith(f"error: --synthetic {tmp_path / 'sp2-model'}: the model was "
                                                   "fitted for a 128-node machine, and --real's machine theta has "
                                                   "4,392 nodes")
    assert not (tmp_path / "report").exists()
    check_machine(model, "sdsc-sp2", "m")  # the same machine passes


def test_headerless_swf_needs_and_takes_a_machine(tmp_path):
    body = [line for line in gzip.decompress((REPO / "hpcgym/data/lublin_256.swf.gz").read_bytes()).decode()
            .splitlines() if line.strip() and not line.startswith(";")][:200]
    path = tmp_path / "headerless.swf"
    path.write_text("\n".join(body) + "\n")
    info = [sys.executable, "-m", "hpcgym.traces", "info", str(path)]
    bad = subprocess.run(info, capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "machine" in bad.stderr.lower()
    good = subprocess.run([*info, "--machine", "256"], capture_output=True, text=True, cwd=REPO)
    assert good.returncode == 0 and "200" in good.stdout, good.stderr


@pytest.mark.parametrize("name", ["sdsc-sp2", "hpc2n", "lublin-256", "theta-2022"])
def test_traces_info_reads_every_bundled_swf_log(name):
    done = subprocess.run([sys.executable, "-m", "hpcgym.traces", "info", name], capture_output=True, text=True,
                          cwd=REPO)
    assert done.returncode == 0 and "offered load" in done.stdout, done.stderr[-2000:]


def test_atomic_writes_keep_the_umask_and_leave_nothing_behind(tmp_path):
    old = os.umask(0o022)
    try:
        path = io.write_text(tmp_path / "a" / "b.txt", "hello")
    finally:
        os.umask(old)
    assert path.read_text() == "hello" and (path.stat().st_mode & 0o777) == 0o644

    def broken(tmp):
        tmp.write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        io.atomic_write(path, broken)
    assert path.read_text() == "hello" and sorted(p.name for p in path.parent.iterdir()) == ["b.txt"]


def test_load_jit_skips_scipy_linalg_and_leaves_it_importable():
    code = ("import sys, numpy as np, numba; from hpcgym import cli; cli.load_jit(); "
            "print('numba.np.arraymath' in sys.modules, 'scipy.linalg' in sys.modules); "
            "import scipy.linalg; dot = numba.njit(lambda a, b: np.dot(a, b)); "
            "print(dot(np.ones((2, 3)), np.ones((3, 2))).sum(), scipy.linalg.det(np.eye(2)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False", "12.0", "1.0"]
