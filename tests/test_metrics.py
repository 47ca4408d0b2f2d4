"""The fidelity metrics' records: each reads its value where the scored result keeps it, and targets judge by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from synth import metrics
from synth.metrics import METRICS, TARGETS, Target


def _scored() -> dict:
    """A scored candidate built by hand: every part a metric reads, with values that tell the rows apart."""
    marg = pd.DataFrame({"ks": [0.1, 0.2, 0.3, 0.4], "wasserstein_log1p": [1.0, 2.0, 3.0, 4.0]},
                        index=list(metrics.NUMERIC))
    stats = {"cv": 2.0, "lag1_acf": 0.3, "dispersion": 5.0, "spectral_24h": 9.0}
    sched = {"offered_load": 0.7, "busy_load": 0.8, "load_spread": 0.2, "utilization": 0.6}
    hist = {"last2_accuracy": 0.5, "runtime_lag1_corr": 0.4, "request_owner_share": 0.6}
    sections = {
        "marginals": marg, "correlation": {"mad": 0.05}, "sdmetrics": {"score": 0.8, "status": "ok"},
        "c2st": {"auc": 0.7}, "shape": {"pow2_candidate": 0.9, "pow2_reference": 0.95, "menu_candidate": 0.5,
                                        "menu_reference": 0.75},
        "arrivals": {"real": stats, "synthetic": {**stats, "cv": 3.5, "lag1_acf": 0.1}, "hour_tv": 0.12},
        "scheduling": {"real": {**sched, "utilization": 0.5}, "synthetic": sched, "ks_wait": 0.11, "ks_bsld": 0.12,
                       "ks_wait_windows": 0.13, "ks_bsld_windows": 0.14},
        "history": {"real": hist, "synthetic": {**hist, "last2_accuracy": 0.25}},
    }
    privacy = {"dcr": {"median_synthetic": 0.3, "median_holdout": 0.4, "p5_synthetic": 0.01, "p5_holdout": 0.02,
                       "below_p5_synthetic": 0.06, "below_p5_holdout": 0.05},
               "copy_candidate": 0.001, "copy_test": 0.002, "user_candidate": 0.0, "user_test": 0.7,
               "group_candidate": 0.0, "group_test": 0.8}
    validity = {"invalid_share": 0.03, "dropped_share": 0.02, "repaired_share": 0.01}
    return {"sections": sections, "privacy": privacy, "validity": validity, "prediction": {"mae_log": 1.5, "bsld": 7.0}}


def test_each_metric_reads_its_own_value():
    scored = _scored()
    want = {"KS run": 0.3, "W1 log1p walltime": 4.0, "Spearman correlation MAD": 0.05, "SDMetrics quality score": 0.8,
            "C2ST ROC AUC": 0.7, "power-of-two share gap": 0.05, "walltime-menu share gap": 0.25,
            "invalid share (dropped or repaired)": 0.03, "inter-arrival CV gap": 1.5,
            "lag-1 ACF log1p inter-arrival gap": 0.2, "24 h spectral peak gap": 0.0, "hour-of-day TV distance": 0.12,
            "offered load (whole trace)": 0.7, "offered load between outages": 0.8,
            "utilization gap (whole trace)": 0.1, "KS bsld (windows)": 0.14,
            "last-two predictor accuracy (history)": 0.25, "predictor bsld (fitted on it)": 7.0,
            "DCR median": 0.3, "exact-copy share": 0.001, "group-id reuse share": 0.0}
    got = {m: METRICS[m].value(scored) for m in want}
    assert got == pytest.approx(want)
    # the floor's privacy rows are the test split's own values; the test split's own statistics beside the gaps
    assert METRICS["DCR median"].value(scored, floor=True) == 0.4
    assert METRICS["user-id reuse share"].value(scored, floor=True) == 0.7
    assert METRICS["utilization gap (whole trace)"].test_value(scored["sections"]) == 0.5
    assert METRICS["walltime-menu share gap"].test_value(scored["sections"]) == 0.75
    assert math.isnan(METRICS["KS wait (whole trace)"].test_value(scored["sections"]))  # no per-trace statistic


def test_a_missing_part_reads_nan():
    scored = _scored() | {"sections": {}}
    del scored["prediction"]
    assert math.isnan(METRICS["KS wait (whole trace)"].value(scored))
    assert math.isnan(METRICS["predictor MAE log (fitted on it)"].value(scored))
    assert METRICS["dropped share"].value(scored) == 0.02  # validity does not need the sections


def test_every_metric_is_defined_once_and_every_target_names_one():
    """41 rows: KS and W1 of the four numeric columns, and 33 more."""
    assert len(METRICS) == 41 and all(name == m.name for name, m in METRICS.items())
    assert all(METRICS[t.metric.name] is t.metric for t in TARGETS)


@pytest.mark.parametrize("op, allowance, value, floor, bar, met", [
    ("0", 0.0, 0.0, 0.7, "= 0", True),
    ("0", 0.0, 0.01, 0.0, "= 0", False),
    ("<=", 0.05, 0.15, 0.1, "<= 0.150", True),
    ("<=", 0.05, 0.151, 0.1, "<= 0.150", False),
    (">=", 0.0, 0.4, 0.4, ">= 0.400", True),
    ("~", 0.03, 0.515, 0.5, "0.485 to 0.515", True),
    ("~", 0.03, 0.52, 0.5, "0.485 to 0.515", False),
    ("<=", 0.0, 0.1, float("nan"), "<= nan", False),  # no floor value: not met
])
def test_targets_judge_by_hand(op, allowance, value, floor, bar, met):
    assert Target("t", metrics.KS_WAIT, op, allowance).judge(value, floor) == (bar, met)
