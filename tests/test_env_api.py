"""Bad input to the environment API, by family: each mistake is one clear error that names the argument.

Every case runs on the single environment and on the vector environment (a new kind of environment joins the
``KINDS`` list and inherits them). Readers' and CLIs' bad inputs have their own families (``test_inputs_*.py``,
``test_cli.py``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import hpcgym

warnings.filterwarnings("ignore", category=UserWarning)

ENV_ID, WINDOW = "lublin256-v0", 64


def single(**kw):
    return hpcgym.make(ENV_ID, **{"window": WINDOW, **kw})


def vector(**kw):
    return hpcgym.make_vec(ENV_ID, num_envs=2, **{"window": WINDOW, **kw})


KINDS = [single, vector]


def refused(error, words, call, *args, **kwargs):
    """``call(*args, **kwargs)`` raises ``error`` whose message holds ``words``."""
    with pytest.raises(error) as caught:
        call(*args, **kwargs)
    assert words in str(caught.value)

#: (keyword arguments, exception, words of the message)
BAD_ARGUMENTS = [
    ({"window": 2.5}, ValueError, "window must be a whole number"),
    ({"window": 1}, ValueError, "window must be >= 2"),
    ({"slots": 0}, ValueError, "slots >= 1"),
    ({"slots": "8"}, ValueError, "slots must be a whole number"),
    ({"window": 10**7}, ValueError, "fewer than window=10000000"),
    ({"objective": "slowdown"}, ValueError, "objective must be one of"),
    ({"reward": "sign"}, ValueError, "reward must be one of"),
    ({"backfill": "conservative"}, ValueError, "step mode supports backfill"),
    ({"invalid_action": "ignore"}, ValueError, "invalid_action must be 'raise' or 'wrap'"),
    ({"time_scale": -5}, ValueError, "time_scale must be a positive number"),
    ({"split": "validation"}, ValueError, "split must be 'train', 'test' or 'all'"),
    ({"train_fraction": 1.5}, ValueError, "train_fraction must be in (0, 1)"),
    ({"baseline": "sjff"}, KeyError, "Unknown policy 'sjff'"),
    ({"order": "wfp"}, KeyError, "Unknown policy 'wfp'"),
    ({"compare_with": ("fcfs", "nope")}, KeyError, "Unknown policy 'nope'"),
    ({"workload": 42}, TypeError, "workload must be"),
]


@pytest.mark.parametrize("make", KINDS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kwargs, error, words", BAD_ARGUMENTS, ids=[str(b[0]) for b in BAD_ARGUMENTS])
def test_bad_constructor_arguments(make, kwargs, error, words):
    refused(error, words, make, **kwargs)


#: (options for the single env, options for the vector env, exception, words of the message)
BAD_OPTIONS = [
    ({"start": 0}, {"start": [0, 0]}, ValueError, "unknown reset option 'start': the options are ['window_start']"),
    ("x", "x", TypeError, "options must be a dict"),
    ({"window_start": 2.5}, {"window_start": [2.5, 3]}, ValueError,
     "options['window_start'] must be a whole number, not 2.5"),
    ({"window_start": True}, {"window_start": [True, 3]}, TypeError, "options['window_start'] must be an integer"),
    ({"window_start": -1}, {"window_start": [0, -1]}, ValueError, "window_start must be in [0, "),
    ({"window_start": 10**9}, {"window_start": [10**9, 0]}, ValueError, "window_start must be in [0, "),
]


@pytest.mark.parametrize("make", KINDS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("one, both, error, words", BAD_OPTIONS, ids=[str(b[0]) for b in BAD_OPTIONS])
def test_bad_reset_options(make, one, both, error, words):
    refused(error, words, make().reset, seed=0, options=one if make is single else both)


@pytest.mark.parametrize("rows", [3, [1], [1, 2, 3]])
def test_vector_window_starts_need_one_row_per_copy(rows):
    with pytest.raises(ValueError, match=r"options\['window_start'\] needs one row per copy \(2\)"):
        vector().reset(seed=0, options={"window_start": rows})


@pytest.mark.parametrize("make", KINDS, ids=lambda f: f.__name__)
def test_a_pinned_whole_float_is_a_row(make):
    env = make()
    env.reset(seed=0, options={"window_start": 5.0} if make is single else {"window_start": [5.0, np.int64(6)]})
    starts = [env.unwrapped._window.start_row] if make is single else [e._window.start_row for e in env.unwrapped.envs]
    assert starts == ([5] if make is single else [5, 6])


@pytest.mark.parametrize("actions, error, words", [
    ([0, 0, 0], ValueError, "step takes one action per copy (2), got 3"),
    ([0], ValueError, "step takes one action per copy (2), got 1"),
    (0, ValueError, "step takes one action per copy (2), got 1"),
    ([0.5, 0], ValueError, "actions must be integer slots"),
    (["a", "b"], ValueError, "actions must be integer slots"),
])
def test_bad_vector_actions(actions, error, words):
    env = vector()
    env.reset(seed=0)
    refused(error, words, env.step, actions)


@pytest.mark.parametrize("action, error, words", [
    (2.5, ValueError, "action must be a whole number"),
    (True, TypeError, "action must be an integer"),
    ("0", ValueError, "action must be a whole number"),
    (None, TypeError, "action must be an integer"),
])
def test_bad_single_actions(action, error, words):
    env = single()
    env.reset(seed=0)
    refused(error, words, env.step, action)


@pytest.mark.parametrize("num_envs, error, words", [
    (0, ValueError, "num_envs must be >= 1"),
    (2.5, ValueError, "num_envs must be a whole number"),
    ("two", TypeError, "num_envs must be an integer"),
])
def test_bad_copy_counts(num_envs, error, words):
    refused(error, words, hpcgym.make_vec, ENV_ID, num_envs=num_envs, window=WINDOW)


@pytest.mark.parametrize("make", KINDS, ids=lambda f: f.__name__)
def test_seeds_are_checked(make):
    env = make()
    with pytest.raises(Exception, match="Seed must be"):
        env.reset(seed=-1)
