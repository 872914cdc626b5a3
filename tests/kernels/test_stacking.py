"""Batch stacking and range checks, against numpy item assignment and one-liners.

The action checks built on ``find_out_of_range`` (``fastvec.spaces.actions``):
``tests/spaces/test_actions.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

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
