"""Runtime predictors: hand-worked estimates and schedules, predictions that never read the future, kill times that
never change, and the compiled engine against the SimPy reference with every predictor."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from simcheck import peak_use, workloads

from hpcgym import jobs as jobtable
from hpcgym import machines, traces
from hpcgym.sim import PriorityPolicy, heuristics, predict, simulate, start_times
from hpcgym.sim.loop import BACKFILL_MODES, schedule
from hpcgym.sim.policy import SJF
from hpcgym.sim.reference import simulate_reference
from hpcgym.sim.simulator import engine_jobs
from hpcgym.sim.table import hold_times

PREDICTORS = ["last2", "median5", "exact"]


def table(rows, columns=("submit", "run", "walltime", "nodes", "user")):
    df = pd.DataFrame(rows, columns=list(columns))
    n = len(df)
    df = df.assign(job_id=np.arange(1, n + 1), procs=df["nodes"], group=0, queue=-1, status="completed",
                   walltime_known=True)
    return jobtable.finalize(df)


def final_estimates(df, nodes, policy, backfill, predictor):
    """The engine's estimates after a run: each job's prediction, or its walltime where it outlived it."""
    pred = predict.get(predictor)
    policy = heuristics.get(policy)
    j, users = engine_jobs(df["submit"].to_numpy(np.int64), hold_times(df), df["walltime"].to_numpy(np.int64),
                           df["nodes"].to_numpy(np.int64), policy.keys(df), df["user"].to_numpy(np.int64),
                           policy.code, pred)
    start, _ = schedule(j, nodes, policy.code, BACKFILL_MODES[backfill], pred.code, pred.k, users, -1)
    return j.wall, start


def test_estimates_by_hand():
    # A machine big enough that nobody waits. User 1 finishes runs of 100, 300 and 50 (in that order of end), then
    # submits two jobs; user 2 has one finished job; user -1 is unknown.
    df = table([
        (0, 100, 1000, 1, 1),    # ends 100
        (0, 300, 1000, 1, 1),    # ends 300
        (200, 50, 1000, 1, 1),   # ends 250
        (0, 7, 9, 1, 2),         # ends 7
        (400, 40, 1000, 1, 1),   # last2: (300 + 50) / 2 = 175; median5 of 100, 300, 50: 100
        (400, 5, 1000, 1, 2),    # last2 and median5: 7 (its user's one job); it runs 5, so no correction
        (400, 10, 30, 1, -1),    # unknown user: its walltime
        (400, 10, 60, 1, 1),     # last2 175 and median5 100 are capped at the walltime, 60
        (500, 10, 1000, 1, 3),   # no history: the walltime
    ])
    last2, _ = final_estimates(df, 16, "fcfs", "easy", "last2")
    median5, _ = final_estimates(df, 16, "fcfs", "easy", "median5")
    exact, _ = final_estimates(df, 16, "fcfs", "easy", "exact")
    # Rows 0-3 (jobs 1, 2, 4, 3: sorted by submit) are not checked; the predicted ones run within their estimates.
    assert list(last2[4:]) == [175, 7, 30, 60, 1000]
    assert list(median5[4:]) == [100, 7, 30, 60, 1000]
    assert list(exact) == list(np.minimum(df["run"], df["walltime"]))


def test_median_of_an_even_count_and_the_mean_round_up():
    df = table([(0, 10, 100, 1, 0), (0, 11, 100, 1, 0), (0, 30, 100, 1, 0), (0, 40, 100, 1, 0),
                (50, 5, 100, 1, 0)])
    last2, _ = final_estimates(df, 8, "fcfs", "none", "last2")
    median5, _ = final_estimates(df, 8, "fcfs", "none", "median5")
    assert last2[4] == 35  # (30 + 40) / 2
    assert median5[4] == 21  # the middle two of 10, 11, 30, 40: (11 + 30) / 2 = 20.5, rounded up


def test_a_correction_at_expiry_by_hand():
    # 4 nodes. Job 0 (user 1) teaches a prediction of 10 s. Job 1 (user 1, 4 nodes) is predicted 10 s but runs 100
    # and is killed at its walltime, 60. Job 2 (4 nodes) must wait for job 1's nodes: it starts exactly at 20 + 60.
    # Job 3 (1 node, 30 s, walltime 30) arrives at 25 while job 2 waits: with job 1 predicted to end at 30, EASY
    # would backfill it only if it ended by 30; at 30 the estimate expires and becomes 20 + 60 = 80, so from 30 on
    # job 3 (ending by 60 < 80) may backfill, but it does not fit (job 1 holds every node). It starts with job 2's
    # head start at 80? No: job 2 takes all 4 nodes at 80, job 3 follows at 80 + 5.
    df = table([
        (0, 10, 50, 1, 1),
        (20, 100, 60, 4, 1),
        (21, 5, 50, 4, 2),
        (25, 30, 30, 1, 3),
    ])
    start = start_times(df, 4, "fcfs", "easy", predictor="last2")
    assert list(start) == [0, 20, 80, 85]
    est, _ = final_estimates(df, 4, "fcfs", "easy", "last2")
    assert est[1] == 60  # corrected to the walltime when it outlived its 10-s prediction


def test_expiry_lets_a_backfill_in():
    # 4 nodes. User 1's first job runs 10 s, so its next is predicted 10 s; that job (2 nodes) really runs 200
    # (walltime 300). The head (4 nodes) waits behind it. A 2-node job of 50 s arrives at 12: with the shadow time
    # at 11 + 10 = 21 (the prediction) it may not backfill (it ends at 62 > 21; the extra nodes are 0). At 21 the
    # prediction expires, the shadow time becomes 11 + 300 = 311, and it backfills at once: start 21.
    df = table([
        (0, 10, 300, 1, 1),
        (11, 200, 300, 2, 1),
        (11, 5, 100, 4, 2),
        (12, 50, 60, 2, 3),
    ])
    start = start_times(df, 4, "fcfs", "easy", predictor="last2")
    assert list(start) == [0, 11, 211, 21]
    assert list(start_times(df, 4, "fcfs", "easy")) == [0, 11, 211, 12]  # walltimes: the shadow time is 311


@pytest.mark.parametrize("predictor", PREDICTORS)
@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_kill_times_are_the_walltimes(predictor, backfill):
    # The job that holds every node is predicted short and runs past its walltime: the next one starts when it is
    # killed, at start + walltime, whatever the predictor.
    df = table([(0, 5, 100, 1, 1), (10, 500, 120, 4, 1), (11, 1, 10, 4, 2)])
    start = start_times(df, 4, "fcfs", backfill, predictor=predictor)
    assert list(start) == [0, 10, 130]


@settings(max_examples=60, deadline=None)
@given(df=workloads(max_jobs=30, machine_nodes=8, users=3))
def test_nodes_never_oversubscribed_with_predictions(df):
    hold = hold_times(df)
    for predictor in PREDICTORS:
        for backfill in ("easy", "conservative"):
            start = start_times(df, 8, "saf", backfill, predictor=predictor)
            assert (start >= df["submit"]).all()
            assert peak_use(start, start + hold, df["nodes"].to_numpy()) <= 8


def changed_after(df, start, when, rng):
    """The same jobs, with the runtimes of the jobs still running after ``when`` lengthened at random."""
    hold = hold_times(df)
    later = (start + hold > when)
    out = df.copy()
    out.loc[later, "run"] = df.loc[later, "run"] + rng.integers(1, 5000, int(later.sum()))
    return out


@pytest.mark.parametrize("predictor", ["last2", "median5"])
@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_predictions_never_read_the_future(predictor, backfill):
    """What happened before ``T`` cannot depend on runtimes that only show after ``T``: change them, and every start
    up to ``T`` (and so every prediction made by then) stays the same."""
    warnings.simplefilter("ignore")
    jobs = traces.window(traces.split(traces.load("sdsc-sp2"), "test"), 400, start=3000)
    rng = np.random.default_rng(0)
    base = start_times(jobs, 128, "saf", backfill, predictor=predictor)
    for when in np.quantile(base, [0.2, 0.5, 0.8]).astype(np.int64):
        changed = changed_after(jobs, base, when, rng)
        assert (changed["run"] != jobs["run"]).any()
        after = start_times(changed, 128, "saf", backfill, predictor=predictor)
        early = base <= when
        assert np.array_equal(after[early], base[early]), f"a start before {when} changed"


def test_the_clairvoyant_predictor_fails_that_check():
    """The same check catches a predictor that reads the future: ``exact`` is told each job's own runtime."""
    warnings.simplefilter("ignore")
    jobs = traces.window(traces.split(traces.load("sdsc-sp2"), "test"), 400, start=3000)
    base = start_times(jobs, 128, "saf", "easy", predictor="exact")
    rng = np.random.default_rng(0)
    changed = 0
    for when in np.quantile(base, [0.2, 0.5, 0.8]).astype(np.int64):
        after = start_times(changed_after(jobs, base, when, rng), 128, "saf", "easy", predictor="exact")
        # The jobs waiting or running at `when` were ordered and backfilled by runtimes they had not shown yet.
        changed += not np.array_equal(after[base <= when], base[base <= when])
    assert changed >= 1


def test_predictors_need_kills_and_know_their_names():
    df = table([(0, 5, 10, 1, 1)])
    with pytest.raises(ValueError, match="kill_at_walltime"):
        start_times(df, 4, "fcfs", "easy", kill_at_walltime=False, predictor="last2")
    with pytest.raises(Exception, match="predictor"):
        start_times(df, 4, "fcfs", "easy", predictor="oracle")


# ---- the compiled engine against the SimPy reference, with predictions ------------------------------------
def assert_same(df, nodes, policy, backfill, predictor, scan=None, learned=None):
    """The engine and the reference start every job at the same time (``learned``: the reference's model, with the
    engine's ``predictor`` a learned one)."""
    pol = heuristics.get(policy)
    if scan is not None:
        pol = PriorityPolicy("scan", pol.code, scan=SJF)
    engine = start_times(df, nodes, pol, backfill, predictor=predictor)
    oracle = simulate_reference(df, nodes, policy, backfill, predictor="learned" if learned else predictor, scan=scan,
                                learned=learned)
    if not np.array_equal(engine, oracle):
        bad = int(np.flatnonzero(engine != oracle)[0])
        pytest.fail(f"{policy}/{backfill}/{predictor}/scan {scan}: row {bad} starts at {engine[bad]} in the engine "
                    f"and {oracle[bad]} in the oracle")


@settings(max_examples=120, deadline=None)
@given(df=workloads(max_jobs=30, machine_nodes=8, users=3))
def test_engine_matches_oracle_with_predictions_on_random_workloads(df):
    for predictor in PREDICTORS:
        for policy in ("fcfs", "sjf", "saf", "wfp3", "f1"):
            for backfill in ("none", "easy", "conservative", "rlscheduler"):
                assert_same(df, 8, policy, backfill, predictor)
        for policy in ("fcfs", "saf"):
            assert_same(df, 8, policy, "easy", predictor, scan="sjf")


@pytest.mark.slow
@pytest.mark.parametrize("trace", ["sdsc-sp2", "theta"])
def test_engine_matches_oracle_with_predictions_on_real_windows(trace):
    warnings.simplefilter("ignore")
    jobs = traces.load(trace)
    nodes = machines.get(jobs.attrs["machine"]).nodes
    window = traces.window(traces.split(jobs, "test"), 250, start=500)
    for predictor in PREDICTORS:
        for policy in ("fcfs", "sjf", "saf"):
            for backfill in ("easy", "conservative"):
                assert_same(window, nodes, policy, backfill, predictor)
        assert_same(window, nodes, "fcfs", "easy", predictor, scan="sjf")


def test_predictions_change_the_schedule_of_a_real_window():
    warnings.simplefilter("ignore")
    jobs = traces.window(traces.split(traces.load("hpc2n"), "test"), 1024, start=0)
    walltime = simulate(jobs, "hpc2n", "saf", "easy")["bsld"].mean()
    exact = simulate(jobs, "hpc2n", "saf", "easy", predictor="exact")["bsld"].mean()
    assert exact < walltime
