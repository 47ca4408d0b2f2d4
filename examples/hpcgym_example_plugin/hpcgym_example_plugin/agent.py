"""An agent that follows the protocol of ``experiments.evaluate`` (SB3's ``predict``): the biggest waiting job first.

``python -m experiments.evaluate --agent biggest=hpcgym_example_plugin.agent:BiggestFirst --trace lublin-256``
"""

import numpy as np

NODES = 3  # the observation's column of a job's nodes / the machine's nodes (hpcgym.env.SchedulingEnv)


class BiggestFirst:
    """Picks the valid slot whose job asks for the most nodes (ties: the earliest arrival, the lowest slot)."""

    backfill = "none"  # the environment settings it plays with (experiments.runs.Agent)

    def predict(self, observation, action_masks=None, deterministic=True):
        """One slot per observation of the batch, and no recurrent state."""
        valid = observation[:, :-1, 0] > 0 if action_masks is None else action_masks  # column 0: a job is there
        nodes = np.where(valid, observation[:, :-1, NODES], -1.0)
        return nodes.argmax(axis=1), None
