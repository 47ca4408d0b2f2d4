"""The paired ratio against a reference with a block-bootstrap CI (hpcgym.metrics.paired_ratio_ci), by hand."""

import numpy as np
import pytest

from hpcgym import metrics

# Two blocks. Block A: two overlapping windows, agent 1 and 1 against reference 2 and 2 (sums 2 / 4);
# block B: one window, 4 against 4. Point ratio (1 + 1 + 4) / (2 + 2 + 4) = 0.75. A resample draws two blocks:
# AA -> 4 / 8 = 0.5 (probability 1/4), AB or BA -> 6 / 8 = 0.75 (1/2), BB -> 8 / 8 = 1.0 (1/4).
AGENT, REFERENCE, BLOCKS = [1.0, 1.0, 4.0], [2.0, 2.0, 4.0], [0, 0, 1]


def test_point_ratio_and_ci_by_hand():
    ratio, low, high = metrics.paired_ratio_ci(AGENT, REFERENCE, BLOCKS, n_boot=4000, seed=0)
    assert ratio == pytest.approx(0.75)
    assert (low, high) == (pytest.approx(0.5), pytest.approx(1.0))


def test_resamples_draw_whole_blocks_with_the_hand_computed_frequencies():
    ratios = metrics.block_bootstrap_ratios(np.array(AGENT), np.array(REFERENCE), np.array(BLOCKS), n_boot=4000)
    values, counts = np.unique(np.round(ratios, 12), return_counts=True)
    assert values.tolist() == [0.5, 0.75, 1.0]
    assert counts / counts.sum() == pytest.approx([0.25, 0.5, 0.25], abs=0.03)


def test_one_block_has_no_spread_and_single_windows_do():
    assert metrics.paired_ratio_ci(AGENT, REFERENCE, [7, 7, 7]) == (0.75, 0.75, 0.75)
    # every window its own block: one A window with two B windows, (1 + 4 + 4) / (2 + 4 + 4) = 0.9, becomes possible
    single = metrics.block_bootstrap_ratios(np.array(AGENT), np.array(REFERENCE), np.arange(3), n_boot=4000)
    assert np.isclose(single, 0.9).any()


def test_seeded_and_deterministic():
    assert metrics.paired_ratio_ci(AGENT, REFERENCE, BLOCKS, seed=3) == metrics.paired_ratio_ci(AGENT, REFERENCE,
                                                                                              BLOCKS, seed=3)


def test_window_blocks_by_hand():
    assert metrics.window_blocks([0, 1023, 1024, 3000], 1024).tolist() == [0, 0, 1, 2]


def test_mismatched_inputs_are_refused():
    with pytest.raises(ValueError, match="equal"):
        metrics.paired_ratio_ci([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="one block per score"):
        metrics.paired_ratio_ci([1.0, 2.0], [1.0, 2.0], [0])
