"""Validation from several periods (``--val-periods``): which rows are held out, and where the windows fall.

The expected rows are worked out here from the train split's length alone (``round`` of the stretch edges and of
each stretch's training share, as the docs state them), not by the functions under test.
"""

from __future__ import annotations

import pytest

from experiments import train
from experiments.protocol import load_data, validation_starts
from experiments.recipe import Source
from hpcgym import cli, traces


def _args(*extra: str) -> Source:
    return train.parse_args(["--trace", "lublin-256", "--workload", "real", *extra]).recipe.source


def _held_out_rows(n: int, periods: int, val_fraction: float) -> list[range]:
    """Each period's validation rows of a train split of ``n`` jobs, by the rule in the docs."""
    out = []
    for k in range(periods):
        lo, hi = round(n * k / periods), round(n * (k + 1) / periods)
        out.append(range(lo + round((hi - lo) * (1 - val_fraction)), hi))
    return out


@pytest.mark.parametrize("periods", [1, 3])
def test_each_period_holds_out_its_last_share(periods):
    data = load_data(_args(), 0.3, periods)
    train_ids = traces.split(traces.read("lublin-256"), "train")["job_id"].to_numpy()
    held = _held_out_rows(len(train_ids), periods, 0.3)
    expected = [int(train_ids[i]) for rows in held for i in rows]
    assert data.validation["job_id"].tolist() == expected
    kept = sorted(set(range(len(train_ids))) - {i for rows in held for i in rows})
    assert data.fit["job_id"].tolist() == [int(train_ids[i]) for i in kept]  # in order, nothing shared
    assert [hi - lo for lo, hi in data.val_periods] == [len(rows) for rows in held]


def test_one_period_is_the_last_share_of_the_train_split_as_before():
    data = load_data(_args(), 0.2)
    train_split = traces.split(traces.read("lublin-256"), "train")
    cut = round(len(train_split) * 0.8)
    assert data.fit["job_id"].tolist() == train_split["job_id"].iloc[:cut].tolist()
    assert data.validation["job_id"].tolist() == train_split["job_id"].iloc[cut:].tolist()
    assert validation_starts(data, 256, 5) == traces.window_starts(len(data.validation), 256, 5, seed=0)


def test_windows_are_shared_out_and_never_straddle_two_periods():
    data = load_data(_args(), 0.4, 3)
    starts = validation_starts(data, 300, 8)
    assert len(starts) == 8 and starts == validation_starts(data, 300, 8)  # fixed
    per_period = [0, 0, 0]
    for s in starts:
        inside = [k for k, (lo, hi) in enumerate(data.val_periods) if lo <= s and s + 300 <= hi]
        assert len(inside) == 1, (s, data.val_periods)
        per_period[inside[0]] += 1
    assert per_period == [3, 3, 2]  # 8 windows over 3 periods: the first periods take the extra ones


def test_periods_shorter_than_a_window_are_refused_by_name():
    data = load_data(_args(), 0.2, 8)
    shortest = min(hi - lo for lo, hi in data.val_periods)
    with pytest.raises(cli.UsageError, match=f"shortest of 8 validation periods has {shortest} jobs.*--val-periods"):
        validation_starts(data, shortest + 1, 4)
