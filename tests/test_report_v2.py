"""The fidelity report v2: test-split reference, bootstrap baseline, privacy, validity, worst scores, directions."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import sklearn  # noqa: F401  (the C2ST and DCR need it)

from hpcgym import jobs as jobtable
from hpcgym import traces
from hpcgym.traces.split import head
from synth import bootstrap, fidelity, report_writer, validity
from synth.lublin import LublinModel

N_JOBS = 6000  # SDSC-SP2's first 6,000 jobs: train 4,200, test 1,800; users return, the workload drifts


@pytest.fixture(scope="module")
def real() -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reader's note on the jobs it dropped
        full = traces.load("sdsc-sp2")
    return head(full, N_JOBS)


@pytest.fixture(scope="module")
def splits(real) -> tuple[pd.DataFrame, pd.DataFrame]:
    return traces.split(real, "train"), traces.split(real, "test")


@pytest.fixture(scope="module")
def refs(splits) -> fidelity.References:
    return fidelity.prepare(*splits, seed=0)


@pytest.fixture(scope="module")
def result(real, splits, refs) -> dict:
    synthetic = LublinModel(128).sample(len(splits[1]), seed=0)
    return fidelity.evaluate(real, synthetic, seed=0, refs=refs)


def _values(result: dict, column: str) -> pd.Series:
    return result["table"].set_index("metric")[column]


# ---- what the report holds -----------------------------------------------------------------------------------
def test_report_has_bootstrap_privacy_validity_and_directions(result):
    table = result["table"]
    assert list(table.columns) == list(fidelity.TABLE_COLUMNS)
    assert list(table["metric"]) == list(fidelity.METRICS)
    # the offered load is judged against train's, the history rows against the test split's
    assert set(table["better"]) == {"lower", "higher", "= train", "= test"}
    assert {"privacy", "validity", "scheduling", "c2st"} <= set(table["section"])
    # the floor of validity is the real reader's: SDSC-SP2 drops about 9.5% of its jobs (run <= 0)
    assert 0.05 < _values(result, "floor")["dropped share"] < 0.15
    # Lublin's history rows: n/a (no users); the prediction rows: n/a (no predictor given here)
    numeric = table[~table["section"].isin(["sdmetrics", "history", "prediction"])]
    assert numeric[["floor", "bootstrap", "synthetic"]].notna().all().all()
    text = report_writer.render_markdown(result)
    for needle in ("bootstrap of train", "## 6. Validity", "## 9. Privacy", "| better |", "test split (floor)",
                   "95% bootstrap CI", "**Whole trace**"):
        assert needle in text, needle
    # the whole-trace replay has as many synthetic jobs as the test split
    summary = result["synthetic"]["sections"]["scheduling"]["summary"]
    assert summary.at["jobs", "synthetic"] == summary.at["jobs", "real"] == result["meta"]["jobs_test"]


def test_reference_is_the_test_split(result, splits, refs):
    """A copy of the *test* split is perfect; a bootstrap of *train* cannot beat the train-vs-test floor.

    Against a train reference both would flip: the test copy would score the floor, and the bootstrap (train rows)
    would look nearly indistinguishable (C2ST near 0.5, far below this drifting trace's floor).
    """
    floor, boot = _values(result, "floor"), _values(result, "bootstrap")
    assert floor["C2ST ROC AUC"] > 0.7  # the workload drifts between the periods
    assert boot["C2ST ROC AUC"] > floor["C2ST ROC AUC"] - 0.05
    _, test = splits
    oracle = test.copy()
    oracle.attrs = dict(test.attrs)
    values = fidelity.score(refs, oracle)["values"]
    assert values["C2ST ROC AUC"] == pytest.approx(0.5, abs=0.05)
    assert all(values[f"KS {c}"] == 0.0 for c in fidelity.NUMERIC)
    assert values["KS wait (whole trace)"] == 0.0 and values["offered load gap (whole trace)"] == 0.0


def test_bootstrap_leaks_more_than_the_test_split(result, splits):
    boot, floor = _values(result, "bootstrap"), _values(result, "floor")
    assert boot["exact-copy share"] == 1.0 and floor["exact-copy share"] < 0.3
    assert boot["user-id reuse share"] == 1.0 and floor["user-id reuse share"] < 0.8
    assert boot["DCR median"] == 0.0 < floor["DCR median"]
    assert boot["share DCR < test p5"] > 0.9
    # the bootstrap is made of whole train days: ordered submits, exact train rows, the train's hours of day
    train, test = splits
    b = bootstrap.day_bootstrap(train, len(test), seed=1)
    assert len(b) == len(test) and b["submit"].is_monotonic_increasing and b["submit"].iat[0] == 0
    assert fidelity.exact_copy_share(train, b) == 1.0
    hours = fidelity.hourly_profile(b) - fidelity.hourly_profile(train)
    assert 0.5 * np.abs(hours).sum() < 0.1


# ---- validity and worst scores -------------------------------------------------------------------------------
def test_validity_counts_the_raw_sample(splits):
    _, test = splits
    raw = test.iloc[:10].copy()
    raw.attrs = {"postprocess": {"rejected: run <= 0": 5, "rounded nodes": 2}}
    raw["nodes"] = raw["nodes"].astype(float)
    raw.loc[0, "nodes"] = 0  # dropped
    raw.loc[1, "nodes"] = 10_000  # more than the 128-node machine: dropped
    raw.loc[2, "run"] = np.nan  # dropped
    raw.loc[3, "nodes"] = 2.5  # rounded up
    raw.loc[4, "submit"] = raw.loc[9, "submit"] + 1  # out of order: sorted
    clean, v = validity.check(raw, 128)
    assert v["raw_rows"] == 15 and v["valid_rows"] == len(clean) == 7
    assert v["dropped"] == 5 + 3 and v["repaired"] == 2 + 1 + 1
    assert v["invalid_share"] == pytest.approx(12 / 15)
    assert clean["submit"].is_monotonic_increasing and clean["nodes"].iat[0] > 0
    assert 3 in clean["nodes"].to_numpy()


@pytest.mark.parametrize("kind", ["none", "empty frame", "empty table", "all invalid", "one row", "no columns"])
def test_empty_or_invalid_sample_scores_worst(kind, real, splits, refs):
    _, test = splits
    bad = test.copy()
    bad["nodes"] = 0
    raw = {"none": None, "empty frame": pd.DataFrame(), "empty table": jobtable.empty(), "all invalid": bad,
           "one row": test.iloc[:1], "no columns": pd.DataFrame({"x": [1, 2, 3]})}[kind]
    out = fidelity.evaluate(real, raw, seed=0, refs=refs)
    synthetic = _values(out, "synthetic")
    assert all(synthetic[m] == fidelity.worst(m) or math.isnan(fidelity.worst(m)) and math.isnan(synthetic[m])
               for m in fidelity.METRICS)  # the history rows' worst is "n/a"
    for m, metric in fidelity.METRICS.items():
        better, worst = metric.better, metric.worst
        floor = _values(out, "floor")[m]
        if better == "= train":  # a value judged by its distance to train's: the worst is infinitely far
            assert math.isinf(worst) and not math.isnan(floor), m
        elif not math.isnan(floor):
            assert not fidelity.beats(worst, floor, better), m
    report_writer.render_markdown(out)  # draws a missing candidate without raising


def test_targets_are_judged_and_reported(result, refs):
    table = result["targets"]
    assert list(table.columns) == ["target", "metric", "bar", "value", "met"]
    assert set(table["metric"]) <= set(fidelity.METRICS) and len(table) == len(fidelity.TARGETS)
    by = table.set_index("metric")
    # Lublin draws no user ids (met) and separates easily from the test split (C2ST far above the floor: missed)
    assert by.at["user-id reuse share", "met"] and not by.at["C2ST ROC AUC", "met"]
    assert by.at["C2ST ROC AUC", "bar"] == f"<= {refs.floor['values']['C2ST ROC AUC'] + 0.02:.3f}"
    text = report_writer.render_markdown(result)
    assert "## Targets" in text and "**missed**" in text and "classifier AUC within 0.02" in text
    # the test split itself meets every privacy target (it is their bar) and a copy of train misses them
    test_values = dict(refs.floor["values"]) | {"user-id reuse share": 0.0, "group-id reuse share": 0.0}
    assert fidelity.targets(test_values, refs.floor["values"]).query("metric.str.contains('DCR|copy')")["met"].all()
    memorized = fidelity.targets(refs.bootstrap["values"], refs.floor["values"]).set_index("metric")["met"]
    assert not memorized["exact-copy share"] and not memorized["DCR median"] and not memorized["user-id reuse share"]


# ---- command line --------------------------------------------------------------------------------------------
def test_report_fits_a_named_model_for_the_real_machine(real):
    from hpcgym import machines
    from synth.report import load_synthetic

    train = traces.split(head(real, 1000), "train")
    assert train["nodes"].max() < 128  # fitting without the machine size would take this as the machine
    (sample,), source = load_synthetic("lublin", train, 300)
    assert machines.get(sample.attrs["machine"]).nodes == 128
    assert "model `lublin` fitted on the train split, 300 jobs" in source


# ---- offered load and several samples ------------------------------------------------------------------------
def _load(jobs: pd.DataFrame, nodes: int = 128) -> float:
    """Offered load by hand: node-seconds asked for over the submit span times the machine's nodes."""
    span = float(jobs["submit"].iat[-1] - jobs["submit"].iat[0])
    return float((jobs["nodes"] * jobs["run"]).sum()) / (nodes * span)


def test_offered_load_row_and_its_target(result, splits, refs):
    train, test = splits
    row = result["table"].set_index("metric").loc["offered load (whole trace)"]
    assert row["better"] == "= train"
    assert row["floor"] == pytest.approx(_load(train)) and row["test"] == pytest.approx(_load(test))
    assert row["synthetic"] == pytest.approx(_load(LublinModel(128).sample(len(test), seed=0)))
    target = result["targets"].set_index("metric").loc["offered load (whole trace)"]
    base = _load(train)
    assert target["bar"] == f"{base * 0.97:.3f} to {base * 1.03:.3f}"
    assert target["met"] == (abs(row["synthetic"] / base - 1) <= 0.03)
    values = dict(refs.floor["values"])
    for factor, met in ((1.029, True), (0.971, True), (1.031, False), (0.969, False)):
        values["offered load (whole trace)"] = base * factor
        by = fidelity.targets(values, refs.floor["values"]).set_index("metric")
        assert by.at["offered load (whole trace)", "met"] == met, factor


def test_windowed_load_spread_by_hand():
    from synth.replay import load_spread, window_loads

    jobs = pd.DataFrame({"submit": np.arange(12) * 10, "nodes": [1] * 12, "run": [10] * 6 + [30] * 6})
    # windows of 4 jobs, each spanning 30 s on 2 nodes: work 40, 80 (runs 10, 10, 30, 30) and 120
    assert np.allclose(window_loads(jobs, 2, window=4), [40 / 60, 80 / 60, 120 / 60])
    assert np.isnan(load_spread(np.array([1.0, 2.0, 3.0])))  # too few windows
    assert load_spread(np.array([1.0, 2.0, 3.0, 4.0, 5.0])) == pytest.approx((4.0 - 2.0) / 3.0)


def test_load_between_outages_by_hand():
    from synth.replay import busy_load

    day = 86400
    jobs = pd.DataFrame({"submit": [0, 3600, 3600 + 3 * day, 3600 + 3 * day + 1800], "nodes": [2, 1, 1, 4],
                         "run": [3600, 1800, 900, 450]})
    # work 7,200 + 1,800 + 900 + 1,800 = 11,700 node-seconds; gaps 3,600 s, 3 days (counted as 12 h), 1,800 s
    assert busy_load(jobs, 4) == pytest.approx(11_700 / (4 * (3600 + 12 * 3600 + 1800)))
    assert busy_load(jobs, 4, outage=10 * day) == pytest.approx(11_700 / (4 * float(jobs["submit"].iat[-1])))


def test_several_samples_are_pooled(real, refs, splits):
    _, test = splits
    samples = [LublinModel(128).sample(len(test), seed=s) for s in (0, 1)]
    one = [fidelity.evaluate(real, s, seed=0, refs=refs)["table"].set_index("metric")["synthetic"] for s in samples]
    both = fidelity.evaluate(real, samples, seed=0, refs=refs)
    mean = both["table"].set_index("metric")["synthetic"]
    assert np.allclose(mean, (one[0] + one[1]) / 2, equal_nan=True)
    assert np.allclose(both["ranges"]["min"], np.minimum(one[0], one[1]), equal_nan=True)
    assert both["meta"]["samples"] == 2
    text = report_writer.render_markdown(both)
    assert "synthetic (mean of 2)" in text and "**2 samples**" in text


# ---- history: is a user's past worth reading? ----------------------------------------------------------------
def _history_table() -> pd.DataFrame:
    rows = [  # (submit, run, walltime, user); ends are submit + min(run, walltime)
        (0, 100, 200, 1),     # ends 100
        (10, 1000, 500, 2),   # killed at its walltime: holds 500 s, ends 510
        (20, 7, 10, -1),      # an unknown user: no history, no pair
        (50, 300, 400, 1),    # user 1 has no ended job at 50: no prediction
        (400, 200, 1000, 1),  # ended: 100 s and 300 s -> predicts 200, runs 200: ratio 1
        (600, 100, 1000, 2),  # ended: 500 s -> predicts 500, runs 100: ratio 0.2
        (700, 50, 120, 1),    # last two ended: 300 s and 200 s -> 250, capped at the walltime 120; runs 50
    ]
    df = pd.DataFrame(rows, columns=["submit", "run", "walltime", "user"])
    return df.assign(job_id=range(1, len(df) + 1), nodes=1)


def test_history_stats_by_hand():
    from synth.distances import history_stats

    stats = history_stats(_history_table())
    assert stats["last2_accuracy"] == pytest.approx(np.median([1.0, 0.2, 50 / 120]))
    # consecutive held runtimes of each user: 1: 100 -> 300 -> 200 -> 50; 2: 500 -> 100
    pairs = np.log([(100, 300), (300, 200), (200, 50), (500, 100)])
    x, y = pairs[:, 0] - pairs[:, 0].mean(), pairs[:, 1] - pairs[:, 1].mean()
    assert stats["runtime_lag1_corr"] == pytest.approx((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))


def test_history_stats_ties_and_missing_users():
    from synth.distances import history_stats

    # rows 1 and 2 both end at 100, and an end at the submit counts: row 3 reads both (mean 75, runs 40). Row 4
    # reads the last two by end, ties going to the later row: row 2 (50 s) and row 3 (40 s), not row 1 (100 s)
    df = pd.DataFrame({"submit": [0, 50, 100, 200], "run": [100, 50, 40, 300], "walltime": [1000] * 4,
                       "user": [3] * 4})
    assert history_stats(df)["last2_accuracy"] == pytest.approx(np.median([40 / 75, 45 / 300]))
    none = history_stats(df.assign(user=-1))
    assert math.isnan(none["last2_accuracy"]) and math.isnan(none["runtime_lag1_corr"])
    assert math.isnan(history_stats(df.drop(columns="user"))["last2_accuracy"])


def test_request_owner_share_by_hand():
    from synth.distances import history_stats

    # request (1, 100): users 1, 1, 1, 2 (main user: 3 jobs); (2, 100): users 2, 3 (1 job); (1, 200): no known user
    df = pd.DataFrame({"submit": range(7), "run": [10] * 7, "nodes": [1, 1, 1, 1, 2, 2, 1],
                       "walltime": [100] * 6 + [200], "user": [1, 1, 1, 2, 2, 3, -1]})
    assert history_stats(df)["request_owner_share"] == pytest.approx((3 + 1) / 6)
    assert math.isnan(history_stats(df.assign(user=-1))["request_owner_share"])


def test_history_rows_in_the_report(result, splits, refs):
    from synth.distances import history_stats

    train, test = splits
    table = result["table"].set_index("metric")
    for metric, key in (("last-two predictor accuracy (history)", "last2_accuracy"),
                        ("user runtime lag-1 correlation (history)", "runtime_lag1_corr"),
                        ("request owner share (history)", "request_owner_share")):
        row = table.loc[metric]
        assert row["better"] == "= test" and row["section"] == "history"
        assert row["floor"] == pytest.approx(history_stats(train)[key])
        assert row["test"] == pytest.approx(history_stats(test)[key])
        assert math.isnan(row["synthetic"]) and "n/a (no user ids)" in row["note"]  # Lublin's jobs have no users
    same = fidelity.score(refs, test)["values"]  # the test split scored as a sample: its own values
    assert same["last-two predictor accuracy (history)"] == pytest.approx(history_stats(test)["last2_accuracy"])
    assert "last-two predictor accuracy (history)" in report_writer.render_markdown(result)
