"""Helpers shared by the simulator tests: random workloads, schedule invariants, a heuristic played in step mode."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import strategies as st

from hpcgym import jobs
from hpcgym.sim import Simulator
from hpcgym.sim.policy import priority

POLICY_NAMES = ["fcfs", "sjf", "wfp3", "unicep", "f1", "ljf", "saf"]
BACKFILLS = ["none", "easy", "conservative", "rlscheduler"]


@st.composite
def workloads(draw, max_jobs: int = 40, machine_nodes: int = 8, users: int = 0):
    """Small random job tables with bursts (equal submit times), overruns (run > walltime) and early ends.

    With ``users`` > 0 the jobs belong to users ``-1 .. users - 1`` (-1: unknown), for the history predictors.
    """
    n = draw(st.integers(1, max_jobs))
    gaps = draw(st.lists(st.sampled_from([0, 0, 1, 3, 7, 20, 50]), min_size=n, max_size=n))
    submit = np.cumsum(gaps) - gaps[0]
    wall = np.asarray(draw(st.lists(st.integers(1, 60), min_size=n, max_size=n)))
    frac = np.asarray(draw(st.lists(st.sampled_from([0.2, 0.5, 1.0, 1.0, 1.5]), min_size=n, max_size=n)))
    run = np.maximum(1, np.round(wall * frac)).astype(np.int64)
    nodes = np.asarray(draw(st.lists(st.integers(1, machine_nodes), min_size=n, max_size=n)))
    user = np.asarray(draw(st.lists(st.integers(-1, users - 1), min_size=n, max_size=n))) if users else 0
    df = pd.DataFrame({
        "job_id": np.arange(1, n + 1), "submit": submit, "run": run, "walltime": wall, "nodes": nodes,
        "procs": nodes, "user": user, "group": 0, "queue": -1, "status": "completed", "walltime_known": True,
    })
    return jobs.finalize(df)


def peak_use(start: np.ndarray, end: np.ndarray, nodes: np.ndarray) -> int:
    """Most nodes in use at any instant (a job frees its nodes at its end, before others start then)."""
    times = np.concatenate([end, start])
    delta = np.concatenate([-nodes, nodes])
    order = np.lexsort((delta, times))  # at equal times, releases (negative) first
    return int(np.cumsum(delta[order]).max(initial=0))


def heuristic_through_steps(df: pd.DataFrame, nodes: int, policy, backfill: str, kill: bool = True) -> Simulator:
    """Step mode with ``policy`` choosing its own head at every decision (it must reproduce the batch schedule)."""
    sim = Simulator(nodes, backfill, order=policy, kill_at_walltime=kill)
    pending = sim.reset(df)
    while pending:
        q = sim.queue
        s = [priority(policy.code, sim.now, sim.submit[j], sim.wall[j], sim.job_nodes[j], 0.0) for j in q]
        pending = sim.choose(int(q[int(np.argmin(s))]))  # argmin takes the first of equals: arrival order
    return sim
