"""The fidelity report's metrics and targets as typed records, each defined once.

A :class:`Metric` names one row of the report: its section, which direction is better, what ideal is, the worst
value (what an empty or all-invalid sample scores), and how its value is read from a scored candidate (the dict of
:func:`synth.fidelity.score`: ``sections``, ``validity``, ``privacy``, ``prediction``), from the floor where that
differs (the privacy rows: the test split's own value), and the test split's own value of a per-trace statistic.
:data:`METRICS` holds them in report order, by name; :data:`TARGETS` holds the generator targets
(:class:`Target`), each judging one metric against the floor. :mod:`synth.fidelity` computes with these records,
:mod:`synth.report_writer` and ``benchmarks/synth_fidelity.py`` read rows through them. This module computes no
distance; it only says where each value is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

NUMERIC = ("interarrival", "nodes", "run", "walltime")  # synth.features.NUMERIC (this module imports no metric code)
INF = float("inf")
NAN = float("nan")
#: a part of a scored candidate (a section's result, the validity, the privacy or the prediction dict) -> a value
Reader = Callable[[Mapping[str, Any]], Any]
#: the privacy part and a side (``"candidate"`` or ``"test"``: the test split's own value) -> a value
SideReader = Callable[[Mapping[str, Any], str], Any]
#: the parts of a scored candidate a metric may read; "sections" holds the pairwise sections
PARTS = ("sections", "validity", "privacy", "prediction")


@dataclass(frozen=True)
class Metric:
    """One row of the fidelity report.

    Attributes:
        name: the row's name (the key of :data:`METRICS` and of every ``values`` dict).
        section: the report section it belongs to.
        better: ``"lower"`` or ``"higher"``; ``"= train"`` / ``"= test"``: the closer to that split's value, the
            better.
        target: what ideal is, in words.
        worst: the value an empty or all-invalid sample scores (NaN: "n/a").
        part: which part of a scored candidate it reads (one of :data:`PARTS`).
        read: the candidate's value from that part.
        floor_read: the floor's value from the same part where it differs from ``read`` (privacy: the test split's
            own value against train); None: ``read``.
        test_read: the test split's own value of a per-trace statistic, from the floor's sections (the rows named
            ``... gap``); None: no such value.
    """

    name: str
    section: str
    better: str
    target: str
    worst: float
    part: str
    read: Reader
    floor_read: Reader | None = None
    test_read: Reader | None = None

    def value(self, scored: Mapping[str, Any], floor: bool = False) -> float:
        """The metric's value in a scored candidate (``floor``: the floor's reading); NaN where its part is missing.

        Args:
            scored: a scored candidate (``sections``, ``validity``, ``privacy``, optionally ``prediction``).
            floor: read the floor's value (:attr:`floor_read`, where set).

        Returns:
            The value as a float (NaN: not computed).
        """
        part = scored.get(self.part)
        if not part:  # no sections (too few valid rows), or no predictor given
            return NAN
        reader = self.floor_read if floor and self.floor_read is not None else self.read
        return float(reader(part))

    def test_value(self, floor_sections: Mapping[str, Any]) -> float:
        """The test split's own value of the statistic (NaN where the row has none or nothing was computed)."""
        if self.test_read is None or not floor_sections:
            return NAN
        return float(self.test_read(floor_sections))


@dataclass(frozen=True)
class Target:
    """A generator target: a metric's value against the floor's.

    Attributes:
        what: the target in words.
        metric: the metric it judges.
        op: ``"<="``: at most the floor plus the allowance; ``">="``: at least the floor; ``"0"``: exactly 0
            whatever the floor; ``"~"``: within the allowance of the floor, relatively (``abs(value / floor - 1)``).
        allowance: see ``op``.
    """

    what: str
    metric: Metric
    op: str
    allowance: float

    def judge(self, value: float, floor: float) -> tuple[str, bool]:
        """The bar in words and whether ``value`` meets it (a bar without a floor value is not met)."""
        if self.op == "0":
            bar, met = "= 0", value == 0.0
        elif self.op == "~":
            bar = f"{floor * (1 - self.allowance):.3f} to {floor * (1 + self.allowance):.3f}"
            met = abs(value / floor - 1.0) <= self.allowance + 1e-12 if floor > 0 else False
        elif self.op == "<=":
            bar, met = f"<= {floor + self.allowance:.3f}", value <= floor + self.allowance + 1e-12
        else:
            bar, met = f">= {floor:.3f}", value >= floor - 1e-12
        return bar, bool(met) and not np.isnan(value) and (self.op == "0" or not np.isnan(floor))


# ---- readers ---------------------------------------------------------------------------------------------------
def _gap(section: str, key: str) -> Reader:
    """``|candidate - test|`` of a per-trace statistic of a section (its ``real`` and ``synthetic`` entries)."""
    return lambda s: abs(float(s[section]["synthetic"][key]) - float(s[section]["real"][key]))


def _test(section: str, key: str) -> Reader:
    """The test split's own value of a per-trace statistic (the ``real`` entry of the floor's section)."""
    return lambda s: s[section]["real"][key]


def _pair(section: str, key: str, better: str = "lower", target: str = "0", worst: float = 1.0) -> Callable[
        [str], Metric]:
    """A metric reading ``sections[section][key]`` (a value of the pair), given its name."""
    return lambda name: Metric(name, section, better, target, worst, "sections", lambda s: s[section][key])


def _stat_gap(name: str, section: str, key: str, worst: float) -> Metric:
    """A per-trace statistic's gap row, with the test split's own value beside it."""
    return Metric(name, section, "lower", "0", worst, "sections", _gap(section, key), test_read=_test(section, key))


def _history(name: str, key: str) -> Metric:
    """A history row: the candidate's own statistic, judged by its closeness to the test split's (NaN: n/a)."""
    return Metric(name, "history", "= test", "the test split's", NAN, "sections",
                  lambda s: s["history"]["synthetic"][key], test_read=_test("history", key))


def _privacy(name: str, better: str, target: str, worst: float, read: SideReader) -> Metric:
    """A privacy row: ``read(privacy, suffix)`` with the candidate's suffix, and the test split's for the floor."""
    return Metric(name, "privacy", better, target, worst, "privacy", lambda p: read(p, "candidate"),
                  floor_read=lambda p: read(p, "test"))


def _dcr(key: str) -> SideReader:
    """A DCR statistic: ``<key>_synthetic`` for a candidate, ``<key>_holdout`` for the test split."""
    return lambda p, side: p["dcr"][f"{key}_{'synthetic' if side == 'candidate' else 'holdout'}"]


# ---- the metrics, in report order --------------------------------------------------------------------------------
KS = {c: Metric(f"KS {c}", "marginals", "lower", "0", 1.0, "sections", lambda s, c=c: s["marginals"].at[c, "ks"])
      for c in NUMERIC}
W1 = {c: Metric(f"W1 log1p {c}", "marginals", "lower", "0", INF, "sections",
                lambda s, c=c: s["marginals"].at[c, "wasserstein_log1p"]) for c in NUMERIC}
CORRELATION_MAD = _pair("correlation", "mad", worst=2.0)("Spearman correlation MAD")
SDMETRICS = _pair("sdmetrics", "score", "higher", "1 (not trusted)", 0.0)("SDMetrics quality score")
C2ST_AUC = _pair("c2st", "auc", target="0.5")("C2ST ROC AUC")
POW2_GAP = Metric("power-of-two share gap", "shape", "lower", "0", 1.0, "sections",
                  lambda s: abs(s["shape"]["pow2_candidate"] - s["shape"]["pow2_reference"]),
                  test_read=lambda s: s["shape"]["pow2_reference"])
MENU_GAP = Metric("walltime-menu share gap", "shape", "lower", "0", 1.0, "sections",
                  lambda s: abs(s["shape"]["menu_candidate"] - s["shape"]["menu_reference"]),
                  test_read=lambda s: s["shape"]["menu_reference"])
INVALID = Metric("invalid share (dropped or repaired)", "validity", "lower", "0", 1.0, "validity",
                 lambda v: v["invalid_share"])
DROPPED = Metric("dropped share", "validity", "lower", "0", 1.0, "validity", lambda v: v["dropped_share"])
REPAIRED = Metric("repaired share", "validity", "lower", "0", 1.0, "validity", lambda v: v["repaired_share"])
CV_GAP = _stat_gap("inter-arrival CV gap", "arrivals", "cv", INF)
LAG1_GAP = _stat_gap("lag-1 ACF log1p inter-arrival gap", "arrivals", "lag1_acf", 2.0)
DISPERSION_GAP = _stat_gap("hourly index of dispersion gap", "arrivals", "dispersion", INF)
SPECTRAL_GAP = _stat_gap("24 h spectral peak gap", "arrivals", "spectral_24h", INF)
HOUR_TV = _pair("arrivals", "hour_tv")("hour-of-day TV distance")
OFFERED_LOAD = Metric("offered load (whole trace)", "scheduling", "= train", "the train split's", INF, "sections",
                      lambda s: s["scheduling"]["synthetic"]["offered_load"],
                      test_read=_test("scheduling", "offered_load"))
BUSY_LOAD = Metric("offered load between outages", "scheduling", "= train", "the train split's", INF, "sections",
                   lambda s: s["scheduling"]["synthetic"]["busy_load"], test_read=_test("scheduling", "busy_load"))
LOAD_GAP = _stat_gap("offered load gap (whole trace)", "scheduling", "offered_load", INF)
SPREAD_GAP = _stat_gap("windowed load spread gap", "scheduling", "load_spread", INF)
UTILIZATION_GAP = _stat_gap("utilization gap (whole trace)", "scheduling", "utilization", 1.0)
KS_WAIT = _pair("scheduling", "ks_wait")("KS wait (whole trace)")
KS_BSLD = _pair("scheduling", "ks_bsld")("KS bsld (whole trace)")
KS_WAIT_WINDOWS = _pair("scheduling", "ks_wait_windows")("KS wait (windows)")
KS_BSLD_WINDOWS = _pair("scheduling", "ks_bsld_windows")("KS bsld (windows)")
#: values judged by their closeness to the test split's; NaN ("n/a") for a table without user ids
LAST2 = _history("last-two predictor accuracy (history)", "last2_accuracy")
RUNTIME_LAG1 = _history("user runtime lag-1 correlation (history)", "runtime_lag1_corr")
OWNER_SHARE = _history("request owner share (history)", "request_owner_share")
#: a runtime predictor fitted on the candidate, scored on the test split; NaN ("n/a") when no predictor is given or
#: the table has no user ids (the prediction part: a ``synth.fidelity.PredictorScore`` result)
PREDICTOR_MAE = Metric("predictor MAE log (fitted on it)", "prediction", "lower", "<= floor", NAN, "prediction",
                       lambda p: p["mae_log"])
PREDICTOR_BSLD = Metric("predictor bsld (fitted on it)", "prediction", "lower", "<= floor", NAN, "prediction",
                        lambda p: p["bsld"])
DCR_MEDIAN = _privacy("DCR median", "higher", ">= floor", 0.0, _dcr("median"))
DCR_P5 = _privacy("DCR 5th percentile", "higher", ">= floor", 0.0, _dcr("p5"))
DCR_BELOW_P5 = _privacy("share DCR < test p5", "lower", "<= floor (~0.05)", 1.0, _dcr("below_p5"))
EXACT_COPIES = _privacy("exact-copy share", "lower", "<= floor", 1.0, lambda p, side: p[f"copy_{side}"])
USER_REUSE = _privacy("user-id reuse share", "lower", "0 (floor: real users return)", 1.0,
                      lambda p, side: p[f"user_{side}"])
GROUP_REUSE = _privacy("group-id reuse share", "lower", "0 (floor: real groups return)", 1.0,
                       lambda p, side: p[f"group_{side}"])

#: every metric, by name, in report order
METRICS: dict[str, Metric] = {m.name: m for m in (
    *KS.values(), *W1.values(), CORRELATION_MAD, SDMETRICS, C2ST_AUC, POW2_GAP, MENU_GAP, INVALID, DROPPED, REPAIRED,
    CV_GAP, LAG1_GAP, DISPERSION_GAP, SPECTRAL_GAP, HOUR_TV, OFFERED_LOAD, BUSY_LOAD, LOAD_GAP, SPREAD_GAP,
    UTILIZATION_GAP, KS_WAIT, KS_BSLD, KS_WAIT_WINDOWS, KS_BSLD_WINDOWS, LAST2, RUNTIME_LAG1, OWNER_SHARE,
    PREDICTOR_MAE, PREDICTOR_BSLD, DCR_MEDIAN, DCR_P5, DCR_BELOW_P5, EXACT_COPIES, USER_REUSE, GROUP_REUSE)}

#: the generator targets. The privacy rows' floor is the test split's own value against train, the others' the train
#: split's against test (for the offered load: the train split's own load).
TARGETS: tuple[Target, ...] = (
    Target("no real user id", USER_REUSE, "0", 0.0),
    Target("no real group id", GROUP_REUSE, "0", 0.0),
    Target("no more exact copies of train than the test split has", EXACT_COPIES, "<=", 0.0),
    Target("median DCR no closer to train than the test split's", DCR_MEDIAN, ">=", 0.0),
    Target("no more rows below the test split's 5th-percentile DCR", DCR_BELOW_P5, "<=", 0.0),
    Target("classifier AUC within 0.02 of train vs test", C2ST_AUC, "<=", 0.02),
    Target("whole-trace EASY-wait KS within 0.05 of train vs test", KS_WAIT, "<=", 0.05),
    Target("offered load within 3% of the train split's", OFFERED_LOAD, "~", 0.03),
    Target("lag-1 ACF of log inter-arrivals within the floor", LAG1_GAP, "<=", 0.0),
    Target("24 h spectral peak within the floor", SPECTRAL_GAP, "<=", 0.0),
)
