"""Every observation column against values worked out by hand, for a small window that starts mid-trace.

The expected rows below are written from the job table alone (times, nodes, the machine's 4 nodes, the fixed
``time_scale``): nothing here calls the observation builder's helpers. Logs are ``log1p`` over the scale's ``log1p``,
as :mod:`hpcgym.observation` documents (waits against ``10 x time_scale``, areas against ``time_scale x 4`` nodes).
"""

from __future__ import annotations

import datetime as dt
from math import log1p

import numpy as np
import pytest

import hpcgym
from hpcgym.env import SchedulingEnv
from hpcgym.testing import TOY, make_jobs
from hpcgym.vector import SchedulingVectorEnv

#: The trace's submit 0 is 23:00:00 UTC on day 20000 of the Unix epoch; the window starts 7,200 s later, after
#: midnight, so a feature that adds the window's clock to the trace's start (the bug of issue 26) is far off.
UNIX0 = 86400 * 20000 + 23 * 3600
#: (submit, run, walltime, nodes). Rows 2-5 are the window: a, b, c, d.
ROWS = [
    (0, 60, 60, 4), (50, 60, 60, 4),  # before the window
    (7200, 300, 600, 2),  # a: t=0, starts alone (est. end 600)
    (7205, 100, 100, 1),  # b: t=5, starts alone (est. end 105)
    (7210, 200, 400, 2),  # c: t=10, alone and too wide (1 free): chosen, it blocks (no backfilling)
    (7230, 50, 40, 1),  # d: t=30, fits: with c waiting, the first decision
    (7300, 10, 10, 1), (7400, 10, 10, 1),  # after the window
]
T = log1p(1000)  # time_scale = 1000 s
W = log1p(10 * 1000)  # waits
A = log1p(1000 * 4)  # areas


def table(rows=ROWS, unix0=UNIX0):
    jobs = make_jobs(rows)
    jobs.attrs["unix_start_time"] = unix0
    return jobs


def env(**kw):
    kw = {"window": 4, "slots": 3, "split": "all", "time_scale": 1000, **kw}
    return SchedulingEnv(TOY, table(), **kw)


# ---- more waiting jobs than slots (first: a broken mask fails at reset, before the step code compiles) ---------
#: A 4-node job holds the machine until 100 while five 1-node jobs queue (walltimes 11..15 tell them apart).
LONG_QUEUE = [(0, 100, 100, 4)] + [(k, 10 + k, 10 + k, 1) for k in range(1, 6)]


def test_masks_and_rows_when_more_jobs_wait_than_there_are_slots():
    e = SchedulingEnv(TOY, make_jobs(LONG_QUEUE), window=6, slots=2, split="all", time_scale=1000,
                      invalid_action="raise")
    obs, info = e.reset(seed=0)
    # t = 100: five jobs wait, two slots: both valid, rows are the two oldest, the queue feature is capped at 1
    assert info["time"] == 100 and info["waiting"] == 5
    np.testing.assert_array_equal(e.action_masks(), [True, True])
    np.testing.assert_allclose(obs[:2, 2], [log1p(11) / T, log1p(12) / T], rtol=1e-6)
    np.testing.assert_allclose(obs[:2, 1], [log1p(99) / W, log1p(98) / W], rtol=1e-6)
    np.testing.assert_allclose(obs[:2, 7], [0, 1 / 2])
    # the machine row: all free, 5 / 2 capped at 1, nothing running, 1 of 6 finished, 100 s after midnight, marker
    np.testing.assert_allclose(obs[2], [1, 1, 0, 0, 0, 1 / 6, 100 / 86400, 1], rtol=1e-6)
    obs, *_ = e.step(1)  # the second-oldest job (walltime 12) starts
    assert e.sim.start[2] == 100 and e.sim.start[1] < 0
    np.testing.assert_array_equal(e.action_masks(), [True, True])
    np.testing.assert_allclose(obs[:2, 2], [log1p(11) / T, log1p(13) / T], rtol=1e-6)
    assert obs[2, 1] == 1.0 and obs[2, 0] == 3 / 4  # still 4 waiting for 2 slots
    with pytest.raises(ValueError, match="action 2 is outside the action space"):
        e.step(2)


def test_vector_masks_when_more_jobs_wait_than_there_are_slots():
    venv = SchedulingVectorEnv(3, machine=TOY, workload=make_jobs(LONG_QUEUE), window=6, slots=2,
                                             split="all", invalid_action="raise")
    venv.reset(seed=0)
    np.testing.assert_array_equal(venv.action_masks(), np.ones((3, 2), bool))
    venv.step(np.array([1, 1, 0]))
    np.testing.assert_array_equal(venv.action_masks(), np.ones((3, 2), bool))
    starts = [copy.sim.start[1:3].tolist() for copy in venv.envs]
    assert starts == [[-1, 100], [-1, 100], [100, -1]]


# ---- every column by hand ---------------------------------------------------------------------------------------
# The first decision, t = 30: c waits (blocked at 10), d just arrived; a and b run, 1 node is free.
FIRST = np.array([
    # present, wait, walltime, nodes, fits now, area, wait for nodes, position
    [1, log1p(20) / W, log1p(400) / T, 2 / 4, 0, log1p(800) / A, log1p(105 - 30) / T, 0 / 3],  # c: b frees 1 at 105
    [1, 0, log1p(40) / T, 1 / 4, 1, log1p(40) / A, 0, 1 / 3],  # d
    [0, 0, 0, 0, 0, 0, 0, 0],  # padding
    # free, queue / slots, next end, mean end, last end, finished / window, time of day, marker
    [1 / 4, 2 / 3, log1p(75) / T, log1p((75 + 570) / 2) / T, log1p(570) / T, 0, (3600 + 30) / 86400, 1],
])
# Slot 0 (c) blocks; b ends at 105 and frees a node: c and d both fit, the second decision.
SECOND = np.array([
    [1, log1p(95) / W, log1p(400) / T, 2 / 4, 1, log1p(800) / A, 0, 0],
    [1, log1p(75) / W, log1p(40) / T, 1 / 4, 1, log1p(40) / A, 0, 1 / 3],
    [0, 0, 0, 0, 0, 0, 0, 0],
    [2 / 4, 2 / 3, log1p(495) / T, log1p(495) / T, log1p(495) / T, 1 / 4, (3600 + 105) / 86400, 1],
])
# Slot 1 (d) starts at 105 (ends 145, killed at its walltime 40); c starts at 145 alone, ends 345; a ends 300.
# The last observation is the empty machine at the last end, every job finished.
LAST = np.zeros((4, 8))
LAST[3] = [1, 0, 0, 0, 0, 1, (3600 + 345) / 86400, 1]


def test_every_column_of_a_mid_trace_window_by_hand():
    e = env()
    obs, info = e.reset(seed=0, options={"window_start": 2})
    assert info["time"] == 30 and list(e.jobs["job_id"]) == [3, 4, 5, 6]
    np.testing.assert_allclose(obs, FIRST, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(e.action_masks(), [True, True, False])
    obs, reward, done, _, info = e.step(0)
    assert (info["time"], done, reward) == (105, False, 0.0)
    np.testing.assert_allclose(obs, SECOND, rtol=1e-6, atol=1e-7)
    obs, _, done, _, info = e.step(1)
    assert done and info["time"] == 345
    np.testing.assert_allclose(obs, LAST, rtol=1e-6, atol=1e-7)
    assert list(info["records"]["start"]) == [0, 5, 145, 105]


def test_the_vector_env_builds_the_same_columns():
    venv = SchedulingVectorEnv(2, machine=TOY, workload=table(), window=4, slots=3, split="all",
                                             time_scale=1000)
    obs, _ = venv.reset(seed=0, options={"window_start": [2, 2]})
    np.testing.assert_allclose(obs, [FIRST, FIRST], rtol=1e-6, atol=1e-7)
    obs, *_ = venv.step(np.array([0, 0]))
    np.testing.assert_allclose(obs, [SECOND, SECOND], rtol=1e-6, atol=1e-7)


def seconds_of_day(unix: int) -> int:
    t = dt.datetime.fromtimestamp(unix, tz=dt.timezone.utc)
    return t.hour * 3600 + t.minute * 60 + t.second


@pytest.mark.parametrize("start", [0, 1, 2])
def test_time_of_day_follows_the_window_start(start):
    # Windows of 2 jobs over submits that spread across two days; the feature is the trace's clock at "now".
    rows = [(0, 10, 10, 4), (5, 10, 10, 1), (40000, 100, 100, 4), (40001, 50, 50, 1), (40002, 50, 50, 1),
            (90000, 100, 100, 4)]
    e = SchedulingEnv(TOY, table(rows, unix0=1_700_000_000), window=3, slots=3, split="all")
    obs, info = e.reset(seed=0, options={"window_start": start})
    absolute = 1_700_000_000 + rows[start][0] + info["time"]
    assert obs[-1, 6] == pytest.approx(seconds_of_day(absolute) / 86400, abs=1e-6)


def test_time_of_day_on_theta_for_any_window_start():
    env = hpcgym.make("theta-v0", window=64)
    base = env.unwrapped
    unix0 = base.source.table.attrs["unix_start_time"]
    assert unix0 > 1_600_000_000
    starts = [0, 5000, 9001, 11000]
    venv = hpcgym.make_vec("theta-v0", num_envs=len(starts), window=64)
    vobs, vinfo = venv.reset(seed=0, options={"window_start": starts})
    for i, start in enumerate(starts):
        obs, info = env.reset(seed=0, options={"window_start": start})
        submit = int(base.source.table["submit"].iat[start])
        expected = seconds_of_day(unix0 + submit + info["time"]) / 86400
        assert obs[-1, 6] == pytest.approx(expected, abs=1e-6), start
        assert vobs[i, -1, 6] == pytest.approx(expected, abs=1e-6) and vinfo["time"][i] == info["time"]
    # later, each copy's clock has moved with its own window (a copy whose episode ended plays a new one)
    for _ in range(5):
        vobs, *_ = venv.step(np.zeros(len(starts), np.int64))
    for i, copy in enumerate(venv.unwrapped.envs):
        submit = int(copy.source.table["submit"].iat[copy._window.start_row])
        assert vobs[i, -1, 6] == pytest.approx(seconds_of_day(unix0 + submit + copy.sim.now) / 86400, abs=1e-6)


def test_time_of_day_of_sampled_windows_is_each_samples_clock():
    class Sampler:
        """Each sample's clock starts at a different hour: seed s starts at s hours past midnight."""

        def sample(self, n_jobs, seed):
            rows = [(100 + 10 * k, 50, 50, 4 if k == 0 else 1) for k in range(n_jobs)]
            out = make_jobs(rows)
            out.attrs["unix_start_time"] = 86400 * 19000 + 3600 * (seed % 24)
            return out

    e = SchedulingEnv(TOY, Sampler(), window=4, slots=3)
    for seed in range(3):
        obs, info = e.reset(seed=seed)
        clock = e.jobs.attrs["unix_start_time"] + 100 + info["time"]  # the sample's first submit is 100
        assert obs[-1, 6] == pytest.approx(seconds_of_day(clock) / 86400, abs=1e-6)
