"""``benchmarks/synth_chains.py``: big jobs wait for their user's running one; the load is held (by hand)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hpcgym.jobs import offered_load
from hpcgym.testing import make_jobs

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("synth_chains", ROOT / "benchmarks" / "synth_chains.py")
chains = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chains)


def _jobs(rows, users):
    jobs = make_jobs(rows)
    jobs["user"] = users
    return jobs


def test_think_times_count_only_big_jobs_that_came_after_their_users_last_one_ended():
    # user 7's big jobs: 0-100, then 130 (30 s after) - 140, then 135 (while that one runs: not counted);
    # user 8's one big job has nothing before it; the 1-node job is not big
    jobs = _jobs([(0, 100, 100, 2), (120, 5, 5, 1), (130, 10, 10, 3), (135, 10, 10, 2), (150, 10, 10, 4)],
                 [7, 7, 7, 7, 8])
    assert chains.think_times(jobs, big=2).tolist() == [30.0]


def test_a_big_job_waits_for_its_users_running_big_job_and_small_ones_do_not():
    # A: big, 0-100; B: big, same user, at 10 (A runs): moves to 100 + 7; C: small, same user: stays at 20
    jobs = _jobs([(0, 100, 100, 4), (10, 50, 50, 4), (20, 5, 5, 1)], [0, 0, 0])
    out = chains.chained(jobs, big=2, q=1.0, think=np.array([7.0]), compression=1.0, rng=np.random.default_rng(0))
    assert out["job_id"].tolist() == [1, 3, 2] and out["submit"].tolist() == [0, 20, 107]
    half = chains.chained(jobs, 2, 1.0, np.array([7.0]), 0.5, np.random.default_rng(0))
    assert half["submit"].tolist() == [0, 10, 107]  # every gap halved first; B still waits for A's end
    other = _jobs([(0, 100, 100, 4), (10, 50, 50, 4), (20, 5, 5, 1)], [0, 1, 0])
    apart = chains.chained(other, 2, 1.0, np.array([7.0]), 1.0, np.random.default_rng(0))
    assert apart["submit"].tolist() == [0, 10, 20]  # B's user has no big job running
    never = chains.chained(jobs, 2, 0.0, np.array([7.0]), 1.0, np.random.default_rng(0))
    assert never["submit"].tolist() == [0, 10, 20]


def test_the_load_is_held_by_the_compression_worked_out_by_hand():
    # C (0, 1 node), A (100, 150 s, 4 nodes), B (110, 100 s, 4 nodes; A's user), D (200, 1 node) on 4 nodes:
    # work 1,002, span 200, load 1.2525. Compressed by c, B waits for A's end at 100c + 150 and D comes at 200c,
    # so the span is 100c + 150 and the load is held while it rounds to 200 s: up to c = 0.505 (200.5 rounds to
    # even), the largest compression that holds it.
    jobs = _jobs([(0, 1, 1, 1), (100, 150, 150, 4), (110, 100, 100, 4), (200, 1, 1, 1)], [1, 0, 0, 2])
    target = offered_load(jobs, 4)
    assert target == pytest.approx(1002 / 800)
    table, c = chains.held(jobs, 4, big=2, q=1.0, think=np.array([]), min_compression=0.1, seed=0)
    assert c == pytest.approx(0.505, abs=1e-6)
    assert table["job_id"].tolist() == [1, 2, 4, 3] and table["submit"].tolist() == [0, 50, 101, 200]
    assert offered_load(table, 4) == pytest.approx(target)
    # unreachable: a compression floor of 0.8 leaves the span at 230, and that is what comes back
    table, c = chains.held(jobs, 4, big=2, q=1.0, think=np.array([]), min_compression=0.8, seed=0)
    assert c == pytest.approx(0.8) and offered_load(table, 4) == pytest.approx(1002 / (4 * 230))
    assert chains.held(jobs, 4, 2, 0.0, np.array([]), 0.1, 0)[1] == 1.0  # q = 0: the sample as it is


def test_the_benchmark_runs_on_a_bundled_week():
    cmd = [sys.executable, "benchmarks/synth_chains.py", "--trace", "mustang-2012-02", "--samples", "1",
           "--q", "0", "1", "--memorizer"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "wait KS" in lines[0] and len(lines) == 5  # header, column names, q = 0, q = 1, the bootstrap
    assert lines[-1].split()[0] == "bootstrap"
