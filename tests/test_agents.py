import warnings

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO

import hpcgym
from agents.dqn import INVALID_Q, MaskedDQN
from agents.policies import ScorerPolicy
from agents.scorer import SlotScorer, queue_ranks

warnings.filterwarnings("ignore", category=UserWarning)


def small_env(**kw):
    return hpcgym.make("lublin256-v0", window=96, slots=32, **kw)


def test_scorer_is_permutation_equivariant():
    torch.manual_seed(0)
    scorer = SlotScorer(slots=6, features=8)
    obs = torch.rand(2, 7, 8)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    permuted = obs.clone()
    permuted[:, :6] = obs[:, perm]
    a = scorer(obs.reshape(2, -1))[0]
    b = scorer(permuted.reshape(2, -1))[0]
    torch.testing.assert_close(b, a[:, perm])


def test_masked_dqn_never_picks_an_invalid_slot():
    env = small_env(invalid_action="raise")  # an invalid action would raise inside learn()
    model = MaskedDQN(env=env, learning_starts=300, buffer_size=2000, exploration_fraction=0.5, seed=0,
                      train_freq=4, target_update_interval=200, verbose=0)
    model.learn(2500)
    obs, _ = env.reset(seed=1)
    q = model.q_net(torch.as_tensor(obs[None]))[0]
    mask = env.unwrapped.action_masks()
    assert (q[~torch.as_tensor(mask)] == INVALID_Q).all() and (q[torch.as_tensor(mask)] > INVALID_Q).all()
    model.exploration_rate = 1.0  # pure exploration is still restricted to valid slots
    for _ in range(200):
        assert mask[int(model.predict(obs)[0])]


def test_masked_dqn_plain_mlp_and_save_load(tmp_path):
    env = small_env()
    model = MaskedDQN(env=env, policy_kwargs={"scorer": False}, learning_starts=100, buffer_size=1000, seed=0)
    model.learn(400)
    model.save(tmp_path / "dqn")
    again = MaskedDQN.load(tmp_path / "dqn", env=env)
    obs, _ = env.reset(seed=2)
    assert model.predict(obs, deterministic=True)[0] == again.predict(obs, deterministic=True)[0]


def test_scorer_policy_with_maskable_ppo(tmp_path):
    env = small_env()
    model = MaskablePPO(ScorerPolicy, env, n_steps=256, batch_size=64, n_epochs=2, seed=0)
    assert sum(p.numel() for p in model.policy.parameters()) < 10_000  # tiny, like RLScheduler's kernel
    model.learn(512)
    model.save(tmp_path / "ppo")
    again = MaskablePPO.load(tmp_path / "ppo", env=env)
    obs, _ = env.reset(seed=3)
    mask = env.unwrapped.action_masks()
    a = model.predict(obs, action_masks=mask, deterministic=True)[0]
    assert a == again.predict(obs, action_masks=mask, deterministic=True)[0] and mask[int(a)]
    with pytest.raises(ValueError, match="observation of shape"):
        MaskablePPO(ScorerPolicy, gym_flat_env())


def gym_flat_env():
    from gymnasium.wrappers import FlattenObservation

    return FlattenObservation(small_env())


def test_valid_from_observation_matches_masks():
    from agents.policies import valid_from_observation

    env = small_env()
    obs, _ = env.reset(seed=0)
    assert np.array_equal(valid_from_observation(obs, 32)[0], env.unwrapped.action_masks())


def test_behaviour_cloning_learns_the_heuristic():
    from agents.pretrain import behaviour_clone
    from baselines import priorities

    env = small_env()
    model = MaskablePPO(ScorerPolicy, env, n_steps=256, batch_size=64, seed=0)
    untrained = behaviour_clone(model, env, priorities.SAF, episodes=4, epochs=0, seed=0)
    accuracy = behaviour_clone(model, env, priorities.SAF, episodes=4, epochs=30, seed=0)
    assert accuracy > max(0.6, untrained + 0.2), (untrained, accuracy)


def test_clone_minibatches_cover_every_decision_once_and_group_queue_lengths():
    import torch

    from agents.pretrain import length_batches

    queue = np.random.default_rng(0).integers(1, 100, 1000)
    batches = length_batches(queue, 64, torch.Generator().manual_seed(0))
    seen = torch.cat(batches).numpy()
    assert sorted(seen) == list(range(1000))
    spans = [np.ptp(queue[b.numpy()]) for b in batches]
    assert np.median(spans) < 15  # a random split would span most of 1..99 in every batch


def test_queue_ranks_are_a_stable_sort_of_the_queue():
    values = torch.tensor([[0.5, 0.2, 0.5, 0.1, 0.0]])
    present = torch.tensor([[True, True, True, True, False]])
    # 0.1 first, then 0.2, then the two 0.5s in arrival order; padding ranks 0
    ranks = queue_ranks(values.unsqueeze(-1), present, slots=4)[..., 0]  # one column
    torch.testing.assert_close(ranks, torch.tensor([[2.0, 1.0, 3.0, 0.0, 0.0]]) / 4)


def test_scorer_with_ranks_stays_permutation_equivariant_without_ties():
    torch.manual_seed(0)
    scorer = SlotScorer(slots=6, features=8, ranks=(2, 5))
    obs = torch.rand(2, 7, 8)
    obs[:, :6, 0] = 1.0  # every slot holds a job
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    permuted = obs.clone()
    permuted[:, :6] = obs[:, perm]
    torch.testing.assert_close(scorer(permuted.reshape(2, -1))[0], scorer(obs.reshape(2, -1))[0][:, perm])


def test_a_scorer_that_sees_area_ranks_clones_saf_exactly():
    from agents import pretrain
    from baselines import priorities
    from hpcgym.observation import JOB_FEATURES

    env = small_env()
    saf = priorities.get("saf")
    area = JOB_FEATURES.index("area")
    model = MaskablePPO(ScorerPolicy, env, policy_kwargs={"ranks": (area,)}, seed=0)
    pretrain.behaviour_clone(model, env, saf, episodes=10, epochs=60, batch_size=32, lr=3e-3)
    held_out = pretrain.demonstrations(env, saf, episodes=5, seed=100)
    assert pretrain.accuracy(model, *held_out) == 1.0


def test_a_masked_dqn_clones_saf_through_its_q_values():
    from agents import pretrain
    from baselines import priorities
    from hpcgym.observation import JOB_FEATURES

    env = small_env()
    saf = priorities.get("saf")
    model = MaskedDQN(env=env, policy_kwargs={"ranks": (JOB_FEATURES.index("area"),)}, seed=0)
    pretrain.behaviour_clone(model, env, saf, episodes=10, epochs=60, batch_size=32, lr=3e-3)
    held_out = pretrain.demonstrations(env, saf, episodes=5, seed=100)
    assert pretrain.accuracy(model, *held_out) == 1.0  # the greedy policy is SAF
    for online, target in zip(model.q_net.parameters(), model.q_net_target.parameters(), strict=True):
        torch.testing.assert_close(online, target)  # TD targets start from the cloned network too
