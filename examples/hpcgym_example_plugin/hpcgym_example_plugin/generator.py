"""A generator: gaps between submits, and (nodes, runtime, walltime) triples, each drawn from the training jobs.

It keeps each job's shape but forgets users, the daily cycle and bursts: a baseline, not a model to use.
"""

import numpy as np
import pandas as pd

from synth.base import Synthesizer


class ResampleSynthesizer(Synthesizer):
    """Independent draws of the training jobs' inter-arrival gaps and of their job shapes."""

    name = "resample"

    def _fit(self, table, jobs, rng):
        self.gaps = table["interarrival"].to_numpy(np.int64)[1:]  # the first row's 0 is no gap
        self.shapes = table[["nodes", "run", "walltime"]].to_numpy(np.int64)

    def _sample(self, n, rng):
        shapes = self.shapes[rng.integers(len(self.shapes), size=n)]
        gaps = self.gaps[rng.integers(len(self.gaps), size=n)]
        return pd.DataFrame({"interarrival": gaps, "nodes": shapes[:, 0], "run": shapes[:, 1],
                             "walltime": shapes[:, 2], "user": -1, "status": "unknown", "hour": 0, "dow": 0})
