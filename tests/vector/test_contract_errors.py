"""What every backend does with bad input: bad constructor arguments, an env that
raises, bad actions (refused before any env steps, the env stays usable), and
observations that do not fit their space (the error names env and key path).

Failures of processes (a worker that dies, hangs or is restarted) are
``SubprocVecEnv``'s own: see ``test_faults.py``.
"""

from __future__ import annotations

import re
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from tests.support import leaks
from tests.support.backends import RAY, SYNC, skip_async
from tests.support.compare import assert_obs_equal, assert_tree_equal
from tests.support.envs import (
    BAD_OBS_PATH,
    ActionEchoEnv,
    AnyActionEnv,
    BadObsEnv,
    CountingEnv,
    EnvBoom,
    ProbeEnv,
    RaisingEnv,
    SyntheticEnv,
    make_fns,
)

N = 6

# ---------------------------------------------------------------------------
# constructor arguments


@pytest.mark.fastvec_only
def test_unknown_autoreset_mode_is_a_value_error(make_envs):
    with pytest.raises(ValueError, match="'NextStep', 'SameStep', 'Disabled'"):
        make_envs(make_fns(CountingEnv, 2), autoreset_mode="EveryOtherStep")
    with pytest.raises(ValueError, match="got 3"):
        make_envs(make_fns(CountingEnv, 2), autoreset_mode=3)


@pytest.mark.fastvec_only
def test_no_env_functions_is_a_value_error(make_envs):
    with pytest.raises(ValueError):
        make_envs([])


@pytest.mark.fastvec_only
def test_envs_with_different_spaces_are_a_value_error_naming_the_env(make_envs):
    layouts = ["dict"] * 4 + ["tuple", "dict"]  # env 4: a worker's first env
    with pytest.raises(ValueError, match=r"\benv 4\b") as caught:
        make_envs(make_fns(SyntheticEnv, N, per_env={"layout": layouts}))
    # also what Gymnasium's vector envs raise, so code written for them catches it
    assert isinstance(caught.value, RuntimeError)
    assert leaks.wait_no_children(2.0) == [], "a failed constructor left workers behind"


# ---------------------------------------------------------------------------
# env functions that return no env, or cannot be pickled: EnvFnError (a TypeError and a
# ValueError) naming the env function, raised in the trainer; what was made is closed,
# no worker is left behind


def returns_none():
    return None


def returns_a_number():
    return 3


def returns_the_class():
    return CountingEnv


# id -> (bad env function, its index, what the message says it returned)
NOT_AN_ENV = {
    "none": (returns_none, 4, r"env_fns\[4\] returned None \(NoneType\)"),
    "number": (returns_a_number, 4, r"env_fns\[4\] returned 3 \(int\)"),
    "class": (returns_the_class, 4,
              r"env_fns\[4\] returned the class CountingEnv, not an instance of it"),
    "none_first": (returns_none, 0, r"env_fns\[0\] returned None"),  # the local block's
}


@pytest.mark.fastvec_only
@pytest.mark.parametrize("case", list(NOT_AN_ENV))
def test_an_env_fn_that_returns_no_env_is_an_env_fn_error(case, impl, make_envs, tmp_path):
    bad_fn, bad, returned = NOT_AN_ENV[case]
    log = tmp_path / "closed"
    fns = make_fns(ProbeEnv, N, close_log=str(log))
    fns[bad] = bad_fn
    with pytest.raises(impl.errors.EnvFnError) as caught:
        make_envs(fns)
    error = caught.value
    assert isinstance(error, TypeError) and isinstance(error, ValueError)
    message = str(error)
    assert re.search(returned, message), message
    assert "expected a gymnasium.Env (or a PettingZoo game" in message, message
    assert leaks.wait_no_children(2.0) == [], "a failed constructor left workers behind"
    closed = [int(line) for line in log.read_text().split()] if log.exists() else []
    assert len(closed) == len(set(closed)), f"an env was closed twice: {closed}"
    assert bad not in closed
    if bad == 4:  # envs 0..3 were made (by every backend) and closed; env 5 if it was made
        assert set(range(4)) <= set(closed) <= {0, 1, 2, 3, 5}, closed


# what is passed as env_fns -> what the message says (before any env is made)
NOT_FUNCTIONS = {
    "an env made": (lambda: [CountingEnv()] * 2,
                    r"env_fns\[0\] is .*\(CountingEnv\), not a function that makes an env "
                    r"\(an env already made: .* e\.g\. CountingEnv or lambda: CountingEnv"),
    "a number among functions": (lambda: [CountingEnv, 3],
                                 r"env_fns\[1\] is 3 \(int\), not a function that makes an env"),
    "a module": (lambda: [gym] * 2, r"env_fns\[0\] is the module gymnasium, not a function"),
}


@pytest.mark.fastvec_only
@pytest.mark.parametrize("case", list(NOT_FUNCTIONS))
def test_env_fns_that_are_not_functions_are_an_env_fn_error(case, impl, make_envs):
    given, message = NOT_FUNCTIONS[case]
    with pytest.raises(impl.errors.EnvFnError, match=message):
        make_envs(given())
    assert leaks.wait_no_children(2.0) == [], "a failed constructor left workers behind"


@pytest.mark.fastvec_only
def test_one_function_in_place_of_a_list_is_an_env_fn_error(impl):
    for vector_env in (impl.SyncVecEnv, impl.SubprocVecEnv):
        with pytest.raises(impl.errors.EnvFnError,
                           match=r"expected env_fns to be a list of functions that each make "
                                 r"an env, got .*; for n copies of one: \[env_fn\] \* n"):
            vector_env(CountingEnv)


def unpicklable_fns() -> tuple[list, threading.Lock]:
    lock = threading.Lock()  # a lock cannot be pickled
    fns = make_fns(CountingEnv, N)
    fns[4] = lambda: CountingEnv(env_id=4) if lock else None
    return fns, lock


@pytest.mark.fastvec_only
def test_an_env_fn_that_cannot_be_pickled_says_which_and_why(impl, backend, make_envs):
    fns, _ = unpicklable_fns()
    if backend == SYNC:  # nothing is pickled
        assert make_envs(fns).num_envs == N
        return
    with pytest.raises(impl.errors.EnvFnError) as caught:
        make_envs(fns)
    message = str(caught.value)
    hosts = "RayVecEnv's actors" if backend == RAY else "SubprocVecEnv's workers"
    for part in ("env_fns[4] cannot be pickled", f"{hosts} get their env functions by "
                 "cloudpickle", "cannot pickle '_thread.lock' object",
                 "the variable 'lock' it closes over, a _thread.lock",
                 "inside the env function", "functools.partial", "use SyncVecEnv"):
        assert part in message, f"{part!r} not in {message!r}"
    assert isinstance(caught.value.__cause__, TypeError), repr(caught.value.__cause__)
    assert leaks.wait_no_children(2.0) == [], "a failed constructor left workers behind"


# ---------------------------------------------------------------------------
# an env raises


@pytest.mark.parametrize("raise_at", [0, 3], ids=["in_reset", "in_step"])
def test_an_env_exception_reaches_the_caller(raise_at, make_envs):
    fns = make_fns(RaisingEnv, N, per_env={"faulty": [i == 1 for i in range(N)]},
                   raise_at=raise_at)
    vec = make_envs(fns)
    with pytest.raises(Exception) as info:
        vec.reset(seed=0)
        for _ in range(raise_at):
            vec.step(np.zeros(N, dtype=np.int64))
    error = info.value
    # SyncVecEnv (and Gymnasium's AsyncVectorEnv) raise the env's exception; SubprocVecEnv
    # a WorkerError naming it, with the remote traceback as __cause__
    assert isinstance(error, EnvBoom) or isinstance(error.__cause__, EnvBoom) or (
        "EnvBoom" in str(error) and "EnvBoom" in str(error.__cause__)), repr(error)
    assert "env 1 raised on purpose" in str(error) + str(error.__cause__)
    if not isinstance(error, EnvBoom) and hasattr(error, "raised"):  # a WorkerError
        assert error.raised[0] == "EnvBoom" and "env 1 raised on purpose" in error.raised[1]


# ---------------------------------------------------------------------------
# bad actions: a ValueError naming what was expected, before any env steps; the
# env stays usable, with nothing pending.

DISCRETE3 = gym.spaces.Discrete(3)
DISCRETE4 = gym.spaces.Discrete(4)
BOX2 = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
MULTIDISCRETE = gym.spaces.MultiDiscrete([3, 5])

# id -> (action space, num_envs, bad actions, regexes the message must match)
BAD_ACTIONS = {
    "discrete_too_few": (DISCRETE4, 5, np.array([0, 1]), [r"\b5\b"]),
    "discrete_too_many": (DISCRETE4, 5, np.zeros(7, dtype=np.int64), [r"\b5\b"]),
    "discrete_2d": (DISCRETE4, 5, np.zeros((5, 1), dtype=np.int64), [r"\(5,\)|\b5\b"]),
    "discrete_scalar": (DISCRETE4, 5, 1, [r"\b5\b"]),
    "discrete_scalar_one_env": (DISCRETE4, 1, 1, [r"\(1,\)|batch|array|scalar"]),
    "discrete_out_of_range": (
        DISCRETE4, 5, np.array([0, 1, 9, 0, 1]), [r"\b2\b", r"\b4\b|Discrete"]
    ),
    "discrete_negative": (
        DISCRETE4, 7, np.array([0, 0, 0, 0, 0, 0, -1]), [r"\b6\b", r"\b4\b|Discrete"]
    ),
    "discrete_fractional": (DISCRETE4, 5, np.array([0.5, 1.0, 2.0, 0.0, 1.0]), [r"(?i)int"]),
    "box_per_env_shape": (BOX2, 3, np.zeros((3, 3), dtype=np.float32), [r"\(2,\)|\(3, 2\)"]),
    "box_too_few": (BOX2, 3, np.zeros((2, 2), dtype=np.float32), [r"\b3\b"]),
    "box_scalar": (BOX2, 3, 0.5, [r"\(3, 2\)|\(2,\)|\b3\b"]),
    "box_flat": (BOX2, 3, np.zeros(6, dtype=np.float32), [r"\(3, 2\)|\(2,\)"]),
    "multidiscrete_out_of_range": (
        MULTIDISCRETE, 7, np.array([[0, 0]] * 6 + [[1, 9]]), [r"\b6\b", r"\b5\b|MultiDiscrete"]
    ),
    "multidiscrete_shape": (
        MULTIDISCRETE, 3, np.zeros((3, 3), dtype=np.int64), [r"\(2,\)|\(3, 2\)"]
    ),
    # the message says exactly what was expected (for how many envs) and what came
    "short": (DISCRETE3, 4, np.zeros(3, np.int64),
              [r"shape \(4,\) for 4 envs.*got shape \(3,\)"]),
    "long": (DISCRETE3, 4, np.zeros(5, np.int64), [r"shape \(4,\) for 4 envs.*got shape \(5,\)"]),
    "extra-dim": (DISCRETE3, 4, np.zeros((4, 2), np.int64),
                  [r"shape \(4,\) for 4 envs.*got shape \(4, 2\)"]),
    "scalar": (DISCRETE3, 4, 1, [r"shape \(4,\) for 4 envs.*got a scalar"]),
    "float-for-discrete": (DISCRETE3, 4, np.array([0.0, 1.0, 2.0, 0.5]),
                           [r"integer actions for 4 envs.*float64 \(env 3: 0\.5\)"]),
    "none-for-discrete": (DISCRETE3, 4, [0, 1, None, 2], [r"integer actions.*\(env 2: None\)"]),
    "one-env-ragged": (DISCRETE3, 4, [0, [1, 1], 2, 0],
                       [r"action for env 1 has shape \(2,\); expected actions of shape \(4,\)"]),
    "one-box-action-short": (BOX2, 3, [[0.0, 0.0], [0.0], [0.0, 0.0]],
                             [r"action for env 1 has shape \(1,\).*\(one action of shape "
                              r"\(2,\) each\)"]),
    "one-box-action-none": (BOX2, 3, [[0.0, 0.0], [0.0, 0.0], [None, 0.0]],
                            [r"dtype float32.*for 3 envs, got object \(env 2: None\)"]),
    "above": (DISCRETE3, 4, np.array([0, 0, 3, 0]), [r"env 2 .*out of range.*got 3"]),
    "below": (DISCRETE3, 4, np.array([0, -1, 0, 0]), [r"env 1 .*out of range.*got -1"]),
    "far-above": (DISCRETE3, 4, np.array([0, 1, 2, 2**40]), [r"env 3 .*out of range"]),
    "box-shape": (gym.spaces.Box(-1, 1, (2,)), 4, np.zeros((4, 3)),
                  [r"shape \(4, 2\).*got shape \(4, 3\)"]),
    "box-flat": (gym.spaces.Box(-1, 1, (2,)), 4, np.zeros(8),
                 [r"shape \(4, 2\).*got shape \(8,\)"]),
    "box-dtype": (gym.spaces.Box(-1, 1, (2,)), 4, np.zeros((4, 2), complex),
                  [r"dtype float32.*for 4 envs, got complex128"]),
}
# Every message names the env whose action is wrong, or how many envs the batch is for.
NAMES_THE_ENV = r"\benv \d+\b|\b\d+ envs?\b"


def good_actions(space: gym.spaces.Space, num_envs: int) -> np.ndarray:
    return np.stack([np.zeros(space.shape, dtype=space.dtype)] * num_envs)


@pytest.mark.fastvec_only
@pytest.mark.parametrize("case", list(BAD_ACTIONS))
def test_bad_actions_are_value_errors_and_the_env_stays_usable(case, backend, make_envs):
    """``step`` and ``step_async`` both refuse the batch, quickly; no env steps; good
    steps work afterwards, with nothing of the bad batch left behind (obs are zeros)."""
    skip_async(backend, "send() takes a batch's actions; its checks are in test_async.py")
    space, num_envs, actions, patterns = BAD_ACTIONS[case]
    vec = make_envs(make_fns(ActionEchoEnv, num_envs, action_space=space))
    vec.reset(seed=0)
    good = good_actions(space, num_envs)
    vec.step(good)
    for split in (False, True):
        start = time.monotonic()
        with pytest.raises(ValueError) as info:
            vec.step_async(actions) if split else vec.step(actions)
        assert time.monotonic() - start < 0.5
        message = str(info.value)
        for pattern in [*patterns, NAMES_THE_ENV]:
            assert re.search(pattern, message), f"message {message!r} does not match {pattern!r}"
    assert vec.get_attr("step_count") == (1,) * num_envs, "a bad batch reached the envs"
    vec.step_async(good)  # nothing is left pending by the refused calls
    vec.step_wait()
    obs, *_ = vec.step(good)
    assert vec.get_attr("step_count") == (3,) * num_envs
    assert_obs_equal(obs, np.zeros((num_envs, *space.shape)), "obs after good steps")


WORD = gym.spaces.Text(max_length=4, charset="abcdefgh")
DICT_ACTIONS = {
    # shared action rows
    "dict": gym.spaces.Dict({"move": gym.spaces.Discrete(3),
                             "aim": gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)}),
    # by the pipe, per env (a Text leaf has no fixed-size record)
    "dict_with_text": gym.spaces.Dict({"move": gym.spaces.Discrete(3), "word": WORD}),
}


def dict_actions(kind: str, moves: list[int]) -> dict:
    other = {"aim": np.linspace(-1, 1, 2 * N, dtype=np.float32).reshape(N, 2)} \
        if kind == "dict" else {"word": ("a", "bb", "ccc", "dddd", "h", "gg")}
    return {"move": np.array(moves), **other}


@pytest.mark.fastvec_only
@pytest.mark.parametrize("kind", list(DICT_ACTIONS))
def test_a_bad_dict_action_is_refused_before_any_env_sees_it(kind, backend, make_envs,
                                                              make_ref):
    # The whole batch is checked before any env's share goes out.
    skip_async(backend, "a batch split over several send() calls is not checked as one")
    fns = make_fns(AnyActionEnv, N, action_space=DICT_ACTIONS[kind])
    vec, ref = make_envs(fns), make_ref(fns)
    vec.reset(seed=0)
    ref.reset(seed=0)
    with pytest.raises(ValueError, match=r'actions\["move"\]: the action for env 4 is out'):
        vec.step(dict_actions(kind, [0, 1, 2, 0, 7, 1]))
    assert vec.get_attr("step_count") == (0,) * N
    good = dict_actions(kind, [2, 1, 0, 1, 2, 0])
    vec.step(good)
    ref.step(good)
    assert vec.get_attr("step_count") == (1,) * N
    assert_tree_equal(vec.get_attr("last_action"), ref.get_attr("last_action"),
                      "the actions the envs got")


@pytest.mark.fastvec_only
def test_text_actions_reach_their_envs_in_order(make_envs, make_ref):
    fns = make_fns(AnyActionEnv, N, action_space=WORD)
    vec, ref = make_envs(fns), make_ref(fns)
    vec.reset(seed=0)
    ref.reset(seed=0)
    for t in range(3):
        actions = tuple("abcdefgh"[(i + t) % 8] * (1 + (i + t) % 4) for i in range(N))
        vec.step(actions)
        ref.step(actions)
        assert vec.get_attr("last_action") == ref.get_attr("last_action") == actions


@pytest.mark.fastvec_only
def test_a_text_batch_of_the_wrong_length_is_refused(backend, make_envs):
    skip_async(backend, "FullBatches splits the batch by env_ids before send() sees it")
    vec = make_envs(make_fns(AnyActionEnv, N, action_space=WORD))
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=rf"\b{N}\b"):
        vec.step(("a", "b"))
    assert vec.get_attr("step_count") == (0,) * N


# ---------------------------------------------------------------------------
# observations that do not fit the space: ObservationError (a ValueError) naming
# the env index (global, not within a worker's block) and the key path

BAD_ENV = 4  # of 6: a worker's first env with 4 workers, its second with 2
BAD_OBS_PARAMS = [
    pytest.param(kind, fault, at_step, id=f"{kind}-{fault}-{'reset' if at_step == 0 else 'step'}")
    for kind in ("box", "dict", "tuple")
    for fault in ("shape", "dtype")
    for at_step in (0, 2)
]


def bad_obs_fns(kind: str, fault: str, at_step: int, faulty_env: int | None) -> list:
    faulty = [i == faulty_env for i in range(N)]
    return make_fns(
        BadObsEnv, N, per_env={"faulty": faulty}, kind=kind, fault=fault, at_step=at_step
    )


@pytest.mark.parametrize("kind", ["box", "dict", "tuple"])
def test_bad_obs_env_is_fine_when_not_faulty(kind, make_envs):
    vec = make_envs(bad_obs_fns(kind, "shape", 0, faulty_env=None))
    obs, _ = vec.reset(seed=0)
    for _ in range(3):
        obs, *_ = vec.step(np.zeros(N, dtype=np.int64))
    assert vec.observation_space.contains(obs)


@pytest.mark.fastvec_only
@pytest.mark.parametrize("kind, fault, at_step", BAD_OBS_PARAMS)
def test_bad_observation_is_an_observation_error_naming_env_and_path(kind, fault, at_step,
                                                                      impl, make_envs):
    vec = make_envs(bad_obs_fns(kind, fault, at_step, faulty_env=BAD_ENV))
    with pytest.raises(impl.errors.ObservationError) as info:
        vec.reset(seed=0)
        for _ in range(at_step):
            vec.step(np.zeros(N, dtype=np.int64))
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert re.search(rf"\b{BAD_ENV}\b", message), f"env index not named: {message!r}"
    named = set(re.findall(r"\benv (\d+)\b", message))
    assert named <= {str(BAD_ENV)}, f"another env (a local index?) named: {message!r}"
    path = BAD_OBS_PATH[kind]
    if kind == "box":
        assert re.search(r"\bobs", message), f"path not named: {message!r}"
    else:
        assert path in message or path.replace('"', "'") in message, (
            f"path {path} not named: {message!r}"
        )

