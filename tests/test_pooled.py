"""The pooled statistics of the bench (experiments/pooled.py), checked against hand computations."""

import itertools
import math

import numpy as np
import pytest

from experiments import pooled


def test_a_row_against_itself_is_exactly_one():
    rng = np.random.default_rng(1)
    logs = [rng.uniform(1, 50, n) for n in (3, 7, 20)]
    p = pooled.pool(logs, logs, n_boot=500)
    assert (p.ratio, p.lo, p.hi, p.lo_logs, p.hi_logs) == (1.0, 1.0, 1.0, 1.0, 1.0)
    assert (p.logs, p.windows) == (3, 30)


def test_a_planted_ratio_is_recovered():
    """Every log's row is the reference times 0.8 (window by window): the ratio and both CIs are 0.8."""
    rng = np.random.default_rng(2)
    ref = [rng.uniform(1, 100, n) for n in (5, 12, 40, 2)]
    p = pooled.pool([0.8 * r for r in ref], ref, n_boot=500)
    assert p.ratio == pytest.approx(0.8) and p.lo == pytest.approx(0.8) and p.hi == pytest.approx(0.8)
    assert p.lo_logs == pytest.approx(0.8) and p.hi_logs == pytest.approx(0.8)


def test_a_planted_ratio_with_noise_lies_inside_its_ci():
    rng = np.random.default_rng(3)
    ref = [rng.uniform(1, 100, n) for n in (30, 60, 90)]
    mine = [r * 0.9 * np.exp(rng.normal(0, 0.05, len(r))) for r in ref]
    p = pooled.pool(mine, ref, n_boot=2000)
    assert p.lo < 0.9 < p.hi and p.hi < 1
    assert p.lo_logs <= p.lo and p.hi <= p.hi_logs  # resampling the logs too widens it here


def test_the_point_ratio_is_the_geometric_mean_of_the_ratios_of_sums():
    """Two logs by hand: log A (row 2, 4; reference 1, 1) has 3; log B (row 1, 1, 1; reference 2, 2, 2) has 0.5."""
    p = pooled.pool([np.array([2.0, 4.0]), np.array([1.0, 1.0, 1.0])],
                    [np.array([1.0, 1.0]), np.array([2.0, 2.0, 2.0])], n_boot=200)
    assert p.ratio == pytest.approx(math.sqrt(3 * 0.5))
    assert (p.logs, p.windows) == (2, 5)


def test_the_suite_ci_matches_the_exact_bootstrap_distribution():
    """Two logs of two windows: the 16 equally likely resamples, enumerated, bound the bootstrap's quantiles."""
    row = [np.array([1.0, 3.0]), np.array([2.0, 8.0])]
    ref = [np.array([2.0, 2.0]), np.array([4.0, 4.0])]
    outcomes = []
    for a in itertools.product(range(2), repeat=2):
        for b in itertools.product(range(2), repeat=2):
            ra = row[0][list(a)].sum() / ref[0][list(a)].sum()
            rb = row[1][list(b)].sum() / ref[1][list(b)].sum()
            outcomes.append(math.sqrt(ra * rb))
    exact = np.sort(outcomes)  # each 1/16
    p = pooled.pool(row, ref, n_boot=20000, seed=5)
    # the 2.5% and 97.5% quantiles of a 16-point uniform distribution are its lowest and highest points
    assert p.lo == pytest.approx(exact[0]) and p.hi == pytest.approx(exact[-1])


def test_the_noise_floor_is_the_farthest_copy():
    ref = [np.array([1.0, 1.0]), np.array([2.0, 2.0])]
    near = [[np.array([1.1, 1.1]), np.array([2.0, 2.0])],   # pooled sqrt(1.1)
            [np.array([0.8, 0.8]), np.array([1.6, 1.6])]]   # pooled 0.8: |log| larger
    assert pooled.noise_floor(near, ref) == pytest.approx(1 / 0.8 - 1)
    assert math.isnan(pooled.noise_floor([], ref))


def test_verdicts_and_outcomes():
    better = pooled.Pooled(0.8, 0.7, 0.9, 0.6, 1.1, 15, 400)
    assert pooled.verdict(better, 0.02).startswith("better") and "do not" in pooled.verdict(better, 0.02)
    assert pooled.verdict(better, 0.3).startswith("noise")  # inside a 30% floor whatever the CI says
    assert pooled.verdict(pooled.Pooled(1.2, 1.1, 1.3, 1.05, 1.4, 3, 9), 0.02).startswith("worse")
    assert pooled.outcome(0.8, 0.7, 0.9, 0.3) == "tie"


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="same windows"):
        pooled.pool([np.array([1.0, 2.0])], [np.array([1.0])])
    with pytest.raises(ValueError, match="same logs"):
        pooled.pool([], [])
    with pytest.raises(ValueError, match="positive"):
        pooled.pool([np.array([0.0])], [np.array([1.0])])
