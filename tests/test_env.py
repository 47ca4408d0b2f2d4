import warnings

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

import hpcgym
from baselines import priorities
from hpcgym import traces
from hpcgym.env import SchedulingEnv, heuristic_action
from hpcgym.sim import start_times

warnings.filterwarnings("ignore", category=UserWarning)


def random_episode(env, seed, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    obs, info = env.reset(seed=seed)
    trajectory = [obs]
    while True:
        mask = env.unwrapped.action_masks()
        assert mask.any()
        valid = np.flatnonzero(mask)
        obs, reward, terminated, truncated, info = env.step(int(valid[rng.integers(len(valid))]))
        trajectory.append(obs)
        assert not truncated
        if terminated:
            return trajectory, reward, info
        assert reward == 0.0


@pytest.mark.parametrize("env_id", sorted(hpcgym.ENVS))
def test_checkers_pass_for_every_id_with_default_arguments(env_id):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    # The checkers sample actions from the whole action space; by default such an action has a fixed meaning.
    check_env(hpcgym.make(env_id).unwrapped)
    sb3_check_env(hpcgym.make(env_id), warn=True)
    env = hpcgym.make(env_id)
    assert gym.make(f"hpcgym/{env_id}").unwrapped.machine.name == env.unwrapped.machine.name


@pytest.mark.parametrize("env_id", sorted(hpcgym.ENVS))
def test_same_seed_same_episode(env_id):
    a, ra, ia = random_episode(hpcgym.make(env_id, backfill="easy", window=128), seed=3)
    b, rb, ib = random_episode(hpcgym.make(env_id, backfill="easy", window=128), seed=3)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert ra == rb and pd.DataFrame(ia["records"]).equals(pd.DataFrame(ib["records"]))


def test_masks_and_episode_end():
    env = hpcgym.make("lublin256-v0", window=256)
    obs, _ = env.reset(seed=1)
    steps = 0
    while True:
        mask = env.unwrapped.action_masks()
        sim = env.unwrapped.sim
        assert mask.sum() == min(len(sim.queue), 128) >= 2  # a real choice, every slot with a job valid
        assert (obs[:128, 0] == mask).all()  # the present flag marks padding
        obs, reward, terminated, _, info = env.step(int(np.flatnonzero(mask)[-1]))
        steps += 1
        if terminated:
            break
        assert not sim.done
    rec = pd.DataFrame(info["records"])
    assert sim.done and len(rec) == 256 and rec["end"].max() <= sim.now
    assert reward == pytest.approx(-rec["bsld"].mean())
    with pytest.raises(ValueError):
        env.step(0)


def test_invalid_action_is_a_clear_error():
    env = hpcgym.make("lublin256-v0", invalid_action="raise")
    env.reset(seed=0)
    empty = int(np.flatnonzero(~env.unwrapped.action_masks())[0])
    with pytest.raises(ValueError, match="invalid action"):
        env.step(empty)
    wrapped = hpcgym.make("lublin256-v0", invalid_action="wrap")
    wrapped.reset(seed=0)
    wrapped.step(empty)  # mapped onto a valid slot


@pytest.mark.parametrize("backfill", ["none", "easy", "rlscheduler"])
def test_heuristic_through_env_equals_batch(backfill):
    for name in ["fcfs", "sjf", "wfp3", "unicep", "f1", "ljf", "saf"]:
        policy = priorities.get(name)
        env = SchedulingEnv("sdsc-sp2", "sdsc-sp2", backfill=backfill, window=512, slots=512, order=policy,
                            split="test")
        env.reset(seed=5)
        terminated = False
        while not terminated:
            _, _, terminated, _, info = env.step(heuristic_action(env, policy))
        jobs = env.unwrapped.jobs
        expected = start_times(jobs, 128, policy, backfill)
        assert np.array_equal(info["records"]["start"], expected), (name, backfill)


def test_train_windows_never_touch_test_jobs():
    full = traces.load("lublin-256")
    cut = 7000
    for split, allowed in (("train", set(full["job_id"][:cut])), ("test", set(full["job_id"][cut:]))):
        env = SchedulingEnv("lublin-256", "lublin-256", window=256, split=split)
        for seed in range(20):
            env.reset(seed=seed)
            assert set(env.unwrapped.jobs["job_id"]) <= allowed


def test_workload_kinds():
    table = traces.load("lublin-256")
    env = SchedulingEnv("lublin-256", table.iloc[:600], window=128, split="all")
    assert env.reset(seed=0)[0].shape == (129, 8)
    env = SchedulingEnv("trinity", "synthetic", window=128)
    env.reset(seed=0)
    first = env.jobs.copy()
    env.reset(seed=0)
    assert env.jobs.equals(first)  # sampled workloads are seeded through the env
    assert env.jobs["nodes"].max() <= 9408

    theta = SchedulingEnv("theta", "synthetic", window=256)  # arrival-aware generator fitted on Theta's train split
    theta.reset(seed=0)
    assert theta.jobs.attrs["name"] == "arrivals-synthetic" and theta._window.start_row == -1

    class Sampler:
        def sample(self, n_jobs, seed):
            return traces.window(table, n_jobs, rng=seed)

    SchedulingEnv("lublin-256", Sampler(), window=64).reset(seed=2)
    SchedulingEnv("lublin-256", str(traces.path_of("lublin-256")), window=64).reset(seed=2)
    with pytest.raises(ValueError, match="need more than the 128 nodes"):
        SchedulingEnv("sdsc-sp2", "lublin-256")
    with pytest.raises(TypeError, match="workload must be"):
        SchedulingEnv("lublin-256", 42)
    with pytest.raises(KeyError, match="Did you mean"):
        hpcgym.make("thetaa-v0")


def test_baseline_reward_and_objectives():
    env = hpcgym.make("lublin256-v0", baseline="fcfs", objective="wait")
    _, reward, info = random_episode(env, seed=4)
    base = info["baseline"]
    agent = info["records"]["wait"].mean()
    assert reward == pytest.approx((base - agent) / base)
    _, reward, info = random_episode(hpcgym.make("lublin256-v0", objective="util"), seed=4)
    assert reward == pytest.approx(info["metrics"]["utilization"]) and 0 < reward <= 1


def test_render_modes():
    env = hpcgym.make("lublin256-v0", render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert "free" in text and "slot" in text
    env = hpcgym.make("lublin256-v0", render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(20):
        env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
    img = env.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3 and img.std() > 0


def test_maskable_ppo_trains_on_lublin256():
    from sb3_contrib import MaskablePPO

    env = hpcgym.make("lublin256-v0", window=128, slots=64)
    model = MaskablePPO("MlpPolicy", env, n_steps=512, batch_size=128, n_epochs=2, seed=0, verbose=0)
    model.learn(total_timesteps=2048)
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
    assert env.unwrapped.action_masks()[int(action)]


def test_readme_env_example_matches_env():
    readme = (pd.io.common.Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert 'env = hpcgym.make("theta-v0")' in readme


def test_out_of_mask_actions_have_a_counted_meaning():
    env = hpcgym.make("lublin256-v0")  # default: invalid_action="wrap"
    ref = hpcgym.make("lublin256-v0")
    env.reset(seed=4)
    ref.reset(seed=4)
    v = int(env.unwrapped.action_masks().sum())
    a, _, _, _, info = env.step(v + 2)  # slot (v + 2) mod v = 2
    b, _, _, _, _ = ref.step(2)
    np.testing.assert_array_equal(a, b)
    assert info["invalid_actions"] == 1


def test_arguments_and_actions_are_checked_not_coerced(tmp_path):
    env = hpcgym.make("lublin256-v0")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="whole number"):
        env.step(2.5)
    env.step(np.float64(1.0))  # a whole float is fine
    with pytest.raises(ValueError, match="whole number"):
        hpcgym.make("lublin256-v0", window=2.5)
    env = SchedulingEnv("lublin-256", "lublin-256", window=64, compare_with="fcfs")  # one name, not letters
    assert [p.name for p in env.compare_with] == ["fcfs"]
    rows = traces.load("lublin-256").iloc[:300]
    colon = tmp_path / "a:b.swf"
    traces.write_swf(rows, colon, machine="lublin-256")
    assert SchedulingEnv("lublin-256", str(colon), window=64, split="all").reset(seed=0)[0].shape == (129, 8)


def test_invalid_job_tables_fail_at_construction():
    table = traces.load("lublin-256").iloc[:600].copy()
    table.loc[5, "nodes"] = np.nan
    table.loc[9, "run"] = 0
    with pytest.raises(ValueError, match="1 jobs with a missing or non-positive run; 1 jobs with a missing or "
                                         "non-positive nodes"):
        SchedulingEnv("lublin-256", table, window=64, split="all")


def test_step_after_the_end_says_so():
    env = hpcgym.make("lublin256-v0", window=32)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, done, _, _ = env.step(0)
    with pytest.raises(ValueError, match="call reset"):
        env.step(0)


def test_the_toy_fixture_env_runs_an_episode_checkably():
    from hpcgym.testing import toy_env

    env = toy_env(backfill="easy")
    obs, info = env.reset(seed=0)
    steps, done = 0, info["done"]
    while not done:
        obs, reward, done, _, info = env.step(0)  # always the oldest waiting job: FCFS
        steps += 1
    rec = pd.DataFrame(info["records"])
    assert len(rec) == 16 and (rec["start"] >= rec["submit"]).all() and steps >= 1
    expected = start_times(env.jobs, 4, priorities.FCFS, "easy")  # FCFS head + FCFS scan == the batch schedule
    assert np.array_equal(rec["start"].to_numpy(), expected)


def test_time_scale_fixes_the_features_across_workloads():
    jobs = traces.load("lublin-256")
    short, long = jobs.iloc[:2000].copy(), jobs.iloc[:2000].copy()
    long.loc[long.index[-1], "walltime"] = 50 * long["walltime"].max()  # one far longer job, after the window
    kwargs = dict(machine="lublin-256", window=64, split="all", backfill="easy")
    default = [SchedulingEnv(workload=w, **kwargs) for w in (short, long)]
    assert default[1].time_scale > default[0].time_scale  # by default, the workload's own longest walltime
    pinned = [SchedulingEnv(workload=w, time_scale=default[0].time_scale, **kwargs) for w in (short, long)]
    first = [env.reset(seed=0, options={"window_start": 0})[0] for env in default + pinned]
    assert not np.array_equal(first[0], first[1])  # the same jobs look different under two scales
    assert np.array_equal(first[2], first[3]) and np.array_equal(first[0], first[2])
    with pytest.raises(ValueError, match="time_scale"):
        SchedulingEnv(workload=short, time_scale=0, **kwargs)


def test_a_workload_that_never_queues_raises_no_decision_error():
    import pickle

    from hpcgym.errors import HpcgymError, NoDecisionError
    from hpcgym.testing import TOY, make_jobs

    # one 1-node job of 60 s every hour on the 4-node toy machine: every job starts on arrival
    idle = make_jobs([(3600 * i, 60, 120, 1) for i in range(40)])
    env = SchedulingEnv(workload=idle, machine=TOY, window=8, split="all", backfill="easy")
    with pytest.raises(NoDecisionError) as caught:
        env.reset(seed=0)
    exc = caught.value
    assert isinstance(exc, RuntimeError) and isinstance(exc, HpcgymError)  # old callers caught RuntimeError
    assert (exc.windows, exc.window) == (hpcgym.env.MAX_REDRAWS, 8)
    # each window: 8 jobs x 1 node x 60 s of work over 7 hours of submits on 4 nodes
    assert exc.offered_load == pytest.approx(8 * 60 / (4 * 7 * 3600))
    assert "100 windows of 8 jobs in a row needed no decision" in str(exc) and "--window" in str(exc)
    again = pickle.loads(pickle.dumps(exc))  # study workers send it back to the driver
    assert str(again) == str(exc) and again.offered_load == exc.offered_load
    # a pinned window is played even when it needs no decision: the episode is over at once
    _, info = env.reset(seed=0, options={"window_start": 0})
    assert info["done"]
