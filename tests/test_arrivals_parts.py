"""Each sub-model of the arrivals generator on its own, on tiny inputs whose answer is worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpcgym.testing import make_jobs
from synth import features
from synth.arrivals.calibration import calibrate_phi
from synth.arrivals.context import arrival_context, gap_bin, hour_class
from synth.arrivals.governor import Governor, rescaled
from synth.arrivals.outcomes import Outcomes
from synth.arrivals.process import ArrivalProcess
from synth.arrivals.requests import RequestMix, request_class
from synth.arrivals.runtimes import Kernel, Runtimes
from synth.arrivals.sessions import Sessions, previous_same, repeats, returns

DAY = 86_400


def _table(gaps: list[int] | np.ndarray, **columns: object) -> pd.DataFrame:
    """A training table (features.to_training's columns) of jobs ``gaps`` apart from Monday 1970-01-05 00:00."""
    submit = 4 * DAY + np.concatenate([[0], np.cumsum(gaps)]).astype(np.int64)
    n = len(submit)
    jobs = make_jobs([(int(t) - 4 * DAY, 60, 120, 1) for t in submit])
    jobs.attrs["unix_start_time"] = 4 * DAY
    table = features.to_training(jobs)
    for name, value in columns.items():
        table[name] = np.resize(np.asarray(value), n)
    return table


# ---- context ---------------------------------------------------------------------------------------------------
def test_contexts_by_hand():
    """Saturday 13:00 after a 100 s gap: weekend class 24 + 13; period 4 + 13 // 6 = 6, gap bin of log1p(100) =
    4.6: bin 2 (edges 0, 2, 4, 6, ...), so context 6 * 6 + 2 = 38."""
    assert hour_class(np.array([13]), np.array([5])).tolist() == [37]
    assert gap_bin(np.log1p(np.array([0.0, 5.0, 100.0, 1e6]))).tolist() == [0, 0, 2, 5]
    assert arrival_context(np.array([13]), np.array([5]), np.log1p(np.array([100.0]))).tolist() == [38]


# ---- arrival process -------------------------------------------------------------------------------------------
def test_a_constant_gap_is_reproduced_at_its_rate():
    """Jobs exactly 60 s apart for a week: every class holds only log1p(60), so each sampled gap is
    expm1(log1p(60) + N(0, 0.1)): mean 61 e^0.005 - 1 = 60.3 s, i.e. about 59.7 jobs an hour."""
    process = ArrivalProcess.fit(_table([60] * 10_080))
    assert all(np.allclose(q, np.log1p(60.0)) for q in process.quantiles.values())
    gaps, _, _ = process.gaps(20_000, np.random.default_rng(0), 4 * DAY)
    assert abs(gaps[1:].mean() - 60.3) < 0.5
    assert process.outage_excess.size == 0 and process.outage_per_gap == 0.0


def test_hour_classes_keep_the_daily_cycle():
    """Gaps of 30 s from the submits of 08-18 h and of 600 s otherwise, for three weeks (so that each weekend hour
    class holds 6 x 6 = 36 quiet gaps, over MIN_POOL): a sample submits busy hours at 20x the quiet hours' rate
    (120 jobs an hour against 6), as the data does."""
    gaps, t = [], 4 * DAY
    while t < 25 * DAY:
        gap = 30 if 8 <= (t // 3600) % 24 < 18 else 600
        gaps.append(gap)
        t += gap
    process = ArrivalProcess.fit(_table(gaps))
    assert np.allclose(process.quantiles[9], np.log1p(30.0)) and np.allclose(process.quantiles[2], np.log1p(600.0))
    g, hours, _ = process.gaps(50_000, np.random.default_rng(1), 4 * DAY)
    busy = (hours >= 8) & (hours < 18)
    rate = (busy.sum() / 10) / ((~busy).sum() / 14)  # jobs per busy hour over jobs per quiet hour
    assert 17 < rate < 23


def test_outages_are_the_datas_time_per_gap():
    """1,000 gaps of 60 s and two outages, 1 and 3 days past 12 h: 4 days of outage per 1,002 gaps; a sample of as
    many gaps carries round(4 / 2) = 2 outages spending those 4 days, their lengths the data's."""
    gaps = [60] * 1002
    gaps[300], gaps[700] = 12 * 3600 + DAY, 12 * 3600 + 3 * DAY
    process = ArrivalProcess.fit(_table(gaps))
    assert process.outage_excess.tolist() == [DAY, 3 * DAY]
    assert process.outage_per_gap == pytest.approx(4 * DAY / 1002)
    out = process.outages(1003, np.random.default_rng(0))
    assert (out > 0).sum() == 2 and (out[out > 0] - 12 * 3600).sum() == pytest.approx(4 * DAY, abs=2)


def test_phi_is_calibrated_to_the_datas_lag1():
    """Independent gaps (lag-1 correlation near 0) give phi near 0; the bisection's result makes the process's own
    gaps correlated as the target asks (0.3, measured on its own sample of 16,000 gaps, within 0.03)."""
    rng = np.random.default_rng(0)
    process = ArrivalProcess.fit(_table(rng.integers(1, 3600, 5000)))
    assert calibrate_phi(process, 0.0, 0) < 0.01
    process.phi = calibrate_phi(process, 0.3, 0)
    gaps, _, _ = process.gaps(16_000, np.random.default_rng(5), 0)
    x = np.log1p(gaps[1:].astype(float))
    assert abs(np.corrcoef(x[1:], x[:-1])[0, 1] - 0.3) < 0.03


# ---- governor --------------------------------------------------------------------------------------------------
def test_governor_targets_the_load_by_hand():
    """50 jobs of 2 nodes x 100 s every 100 s on a 4-node machine: 10,000 node-seconds over a span of 4,900 s,
    load 10,000 / (4 x 4,900) = 0.510 (no outages: the same between outages); asking for a whole-trace load of 0.25
    scales every gap by 0.510 / 0.25 and holds 0.25."""
    jobs = make_jobs([(100 * k, 100, 100, 2) for k in range(50)])
    own = Governor.fit(jobs, 4)
    load = 10_000 / (4 * 4_900)
    assert own.target_load == pytest.approx(load) and own.gap_scale == 1.0 and own.mean_gap == 100.0
    quarter = Governor.fit(jobs, 4, load=0.25)
    assert quarter.gap_scale == pytest.approx(load / 0.25) and quarter.target_load == pytest.approx(0.25)


def test_rescaled_gaps_spend_the_span_asked_for():
    """Inner gaps 10, 20, 30 (span 60), asked for 120: each doubles; the first and last gaps are kept."""
    clock = (np.array([0, 10, 20, 30, 5]), np.zeros(5), np.zeros(5))
    gaps, _, _ = rescaled(clock, 120.0, 0)
    assert gaps.tolist() == [0, 20, 40, 60, 5]


# ---- request mix -----------------------------------------------------------------------------------------------
def test_request_mix_reproduces_the_frequencies():
    """60/30/10 of three requests in one context: with one context the shrinkage target is the same mix, so the
    draw's frequencies are 0.6/0.3/0.1 (100,000 draws: within 0.01); the menu is sorted by (nodes, walltime)."""
    nodes = np.array([4] * 60 + [1] * 30 + [2] * 10)
    wall = np.array([3600] * 60 + [600] * 30 + [60] * 10)
    mix, request = RequestMix.fit(nodes, wall, np.zeros(100, np.int64), smoothing=20.0)
    assert mix.menu_nodes.tolist() == [1, 2, 4] and mix.menu_wall.tolist() == [600, 60, 3600]
    assert np.bincount(request).tolist() == [30, 10, 60]
    got = np.bincount(mix.draw(np.zeros(100_000, np.int64), np.random.default_rng(0)), minlength=3) / 100_000
    assert np.abs(got - [0.3, 0.1, 0.6]).max() < 0.01


def test_a_context_is_shrunk_towards_the_overall_mix():
    """Context 0 holds 10 jobs of request A, context 1 holds 90 of B (overall 0.1/0.9); with a = 20, context 0's
    P(A) = (10 + 20 x 0.1) / (10 + 20) = 0.4, and an unseen context's is the overall 0.1."""
    nodes = np.array([1] * 10 + [2] * 90)
    ctx = np.array([0] * 10 + [1] * 90)
    mix, _ = RequestMix.fit(nodes, np.full(100, 60), ctx, smoothing=20.0)
    probs = np.diff(mix.request_cdf, axis=1, prepend=0.0)
    assert probs[0, 0] == pytest.approx(0.4) and probs[5, 0] == pytest.approx(0.1)
    assert request_class(np.array([1, 3, 4]), np.array([60, 119, 120])).tolist() == [0, 1, 22]


# ---- sessions --------------------------------------------------------------------------------------------------
def test_session_helpers_by_hand():
    request, user = np.array([0, 0, 1, 1, 0, 1]), np.array([7, 7, 7, 8, 7, 7])
    assert repeats(request, user).tolist() == [True, False, False, False, False]
    assert previous_same(np.array([5, 2, 5, 5, 2, 9])).tolist() == [-1, -1, 0, 2, 1, -1]
    j, i = returns(np.array([0, 2, 3, 4, 5]), user, request, 2)  # user 7 returns to request 0 at 4 and 1 at 5
    assert j.tolist() == [4, 5] and i.tolist() == [0, 2]


def test_sessions_continue_at_the_fitted_rate_and_users_own_their_requests():
    """Gaps alternate 1,000 s (bin 3) and 0 s (bin 0), and the user changes exactly at the long gaps: p_same is 0
    in bin 3 and 1 in bin 0. Users 9 and 10 open all 100 sessions of request 1 and have the most sessions (ranks 0
    and 1), so a session of request 1 goes to one of them with probability at least k / (k + 1) = 100 / 101; ids
    start above 10^6."""
    k = np.arange(400)
    request = (k >= 200).astype(np.int64)
    user = np.where(request == 1, 9 + (k // 2) % 2, (k // 2) % 3)  # request 0: users 0-2, request 1: users 9-10
    x = np.log1p(np.where(k % 2 == 1, 0.0, 1000.0))
    sessions = Sessions.fit(request, user, x, 2)
    assert sessions.p_same[0] == 1.0 and sessions.p_same[3] == 0.0
    assert sessions.user_base == 10**6 and sessions.users_known
    ranks = sessions.owners(np.ones(10_000, np.int64), np.random.default_rng(0).random(10_000))
    assert (ranks <= 1).mean() > 100 / 101 - 0.005
    assert sessions.ids(np.array([0, -1])).tolist() == [10**6 + 1, -1]


# ---- outcomes --------------------------------------------------------------------------------------------------
def test_outcomes_kept_within_sessions_as_often_as_the_data():
    """One request, two statuses half and half: two fresh draws agree with probability 0.5. One session of 100
    completed then 100 failed jobs: 198 of its 199 pairs agree, so p_keep = (198/199 - 0.5) / (1 - 0.5); one whose
    jobs alternate needs 0 (clipped)."""
    mix, request = RequestMix.fit(np.ones(200, np.int64), np.full(200, 60), np.zeros(200, np.int64), 20.0)
    same = np.ones(199, bool)
    agree = np.repeat(np.array(["completed", "failed"]), 100)
    kept, _ = Outcomes.fit(agree, np.zeros(200, bool), request, same, mix, 20.0)
    assert kept.p_keep == pytest.approx((198 / 199 - 0.5) / 0.5) and kept.statuses.tolist() == ["completed", "failed"]
    alternate = np.resize(np.array(["completed", "failed"]), 200)
    assert Outcomes.fit(alternate, np.zeros(200, bool), request, same, mix, 20.0)[0].p_keep == 0.0
    # one session of 1,000 jobs: a job changes outcome when not kept (1 - p_keep) and its fresh draw differs (0.5):
    # 999 x 0.0050 = 5.0 changes expected (Poisson: 0-14 at 99.9%), against 499.5 with p_keep = 0
    drawn = kept.draw(np.zeros(1000, np.int64), np.zeros(1000, np.int64), np.random.default_rng(0))
    assert (drawn[1:] != drawn[:-1]).sum() <= 14


# ---- runtimes --------------------------------------------------------------------------------------------------
def test_kernel_draws_about_its_members():
    """Two pools: key 3 holds 1.0 x 50, key 7 holds -2.0 x 50 (sd 0: the bandwidth is the floor, 0.1)."""
    kernel = Kernel(np.array([3] * 50 + [7] * 50), np.array([1.0] * 50 + [-2.0] * 50), 0.1)
    assert kernel.size(np.array([3, 5, 7])).tolist() == [50, 0, 50]
    draws = kernel.draw(np.array([3] * 5000 + [7] * 5000), np.random.default_rng(0))
    assert abs(draws[:5000].mean() - 1.0) < 0.01 and abs(draws[5000:].std() - 0.1) < 0.01


def test_runtimes_stay_below_the_walltime_and_overruns_above():
    """Finished jobs run about half their 1,000 s walltime (log ratio -0.69), a fifth of the jobs overrun by about
    30 s; sampled finished runs never exceed the walltime, and overruns always do."""
    n = 500
    run = np.where(np.arange(n) % 5 == 0, 1030, 500)
    wall = np.full(n, 1000)
    mix, request = RequestMix.fit(np.ones(n, np.int64), wall, np.zeros(n, np.int64), 20.0)
    outcome = (run > wall).astype(np.int64)
    runtimes = Runtimes.fit(run, wall, request, outcome, np.arange(n), mix, 2, 0.3)
    first = np.arange(2000)
    got = runtimes.draw(np.zeros(2000, np.int64), np.tile([0, 1], 1000), first, np.full(2000, -1), mix, 2,
                        np.random.default_rng(0))
    assert (got[::2] <= 1000).all() and (got[1::2] > 1000).all()
    assert abs(np.median(got[::2]) - 500) < 100 and abs(np.median(got[1::2]) - 1030) < 15
