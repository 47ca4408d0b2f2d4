"""The golden cases of the arrivals generator: small fits whose samples the split generator must reproduce exactly.

``python tests/arrivals_golden.py OUT.json [SAVES]`` fits every case and writes each sample's SHA-256 (its CSV, with
its ``attrs``) and the fit's calibrated numbers; with ``SAVES``, it also saves the fits of :data:`SAVED` there. The
JSON and the saves in ``tests/data/arrivals_golden/`` were written by this script run on the single-module code at
commit 19ae773 (before the split; it read the numbers as the model's own attributes), and
``tests/test_arrivals_golden.py`` checks the current code against them.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

import synth
from hpcgym import traces
from hpcgym.testing import TOY, make_jobs
from hpcgym.traces.split import head

DEGENERATE = {
    "burst": [(0, 100 * (k + 1), 200 * (k + 1), k % 3 + 1) for k in range(10)],
    "equal-gaps": [(10 * k, 100, 100, 2) for k in range(10)],
    "identical": [(0, 100, 100, 2)] * 10,
}


def _outage_log() -> pd.DataFrame:
    """3,001 jobs 5-15 min apart with three outages (tests/test_generator.py's fixture)."""
    rng = np.random.default_rng(0)
    gaps = rng.integers(300, 900, 3000)
    gaps[[749, 1499, 2249]] = 12 * 3600 + np.array([2, 8, 5]) * 86400
    submit = np.concatenate([[0], np.cumsum(gaps)])
    return make_jobs([(int(t), 1800, 3600, int(k)) for t, k in zip(submit, rng.integers(1, 3, len(submit)),
                                                                      strict=True)])


def _sdsc(n: int = 3000) -> pd.DataFrame:
    return traces.split(head(traces.load("sdsc-sp2"), n), "train")


def _anonymous() -> pd.DataFrame:
    jobs = _sdsc()
    jobs["user"] = -1
    return jobs


#: name -> (training table, constructor settings, fit seed, sample lengths)
CASES: dict[str, tuple[Callable[[], pd.DataFrame], dict, int, tuple[int, ...]]] = {
    "sdsc-3000": (_sdsc, {"max_nodes": 128}, 0, (300, 2500)),
    "sdsc-3000-load-slow": (_sdsc, {"max_nodes": 128, "load": 0.9, "slow": 0.2}, 1, (300, 2500)),
    "sdsc-anonymous": (_anonymous, {"max_nodes": 128, "slow": 0.0}, 0, (500,)),
    "lublin-2000": (lambda: traces.split(head(traces.load("lublin-256"), 2000), "train"),
                    {"max_nodes": 256, "slow": 0.1}, 0, (1500,)),
    "mustang": (lambda: traces.split(traces.load("mustang"), "train"), {"max_nodes": 1600}, 0, (148, 1000)),
    "outages": (_outage_log, {"max_nodes": 4, "slow": 0.0}, 0, (300, 3000)),
    **{f"toy-{k}": (lambda rows=rows: make_jobs(rows), {"max_nodes": TOY.nodes}, 0, (20,))
       for k, rows in DEGENERATE.items()},
}
SEEDS = (0, 7)
SAVED = ("outages", "toy-burst")
#: the calibrated numbers kept beside the hashes (they name what went wrong when a hash does not match), and where
#: the split generator keeps them (the single module had each as an attribute of the model, by the same name)
NUMBERS = {"phi": "process", "slow_share": "process", "mix_tv": "mix", "target_load": "governor",
           "p_keep": "outcomes", "p_close": "runtimes", "p_return": "runtimes"}


def sample_hash(jobs: pd.DataFrame) -> str:
    """SHA-256 of a sample's CSV and its ``attrs`` (postprocess counts, machine)."""
    attrs = json.dumps({k: v for k, v in jobs.attrs.items()}, sort_keys=True, default=str)
    return hashlib.sha256((jobs.to_csv(index=False) + attrs).encode()).hexdigest()


def describe(model: synth.base.Synthesizer, lengths: tuple[int, ...]) -> dict:
    """A fitted model's numbers and the hashes of its samples (every length, every seed of :data:`SEEDS`)."""
    numbers = {k: getattr(getattr(model, part), k) for k, part in NUMBERS.items()}
    hashes = {f"{n}@{s}": sample_hash(model.sample(n, seed=s)) for n in lengths for s in SEEDS}
    return {"numbers": numbers, "hashes": hashes}


def fit(name: str) -> synth.base.Synthesizer:
    table, params, seed, _ = CASES[name]
    return synth.get("arrivals", **params).fit(table(), seed=seed)


def main(out: str, saves: str | None = None) -> None:
    found = {}
    for name, (_, _, _, lengths) in CASES.items():
        model = fit(name)
        found[name] = describe(model, lengths)
        if saves and name in SAVED:
            model.save(Path(saves) / name)
    Path(out).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
