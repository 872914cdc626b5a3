"""Batch stacking and action checks, against numpy item assignment and one-liners."""

from __future__ import annotations

import re

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, iterate
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fastvec._actions import ActionChecker
from fastvec._kernels.stacking import find_out_of_range, stack_flags, stack_rewards

NUMPY_SCALAR_TYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                      np.int64, np.uint64, np.float16, np.float32, np.float64, np.longdouble]

# -- stack_rewards / stack_flags -----------------------------------------------------


numpy_scalars = st.sampled_from(NUMPY_SCALAR_TYPES).flatmap(
    lambda t: hnp.from_dtype(np.dtype(t)).map(t))


step_values = st.one_of(
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    numpy_scalars,
    numpy_scalars.map(np.asarray),  # 0-d arrays
    st.fractions(),
)


def numpy_assign(values, dtype):
    out = np.zeros(len(values), dtype=dtype)
    for i, value in enumerate(values):
        out[i] = value
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(step_values, max_size=12))
def test_stack_rewards_matches_item_assignment(values):
    out = np.full(len(values), -7.0)
    stack_rewards(values, out)
    np.testing.assert_array_equal(out, numpy_assign(values, np.float64), strict=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(step_values, max_size=12))
def test_stack_flags_matches_item_assignment(values):
    out = np.ones(len(values), dtype=np.bool_)
    out[::2] = False
    stack_flags(values, out)
    np.testing.assert_array_equal(out, numpy_assign(values, np.bool_), strict=True)


@pytest.mark.parametrize("scalar_type", NUMPY_SCALAR_TYPES)
def test_every_numpy_scalar_type(scalar_type):
    values = [scalar_type(0), scalar_type(1), scalar_type(True), np.asarray(scalar_type(1))]
    rewards = np.empty(len(values))
    flags = np.empty(len(values), dtype=np.bool_)
    stack_rewards(values, rewards)
    stack_flags(values, flags)
    np.testing.assert_array_equal(rewards, [0.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(flags, [False, True, True, True])


def test_longer_output_keeps_its_tail():
    rewards = np.full(4, 9.0)
    flags = np.ones(4, dtype=np.bool_)
    stack_rewards([1, 2.5], rewards)
    stack_flags([0, False], flags)
    np.testing.assert_array_equal(rewards, [1.0, 2.5, 9.0, 9.0])
    np.testing.assert_array_equal(flags, [False, False, True, True])


def test_empty_inputs():
    stack_rewards([], np.empty(0))
    stack_flags([], np.empty(0, dtype=np.bool_))


def test_output_too_short():
    with pytest.raises(ValueError, match="at least 3 rewards, got 2"):
        stack_rewards([1.0, 2.0, 3.0], np.zeros(2))
    with pytest.raises(ValueError, match="at least 2 flags, got 1"):
        stack_flags([True, False], np.zeros(1, dtype=np.bool_))


def test_unconvertible_values_raise():
    # numpy's own assignment raises for these too (TypeError / ValueError / OverflowError).
    for bad in (1 + 2j, [1.0, 2.0], 2**1100, object()):
        with pytest.raises((TypeError, ValueError, OverflowError)):
            stack_rewards([0.0, bad], np.zeros(2))
    with pytest.raises(ValueError):  # the truth value of an array is ambiguous
        stack_flags([np.array([True, False])], np.zeros(1, dtype=np.bool_))


def test_wrong_output_dtype_or_layout():
    with pytest.raises(ValueError):
        stack_rewards([1.0], np.zeros(1, dtype=np.float32))
    with pytest.raises(ValueError):
        stack_rewards([1.0, 2.0], np.zeros(4)[::2])
    with pytest.raises(ValueError):
        stack_flags([True], np.zeros(1, dtype=np.int8))


# -- find_out_of_range ---------------------------------------------------------------

def first_out_of_range(values, low, high):
    bad = np.argwhere((values < low) | (values > high))
    return None if len(bad) == 0 else tuple(int(x) for x in bad[0])


@st.composite
def batches_and_bounds(draw):
    rows = draw(st.integers(0, 6))
    cols = draw(st.integers(0, 5))
    limit = draw(st.sampled_from([3, 1000, 2**62]))
    ints = st.integers(-limit, limit)
    low = np.array(draw(st.lists(ints, min_size=cols, max_size=cols)), dtype=np.int64)
    width = np.array(draw(st.lists(st.integers(0, limit), min_size=cols, max_size=cols)),
                     dtype=np.int64)
    high = low + width
    values = draw(hnp.arrays(np.int64, (rows, cols), elements=st.one_of(
        ints, st.sampled_from([np.iinfo(np.int64).min, np.iinfo(np.int64).max]))))
    return values, low, high


@settings(max_examples=300, deadline=None)
@given(batches_and_bounds())
def test_find_out_of_range_matches_numpy(case):
    values, low, high = case
    assert find_out_of_range(values, low, high) == first_out_of_range(values, low, high)


@pytest.mark.parametrize("shape", [(0, 3), (4, 0), (0, 0)])
def test_find_out_of_range_empty(shape):
    cols = shape[1]
    values = np.zeros(shape, np.int64)
    assert find_out_of_range(values, np.zeros(cols, np.int64), np.zeros(cols, np.int64)) is None


def test_find_out_of_range_bounds_are_inclusive():
    low, high = np.array([-2, 0], np.int64), np.array([2, 0], np.int64)
    assert find_out_of_range(np.array([[-2, 0], [2, 0]], np.int64), low, high) is None
    assert find_out_of_range(np.array([[-2, 0], [3, 0]], np.int64), low, high) == (1, 0)
    assert find_out_of_range(np.array([[-2, 0], [2, -1]], np.int64), low, high) == (1, 1)


def test_find_out_of_range_argument_errors():
    values = np.zeros((2, 3), np.int64)
    three = np.zeros(3, np.int64)
    with pytest.raises(ValueError, match="bounds of length 3, got 2 and 3"):
        find_out_of_range(values, np.zeros(2, np.int64), three)
    with pytest.raises(ValueError, match="bounds of length 3, got 3 and 4"):
        find_out_of_range(values, three, np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="int64"):
        find_out_of_range(values.astype(np.int32), three, three)
    with pytest.raises(ValueError, match="int64"):
        find_out_of_range(values, three.astype(np.uint64), three)
    with pytest.raises(ValueError, match="C-contiguous"):
        find_out_of_range(np.zeros((3, 2), np.int64).T, three, three)
    with pytest.raises(ValueError, match="2-D"):
        find_out_of_range(three, three, three)
    with pytest.raises(TypeError):
        find_out_of_range([[0, 0, 0]], three, three)


# -- ActionChecker -------------------------------------------------------------------

def checker(space, num_envs):
    return ActionChecker(space, batch_space(space, num_envs), num_envs)


def check_and_split(space, num_envs, actions):
    c = checker(space, num_envs)
    checked = c.check(actions)
    return checked, c.split(checked)


def assert_env_named(message, env):
    assert re.search(rf"\benv {env}\b", message), message


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), st.integers(-4, 4), st.integers(1, 5),
       st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16]),
       st.data())
def test_discrete_with_start(n, start, num_envs, dtype, data):
    space = spaces.Discrete(n, start=start)
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), start - 2), min(int(info.max), start + n + 1)
    if lo > hi:  # an unsigned dtype below a negative range: every value is outside
        lo, hi = 0, 3
    values = data.draw(hnp.arrays(dtype, (num_envs,), elements=st.integers(lo, hi)))
    outside = (values < start) | (values > start + n - 1)
    if outside.any():
        with pytest.raises(ValueError) as err:
            checker(space, num_envs).check(values)
        assert_env_named(str(err.value), int(np.flatnonzero(outside)[0]))
        assert f"[{start}, {start + n - 1}]" in str(err.value)
    else:
        checked, per_env = check_and_split(space, num_envs, values)
        assert checked.dtype == space.dtype and checked.shape == (num_envs,)
        np.testing.assert_array_equal(checked, values.astype(np.int64))
        assert all(space.contains(a) for a in per_env)
        assert [int(a) for a in per_env] == values.tolist()


def test_discrete_rejects_huge_unsigned_actions():
    space = spaces.Discrete(3, start=-1)
    with pytest.raises(ValueError):
        checker(space, 2).check(np.array([0, 2**64 - 1], dtype=np.uint64))


def test_discrete_accepts_lists_and_bools():
    checked, per_env = check_and_split(spaces.Discrete(2), 3, [True, 0, 1])
    np.testing.assert_array_equal(checked, [1, 0, 1])
    assert checked.dtype == np.int64


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), st.data())
def test_multi_discrete_2d_nvec(num_envs, data):
    nvec = data.draw(hnp.arrays(np.int64, (2, 3), elements=st.integers(1, 4)))
    start = data.draw(hnp.arrays(np.int64, (2, 3), elements=st.integers(-3, 3)))
    space = spaces.MultiDiscrete(nvec, start=start)
    values = data.draw(hnp.arrays(np.int64, (num_envs, 2, 3), elements=st.integers(-5, 8)))
    outside = (values < start) | (values > start + nvec - 1)
    if outside.any():
        with pytest.raises(ValueError) as err:
            checker(space, num_envs).check(values)
        env = int(np.argwhere(outside)[0][0])
        assert_env_named(str(err.value), env)
    else:
        checked, per_env = check_and_split(space, num_envs, values)
        assert checked.dtype == space.dtype and checked.shape == (num_envs, 2, 3)
        np.testing.assert_array_equal(checked, values)
        assert all(space.contains(a) for a in per_env)


def test_multi_binary():
    space = spaces.MultiBinary([2, 2])
    actions = np.array([[[0, 1], [1, 1]], [[0, 0], [1, 0]]], dtype=np.int64)
    checked, per_env = check_and_split(space, 2, actions)
    assert checked.dtype == np.int8
    np.testing.assert_array_equal(checked, actions)
    assert all(space.contains(a) for a in per_env)
    actions[1, 0, 1] = 2
    with pytest.raises(ValueError, match=r"env 1\b.*got 2.*\[0, 1\]"):
        checker(space, 2).check(actions)


def test_box_float32_fed_float64_is_converted():
    space = spaces.Box(-1, 1, (2,), np.float32)
    actions = np.array([[0.5, 2.0], [-3.0, 0.1]])  # outside the bounds passes through
    checked, per_env = check_and_split(space, 2, actions)
    assert checked.dtype == np.float32 and checked.shape == (2, 2)
    np.testing.assert_array_equal(checked, actions.astype(np.float32))
    assert all(a.dtype == np.float32 and a.shape == (2,) for a in per_env)
    assert not np.shares_memory(checked, actions)


@pytest.mark.parametrize("space, actions, expected", [
    (spaces.Box(-1, 1, (2,), np.float32), np.zeros((3, 2)), "(2, 2)"),
    (spaces.Box(-1, 1, (2,), np.float32), np.zeros((2, 3)), "(2, 2)"),
    (spaces.Box(-1, 1, (2,), np.float32), 0.5, "a scalar"),
    (spaces.Discrete(3), 1, "a scalar"),
    (spaces.Discrete(3), [0, 1, 2], "(2,)"),
    (spaces.MultiDiscrete([[2, 3], [4, 5]]), np.zeros((2, 4), np.int64), "(2, 2, 2)"),
    (spaces.Discrete(3), np.zeros(2), "float64"),
    (spaces.Box(0, 1, (2,), np.int32), np.zeros((2, 2)), "float64"),
], ids=["box-batch", "box-shape", "box-scalar", "discrete-scalar", "discrete-length",
        "multidiscrete-shape", "discrete-float", "int-box-float"])
def test_rejected_batches_say_what_was_expected(space, actions, expected):
    with pytest.raises(ValueError) as err:
        checker(space, 2).check(actions)
    assert expected in str(err.value), str(err.value)


DICT_SPACE = spaces.Dict({
    "move": spaces.Discrete(4, start=1),
    "arm": spaces.Tuple((spaces.MultiBinary(3), spaces.Box(-1, 1, (), np.float32))),
})


def good_dict_actions():
    return {"move": np.array([1, 4, 2]),
            "arm": (np.array([[0, 1, 0], [1, 1, 1], [0, 0, 0]]), np.array([0.5, -0.5, 0.0]))}


def test_dict_tuple_actions_convert_and_split():
    actions = good_dict_actions()
    checked, per_env = check_and_split(DICT_SPACE, 3, actions)
    assert checked["move"].dtype == np.int64
    assert checked["arm"][0].dtype == np.int8 and checked["arm"][1].dtype == np.float32
    expected = list(iterate(batch_space(DICT_SPACE, 3), {
        "move": actions["move"],
        "arm": (actions["arm"][0].astype(np.int8), actions["arm"][1].astype(np.float32))}))
    assert len(per_env) == 3
    for got, want in zip(per_env, expected, strict=True):
        assert DICT_SPACE["move"].contains(got["move"])
        assert got["move"] == want["move"]
        np.testing.assert_array_equal(got["arm"][0], want["arm"][0], strict=True)
        np.testing.assert_array_equal(got["arm"][1], want["arm"][1], strict=True)


@pytest.mark.parametrize("mutate, names", [
    (lambda a: a.pop("arm"), ['"arm"']),
    (lambda a: a.update(move=np.array([1, 5, 2])), ['actions["move"]', "env 1"]),
    (lambda a: a.update(move=np.array([1, 2])), ['actions["move"]', "(3,)"]),
    (lambda a: a.update(arm=(a["arm"][0],)), ['actions["arm"]', "2"]),
    (lambda a: a["arm"][0].__setitem__((2, 1), 3), ['actions["arm"][0]', "env 2"]),
    (lambda a: a.update(arm=(a["arm"][0], np.zeros((3, 1)))), ['actions["arm"][1]', "(3,)"]),
], ids=["missing-key", "out-of-range", "short-batch", "short-tuple", "multibinary-2",
        "box-shape"])
def test_dict_tuple_rejections_name_the_leaf(mutate, names):
    actions = good_dict_actions()
    mutate(actions)
    with pytest.raises(ValueError) as err:
        checker(DICT_SPACE, 3).check(actions)
    for name in names:
        assert name in str(err.value), str(err.value)


def test_dict_space_needs_a_dict():
    with pytest.raises(ValueError, match="dict"):
        checker(DICT_SPACE, 3).check([1, 2, 3])
