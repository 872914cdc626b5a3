"""The info-batching kernel against Gymnasium's own ``VectorEnv._add_info``."""

import collections
import enum
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fastvec._kernels import infos as kernel
from tests.kernels.infos_reference import (
    check_batch,
    check_steps,
    outcome,
    ref_add_info,
)

# --- hand-written cases, one per rule -------------------------------------------------


def test_python_numbers_get_int64_float64_bool_arrays_and_masks():
    out = check_batch([(1, {"i": 3, "f": 2.5, "b": True})], 3)
    assert out["i"].dtype == np.dtype(int) and out["i"].tolist() == [0, 3, 0]
    assert out["f"].dtype == np.float64 and out["b"].dtype == np.bool_
    assert out["_i"].tolist() == [False, True, False]
    assert list(out) == ["i", "_i", "f", "_f", "b", "_b"]


class MyFloat(np.float64):
    pass


class MyInt(np.int16):
    pass


@pytest.mark.parametrize(
    "scalar",
    [
        np.float32(1.5),
        np.float64(-0.0),
        np.float16(3),
        np.int8(-4),
        np.uint16(9),
        np.int64(-(2**63)),
        np.longlong(5),
        np.complex64(1 - 2j),
        np.longdouble(0.1),
        np.timedelta64(3),
        MyFloat(2.5),
        MyInt(7),
    ],
)
def test_numpy_scalars_get_arrays_of_their_own_dtype(scalar):
    out = check_batch([(0, {"x": scalar}), (2, {"x": scalar})], 3)
    assert out["x"].dtype == np.asarray(scalar).dtype


def test_numpy_bool_is_not_a_number_so_it_goes_to_an_object_array():
    out = check_batch([(0, {"x": np.bool_(True)})], 2)
    assert out["x"].dtype == object and out["x"][1] is None


class Color(enum.IntEnum):
    RED = 1


@pytest.mark.parametrize("odd", ["text", None, [1, 2], (3,), Color.RED, object(), b"raw"])
def test_other_values_go_to_object_arrays_by_reference(odd):
    out = check_batch([(1, {"x": odd})], 2)
    assert out["x"].dtype == object and out["x"][1] is odd and out["x"][0] is None


@pytest.mark.parametrize("shape", [(), (1,), (3,), (2, 3), (0, 2)])
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int16, np.uint8, np.bool_, "U3", "M8[s]", ">f4", object]
)
def test_array_values_get_a_leading_env_axis(shape, dtype):
    value = np.ones(shape, dtype=dtype)
    out = check_batch([(0, {"x": value}), (1, {"x": np.full(shape, 2).astype(dtype)})], 3)
    assert out["x"].shape == (3, *shape) and out["x"].dtype == value.dtype


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(6.0)[::2],
        lambda: np.asfortranarray(np.ones((3, 2)).T),
        lambda: np.ones(3).astype(">f8"),
        lambda: np.ones(3, dtype=np.float32),
        lambda: np.ones((1,)),
        lambda: np.ones((2,)),
        lambda: np.arange(3).view(np.matrix),
        lambda: np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0]),
    ],
    ids=[
        "strided",
        "fortran",
        "byteswapped",
        "other-dtype",
        "broadcast",
        "bad-shape",
        "matrix",
        "masked",
    ],
)
def test_later_arrays_are_assigned_with_numpy_casting_and_errors(make):
    check_steps([(0, {"x": np.zeros(3)}), (1, {"x": make()}), (2, {"x": make()})], 3)


@pytest.mark.parametrize(
    "first, later",
    [
        (1, 2.7),
        (1.5, 7),
        (True, 5),
        (2, True),
        (1.0, np.float32(2.5)),
        (np.float32(1), 0.1),
        (np.uint8(1), 300),
        (np.uint8(1), -1),
        (np.int8(1), np.int64(1000)),
        (1, float("nan")),
        (1, float("inf")),
        (1.0, "text"),
        ("text", 2.5),
        (1, np.ones(2)),
        (1, None),
        (np.ones(2), 3),
        (np.ones(2), [4, 5]),
        (None, np.ones(2)),
        (1.5, 1 + 2j),
        (1, 2**63),
        (1, -(2**63) - 1),
        (1.0, 2**1100),
        (np.timedelta64(1, "s"), np.timedelta64(2, "s")),
    ],
)
def test_later_values_are_cast_like_numpy_does(first, later):
    check_steps([(0, {"x": first}), (1, {"x": later}), (0, {"x": later})], 2)


@pytest.mark.parametrize(
    "later",
    [
        np.ones(2),
        np.ones(3),
        np.ones((1, 2, 3)),
        np.ones((2, 1)),
        np.ones((3, 2)),
        np.ones((2, 3, 1)),
        5.0,
    ],
)
def test_rows_of_multi_dim_arrays_broadcast_like_numpy(later):
    check_steps([(0, {"x": np.zeros((2, 3))}), (1, {"x": later})], 2)


@pytest.mark.parametrize("first, later", [(True, False), (False, True), (True, np.bool_(False))])
def test_bools_overwrite_bools(first, later):
    check_steps([(0, {"x": first}), (1, {"x": first}), (0, {"x": later})], 2)


def test_object_slots_keep_exactly_one_reference_per_stored_value():
    old, new = object(), object()
    before = sys.getrefcount(old), sys.getrefcount(new)
    state = kernel.add_info({}, {"final_obs": old, "x": old}, 0, 2)
    kernel.add_info(state, {"final_obs": new, "x": new}, 0, 2)
    assert (sys.getrefcount(old), sys.getrefcount(new)) == (before[0], before[1] + 2)
    del state
    assert (sys.getrefcount(old), sys.getrefcount(new)) == before


def test_int_overflow_on_first_value_raises_like_gymnasium():
    check_steps([(0, {"a": 1, "x": 2**64})], 2)


def test_nested_dicts_recurse_with_their_own_masks():
    entries = [(0, {"ep": {"r": 1.0, "l": 3, "deep": {"t": np.ones(2)}}}), (2, {"ep": {"r": 2.0}})]
    out = check_batch(entries, 3)
    assert out["_ep"].tolist() == [True, False, True]
    assert out["ep"]["_l"].tolist() == [True, False, False]
    assert list(out["ep"]) == ["r", "_r", "l", "_l", "deep", "_deep"]


def test_final_obs_is_an_object_array_holding_each_observation():
    obs = np.arange(4.0)
    entries = [(1, {"final_obs": obs, "final_info": {"x": 1}}), (0, {"final_obs": {"o": 1}})]
    out = check_batch(entries, 2)
    assert out["final_obs"].dtype == object
    assert out["final_obs"][1] is obs and out["final_obs"][0] == {"o": 1}
    assert out["final_info"]["x"].tolist() == [0, 1]


def test_a_key_may_appear_twice_for_one_env_and_the_last_value_wins():
    out = check_batch([(1, {"a": 1, "final_obs": 0}), (1, {"a": 2, "b": 1.0})], 2)
    assert out["a"].tolist() == [0, 2]


def test_keys_keep_first_seen_order_across_envs():
    out = check_batch([(0, {"b": 1}), (1, {"a": 1, "b": 2}), (2, {"c": 1, "a": 2})], 3)
    assert list(out) == ["b", "_b", "a", "_a", "c", "_c"]


def test_user_keys_that_look_like_masks_collide_as_in_gymnasium():
    check_batch([(0, {"a": 1, "_a": 7}), (1, {"_a": 0, "a": 2})], 2)
    check_batch([(0, {"_a": 1.5, "a": 2}), (1, {"a": 3})], 2)


def test_a_key_switching_between_dict_and_value_behaves_as_in_gymnasium():
    check_steps([(0, {"a": {"x": 1}}), (1, {"a": 5})], 2)
    check_steps([(0, {"a": 5}), (1, {"a": {"x": 1}})], 2)
    check_steps([(0, {"a": "s"}), (1, {"a": {"x": 1}})], 2)


def test_non_string_keys_format_their_mask_name():
    check_batch([(0, {1: 1.5, (2, 3): "t", 2.5: 1, np.str_("final_obs"): 3})], 2)


def test_many_distinct_keys_outgrow_the_mask_name_cache():
    entries = [(i % 3, {f"k{j}": j for j in range(i * 1000, i * 1000 + 1000)}) for i in range(6)]
    check_batch(entries, 3)


def test_dict_subclasses_and_mappings_take_the_generic_path():
    info = collections.OrderedDict([("a", 1), ("b", {"c": 2.0})])
    check_steps([(0, info), (1, collections.defaultdict(int, a=3))], 2)
    check_steps([(0, {"a": 1})], 2, collections.OrderedDict(), collections.OrderedDict())


def test_info_that_is_the_batch_itself_fails_like_gymnasium():
    ours, ref = {"x": 1}, {"x": 1}
    assert outcome(kernel.add_info, ours, ours, 0, 1)[1] == outcome(ref_add_info, ref, ref, 0, 1)[1]


def test_existing_state_not_made_by_the_kernel_is_respected():
    def state():
        readonly = np.zeros(3)
        readonly.flags.writeable = False
        return {
            "short": np.zeros(2),
            "_short": np.zeros(2, bool),
            "ro": readonly,
            "view": np.zeros(6)[::2],
            "be": np.zeros(3, ">f8"),
            "_be": np.zeros(3, int),
            "obj": np.zeros((3, 2), object),
            "none": None,
            "q": np.zeros(3, "q"),
        }

    info = {
        "short": 1.0,
        "ro": 1.0,
        "view": 2.5,
        "be": 3.5,
        "obj": np.ones(2, object),
        "q": 7,
        "none": 1,
    }
    for key in info:
        check_steps([(2, {key: info[key]})], 3, state(), state())


def test_mutates_and_returns_the_given_dict():
    state = {"keep": 1}
    assert kernel.add_info(state, {"a": 1}, 0, 2) is state
    assert list(state) == ["keep", "a", "_a"]


@pytest.mark.parametrize("env_index", [-1, -3, np.int64(1), np.uint8(2)])
def test_negative_and_numpy_indices_match_gymnasium(env_index):
    check_steps([(env_index, {"a": 1.0, "b": np.ones(2), "c": "s"})], 3)


@pytest.mark.parametrize(
    "env_index, error", [(3, IndexError), (-4, IndexError), (True, TypeError), (1.0, TypeError)]
)
def test_bad_env_index_is_rejected_before_anything_is_written(env_index, error):
    state = {}
    with pytest.raises(error, match="env_index"):
        kernel.add_info(state, {"a": 1}, env_index, 3)
    with pytest.raises(error, match="env_index"):
        kernel.batch_infos([(0, {"a": 1}), (env_index, {"a": 1})], 3)
    assert state == {}


def test_bad_num_envs_and_entries_are_rejected():
    with pytest.raises(ValueError, match="num_envs"):
        kernel.batch_infos([], -1)
    with pytest.raises(TypeError):
        kernel.batch_infos(None, 2)
    with pytest.raises(ValueError):
        kernel.batch_infos([(0, {}, 1)], 2)


def test_empty_inputs():
    assert kernel.batch_infos([], 4) == {}
    assert kernel.batch_infos([(0, {}), (3, {})], 4) == {}


# --- property tests ----------------------------------------------------------------------

KEYS = ["a", "b", "c", "final_obs", "_a", "ep"]
DTYPES = [
    np.float32,
    np.float64,
    np.int8,
    np.int32,
    np.int64,
    np.uint8,
    np.bool_,
    np.float16,
    np.complex64,
]
SHAPES = [(), (1,), (3,), (2, 3)]

INTS = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70))
FLOATS = st.floats(allow_nan=True, allow_infinity=True)


def numpy_scalars(dtype):
    return hnp.from_dtype(np.dtype(dtype)).map(np.dtype(dtype).type)


def numpy_arrays(dtype_and_shape):
    return hnp.arrays(*dtype_and_shape)


def infos_of(schema):
    """Dicts holding a random subset of the schema's keys, in random order."""
    items = [st.tuples(st.just(key), kind) for key, kind in schema.items()]
    subsets = st.lists(st.sampled_from(range(len(items))), unique=True) if items else st.just([])
    return subsets.flatmap(lambda picks: st.tuples(*[items[i] for i in picks]).map(dict))


# A "kind" is a strategy for one key's values: a fixed type (and dtype, shape) per key.
LEAF_KINDS = st.one_of(
    st.sampled_from([INTS, FLOATS, st.booleans(), st.text(max_size=3), st.none()]),
    st.sampled_from(DTYPES + [np.bool_]).map(numpy_scalars),
    st.tuples(st.sampled_from(DTYPES), st.sampled_from(SHAPES)).map(numpy_arrays),
)
KINDS = st.recursive(
    LEAF_KINDS,
    lambda inner: st.dictionaries(st.sampled_from(KEYS), inner, max_size=3).map(infos_of),
    max_leaves=6,
)
ANY_VALUE = KINDS.flatmap(lambda kind: kind)


@st.composite
def episodes(draw):
    """(entries, num_envs): consistent per-key types, or anything anywhere (casts, errors)."""
    num_envs = draw(st.integers(1, 5))
    if draw(st.booleans()):
        infos = draw(st.dictionaries(st.sampled_from(KEYS), KINDS, max_size=5).map(infos_of))
    else:
        infos = st.dictionaries(st.sampled_from(KEYS), ANY_VALUE, max_size=4)
    indices = st.integers(-num_envs, num_envs - 1)
    entries = draw(st.lists(st.tuples(indices, infos), min_size=1, max_size=8))
    return entries, num_envs


@settings(max_examples=300, deadline=None)
@given(episodes())
def test_batch_infos_matches_folding_gymnasium(episode):
    check_batch(*episode)


@settings(max_examples=200, deadline=None)
@given(episodes())
def test_add_info_matches_gymnasium_step_by_step(episode):
    check_steps(*episode)
