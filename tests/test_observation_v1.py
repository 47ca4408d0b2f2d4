"""The ``v1`` observation columns, against values worked out by hand for a five-job window."""

import math

import numpy as np
import pandas as pd
import pytest

import hpcgym
from hpcgym import jobs as jobtable
from hpcgym import machines, observation
from hpcgym.env import SchedulingEnv
from hpcgym.vector import SchedulingVectorEnv

# 10 nodes, EASY, last-two predictions, time scale 1000 s.
#   A (user 1) runs 0-100 alone.           B (user 1, 6 nodes) is predicted 100 s (A's run), runs 200-250.
#   C (user 2, 8 nodes) arrives at 210 and does not fit: it is the oldest waiting job that does not fit, so the
#   reservation is its: shadow time 300 (B's estimated end), extra nodes 10 - 8 = 2.
#   D (user 1, 2 nodes, walltime 150) and E (user 3, 4 nodes, walltime 50) arrive at 220: the first decision.
ROWS = [  # submit, run, walltime, nodes, user
    (0, 100, 400, 4, 1),
    (200, 50, 300, 6, 1),
    (210, 500, 600, 8, 2),
    (220, 30, 150, 2, 1),
    (220, 10, 50, 4, 3),
]
SCALE = 1000.0


def table():
    df = pd.DataFrame(ROWS, columns=["submit", "run", "walltime", "nodes", "user"])
    df = df.assign(job_id=np.arange(1, len(df) + 1), procs=df["nodes"], group=0, queue=-1, status="completed",
                   walltime_known=True)
    return jobtable.finalize(df)


def log_norm(seconds):
    return math.log1p(seconds) / math.log1p(SCALE)


def kwargs():
    return dict(machine=machines.parse("10"), workload=table(), window=5, split="all", backfill="easy",
                predictor="last2", features="v1", time_scale=SCALE)


def expected():
    """The rows by hand, at the first decision (time 220; the queue is C, D, E in arrival order)."""
    jobs = np.zeros((3, 4))
    jobs[0] = [log_norm(600), 1.0, 0.0, 0.0]  # C: no history (its walltime); 8 nodes do not fit in 4 free
    jobs[1] = [log_norm(100), 100 / 400, 1 / 2, 1.0]  # D: predicted 100 (A); it ends at 320 > 300 but its 2 nodes
    #                                                   are the extra nodes: rule (b)
    jobs[2] = [log_norm(50), 1.0, 0.0, 1.0]  # E: no history; it ends at 270 <= 300: rule (a)
    machine = [log_norm(300 - 220), 2 / 10, log_norm(300 - 220), 6 / 10]  # half the machine is free when B ends
    return jobs, np.array(machine)


def test_v1_columns_by_hand():
    env = SchedulingEnv(**kwargs())
    obs, info = env.reset(seed=0)
    assert info["time"] == 220 and info["waiting"] == 3
    jobs, machine = expected()
    v0 = observation.N_FEATURES
    assert obs.shape == (129, observation.N_FEATURES_V1)
    np.testing.assert_allclose(obs[:3, v0:], jobs, rtol=1e-6)
    np.testing.assert_allclose(obs[3:-1, v0:], 0.0)
    np.testing.assert_allclose(obs[-1, v0:], machine, rtol=1e-6)
    # The walltime column (2) shows the request, the estimate column (8) the prediction: D asked for 150 s.
    assert obs[1, 2] == pytest.approx(log_norm(150)) and obs[0, 2] == pytest.approx(log_norm(600))


def test_v1_columns_in_the_vector_env():
    envs = SchedulingVectorEnv(num_envs=2, **kwargs())
    obs, _ = envs.reset(seed=0)
    single, _ = SchedulingEnv(**kwargs()).reset(seed=0)
    np.testing.assert_array_equal(obs[0], single)
    np.testing.assert_array_equal(obs[1], single)


@pytest.mark.parametrize("env_id", ["theta-v1", "sdsc-sp2-v1"])
def test_v1_ids(env_id):
    env = hpcgym.make(env_id, backfill="easy")
    assert env.unwrapped.predictor.name == "last2" and env.unwrapped.features == "v1"
    obs, _ = env.reset(seed=0)
    assert obs.shape == (129, 12) and 0.0 <= obs.min() and obs.max() <= 1.0


def test_bad_features():
    with pytest.raises(ValueError, match="features"):
        SchedulingEnv(features="v2")
