"""The whole test split as one stream (experiments.stream, evaluation.run_stream) and the cross-period check.

The stream's ratio and CI are checked against a hand enumeration of the block resamples; the stream run against
the simulator run directly on the same jobs; the cross-period part against the traces' absolute times.
"""

import warnings

import numpy as np
import pandas as pd
import pytest

from experiments import evaluation, stream, tables
from experiments.runs import Agent
from hpcgym import metrics, traces
from hpcgym.sim import simulate


class FirstSlot:
    """Always the first valid slot: the oldest queued job, i.e. FCFS (with EASY: FCFS+EASY)."""

    def predict(self, obs, action_masks=None, deterministic=True):
        return np.argmax(action_masks, axis=-1), None


def records(scheduler: str, kind: str, bsld: list[float], order: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"job_id": order, "submit": [10 * j for j in order], "bsld": [bsld[j] for j in order],
                         "scheduler": scheduler, "kind": kind, "backfill": "easy"})


def test_stream_ratio_and_ci_by_hand():
    # jobs 0-3 in submit order, blocks of two: A = jobs 0, 1 (agent 1 + 1 against 2 + 2), B = jobs 2, 3 (2 + 2
    # against 2 + 2). Point ratio 6 / 8 = 0.75; resamples AA 4/8 = 0.5 (1/4), AB 6/8 (1/2), BB 8/8 = 1 (1/4), so the
    # 95% CI is (0.5, 1.0). The agent's rows come shuffled: jobs pair by id, blocks follow submit order.
    per_job = pd.concat([records("tuned+easy", "heuristic", [2, 2, 2, 2], [0, 1, 2, 3]),
                         records("agent", "agent", [1, 1, 2, 2], [3, 0, 2, 1])])
    table = stream.table(per_job, "tuned+easy", block=2).set_index("scheduler")
    assert table.loc["agent", "bsld"] == pytest.approx(1.5) and table.loc["agent", "jobs"] == 4
    assert tuple(table.loc["agent", ["vs_reference", "vs_reference_low", "vs_reference_high"]]) == pytest.approx(
        (0.75, 0.5, 1.0))
    assert tuple(table.loc["tuned+easy", ["vs_reference", "vs_reference_low", "vs_reference_high"]]) == (1, 1, 1)
    # by default the reference is the stream's own strongest heuristic row: here the only one
    assert (stream.table(per_job, block=2)["reference"] == "tuned+easy").all()


def test_one_block_of_jobs_leaves_no_spread():
    per_job = pd.concat([records("ref", "heuristic", [2, 4, 2, 2], [0, 1, 2, 3]),
                         records("a", "agent", [1, 1, 2, 2], [0, 1, 2, 3])])
    row = stream.table(per_job, "ref", block=4).set_index("scheduler").loc["a"]
    assert (row["vs_reference"], row["vs_reference_low"], row["vs_reference_high"]) == (0.6, 0.6, 0.6)


@pytest.fixture(scope="module")
def lublin():
    real, machine, test, _ = evaluation.evaluation_split("lublin-256", None, 2, 128, 0)
    return real, machine, test


def test_the_stream_is_the_simulator_run_on_the_whole_split(lublin):
    real, machine, test = lublin
    per_job = evaluation.run_stream(real, test, machine, {"first": Agent(FirstSlot(), backfill="easy")})
    direct = simulate(test.reset_index(drop=True).assign(submit=test["submit"] - test["submit"].iat[0]), machine,
                      "fcfs", backfill="easy").sort_values("job_id")
    for name in ("first", "fcfs+easy"):  # the agent through the environment, the reference through the grid
        mine = per_job[per_job["scheduler"] == name].sort_values("job_id")
        assert len(mine) == len(test)
        np.testing.assert_array_equal(mine["start"].to_numpy(), direct["start"].to_numpy())
    row = stream.table(per_job, "fcfs+easy").set_index("scheduler").loc["first"]
    assert (row["vs_reference"], row["vs_reference_low"], row["vs_reference_high"]) == (1, 1, 1)


def read(name: str) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traces.read(name)


def test_cross_period_takes_the_months_the_training_trace_does_not_cover():
    theta, theta22 = read("theta"), read("theta-2022")
    theta_first = theta.attrs["unix_start_time"] + int(theta["submit"].min())  # 2022-11-17
    theta22_last = theta22.attrs["unix_start_time"] + int(theta22["submit"].max())  # 2022-12-31
    part = evaluation.cross_period(theta, theta22)  # theta-2022's jobs before theta begins
    assert len(part) == int((theta22.attrs["unix_start_time"] + theta22["submit"] < theta_first).sum()) > 0
    assert part.attrs["unix_start_time"] == theta22.attrs["unix_start_time"] + int(theta22["submit"].min())
    assert part["submit"].iat[0] == 0 and part.attrs["name"] == "theta"  # theta's own fits are its references
    back = evaluation.cross_period(theta22, theta)  # theta's jobs after theta-2022 ends
    assert len(back) == int((theta.attrs["unix_start_time"] + theta["submit"] > theta22_last).sum()) > 0
    assert back.attrs["unix_start_time"] > theta22_last and back.attrs["source_trace"] == "theta"


def test_cross_period_refuses_a_trace_that_covers_every_month():
    theta = read("theta")
    with pytest.raises(ValueError, match="covers every month"):
        evaluation.cross_period(theta, theta)


def test_cross_period_evaluation_at_smoke_size():
    done = evaluation.evaluate_cross_period("theta", "theta-2022", {"first": Agent(FirstSlot(), backfill="easy")},
                                            windows=2, length=64, progress=False, whole=False)
    first = done.per_window[done.per_window["scheduler"] == "first"]
    fcfs = done.per_window[done.per_window["scheduler"] == "fcfs+easy"]
    assert len(first) == 2 and first["bsld"].tolist() == pytest.approx(fcfs["bsld"].tolist())
    assert done.description.startswith("theta-2022, the months theta does not cover (2022-01-01 to 2022-11-")


def test_paired_rows_read_the_windows_and_the_stream_of_an_evaluation(tmp_path):
    # windows: tuned 2, 2 and the agent 1, 2 in two blocks -> 3 / 4 = 0.75, resamples 0.5, 0.75, 1 (as above)
    rows = [("tuned+easy", "heuristic", w, 2.0) for w in (0, 1)] + [("fcfs+easy", "heuristic", w, 9.0) for w in (0, 1)]
    rows += [("run-s0", "agent", 0, 1.0), ("run-s0", "agent", 1, 2.0)]
    per_window = pd.DataFrame(rows, columns=["scheduler", "kind", "window", "bsld"]).assign(backfill="easy")
    per_window.assign(block=per_window["window"]).to_csv(tmp_path / "per_window.csv", index=False)
    row = stream.paired_rows(tmp_path).set_index("scheduler").loc["run-s0"]
    assert row["reference"] == "tuned+easy" and not row["beats"]  # no stream: the windows' CI reaches 1
    assert (row["windows_ratio"], row["windows_low"], row["windows_high"]) == pytest.approx((0.75, 0.5, 1.0))
    assert np.isnan(row["stream_ratio"])
    pd.DataFrame({"scheduler": ["run-s0"], "vs_reference": [0.9], "vs_reference_low": [0.8],
                  "vs_reference_high": [0.95], "reference": ["saf+easy"], "kind": ["agent"]}).to_csv(
        tmp_path / stream.FILE, index=False)
    row = stream.paired_rows(tmp_path).set_index("scheduler").loc["run-s0"]
    assert (row["stream_ratio"], row["stream_high"], row["beats"]) == (0.9, 0.95, True)
    assert row["stream_reference"] == "saf+easy"


def test_window_ratio_by_blocks_of_jobs_by_hand():
    # Two windows of two jobs starting at rows 0 and 1 of the split: they share row 1. Blocks of two rows: rows 0, 1
    # -> block 0, row 2 -> block 1. Terms bsld / 2: agent w0 (1, 3) -> 0.5, 1.5 in block 0; w1 (3, 5) -> 1.5 in
    # block 0, 2.5 in block 1: blocks 3.5 and 2.5. The reference (2 everywhere): 3 and 1. Point 6 / 4 = 1.5 (the
    # windows' means 2, 4 against 2, 2); resamples 00 -> 7/6 (1/4), 01 -> 1.5 (1/2), 11 -> 5/2 (1/4).
    jobs = [(w, j, s, b) for s, b in (("agent", (1, 3, 3, 5)), ("ref", (2, 2, 2, 2)))
            for w, j, b in zip((0, 0, 1, 1), (10, 11, 11, 12), b, strict=True)]
    per_job = pd.DataFrame(jobs, columns=["window", "job_id", "scheduler", "bsld"]).assign(submit=lambda d: d["job_id"])
    per_window = pd.DataFrame({"window": [0, 1], "start": [0, 1]})
    row = tables.paired_by_jobs(per_job, per_window, "ref", block=2, seed=1).set_index("scheduler").loc["agent"]
    assert tuple(row) == pytest.approx((1.5, 7 / 6, 2.5))
    # the same two windows as independent items could draw w0 twice: (2 + 2) / (2 + 2) = 1, below the job blocks' 7/6
    ratios = metrics.block_bootstrap_ratios(np.array([2.0, 4.0]), np.array([2.0, 2.0]), np.arange(2), n_boot=400)
    assert ratios.min() == pytest.approx(1.0)


def test_the_summary_resamples_jobs_and_keeps_the_windows_point_ratio():
    per_window, per_job = evaluation.evaluate_on_test("lublin-256", {}, windows=6, length=256, progress=False)
    by_windows = evaluation.summary(per_window).set_index("scheduler")
    by_jobs = evaluation.summary(per_window, per_job=per_job).set_index("scheduler")
    np.testing.assert_allclose(by_jobs["vs_reference"], by_windows.loc[by_jobs.index, "vs_reference"], rtol=1e-9)
    assert (by_jobs["vs_reference_low"] <= by_jobs["vs_reference"]).all()
    assert (by_jobs["vs_reference"] <= by_jobs["vs_reference_high"]).all()


# ---- issue 55, item 3: the stream's cost, said before it starts, and spent once per step for a run's networks ------

def _scorers(n: int):
    from sb3_contrib import MaskablePPO

    import hpcgym
    from agents.policies import ScorerPolicy

    return [MaskablePPO(ScorerPolicy, hpcgym.make("lublin-256-v0", backfill="easy"), seed=s, device="cpu",
                        policy_kwargs={"ranks": (2, 3, 5)}) for s in range(n)]


def test_a_runs_networks_play_the_stream_together_as_each_would_alone(lublin, monkeypatch):
    """Three networks in one environment: each network's records are those of its stream played alone through SB3's
    predict (f3bee14's way), and the environment steps once per step of the longest episode, not once per decision
    of each network."""
    from agents import rollout
    from hpcgym.vector import SchedulingVectorEnv

    real, machine, test = lublin
    models = _scorers(3)
    agents = {f"net{i}": Agent(m, backfill="easy") for i, m in enumerate(models)}
    alone = {}
    for label, m in zip(agents, models, strict=True):  # one at a time, each asked through its own predict
        wrapped = type("Asked", (), {"predict": lambda self, o, action_masks=None, deterministic=True, m=m:
                                     m.predict(o, action_masks=action_masks, deterministic=deterministic)})()
        alone[label] = rollout.play_windows(wrapped, [0], machine=machine, workload=real, backfill="easy",
                                            window=len(test), split="test")[0]
    steps = []
    step = SchedulingVectorEnv.step
    monkeypatch.setattr(SchedulingVectorEnv, "step", lambda self, a: steps.append(len(a)) or step(self, a))
    per_job = evaluation.run_stream(real, test, machine, agents)
    assert set(steps) == {3}  # one step serves the three networks
    assert len(steps) == max(int(info["decisions"]) for info in alone.values()) < sum(
        int(info["decisions"]) for info in alone.values())
    for label, info in alone.items():
        mine = per_job[per_job["scheduler"] == label]
        np.testing.assert_array_equal(mine["start"].to_numpy(), info["records"]["start"])
        np.testing.assert_array_equal(mine["job_id"].to_numpy(), info["records"]["job_id"])


def test_the_lean_chooser_is_predicts_choice_without_predict(lublin, monkeypatch):
    from agents.rollout import chooser
    from hpcgym.vector import SchedulingVectorEnv

    real, machine, _ = lublin
    model = _scorers(1)[0]
    venv = SchedulingVectorEnv(num_envs=8, machine=machine, workload=real, backfill="easy", window=256,
                               split="test")
    obs, _ = venv.reset(seed=3)
    expected = [model.predict(obs, action_masks=venv.action_masks(), deterministic=True)[0]]
    choose = chooser(model)
    monkeypatch.setattr(type(model), "predict", lambda *a, **k: pytest.fail("predict was called"))
    got = [choose(obs, venv.action_masks())]
    np.testing.assert_array_equal(got[0], expected[0])


def test_the_expected_time_is_said_before_the_stream_and_its_bar_covers_it(lublin, capsys):
    real, machine, test = lublin
    agents = {"first": Agent(FirstSlot(), backfill="easy"), "second": Agent(FirstSlot(), backfill="easy")}
    evaluation.evaluate_split(real, test, "test", agents, [0, 500], 128, progress=True, whole=True)
    out, err = capsys.readouterr()
    said = [line for line in out.splitlines() if line.startswith("whole split:")]
    assert len(said) == 1 and f"{len(test):,} jobs as one episode for 2 networks, about " in said[0]
    assert "--no-whole-split skips it" in said[0]
    bar = [part for part in err.replace("\r", "\n").splitlines() if part.startswith("whole split:")]
    assert bar and f"{2 * len(test)}/{2 * len(test)}" in bar[-1]  # every job of both streams arrived


def test_the_stream_estimate_scales_the_windows_time():
    # 20 windows of 1,024 jobs took 30 s: two batches of 16, so a batch of 1,024 decisions took 15 s; a stream of
    # 16,210 jobs takes about 16,210 / 1,024 x 15 s = 237 s, 4 min
    note = evaluation.stream_note(16_210, 3, 30.0, 20, 1024)
    assert note.startswith("whole split: 16,210 jobs as one episode for 3 networks, about 4 min")
    assert "about 47 s" in evaluation.stream_note(16_210, 1, 3.0, 2, 1024)  # one batch: 16,210 / 1,024 x 3 s
