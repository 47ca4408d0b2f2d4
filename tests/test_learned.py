"""The learned runtime predictor: its features by hand, its export against scikit-learn, the compiled engine against
the SimPy reference with it, predictions that never read the future, and the fit's files and names."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from simcheck import workloads
from test_predict import assert_same

from baselines import learned as fitting
from hpcgym import jobs as jobtable
from hpcgym import machines, traces
from hpcgym.sim import heuristics, learned, predict, simulate, start_times, state
from hpcgym.sim.loop import BACKFILL_MODES, schedule
from hpcgym.sim.reference import _Job, learned_features
from hpcgym.sim.simulator import engine_jobs
from hpcgym.sim.table import hold_times

NAN = float("nan")


def table(rows):
    df = pd.DataFrame(rows, columns=["submit", "run", "walltime", "nodes", "user"])
    df = df.assign(job_id=np.arange(1, len(df) + 1), procs=df["nodes"], group=0, queue=-1, status="completed",
                   walltime_known=True)
    return jobtable.finalize(df)


def replayed(df, start):
    users, n_users = predict.user_index(df["user"].to_numpy(np.int64))
    return learned.replay(df["submit"].to_numpy(np.int64), np.asarray(start, np.int64), hold_times(df),
                          df["walltime"].to_numpy(np.int64), df["nodes"].to_numpy(np.int64), users, n_users)


def reference_rows(df, start):
    """The reference's features of every job, from the same schedule (its own reading of the docstring)."""
    hold = hold_times(df)
    end = np.asarray(start) + hold
    walls = df["walltime"].tolist()
    rows = []
    for j, r in enumerate(df.itertuples()):
        past = sorted((int(end[g]), g, int(hold[g])) for g in range(len(df))
                      if df["user"].iat[g] == r.user and r.user >= 0 and end[g] <= r.submit)
        job = _Job(j, r.job_id, r.submit, r.run, r.walltime, r.nodes, user=r.user)
        rows.append(learned_features(job, past, walls))
    return np.array(rows, np.float64)


def same(a, b):
    return np.array_equal(np.asarray(a, np.float64), np.asarray(b, np.float64), equal_nan=True)


# ---- the features, by hand --------------------------------------------------------------------------------
BY_HAND = table([
    (0, 100, 1000, 1, 1),   # ends 100
    (1, 300, 1000, 2, 1),   # ends 301
    (2, 7, 9, 1, 2),        # ends 9
    (200, 50, 500, 1, 1),   # ends 250
    (400, 40, 1000, 4, 1),  # user 1's history by end: 100 (w 1000), 50 (w 500), 300 (w 1000)
    (401, 10, 60, 1, -1),   # unknown user: no history
    (402, 5, 9, 1, 2),      # user 2: one job of 7 s (w 9), ended at 9
    (403, 10, 30, 1, 3),    # user 3: none finished
])
EXPECTED = {
    4: [1000, 4, 3, 300, 175, 100, 300, 50, 0.3, (0.1 + 0.1 + 0.3) / 3, 300, 300, 2, 99],
    5: [60, 1, 0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0, NAN],
    6: [9, 1, 1, 7, 7, 7, 7, 7, 7 / 9, 7 / 9, 7 / 9 * 9, 7, 1, 393],
    7: [30, 1, 0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0, NAN],
}


def test_features_by_hand():
    start = start_times(BY_HAND, 16, "fcfs", "easy")
    assert list(start) == list(BY_HAND["submit"])  # nobody waits on 16 nodes
    for rows in (replayed(BY_HAND, start), reference_rows(BY_HAND, start)):
        for j, want in EXPECTED.items():
            assert same(rows[j], want), (j, rows[j], want)


def test_features_read_the_last_eight_finished_jobs():
    # User 5 finishes jobs of 1..10 s in that order (walltime 100, one a minute); then one job arrives.
    df = table([(60 * i, i, 100, 1, 5) for i in range(1, 11)] + [(1000, 5, 100, 1, 5)])
    start = start_times(df, 4, "fcfs", "easy")
    want = [100, 1, 10, 10, 9.5, 8, 10, 3, 0.1, sum(h / 100 for h in range(3, 11)) / 8, 10, 10, 8, 1000 - 610]
    for rows in (replayed(df, start), reference_rows(df, start)):
        assert same(rows[10], want), rows[10]


# ---- a small fitted model -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model():
    """A small boosted model fitted on replayed random workloads (so that its estimates vary around the walltimes)."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    rng = np.random.default_rng(0)
    n = 3000
    wall = rng.integers(1, 61, n)
    run = np.maximum(1, (wall * rng.choice([0.2, 0.5, 1.0, 1.5], n)).round()).astype(np.int64)
    df = table(list(zip(np.sort(rng.integers(0, 20 * n, n)), run, wall, rng.integers(1, 9, n),
                        rng.integers(-1, 4, n), strict=True)))
    x = replayed(df, start_times(df, 8, "fcfs", "easy"))
    y = np.log(hold_times(df).astype(np.float64))
    reg = HistGradientBoostingRegressor(loss="quantile", quantile=0.5, max_iter=25, min_samples_leaf=5,
                                        random_state=0).fit(x, y)
    packed = fitting.export(reg)
    pred = predict.Predictor("learned", predict.LEARNED, learned.K, model=packed, source="test")
    return reg, pred, x


def test_the_export_predicts_what_scikit_learn_predicts(model):
    reg, _, x = model
    rows = np.vstack([x[:500], np.full((3, learned.N_FEATURES), NAN)])  # with missing values
    ours = np.array([learned.raw_value(model[1].model, tuple(r)) for r in rows])
    assert np.array_equal(ours, reg.predict(rows))  # the same float, not a close one


def test_seconds_round_up_and_stay_within_the_walltime():
    assert learned.seconds(math.log(10.5), 100) == 11
    assert learned.seconds(math.log(10.5), 10) == 10
    assert learned.seconds(-50.0, 100) == 1
    assert learned.seconds(1e6, 100) == 100  # exp overflows to inf: still the walltime


def sk_raw(reg):
    return lambda row: float(reg.predict(np.array([row], np.float64))[0])


def engine_vs_reference(df, nodes, reg, pred, policy, backfill, scan=None):
    assert_same(df, nodes, policy, backfill, pred, scan, learned=sk_raw(reg))


@settings(max_examples=40, deadline=None)
@given(df=workloads(max_jobs=30, machine_nodes=8, users=3))
def test_engine_matches_reference_with_the_learned_predictor(model, df):
    reg, pred, _ = model
    for policy in ("fcfs", "sjf", "saf"):
        for backfill in ("none", "easy", "conservative", "rlscheduler"):
            engine_vs_reference(df, 8, reg, pred, policy, backfill)
    engine_vs_reference(df, 8, reg, pred, "fcfs", "easy", scan="sjf")


@pytest.mark.slow
def test_engine_matches_reference_with_the_learned_predictor_on_a_real_window():
    warnings.simplefilter("ignore")
    jobs = traces.load("sdsc-sp2")
    nodes = machines.get(jobs.attrs["machine"]).nodes
    train = traces.window(traces.split(jobs, "train"), 3000, start=0)
    x, y = fitting.training_rows(train, nodes)
    reg = fitting.regressor("quantile:0.5").set_params(max_iter=30).fit(x, y)
    pred = predict.Predictor("learned", predict.LEARNED, learned.K, model=fitting.export(reg), source="test")
    window = traces.window(traces.split(jobs, "test"), 200, start=500)
    for policy in ("fcfs", "saf"):
        for backfill in ("easy", "conservative"):
            engine_vs_reference(window, nodes, reg, pred, policy, backfill)


def test_the_engine_predicts_from_the_features_training_reads(model):
    """The engine's estimate of each job equals the model on the job's replayed features (training's rows) under the
    engine's own schedule, wherever no expiry raised it since."""
    reg, pred, _ = model
    rng = np.random.default_rng(3)
    n = 400
    wall = rng.integers(10, 600, n)
    df = table(list(zip(np.sort(rng.integers(0, 40 * n, n)), np.maximum(1, (wall * rng.random(n)).astype(int)), wall,
                        rng.integers(1, 9, n), rng.integers(0, 6, n), strict=True)))
    policy = heuristics.get("saf")
    j, users = engine_jobs(df["submit"].to_numpy(np.int64), hold_times(df), df["walltime"].to_numpy(np.int64),
                           df["nodes"].to_numpy(np.int64), policy.keys(df), df["user"].to_numpy(np.int64),
                           policy.code, pred)
    start, _ = schedule(j, 8, policy.code, BACKFILL_MODES["easy"], pred.code, pred.k, users, -1)
    expected = np.minimum(df["walltime"], np.maximum(1, np.ceil(np.exp(reg.predict(replayed(df, start))))))
    kept = j.wall != j.limit  # an expiry sets the estimate to the walltime
    assert kept.sum() > 40
    assert np.array_equal(j.wall[kept], expected[kept].astype(np.int64))


def changed_after(df, start, when, rng):
    hold = hold_times(df)
    later = start + hold > when
    out = df.copy()
    out.loc[later, "run"] = df.loc[later, "run"] + rng.integers(1, 5000, int(later.sum()))
    return out


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_learned_predictions_never_read_the_future(model, backfill):
    """Change the runtimes of the jobs still running after ``T``: every start up to ``T`` (and every prediction made
    by then) stays the same."""
    warnings.simplefilter("ignore")
    _, pred, _ = model
    jobs = traces.window(traces.split(traces.load("sdsc-sp2"), "test"), 400, start=3000)
    base = start_times(jobs, 128, "saf", backfill, predictor=pred)
    rng = np.random.default_rng(0)
    for when in np.quantile(base, [0.2, 0.5, 0.8]).astype(np.int64):
        changed = changed_after(jobs, base, when, rng)
        after = start_times(changed, 128, "saf", backfill, predictor=pred)
        early = base <= when
        assert np.array_equal(after[early], base[early]), f"a start before {when} changed"
        # and the features of every job that arrived by then
        arrived = (jobs["submit"] <= when).to_numpy()
        assert same(replayed(changed, after)[arrived], replayed(jobs, base)[arrived])


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_kill_times_are_the_walltimes_with_the_learned_predictor(model, backfill):
    df = table([(0, 5, 100, 1, 1), (10, 500, 120, 4, 1), (11, 1, 10, 4, 2)])
    assert list(start_times(df, 4, "fcfs", backfill, predictor=model[1])) == [0, 10, 130]


# ---- files and names ----------------------------------------------------------------------------------------
def test_a_fit_saves_loads_and_resolves_by_name(tmp_path, monkeypatch):
    warnings.simplefilter("ignore")
    jobs = traces.load("lublin-256")
    train = traces.window(traces.split(jobs, "train"), 1500, start=0)
    train.attrs["name"] = "lublin-256"
    packed, info = fitting.fit(train, 256, losses=("quantile:0.35", "quantile:0.65"), folds=2, windows=2,
                                progress=False)
    assert set(info.validation) == {"quantile:0.35", "quantile:0.65"}
    assert info.loss == min(info.validation, key=info.validation.get)
    # the other loss against the chosen one: the ratio of their means on the same windows, its CI around it
    (other,) = set(info.validation) - {info.loss}
    ratio, low, high = info.versus_chosen[other]
    assert list(info.versus_chosen) == [other] and low <= ratio <= high
    assert ratio == pytest.approx(info.validation[other] / info.validation[info.loss])
    monkeypatch.chdir(tmp_path)
    path = fitting.save(packed, info, fitting.local_path("lublin-256"))
    assert path == tmp_path.joinpath("predictors", "lublin-256.npz").relative_to(tmp_path)
    assert fitting.about(path)["loss"] == info.loss
    for name in ("learned:lublin-256", f"learned:{path.resolve()}"):
        pred = predict.get(name)
        assert pred.code == predict.LEARNED and np.array_equal(pred.model, packed)
    assert predict.get("learned", trace="lublin-256").source == predict.get("learned:lublin-256").source
    window = traces.window(traces.split(jobs, "test"), 300, start=0)
    window.attrs["name"] = "lublin-256"
    a = start_times(window, 256, "saf", "easy", predictor="learned")  # a bare name: the table's trace
    assert np.array_equal(a, start_times(window, 256, "saf", "easy", predictor=predict.get("learned:lublin-256")))


def test_missing_and_broken_models_say_what_to_do(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="python -m baselines.learn --trace nowhere"):
        predict.get("learned:nowhere")
    with pytest.raises(ValueError, match="learned:TRACE"):
        predict.get("learned")
    with pytest.raises(ValueError, match="format"):
        predict.Predictor("learned", predict.LEARNED, learned.K, model=np.zeros((3, 6)))
    good = learned.pack([np.array([[0, 1.0, 0, 1, 2, 0], [-1, 0, 0, 0, 0, 1.0], [-1, 0, 0, 0, 0, 2.0]])], 0.0)
    learned.check_model(good)
    assert learned.raw_value(good, (0.5,) + (NAN,) * 13) == 1.0 and learned.raw_value(good, (2.0,) * 14) == 2.0
    bad = good.copy()
    bad[2, 3:5] = 9, 10
    with pytest.raises(ValueError, match="outside"):
        learned.check_model(bad)


# ---- the v2 observation ------------------------------------------------------------------------------------
def test_the_v2_columns_by_their_definition(model):
    """Each visible job's v2 columns, recomputed from the simulator's records (not from the feature code)."""
    import hpcgym
    from hpcgym.observation import N_FEATURES_V1

    _, pred, _ = model
    warnings.simplefilter("ignore")
    jobs = traces.window(traces.split(traces.load("sdsc-sp2"), "test"), 600, start=100)
    env = hpcgym.make("hpcgym/sdsc-sp2-v0", workload=jobs, machine="sdsc-sp2", window=600, backfill="easy",
                      features="v2", predictor=pred, split="all")
    obs, _ = env.reset(seed=0)
    base = env.unwrapped
    checked = 0
    for _ in range(150):
        sim = base.sim
        now, inv = sim.now, base.sim.hook.scales.inv_time
        end = sim.start + sim.hold
        done = (sim.start >= 0) & (end <= now)
        for k, j in enumerate(sim.queue[:base.slots]):
            mine = np.flatnonzero(done & (sim.user_ids == sim.user_ids[j]))
            mine = mine[np.lexsort((mine, end[mine]))][-learned.K:] if sim.user_ids[j] >= 0 else mine[:0]
            spread = (np.log1p(sim.hold[mine].max()) - np.log1p(sim.hold[mine].min())) * inv if len(mine) else 0.0
            same = (sim.limit[mine] == sim.limit[j]).mean() if len(mine) else 0.0
            assert obs[k, N_FEATURES_V1] == pytest.approx(min(spread, 1.0), abs=1e-6)
            assert obs[k, N_FEATURES_V1 + 1] == pytest.approx(same, abs=1e-6)
            checked += len(mine) > 0
        obs, _, done_, _, _ = env.step(int(np.flatnonzero(base.action_masks())[0]))
        if done_:
            break
    assert checked > 50
    assert env.observation_space.contains(obs)
    with pytest.raises(ValueError, match="predictor='learned'"):
        hpcgym.make("hpcgym/sdsc-sp2-v0", features="v2")


# ---- the command lines -------------------------------------------------------------------------------------
def test_learn_and_accuracy_command_lines(tmp_path, monkeypatch, capsys):
    from baselines import accuracy, learn

    warnings.simplefilter("ignore")
    monkeypatch.chdir(tmp_path)
    assert learn.main(["--trace", "mustang-2012-12", "--losses", "squared_error", "quantile:0.5", "--folds", "2",
                       "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "mustang-2012-12: loss" in out and (tmp_path / "predictors" / "mustang-2012-12.npz").is_file()
    assert fitting.about("predictors/mustang-2012-12.npz")["command"].startswith("python -m baselines.learn --trace")
    assert accuracy.main(["--trace", "mustang-2012-12", "--windows", "2", "--window", "64", "--out", "acc"]) == 0
    acc = pd.read_csv(tmp_path / "acc" / "accuracy.csv")
    assert list(acc["predictor"]) == ["walltime", "last2", "median5", "learned"]
    assert acc.loc[0, "under"] == 0  # a walltime never under-predicts a job killed at its walltime
    from scipy.stats import spearmanr

    test = traces.split(traces.load("mustang-2012-12"), "test")
    est = fitting.predictions(test, machines.get(test.attrs["machine"]).nodes)
    assert acc.loc[0, "spearman"] == pytest.approx(spearmanr(est["walltime"], est["hold"])[0], rel=1e-12)
    # a walltime never calls short a job that asks for an hour, nor one that runs 10 minutes (it runs at most that)
    assert acc.loc[0, "short_found"] == 0 and acc.loc[0, "long_called_short"] == 0
    est = fitting.predictions(test, machines.get(test.attrs["machine"]).nodes,
                              predict.get("learned:mustang-2012-12").model)  # the fit above, in ./predictors
    hidden = (est["hold"] < 600) & (est["walltime"] > 3600)
    assert hidden.any() and acc.loc[3, "short_found"] == pytest.approx((est.loc[hidden, "learned"] < 600).mean(),
                                                                       rel=1e-12)
    sched = pd.read_csv(tmp_path / "acc" / "scheduling.csv")
    assert sched["scheduler"].iat[0] == "saf@walltime" and sched["headroom_windows"].iat[0] == 0
    assert sched["headroom_windows"].iat[-1] == pytest.approx(1.0)
    order = pd.read_csv(tmp_path / "acc" / "ordering.csv").set_index(["order", "reservations"])
    assert len(order) == len(accuracy.ORDERS) * len(accuracy.RESERVATIONS)
    # the static-key path against the compiled SAF: the same schedule where both read the walltimes
    assert order.loc[("walltime", "walltime"), "windows"] == pytest.approx(sched["windows"].iat[0], rel=1e-12)
    assert order.loc[("walltime", "walltime"), "whole"] == pytest.approx(sched["whole"].iat[0], rel=1e-12)
    exact = simulate(test, test.attrs["machine"], "saf", "easy", predictor="exact")["bsld"].mean()
    assert order.loc[("exact", "exact"), "whole"] == pytest.approx(exact, rel=1e-12)
    assert order["headroom_windows"].iat[0] == 0 and order["headroom_whole"].iat[-1] == pytest.approx(1.0)


def test_tuning_on_a_learned_predictor_uses_the_held_out_models_window_by_window():
    """With ``held_out``, every tuning window is scheduled on the predictor it returns for the window's rows: one
    that returns the clairvoyant predictor tunes exactly as tuning on ``exact`` itself does."""
    from baselines import tuned

    warnings.simplefilter("ignore")
    train = traces.window(traces.split(traces.load("sdsc-sp2"), "train"), 3000, start=0)
    asked = []

    def held_out(first, end):
        asked.append((first, end))
        return predict.get("exact")

    via = tuned.fit(train, 128, "easy", ["learned:nowhere"], windows=3, length=500, evaluations=12, progress=False,
                    held_out=held_out)
    direct = tuned.fit(train, 128, "easy", ["exact"], windows=3, length=500, evaluations=12, progress=False)
    assert via.tuning_bsld == direct.tuning_bsld and via.weights == direct.weights
    assert sorted(asked) == sorted((s, s + 500) for s in traces.window_starts(len(train), 500, 3, 0))


def test_out_of_fold_models_leave_out_the_blocks_a_window_touches():
    warnings.simplefilter("ignore")
    train = traces.window(traces.split(traces.load("sdsc-sp2"), "train"), 2000, start=0)
    held_out = fitting.out_of_fold(train, 128, "quantile:0.5", folds=4)
    a, b, c = held_out(0, 400), held_out(100, 500), held_out(400, 900)  # blocks of 500 rows
    assert a is b and a is not c
    assert "rows 0-500 held out" in a.source and "rows 0-1000 held out" in c.source


def test_the_vector_env_steps_the_learned_predictor_as_single_envs_do():
    import hpcgym

    warnings.simplefilter("ignore")
    kw = {"predictor": "learned", "features": "v2", "backfill": "easy"}
    venv = hpcgym.make_vec("theta-v0", num_envs=3, **kw)
    singles = [hpcgym.make("theta-v0", **kw) for _ in range(3)]
    obs, _ = venv.reset(seed=0)
    alone = [env.reset(seed=i)[0] for i, env in enumerate(singles)]
    assert all(np.array_equal(obs[i], alone[i]) for i in range(3))
    for _ in range(10):
        acts = np.array([int(np.flatnonzero(m)[0]) for m in venv.unwrapped.action_masks()])
        obs, _, done, _, _ = venv.step(acts)
        steps = [env.step(int(a)) for env, a in zip(singles, acts, strict=True)]
        assert all(np.array_equal(obs[i], steps[i][0]) for i in range(3) if not done[i])
        if done.any():
            break


def test_the_order_benchmarks_per_user_correction_by_hand():
    """benchmarks/predictor_order.py's corrected estimates, on a machine with room for every job (each starts at its
    submit): a user's estimate times the median runtime / estimate of their finished jobs."""
    from test_predict import table as jobs_of

    from benchmarks.predictor_order import corrected

    window = jobs_of([(0, 100, 1000, 1, 1), (200, 10, 1000, 1, 1), (300, 50, 1000, 1, 2), (400, 30, 1000, 1, 1),
                      (500, 30, 15, 1, 1)])
    estimate = np.array([50, 20, 30, 10, 8])
    got = corrected(window, 100, estimate)
    # job 1: job 0 ran 2x its estimate; job 2: its user has no finished job; job 3: ratios 2 and 1/2, median 1;
    # job 4: ratios 2, 1/2, 3 (median 2), 16 capped by its walltime 15
    np.testing.assert_array_equal(got, [50, 40, 30, 10, 15])

def small_benchmark_rows(script, tmp_path):
    """Run ``benchmarks/<script>`` on two 64-job windows of a small trace with user ids; its CSV rows."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "rows.csv"
    done = subprocess.run([sys.executable, f"benchmarks/{script}", "--trace", "mustang-2012-12", "--windows", "2",
                           "--window", "64", "--out", str(out)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return pd.read_csv(out)


def test_the_order_benchmark_runs_on_a_small_trace(tmp_path):
    rows = small_benchmark_rows("predictor_order.py", tmp_path)
    assert len(rows) == 2 * 9 and set(rows["part"]) == {"dev", "test"}
    assert (rows.loc[rows["order"] == "median5", "vs_median5"] == 1).all()
    assert rows.loc[rows["order"] == "median5", "windows_for_5pct"].isna().all()


def test_the_order_benchmarks_power_and_submit_columns_by_hand():
    """A 95% CI of 0.9-1.1 from 20 windows: half-width (ln 1.1 - ln 0.9) / 2 = 0.10034 in log terms, so a +-5% one
    (ln 1.05 = 0.04879) needs 20 * (0.10034 / 0.04879)^2 = 84.6, i.e. 85 windows. A submit at 0 s with the log
    starting at 1970-01-01 00:00 UTC (a Thursday) is hour 0 of day 3 (Monday 0); 25 hours later, hour 1 of day 4."""
    from benchmarks.predictor_order import submit_columns, windows_for

    assert windows_for(0.9, 1.1, 20, 0.05) == 85
    assert np.isnan(windows_for(1.0, 1.0, 20, 0.05))
    jobs = pd.DataFrame({"submit": [0, 25 * 3600], "queue": [2, 5]})
    np.testing.assert_array_equal(submit_columns(jobs, 0, ("queue",)), [[0, 3, 2], [1, 4, 5]])
    # a log starting on Monday 2026-11-23 00:00 UTC (1795392000 s): day 0
    assert submit_columns(jobs.iloc[:1], 1795392000, ())[0, 1] == 0


def test_the_short_jobs_benchmarks_rates_and_keys_by_hand():
    """Runtimes 10, 700, 30 and 5,000 s with the 10-minute cutoff: jobs 0 and 2 are short, and job 2 (asking for 2 h)
    is the one the walltimes put late. Flagging jobs 0 and 1: recall 1/2, false positives 1/2 (job 1 of jobs 1 and 3),
    recall among the short jobs asking for more than an hour 0 (job 2 is not flagged)."""
    from baselines.accuracy import short_job_rates as rates
    from benchmarks.short_jobs import keys, random_flags

    hold = np.array([10, 700, 30, 5000])
    wall = np.array([100, 7200, 7200, 7200])
    flag = np.array([True, True, False, False])
    assert rates(flag, hold, wall, 600) == (0.5, 0.5, 0.0)
    recall, false_positive, hidden = rates(flag, hold, np.full(4, 100), 600)
    assert (recall, false_positive) == (0.5, 0.5) and np.isnan(hidden)  # no short job asks for more than an hour
    np.testing.assert_array_equal(keys(flag, wall, 600), [100, 600, 7200, 7200])
    many = np.repeat([10, 5000], 50_000)
    got = rates(random_flags(many, 0.3, 0.1, 600, seed=0), many, np.full(len(many), 7200), 600)
    assert abs(got[0] - 0.3) < 0.01 and abs(got[1] - 0.1) < 0.01


def test_the_short_jobs_benchmark_runs_on_a_small_trace(tmp_path):
    rows = small_benchmark_rows("short_jobs.py", tmp_path)
    assert list(rows["flags"]) == ["exact"] * 3 + ["learned", "random"] * 3
    told = rows[rows["flags"] == "exact"]
    assert (told["recall"] == 1).all() and (told["false_positive_rate"] == 0).all()


def test_reestimation_by_hand():
    """Three nodes. Job 0 (user 9, 2 nodes, 100 s) and job 1 (user 1, 1 node, runs 5 s of 1,000) start at 0; job 2
    (user 2, runs 50 s of 500) arrives at 1 and job 3 (user 1, runs 5 s of 1,000) at 2, and both wait. ``median5``
    estimates them at arrival from nothing: 500 and 1,000, so when job 1 frees its node at 5, SAF (estimate x nodes)
    starts job 2 (5-55) and job 3 waits until 55. Re-estimated when job 1 ends, job 3's estimate is the median of
    its user's one finished runtime, 5 s: SAF starts it at 5 (5-10), then job 2 at 10. Re-estimating only the jobs
    with job 1's walltime does the same (job 3 asks for 1,000 s, as job 1 did); a job 3 asking for 999 s is left
    alone."""
    from benchmarks.reestimate import start_times as reestimated

    df = table([(0, 100, 100, 2, 9), (0, 5, 1000, 1, 1), (1, 50, 500, 1, 2), (2, 5, 1000, 1, 1)])
    assert reestimated(df, 3, "median5", "none").tolist() == [0, 0, 5, 55]
    assert reestimated(df, 3, "median5", "user").tolist() == [0, 0, 10, 5]
    assert reestimated(df, 3, "median5", "walltime").tolist() == [0, 0, 10, 5]
    other = table([(0, 100, 100, 2, 9), (0, 5, 1000, 1, 1), (1, 50, 500, 1, 2), (2, 5, 999, 1, 1)])
    assert reestimated(other, 3, "median5", "walltime").tolist() == [0, 0, 5, 55]
    with pytest.raises(ValueError, match="mode must be one of"):
        reestimated(df, 3, "median5", "everyone")


@pytest.mark.parametrize("predictor", ["median5", "learned"])
def test_reestimation_none_is_the_engine_on_a_real_window(predictor):
    """Without re-estimation the benchmark's schedule is the engine's SAF+EASY on the same predictor."""
    from benchmarks.reestimate import model_of
    from benchmarks.reestimate import start_times as reestimated

    w = traces.window(traces.split(traces.load("sdsc-sp2"), "test"), 300, start=1000)
    pred = predict.get("learned:sdsc-sp2") if predictor == "learned" else predictor
    ours = reestimated(w, 128, predictor, "none", model_of(pred.model) if predictor == "learned" else None)
    np.testing.assert_array_equal(ours, start_times(w, 128, "saf", "easy", predictor=pred))


def test_the_reestimation_benchmark_runs_on_a_small_trace(tmp_path):
    rows = small_benchmark_rows("reestimate.py", tmp_path)
    assert len(rows) == 2 * 11 and set(rows["part"]) == {"dev", "test"}
    assert rows.loc[rows["reestimate"] == "none", "vs_none"].isna().all()
    assert rows.loc[rows["reestimate"] != "none", "vs_none"].notna().all()


def _since_model(left_seconds, right_seconds, cut=100.0):
    """One tree: ``since <= cut`` -> ``left_seconds``, else ``right_seconds`` (leaves at log(s - 0.5), so that the
    estimate, ``ceil(exp(raw))``, is exactly ``s``)."""
    tree = np.array([[learned.SINCE, cut, 1, 1, 2, 0.0], [-1, 0, 0, 0, 0, math.log(left_seconds - 0.5)],
                     [-1, 0, 0, 0, 0, math.log(right_seconds - 0.5)]])
    return learned.pack([tree], 0.0)


def test_the_since_thresholds_are_appended_in_memory_by_hand():
    packed = _since_model(50, 500)
    assert len(packed) == 2 + 3 and packed[0, 5] == 0
    model = learned.with_since_bins(packed)
    assert model.shape == (6, 6) and model[0, 4] == 5 and model[0, 5] == 1
    assert model[5, 0] == 100.0 and np.isinf(model[5, 1:]).all()
    learned.check_model(model)  # the threshold rows are not read as nodes
    assert learned.with_since_bins(model) is model and learned.tree_rows(model) == 5
    assert predict.Predictor("learned", predict.LEARNED, learned.K, model=packed).model.shape == (6, 6)


@pytest.mark.parametrize(("change", "expected"), [("nothing", 500), ("since bin", 60), ("nodes", 1000),
                                                  ("walltime", 1000), ("history", 1000), ("unknown user", 60)])
def test_the_estimate_memo_answers_only_a_repeat(change, expected):
    """User 0 has one finished job (0), which ended at 10. Job 2 arrives at 300 (since 290 > 100: 500 s) and fills
    the memo. Then the model's leaves change to 60 s (since <= 100, or unknown) and 1,000 s, which only a walk sees.
    Job 3 arrives at 301: with nothing else changed it gets the memo's 500; arriving at 60 instead (since 50, another
    bin), asking for two nodes or another walltime, after another finished job of its user, or from an unknown user,
    it is walked."""
    model = learned.with_since_bins(_since_model(50, 500))
    hist = np.zeros(learned.K + state.MEMO, np.int64)
    hcount = np.array([1], np.int64)
    user, begin = np.zeros(4, np.int64), np.zeros(4, np.int64)
    hold, limit, nodes = np.full(4, 10, np.int64), np.full(4, 4000, np.int64), np.ones(4, np.int64)
    assert learned.estimate(2, 300, model, hist, hcount, user, begin, hold, limit, nodes) == 500
    model[3, 5], model[4, 5] = math.log(60 - 0.5), math.log(1000 - 0.5)  # rows 1 + 1 tree + nodes 1 and 2
    t = 60 if change == "since bin" else 301
    if change == "nodes":
        nodes[3] = 2
    elif change == "walltime":
        limit[3] = 3000
    elif change == "history":
        hist[1], hcount[0] = 1, 2  # job 1 finished as well (ended at 10)
    elif change == "unknown user":
        user[3] = -1
    assert learned.estimate(3, t, model, hist, hcount, user, begin, hold, limit, nodes) == expected
