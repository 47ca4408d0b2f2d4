"""The privacy rules of :mod:`synth.privacy` on tables small enough to score by hand."""

from __future__ import annotations

from math import log2

import pandas as pd
import pytest

from hpcgym.testing import make_jobs
from synth import privacy


def jobs(rows, users=None, groups=None):
    """A job table of (submit, run, walltime, nodes) rows, with the given user and group ids."""
    out = make_jobs(rows)
    if users is not None:
        out["user"] = users
    if groups is not None:
        out["group"] = groups
    return out


TRAIN = jobs([(0, 10, 20, 1), (5, 30, 60, 2)], users=[-1, 5], groups=[3, -1])


def test_a_copy_is_the_whole_request_and_outcome_tuple():
    rows = jobs([(0, 10, 20, 1), (1, 10, 99, 1), (2, 30, 60, 2), (3, 10, 20, 4)])
    # copies: (1, 10, 20) and (2, 30, 60); (1, 10, 99) differs in walltime only, (4, 10, 20) in nodes only
    assert privacy.exact_copy_share(TRAIN, rows) == 0.5
    assert privacy.exact_copy_share(TRAIN, jobs([(0, 30, 20, 1)])) == 0.0  # run and walltime of different jobs
    assert privacy.exact_copy_share(TRAIN, rows.iloc[:0]) == 1.0  # nothing generated: the worst value


def test_unknown_ids_are_no_identifiers():
    rows = jobs([(k, 1, 1, 1) for k in range(4)], users=[-1, -1, 5, 9], groups=[3, -1, -1, 4])
    # user: only 5 is a known train id (-1 is "unknown", in train and in the rows alike)
    assert privacy.identifier_reuse(TRAIN, rows, "user") == 0.25
    assert privacy.identifier_reuse(TRAIN, rows, "group") == 0.25  # 3
    every_user_unknown = jobs([(0, 1, 1, 1), (1, 1, 1, 1)], users=[-1, -1])
    assert privacy.identifier_reuse(every_user_unknown, every_user_unknown, "user") == 0.0


def test_ids_are_compared_as_strings():
    hashed = pd.DataFrame({"user": ["a1", "-1", "5"]})
    rows = pd.DataFrame({"user": ["5", "-1", "b2", "a1"]})
    assert privacy.identifier_reuse(hashed, rows, "user") == 0.5  # "5" and "a1"
    assert privacy.identifier_reuse(TRAIN, pd.DataFrame({"user": ["5", "-1"]}), "user") == 0.5  # int 5 == "5"


def test_missing_columns_and_empty_tables():
    assert privacy.identifier_reuse(TRAIN, pd.DataFrame({"nodes": [1]}), "user") == 0.0
    assert privacy.identifier_reuse(TRAIN.drop(columns="group"), TRAIN, "group") == 0.0
    assert privacy.identifier_reuse(TRAIN, TRAIN.iloc[:0], "user") == 1.0


def test_dcr_by_hand():
    # Everything is equal but the runs. Train runs 1 and 3: log1p gives log 2 and log 4, mean 1.5 log 2 and sd
    # 0.5 log 2, so train sits at -1 and +1 in standardized units; a constant column keeps sd 1 and adds nothing.
    train = jobs([(0, 1, 100, 1), (0, 3, 100, 1)])
    synthetic = jobs([(0, 7, 100, 1), (0, 1, 100, 1)])  # log 8 -> +3: distance 2; a copy: distance 0
    holdout = jobs([(0, 2, 100, 1)])  # log 3 -> 2 log2(3) - 3: distance to +1 is 4 - 2 log2(3)
    d = privacy.dcr(train, synthetic, holdout)
    near = 4 - 2 * log2(3)
    assert d["median_synthetic"] == pytest.approx(1.0)
    assert d["median_holdout"] == pytest.approx(near) and d["p5_holdout"] == pytest.approx(near)
    assert d["p5_synthetic"] == pytest.approx(0.05 * 2)  # numpy's linear percentile between 0 and 2
    assert d["zero_synthetic"] == 0.5 and d["zero_holdout"] == 0.0
    assert d["below_p5_synthetic"] == 0.5  # the copy only
    assert d["below_p5_holdout"] == 0.0


def test_dcr_of_an_empty_sample_is_the_worst():
    d = privacy.dcr(TRAIN, TRAIN.iloc[:0], TRAIN)
    assert (d["median_synthetic"], d["below_p5_synthetic"], d["zero_synthetic"]) == (0.0, 1.0, 1.0)


def test_privacy_puts_the_candidate_beside_the_test_split():
    candidate = jobs([(0, 10, 20, 1), (1, 11, 20, 1)], users=[5, 8], groups=[-1, -1])
    test = jobs([(0, 30, 60, 2), (4, 30, 61, 2), (9, 1, 1, 1)], users=[-1, 5, 5], groups=[3, 3, 7])
    out = privacy.privacy(TRAIN, candidate, test)
    assert (out["copy_candidate"], out["copy_test"]) == (0.5, pytest.approx(1 / 3))
    assert (out["user_candidate"], out["user_test"]) == (0.5, pytest.approx(2 / 3))
    assert (out["group_candidate"], out["group_test"]) == (0.0, pytest.approx(2 / 3))
    assert out["dcr"] == privacy.dcr(TRAIN, candidate, test)
