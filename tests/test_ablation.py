"""``synth.ablation``: the shuffles keep what they say they keep; a trace of identical jobs is immune to all of them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd

from hpcgym.testing import TOY, make_jobs
from synth import ablation


def test_permute_within_moves_rows_only_among_their_key():
    keys = np.array([3, 1, 3, 1, 7, 3])
    perm = ablation.permute_within(keys, np.random.default_rng(4))
    assert sorted(perm) == list(range(6))
    assert (keys[perm] == keys).all()  # every row receives a row of its own key
    assert perm[4] == 4  # a key of one row: it stays
    assert (ablation.permute_within(keys, np.random.default_rng(4)) == perm).all()


def test_moved_jobs_keep_the_arrival_times():
    jobs = make_jobs([(0, 10, 20, 1), (5, 30, 40, 2), (9, 50, 60, 3)])
    out = ablation.moved_jobs(jobs, np.array([2, 0, 1]))
    assert out["submit"].tolist() == [0, 5, 9]
    assert out["run"].tolist() == [50, 10, 30] and out["nodes"].tolist() == [3, 1, 2]
    assert out["job_id"].tolist() == [3, 1, 2]  # the whole job moves; only its arrival time stays


def test_reordered_blocks_keep_each_block_and_each_jobs_gap():
    jobs = make_jobs([(0, 1, 1, 1), (10, 1, 1, 1), (30, 1, 1, 1), (60, 1, 1, 1), (100, 1, 1, 1)])
    out = ablation.reordered_blocks(jobs, 2, np.random.default_rng(1))
    order = out["job_id"].tolist()
    pieces = {(1, 2), (3, 4), (5,)}
    found, i = set(), 0
    while i < 5:
        piece = next(p for p in pieces if tuple(order[i:i + len(p)]) == p)
        found.add(piece)
        i += len(piece)
    assert found == pieces  # every block is whole, in its own order
    gap_of = {1: 25, 2: 10, 3: 20, 4: 30, 5: 40}  # the gap before each job in the data (the first: the median)
    submit = out["submit"].tolist()
    assert submit[0] == 0
    assert [b - a for a, b in zip(submit, submit[1:], strict=False)] == [gap_of[j] for j in order[1:]]


def test_identical_jobs_at_equal_gaps_schedule_alike_under_every_shuffle():
    train = make_jobs([(60 * i, 500, 600, 2) for i in range(40)])
    test = make_jobs([(60 * i, 300, 600, 3) for i in range(30)])
    rows = ablation.ablate(train, test, TOY, shuffles=2, seed=0)
    assert set(rows["ablation"]) == set(ablation.ABLATIONS)
    none = rows[rows["ablation"] == "none"].iloc[0]
    for _, row in rows.iterrows():  # nothing to shuffle: every row's waits are the table's own
        assert (row["wait_ks"], row["no_wait"], row["mean_wait"]) == (none["wait_ks"], none["no_wait"],
                                                                      none["mean_wait"])
    # by hand: jobs of 2 of the 4 nodes for 500 s, one every 60 s: two run at once, so the queue grows and only
    # the first two start on arrival
    assert none["no_wait"] == 2 / 40


def test_the_cli_prints_the_rows_and_writes_every_draw(tmp_path):
    out = tmp_path / "rows.csv"
    done = subprocess.run([sys.executable, "-m", "synth.ablation", "--trace", "lublin-256", "--shuffles", "2",
                           "--only", "none", "jobs | all", "--out", str(out)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "jobs | all" in done.stdout and "wait_ks" in done.stdout
    rows = pd.read_csv(out)
    assert rows["ablation"].tolist() == ["none", "jobs | all", "jobs | all"] and rows["wait_ks"].between(0, 1).all()
