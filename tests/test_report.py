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
    assert report.differences(copy) == ["docs/results.md"]


def test_editing_one_number_of_the_bench_makes_the_check_fail(copy):
    """The suite's pooled table feeds the README's leaderboard, the results page and the predictions page."""
    path = copy / report.RESULTS / "bench" / "suite" / "pooled.csv"
    table = pd.read_csv(path)
    table.loc[table["scheduler"] == "saf-learned+easy", "ratio"] *= 1.01
    table.to_csv(path, index=False)
    assert report.differences(copy) == ["docs/results.md", "docs/predictions.md", "README.md"]


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


def test_editing_a_whole_split_number_makes_the_check_fail(copy):
    path = copy / report.RESULTS / report.STREAMS / "sdsc-sp2-heuristics.csv"
    stream = pd.read_csv(path)
    stream.loc[stream["scheduler"] == "tuned+easy", "bsld"] *= 2
    stream.to_csv(path, index=False)
    assert report.differences(copy) == ["docs/results.md"]


def test_whole_split_columns_come_from_the_stream_file_and_are_blank_without_one(tmp_path):
    rows = [("fcfs+easy", "heuristic", [4.0, 8.0]), ("me", "agent", [2.0, 2.0])]
    windows = pd.DataFrame([{"scheduler": s, "kind": k, "backfill": "easy", "window": w, "block": w, "bsld": b,
                             "seeds": "0", "date": "d", "trace": "t"} for s, k, bs in rows for w, b in enumerate(bs)])
    streams = pd.DataFrame([{"scheduler": "fcfs+easy", "kind": "heuristic", "backfill": "easy", "jobs": 9,
                             "bsld": 7.5, "vs_reference": 1.0, "vs_reference_low": 1.0, "vs_reference_high": 1.0,
                             "reference": "fcfs+easy", "trace": "t"}])
    shown = report.evaluation_tables(windows, "all", streams).set_index("scheduler")
    assert shown.loc["fcfs+easy", "whole"] == 7.5 and shown.loc["fcfs+easy", "whole_reference"] == "fcfs+easy"
    assert pd.isna(shown.loc["me", "whole"])
    text = report._shown(shown.reset_index())
    assert list(text["whole vs its reference (95% CI)"]) == ["-", "1.000 (1.000-1.000)"]  # "me" (2.0) sorts first


def test_adding_an_evaluation_copies_its_stream(tmp_path):
    (tmp_path / report.RESULTS).mkdir()
    pd.DataFrame(columns=["file", "trace", "date", "seeds", "command"]).to_csv(
        tmp_path / report.RESULTS / report.MANIFEST, index=False)
    run = tmp_path / "run" / "eval"
    run.mkdir(parents=True)
    pd.DataFrame([{"scheduler": "fcfs+easy", "kind": "heuristic", "backfill": "easy", "window": 0, "start": 0,
                   "block": 0, "bsld": 3.0}]).to_csv(run / "per_window.csv", index=False)
    pd.DataFrame([{"scheduler": s, "kind": "heuristic", "backfill": b, "jobs": 5, "bsld": 3.0, "vs_reference": 1.0,
                   "vs_reference_low": 1.0, "vs_reference_high": 1.0, "reference": "fcfs+easy"}
                  for s, b in (("fcfs+easy", "easy"), ("fcfs+none", "none"))]).to_csv(run / "stream.csv", index=False)
    report.add(run, "t", "2026-11-28", "-", "cmd", root=tmp_path)
    copied = pd.read_csv(tmp_path / report.RESULTS / report.STREAMS / "run.csv")
    assert list(copied["scheduler"]) == ["fcfs+easy"]  # the EASY rows only, as the per-window file
    manifest = pd.read_csv(tmp_path / report.RESULTS / report.MANIFEST, dtype=str)
    assert len(report.read_streams(manifest, tmp_path)) == 1
