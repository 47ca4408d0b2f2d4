"""The recipe's pieces: the residual scorer's prior, attention across the queue, the hold's logit, the KL anchor.

The prior is checked against the tuned formula computed here from the simulator's job arrays (not from the
observation it reads), and the KL anchor against torch's own KL divergence.
"""

import warnings

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO

from agents import pretrain
from agents.policies import ScorerPolicy, kl_from
from agents.scorer import ESTIMATE, HOLD_START, PRESENT, PriorScore, SlotScorer
from baselines import tuned
from experiments.protocol import resolve_heuristic
from experiments.recipe import Recipe, resolve
from hpcgym import traces
from hpcgym.env import WAIT_SCALE, SchedulingEnv, heuristic_action
from hpcgym.sim import heuristics, start_times

warnings.filterwarnings("ignore", category=UserWarning)


def permuted(obs, perm):
    out = obs.clone()
    out[:, :len(perm)] = obs[:, perm]
    return out


def test_attention_scorer_is_permutation_equivariant_and_reads_the_other_jobs():
    torch.manual_seed(0)
    scorer = SlotScorer(slots=6, features=8, attention=2)
    obs = torch.rand(3, 7, 8)
    obs[:, :, 0] = torch.tensor([1, 1, 1, 1, 0, 0, 1.0])  # four jobs, two padding slots, the machine row
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    a = scorer(obs.reshape(3, -1))[0]
    b = scorer(permuted(obs, perm).reshape(3, -1))[0]
    torch.testing.assert_close(b, a[:, perm])
    other = obs.clone()
    other[:, 3, 1:] = torch.rand(3, 7)  # another job changes: job 0's score changes with attention, not without
    assert not torch.allclose(scorer(other.reshape(3, -1))[0][:, 0], a[:, 0])
    plain = SlotScorer(slots=6, features=8)
    torch.testing.assert_close(plain(other.reshape(3, -1))[0][:, 0], plain(obs.reshape(3, -1))[0][:, 0])
    padding = obs.clone()
    padding[:, 4, 1:] = torch.rand(3, 7)  # a padding slot's content is never attended to
    torch.testing.assert_close(scorer(padding.reshape(3, -1))[0][:, :4], a[:, :4])


def tuned_env(window=512, **kw):
    test = traces.split(traces.load("sdsc-sp2"), "test")
    pol = heuristics.resolve("tuned", "sdsc-sp2", "easy")
    env = SchedulingEnv("sdsc-sp2", test, window=window, split="all", backfill="easy", order=pol,
                        predictor=pol.predictor, features="v1", **kw)
    return env, pol


def prior_of(env, pol, temperature=0.1):
    return {"weights": tuned.weights_of(pol), "temperature": temperature, "time_scale": env.time_scale,
            "wait_scale": WAIT_SCALE * env.time_scale, "nodes": env.machine.nodes}


def test_the_prior_is_the_tuned_score_of_the_waiting_jobs():
    env, pol = tuned_env(slots=128)
    a, b, c, d = tuned.weights_of(pol)
    prior = PriorScore(features=12, **prior_of(env, pol))
    obs, _ = env.reset(options={"window_start": 1500})
    checked = 0
    for _ in range(60):
        sim = env.sim
        q = sim.queue[:128]
        by_hand = (a * np.log(sim.wall[q]) + b * np.log(sim.job_nodes[q]) + c * np.log(sim.limit[q])
                   - d * (sim.now - sim.submit[q]) / 3600)  # the estimate, the nodes, the walltime, the wait
        logits = prior(torch.as_tensor(obs[None, :len(q)]))[0].double().numpy()
        # the same preference up to a constant: differences between jobs agree
        np.testing.assert_allclose(-logits * (a + b + c) * 0.1 - by_hand, (-logits * (a + b + c) * 0.1 - by_hand)[0],
                                   atol=1e-3)
        checked += len(q) > 1
        obs, _, done, _, _ = env.step(heuristic_action(env, pol))
        if done:
            break
    assert checked > 20


def test_a_residual_at_zero_plays_its_heuristic():
    env, pol = tuned_env(200, slots=1000)
    model = MaskablePPO(ScorerPolicy, env, policy_kwargs={"prior": prior_of(env, pol, 0.05)}, seed=0, n_steps=64)
    model.policy.mlp_extractor.scorer.zero_output()
    obs, info = env.reset(options={"window_start": 800})
    done = info["done"]
    while not done:
        action = model.predict(obs[None], action_masks=env.action_masks()[None], deterministic=True)[0][0]
        obs, _, done, _, info = env.step(int(action))
    jobs = env.jobs
    np.testing.assert_array_equal(info["records"]["start"], start_times(jobs, 128, pol, "easy"))


def test_a_clairvoyant_teacher_ranks_by_the_jobs_own_runtimes():
    env, pol = tuned_env(slots=128)
    a, b, c, d = tuned.weights_of(pol)
    teacher = resolve_heuristic("tuned@exact", trace="sdsc-sp2", backfill="easy")
    assert teacher.predictor == "exact" and teacher.name == "tuned@exact"
    recipe = Recipe.from_settings({"trace": "sdsc-sp2", "backfill": "easy", "prior": "tuned", "clone": "tuned@exact"})
    assert resolve(recipe).predictor == pol.predictor  # the environment's estimates are the prior's
    env.reset(options={"window_start": 1500})
    differs = 0
    for _ in range(80):
        sim = env.sim
        q = np.asarray(sim.queue[:128])
        ok = env.action_masks()[:len(q)]
        by_hand = (a * np.log(sim.hold[q].clip(1)) + b * np.log(sim.job_nodes[q]) + c * np.log(sim.limit[q])
                   - d * (sim.now - sim.submit[q]) / 3600)  # the job's own runtime where tuned reads last2's
        by_hand[~ok] = np.inf
        slot = heuristic_action(env, teacher)
        assert by_hand[slot] <= by_hand.min() + 1e-9
        differs += slot != heuristic_action(env, pol)
        _, _, done, _, _ = env.step(slot)
        if done:
            break
    assert differs > 5  # the runtimes change the choices: the teacher knows what tuned does not


def test_taught_runtimes_put_a_learned_estimate_in_the_place_of_the_priors():
    env, pol = tuned_env(256, slots=32)
    model = MaskablePPO(ScorerPolicy, env, policy_kwargs={"prior": prior_of(env, pol, 0.03)}, seed=0, n_steps=64)
    scorer = model.policy.mlp_extractor.scorer
    scorer.zero_output()
    obs, _ = pretrain.runtime_demonstrations(env, pol, 3, seed=0)
    jobs = obs.reshape(len(obs), 33, -1)[:, :32]
    present = jobs[..., PRESENT] > 0.5
    estimate = np.expm1(jobs[..., ESTIMATE] * np.log1p(env.time_scale)).clip(1)  # hpcgym.env's log scaling
    runs = np.where(present, 30 * np.sqrt(estimate), 0)  # long estimates run shorter than they say, short longer
    before = pretrain.runtime_error(model, obs, runs)
    pretrain.fit_runtimes(model, obs, runs, epochs=200, lr=0.01, seed=0)
    a, b, c, _ = tuned.weights_of(pol)
    expected = -a * np.log(runs.clip(1) / estimate) / ((a + b + c) * 0.03)  # log r -> log r + log(run / r)
    with torch.no_grad():
        got = scorer.correction(torch.as_tensor(obs, dtype=torch.float32)).numpy()
    err = np.abs(got - expected[:, :got.shape[1]])[present[:, :got.shape[1]]]
    assert np.median(err) < 0.05 * np.abs(expected).max(), (np.median(err), np.abs(expected).max())
    after = pretrain.runtime_error(model, obs, runs)
    assert before[0] == pytest.approx(np.abs(np.log(runs[present] / estimate[present])).mean(), rel=1e-5)
    assert after[1] < 0.1 * before[0]


def test_a_taught_residual_starts_from_the_best_of_three_on_validation():
    env, pol = tuned_env(256, slots=32)
    model = MaskablePPO(ScorerPolicy, env, policy_kwargs={"prior": prior_of(env, pol, 0.03)}, seed=0, n_steps=64)
    scorer = model.policy.mlp_extractor.scorer
    obs = torch.as_tensor(pretrain.runtime_demonstrations(env, pol, 1, seed=0)[0], dtype=torch.float32)

    def teach():
        with torch.no_grad():
            scorer.head.bias.fill_(3.0)  # a stand-in for a fit: any change of the correction
        return 0.5

    scores = iter([2.0, 1.0, 3.0])  # untrained, prior, taught: the prior wins
    done = pretrain.residual_start(model, pol, None, validate=lambda m: next(scores), teach=teach)
    assert done.scores == {"untrained": 2.0, "prior": 1.0, "cloned": 3.0} and done.chosen == "prior"
    assert done.accuracy == 0.5
    with torch.no_grad():
        assert not scorer.correction(obs).any()  # the model holds the prior alone


def test_the_hold_logit_is_the_best_jobs_plus_an_offset_that_ignores_the_order():
    torch.manual_seed(1)
    scorer = SlotScorer(slots=6, features=8, hold=True)
    obs = torch.rand(2, 7, 8)
    obs[:, :, 0] = torch.tensor([1, 1, 1, 0, 1, 0, 1.0])
    scores = scorer(obs.reshape(2, -1))[0]
    assert scores.shape == (2, 7)
    perm = torch.tensor([4, 2, 0, 3, 1, 5])
    torch.testing.assert_close(scorer(permuted(obs, perm).reshape(2, -1))[0][:, 6], scores[:, 6])
    scorer.zero_output()
    scores = scorer(obs.reshape(2, -1))[0]
    best = scores[:, :6].masked_fill(obs[:, :6, 0] < 0.5, -torch.inf).amax(1)
    torch.testing.assert_close(scores[:, 6], best + HOLD_START)


def test_kl_from_is_torchs_kl_over_the_valid_slots():
    torch.manual_seed(2)
    logits, anchor = torch.randn(4, 5), torch.randn(4, 5)
    valid = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [0, 1, 1, 0, 1]], dtype=torch.bool)
    log_p = torch.log_softmax(logits.masked_fill(~valid, -1e8), -1)
    ours = kl_from(log_p, anchor, valid)
    for i in range(4):
        p = torch.distributions.Categorical(logits=logits[i][valid[i]])
        q = torch.distributions.Categorical(logits=anchor[i][valid[i]])
        torch.testing.assert_close(ours[i], torch.distributions.kl_divergence(p, q))


def test_the_kl_anchor_replaces_the_entropy_and_pulls_back_to_the_start():
    env, pol = tuned_env(slots=64)
    soft = prior_of(env, pol, temperature=5.0)  # a soft prior: the learned part moves the probabilities
    model = MaskablePPO(ScorerPolicy, env, policy_kwargs={"anchor": True, "prior": soft}, seed=0, n_steps=64)
    policy = model.policy
    policy.set_anchor()
    obs, _ = env.reset(options={"window_start": 300})
    batch = torch.as_tensor(obs[None]).flatten(1)
    masks = torch.as_tensor(env.action_masks()[None])
    action = torch.tensor([int(np.flatnonzero(masks[0])[0])])
    assert masks.sum() >= 2
    term = policy.evaluate_actions(batch, action, masks)[2]
    torch.testing.assert_close(term, torch.zeros(1))  # at the start, no divergence
    with torch.no_grad():
        for p in policy.mlp_extractor.scorer.head.parameters():
            p.add_(torch.randn_like(p))
    kl = -policy.evaluate_actions(batch, action, masks)[2]
    assert kl.item() > 1e-4
    optimizer = torch.optim.SGD([p for p in policy.parameters() if p.requires_grad], lr=0.05)
    for _ in range(20):  # what PPO's entropy term does with ent_coef > 0: it lowers the divergence
        optimizer.zero_grad()
        (-policy.evaluate_actions(batch, action, masks)[2]).mean().backward()
        optimizer.step()
    assert -policy.evaluate_actions(batch, action, masks)[2].item() < 0.5 * kl.item()
    assert all(not p.requires_grad for p in policy.anchor.parameters())
    with pytest.raises(ValueError, match="no KL anchor"):
        MaskablePPO(ScorerPolicy, env, seed=0, n_steps=64).policy.set_anchor()
