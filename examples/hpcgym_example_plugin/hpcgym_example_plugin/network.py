"""A policy network for MaskablePPO: each queue slot is embedded by one shared MLP, then averaged (a deep set).

``python -m experiments.train --network hpcgym_example_plugin.network:PooledPolicy --policy-kwargs '{"hidden": 32}'``
"""

import torch
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor


class SlotMeanExtractor(BaseFeaturesExtractor):
    """The observation's job rows through a shared MLP, averaged over the occupied slots, next to the machine row."""

    def __init__(self, observation_space, hidden=32):
        slots_plus_one, features = observation_space.shape
        super().__init__(observation_space, features_dim=hidden + features)
        self.slot = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU())

    def forward(self, obs):
        """``(batch, hidden + features)``: the pooled job rows, then the machine row."""
        jobs, machine = obs[:, :-1, :], obs[:, -1, :]
        present = jobs[:, :, :1]  # column 0: 1 for a waiting job, 0 for padding
        pooled = (self.slot(jobs) * present).sum(1) / present.sum(1).clamp(min=1)
        return torch.cat([pooled, machine], dim=1)


class PooledPolicy(MaskableActorCriticPolicy):
    """MaskablePPO's policy with :class:`SlotMeanExtractor` (``policy_kwargs``: ``hidden``)."""

    def __init__(self, *args, hidden=32, **kwargs):
        super().__init__(*args, features_extractor_class=SlotMeanExtractor,
                         features_extractor_kwargs={"hidden": hidden}, **kwargs)
