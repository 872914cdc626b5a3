"""``fastvec.spaces.actions.ActionChecker``: which batches are accepted (converted to the
space's dtype, split per env as Gymnasium's ``iterate`` would) and which are
refused, with a message naming the env, the leaf and what was expected.

The range check it calls (``find_out_of_range``): ``tests/kernels/test_stacking.py``;
bad actions through every vector env: ``tests/vector/test_contract_errors.py``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, iterate
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fastvec.spaces.actions import ActionChecker


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


def test_tuple_space_needs_a_tuple_of_one_batch_per_part():
    space = spaces.Tuple((spaces.Discrete(2), spaces.Box(-1, 1, (), np.float32)))
    with pytest.raises(ValueError, match=r"actions as a tuple of 2 batches, each for 3 envs, "
                                         "got list"):
        checker(space, 3).check([np.zeros(3, np.int64)])
    with pytest.raises(ValueError, match=r"tuple of 2 batches, each for 3 envs, got tuple"):
        checker(space, 3).check((np.zeros(3, np.int64),))
    checked, per_env = check_and_split(space, 3, [np.array([0, 1, 1]), np.zeros(3)])
    assert isinstance(checked, tuple) and checked[1].dtype == np.float32
    assert [int(a[0]) for a in per_env] == [0, 1, 1]


def test_other_spaces_are_checked_for_length_only():
    word = spaces.Text(max_length=3)
    checked, per_env = check_and_split(word, 3, ("a", "bb", "ccc"))
    assert checked == ("a", "bb", "ccc") and per_env == ["a", "bb", "ccc"]
    with pytest.raises(ValueError, match=r"expected actions for 3 envs, got 2"):
        checker(word, 3).check(("a", "b"))
    inside = spaces.Dict({"say": word, "move": spaces.Discrete(2)})
    with pytest.raises(ValueError, match=r'expected actions\["say"\] for 3 envs, got 1'):
        checker(inside, 3).check({"say": ("a",), "move": np.zeros(3, np.int64)})


@pytest.mark.parametrize("space, actions, dtype", [
    (spaces.Box(-1, 1, (2,), np.float32), np.zeros((3, 2), np.float16), np.float32),
    (spaces.Box(-1, 1, (2,), np.float64), np.zeros((3, 2), np.float32), np.float64),
    (spaces.Box(0, 9, (2,), np.int32), np.zeros((3, 2), np.int64), np.int32),
    (spaces.Box(0, 9, (2,), np.int64), np.zeros((3, 2), np.uint8), np.int64),
], ids=["f16-to-f32", "f32-to-f64", "i64-to-i32", "u8-to-i64"])
def test_same_kind_box_batches_are_converted(space, actions, dtype):
    checked, per_env = check_and_split(space, 3, actions)
    assert checked.dtype == dtype and checked.shape == (3, 2)
    assert len(per_env) == 3 and all(a.dtype == dtype and a.shape == (2,) for a in per_env)


@pytest.mark.parametrize("space, actions, expected", [
    (spaces.Box(-1, 1, (2,), np.float32), np.zeros((3, 2), complex),
     "of dtype float32 (or one that converts to it) for 3 envs, got complex128"),
    (spaces.Box(0, 9, (2,), np.int32), np.zeros((3, 2), np.float32),
     "of dtype int32 (or one that converts to it) for 3 envs, got float32"),
    (spaces.MultiBinary(2), np.zeros((3, 2), np.float64), "integer actions for 3 envs"),
    (spaces.Box(-1, 1, (2,), np.float32), np.zeros((3, 2, 1), np.float32),
     "of shape (3, 2) for 3 envs (one action of shape (2,) each), got shape (3, 2, 1)"),
], ids=["complex-for-float", "float-for-int-box", "float-for-multibinary", "extra-dim"])
def test_refused_dtypes_and_shapes_say_what_would_do(space, actions, expected):
    with pytest.raises(ValueError) as err:
        checker(space, 3).check(actions)
    assert expected in str(err.value), str(err.value)


@pytest.mark.parametrize("space", [spaces.Discrete(4), spaces.Box(-1, 1, (2,), np.float32),
                                   spaces.MultiDiscrete([2, 3])], ids=["discrete", "box",
                                                                        "multidiscrete"])
def test_checked_batches_are_fresh_copies(space):
    actions = np.zeros((3, *space.shape), dtype=space.dtype)
    checked, per_env = check_and_split(space, 3, actions)
    assert not np.shares_memory(checked, actions), "the envs could see later edits"
    actions[...] = 1
    assert not checked.any()


def test_out_of_range_names_the_first_bad_env_and_the_bounds():
    space = spaces.MultiDiscrete([3, 4], start=[1, -2])
    actions = np.array([[1, -2], [3, 1], [4, 0], [0, 9]])
    with pytest.raises(ValueError) as err:
        checker(space, 4).check(actions)
    message = str(err.value)
    assert re.search(r"\benv 2\b.*got 4, expected values in \[1, 3\]", message), message
    assert "env 3" not in message


def test_game_rows_are_named_by_row_game_and_agent():
    agents = ("north", "south")
    space = spaces.Discrete(3)
    games = ActionChecker(space, batch_space(space, 6), 6, agents)
    with pytest.raises(ValueError, match=r"the action for row 3 \(game 1, agent 'south'\) is "
                                         r"out of range: got 5"):
        games.check(np.array([0, 0, 0, 5, 0, 0]))
    with pytest.raises(ValueError, match=r"shape \(6,\) for 6 rows, 3 games of 2 agents"):
        games.check(np.zeros(4, np.int64))


def test_a_batch_for_some_envs_names_them_by_their_env_ids():
    space = spaces.Discrete(3)
    some = checker(space, 2)
    ids = np.array([4, 5])
    with pytest.raises(ValueError, match=r"the action for env 5 is out of range"):
        some.check(np.array([0, 9]), env_ids=ids)
    with pytest.raises(ValueError, match=r"for the 2 envs env_ids \[4, 5\]"):
        some.check(np.zeros(3, np.int64), env_ids=ids)


@pytest.mark.parametrize("space, actions, expected", [
    (spaces.Discrete(3), [0, [1, 1], 2], "the action for env 1 has shape (2,)"),
    (spaces.Box(-1, 1, (2,), np.float32), [[0, 0], [0, 0], [0]],
     "the action for env 2 has shape (1,)"),
    (spaces.Discrete(3), np.array([0.0, 1.5, 2.0]), "got dtype float64 (env 1: 1.5)"),
    (spaces.Box(-1, 1, (2,), np.float32), [[0, 0], [None, 0], [0, 0]],
     "got object (env 1: None)"),
], ids=["ragged-discrete", "ragged-box", "fraction", "none"])
def test_the_env_whose_action_differs_from_the_others_is_named(space, actions, expected):
    with pytest.raises(ValueError) as err:
        checker(space, 3).check(actions)
    assert expected in str(err.value), str(err.value)
