"""The one reader of per-window results: roles, rows and the strongest reference, checked by hand."""

import pandas as pd
import pytest

from experiments.results import Windows

ROWS = [("fcfs+easy", "heuristic", 0, 10.0), ("fcfs+easy", "heuristic", 1, 20.0),
        ("tuned+easy", "heuristic", 0, 6.0), ("tuned+easy", "heuristic", 1, 5.0),
        ("clairvoyant+easy", "clairvoyant", 0, 1.0), ("clairvoyant+easy", "clairvoyant", 1, 2.0),
        ("run-s0", "agent", 1, 4.0), ("run-s0", "agent", 0, 7.0),
        ("cloned", "cloned", 0, 8.0), ("untrained", "untrained", 0, 30.0)]


def table() -> Windows:
    return Windows(pd.DataFrame(ROWS, columns=["scheduler", "kind", "window", "bsld"]).assign(backfill="easy"))


def test_roles_split_the_rows_by_kind():
    w = table()
    assert w.agents["scheduler"].unique().tolist() == ["run-s0"]
    assert sorted(w.starts["scheduler"].unique()) == ["cloned", "untrained"]
    assert sorted(w.heuristics["scheduler"].unique()) == ["fcfs+easy", "tuned+easy"]
    assert len(w.references) == 6  # the heuristics and the clairvoyant row


def test_the_reference_is_the_best_heuristic_never_the_clairvoyant_row():
    assert table().reference() == "tuned+easy"  # means 15, 5.5; the clairvoyant row (1.5) is an upper bound


def test_rows_by_window_and_the_fingerprint_sorts_windows():
    w = table()
    assert w.bsld("run-s0").to_dict() == {1: 4.0, 0: 7.0}
    assert w.fingerprint("run-s0") == [7.0, 4.0]
    assert w.bsld("nobody").empty


def test_read_takes_a_file_or_its_folder(tmp_path):
    table().table.to_csv(tmp_path / "per_window.csv", index=False)
    for path in (tmp_path, tmp_path / "per_window.csv"):
        assert Windows.read(path).fingerprint("fcfs+easy") == [10.0, 20.0]


def test_a_table_without_scores_is_refused():
    with pytest.raises(ValueError, match="lacks"):
        Windows(pd.DataFrame({"scheduler": ["a"], "kind": ["agent"], "window": [0]}))
