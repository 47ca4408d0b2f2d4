"""The across-seed table's validation-against-test lines (``experiments.seeds.agreement``), on hand-made runs."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments import seeds
from experiments.runs import BASELINE

# per seed: the learning curve (timesteps, validation bsld, network) and the test bsld of each network row
RUNS = {
    0: ([(0, 10.0, "untrained (not kept)"), (0, 9.0, "cloned"), (20, 8.5, "ppo"), (40, 9.2, "ppo")],
        {"agent": 19.0, "cloned": 20.0, "untrained": 25.0}),
    1: ([(0, 9.0, "cloned (not kept)"), (0, 8.8, "untrained"), (20, 9.0, "ppo")],
        {"agent": 21.0, "cloned": 22.0, "untrained": 21.0}),
    2: ([(0, 9.5, "prior"), (20, 9.1, "ppo")], {"agent": 18.0, "cloned": 30.0, "untrained": 26.0}),
}


def _run(root: Path, seed: int, curve: list | None = None, tests: dict | None = None) -> Path:
    path = root / f"r-s{seed}"
    (path / "eval").mkdir(parents=True)
    (path / "args.json").write_text(json.dumps({"trace": "lublin-256", "workload": "real", "algo": "ppo",
                                                "seed": seed, "backfill": "easy", "eval_windows": 1,
                                                "eval_length": 128}))
    with zipfile.ZipFile(path / "model.zip", "w") as z:
        z.writestr("data", "{}")
    if curve is None:
        curve, tests = RUNS[seed]
    pd.DataFrame(curve, columns=["timesteps", "val_bsld", "network"]).to_csv(path / "learning_curve.csv", index=False)
    rows = [{"scheduler": BASELINE, "kind": "heuristic", "backfill": "easy", "window": 0, "bsld": 40.0}]
    rows += [{"scheduler": f"r-s{seed}", "kind": kind, "backfill": "easy", "window": 0, "bsld": b}
             for kind, b in tests.items()]
    pd.DataFrame(rows).to_csv(path / "eval" / "per_window.csv", index=False)
    return path


def test_agreement_reads_each_seeds_start_and_kept_network(tmp_path):
    dirs = [_run(tmp_path, s) for s in RUNS]
    agree = seeds.agreement(dirs, seeds.load(dirs)).set_index("seed")
    assert agree["start"].tolist() == ["cloned", "untrained", "prior"]
    assert agree["val_start"].tolist() == [9.0, 8.8, 9.5] and agree["val_kept"].tolist() == [8.5, 8.8, 9.1]
    assert agree["test_kept"].tolist() == [19.0, 21.0, 18.0]
    assert agree.loc[0, "test_start"] == 20.0 and agree.loc[1, "test_start"] == 21.0
    assert np.isnan(agree.loc[2, "test_start"])  # a prior that RL moved off has no test row
    # moved on validation: seeds 0 and 2; scored on test: seed 0 only, better there (19 < 20); Spearman of
    # (8.5, 8.8, 9.1) against (19, 21, 18): ranks (1, 2, 3) and (2, 3, 1), 1 - 6 * 6 / (3 * 8) = -0.5
    line = seeds.describe_agreement(agree.reset_index())
    assert "on validation on 2 of 3 seeds, and on test on 1 of the 1 of them" in line
    assert "over 3 seeds: -0.50" in line


def test_the_summary_carries_the_agreement_and_its_file(tmp_path):
    dirs = [_run(tmp_path, s) for s in RUNS]
    seeds.write(dirs, tmp_path / "out")
    assert "Validation against test: the network kept beat RL's start" in (tmp_path / "out" / "summary.md").read_text()
    assert len(pd.read_csv(tmp_path / "out" / seeds.AGREEMENT)) == 3


def test_a_start_kept_to_the_end_is_the_agent(tmp_path):
    run = _run(tmp_path, 3, [(0, 9.5, "prior"), (20, 9.7, "ppo")], {"agent": 17.0, "cloned": 30.0})
    agree = seeds.agreement([run], seeds.load([run]))
    assert agree["test_start"].tolist() == pytest.approx([17.0])  # RL found nothing better: the prior is the agent


def test_the_agreement_line_counts_test_gains_among_the_seeds_it_names():
    """Seed 0 moved on validation (8 < 9) and gained on test (19 < 20). Seed 1 has no validation score, though its
    network is better on test (18 < 20): it is not among the moved seeds, so it is not counted as a test gain
    either ("1 of the 1", never "2 of the 1")."""
    agree = pd.DataFrame({"seed": [0, 1], "start": ["cloned", "cloned"], "val_start": [9.0, np.nan],
                          "val_kept": [8.0, 8.0], "test_start": [20.0, 20.0], "test_kept": [19.0, 18.0]})
    line = seeds.describe_agreement(agree)
    assert "on validation on 1 of 2 seeds, and on test on 1 of the 1 of them" in line
