"""A priority rule: the job that asks for the most nodes first (ties: the earlier submit, then the lower job id)."""

import numpy as np

from hpcgym.sim import KEY, PriorityPolicy


def most_nodes_first(jobs):
    """One score per job of a job table; the lowest runs first."""
    return -jobs["nodes"].to_numpy(np.float64)


BIGFIRST = PriorityPolicy("bigfirst", KEY, key=most_nodes_first, description="-n (largest job first)")
