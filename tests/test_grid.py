"""baselines.grid: every heuristic x backfill mode on the same windows, in the order the tables rely on."""

from __future__ import annotations

import pandas as pd

from baselines import priorities
from baselines.grid import simulate_grid
from experiments import evaluate
from hpcgym import machines, traces
from hpcgym.sim import simulate


def _windows():
    jobs = traces.split(traces.load("lublin-256"), "test")
    return jobs, [traces.window(jobs, 96, start=s) for s in (0, 300, 700)]


def test_each_cell_holds_one_simulation_per_window():
    _, windows = _windows()
    machine = machines.get("lublin-256")
    cells = simulate_grid(windows, machine, ["wfp3", "fcfs"], ["easy", "none", "conservative"])
    assert [(c.policy, c.backfill) for c in cells] == [("wfp3", "easy"), ("wfp3", "none"), ("wfp3", "conservative"),
                                                      ("fcfs", "easy"), ("fcfs", "none"), ("fcfs", "conservative")]
    for cell in cells:
        assert cell.cpu_s >= 0 and len(cell.records) == len(windows)
        for jobs, rec in zip(windows, cell.records, strict=True):
            pd.testing.assert_frame_equal(rec, simulate(jobs, machine, priorities.get(cell.policy), cell.backfill))


def test_the_evaluation_lists_heuristics_window_by_window():
    test, windows = _windows()
    recs = evaluate.run_heuristics(test, machines.get("lublin-256"), [0, 300, 700], 96)
    order = [(int(r["window"].iat[0]), r["scheduler"].iat[0]) for r in recs]
    # Every heuristic and the three on the trace's learned predictions (lublin-256 ships a model), then per backfill
    # mode the tuned fit (lublin-256 ships one) and the clairvoyant row.
    names = list(priorities.POLICIES) + ["sjbf-learned", "sjf-learned", "saf-learned"]
    extra = [f"{p}+{b}" for b in ("none", "easy") for p in ("tuned", "clairvoyant")]
    assert order == [(w, s) for w in range(3) for s in [f"{p}+{b}" for p in names for b in ("none", "easy")] + extra]
    assert all((r["kind"] == ("clairvoyant" if r["scheduler"].iat[0].startswith("clairvoyant") else "heuristic")).all()
               and r["backfill"].iat[0] == r["scheduler"].iat[0].split("+")[1] for r in recs)
