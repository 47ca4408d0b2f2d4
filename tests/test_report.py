"""The docs' results tables are what ``python -m experiments.report`` builds from the committed summaries."""

import shutil

import pandas as pd
import pytest

from experiments import report


def test_docs_tables_match_the_committed_summaries():
    assert report.differences() == [], "run python -m experiments.report"


@pytest.fixture
def copy(tmp_path):
    """The pages and the summaries, copied: the tables agree there until a test edits something."""
    shutil.copytree(report.ROOT / report.RESULTS, tmp_path / report.RESULTS)
    for page in set(report.PAGES.values()):
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(report.ROOT / page, tmp_path / page)
    assert report.differences(tmp_path) == []
    return tmp_path


def test_editing_one_number_of_a_summary_makes_the_check_fail(copy):
    path = copy / report.RESULTS / "theta-synthetic-ppo-s0.csv"
    scores = pd.read_csv(path)
    scores.loc[scores["scheduler"] == "saf+easy", "bsld"] *= 1.5
    scores.to_csv(path, index=False)
    assert report.differences(copy) == ["README.md", "docs/results.md"]


def test_editing_one_number_of_a_page_makes_the_check_fail(copy):
    page = copy / "docs" / "benchmarks.md"
    page.write_text(page.read_text().replace("2,228,414", "2,228,415", 1))
    assert report.differences(copy) == ["docs/benchmarks.md"]


def test_rows_come_from_the_summaries():
    """A new row appears without a change to the script; the reference is the best implementable row (ratio 1)."""
    rows = [("fcfs+easy", "heuristic", [4.0, 8.0]), ("learned+easy", "heuristic", [1.0, 3.0]),
            ("me", "agent", [2.0, 2.0]), ("clairvoyant+easy", "clairvoyant", [0.5, 0.5])]
    windows = pd.DataFrame([{"scheduler": s, "kind": k, "backfill": "easy", "window": w, "block": w, "bsld": b,
                             "seeds": "0", "date": "d"} for s, k, bs in rows for w, b in enumerate(bs)])
    table = report.trace_table(windows).set_index("scheduler")
    assert list(table.index) == ["learned+easy", "me", "fcfs+easy", "clairvoyant+easy"]  # upper bound last
    assert table.loc["me", "vs_reference"] == pytest.approx(4 / 4) and table.loc["fcfs+easy", "vs_reference"] == 3.0
    assert (table["reference"] == "learned+easy").all()
