"""Observation casts in ``flatten_into``: exactly what Gymnasium's batching accepts.

Gymnasium's ``SyncVectorEnv`` batches observations with
``gymnasium.vector.utils.concatenate``, which for every Box, Discrete,
MultiDiscrete and MultiBinary leaf is ``np.stack(items, out=batch)``: each item
is taken as ``np.asanyarray(item)``, must have the leaf's shape, and is cast with
numpy's default ``casting="same_kind"``.  ``flatten_into`` must accept exactly the
same inputs and write the same bytes, and reject the rest with an
``ObservationError`` naming the env and the leaf.  The references here are
Gymnasium's ``concatenate`` into a ``create_empty_array`` batch.
"""

from __future__ import annotations

import logging
import re
import warnings

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fastvec._kernels.flatten import flatten_into
from fastvec.errors import ObservationError
from fastvec.spaces.layout import batch_views, layout_of

LEAF_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
               np.int64, np.uint64, np.float16, np.float32, np.float64]
SOURCE_DTYPES = [*LEAF_DTYPES, np.longdouble, np.complex64, np.complex128, ">f8", ">i4",
                 "<U3", "O"]
FORMS = ["array", "strided", "fortran", "byteswapped", "list", "tuple", "items", "scalar",
         "python"]


def gymnasium_batch(space, observations):
    """Gymnasium's batch of ``observations``, or ``None`` where it raises."""
    out = create_empty_array(space, len(observations))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # float overflow in a cast warns on both sides
            return concatenate(space, observations, out)
    except (ValueError, TypeError):
        return None


def leaf_arrays(batch, space):
    """The leaf arrays of a batch of ``space``, in the layout's order."""
    if isinstance(space, spaces.Dict):
        return [a for key, sub in space.spaces.items() for a in leaf_arrays(batch[key], sub)]
    if isinstance(space, spaces.Tuple):
        return [a for i, sub in enumerate(space.spaces) for a in leaf_arrays(batch[i], sub)]
    return [batch]


def write_rows(space, observations, seed=0):
    """``flatten_into`` each observation into garbage rows; (layout, rows, rows before)."""
    layout = layout_of(space)
    rows = np.random.default_rng(seed).integers(
        0, 256, (len(observations), layout.record_size), dtype=np.uint8)
    before = rows.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, obs in enumerate(observations):
            flatten_into(layout.table, obs, rows[i], i)
    return layout, rows, before


def assert_bit_identical(space, observations, reference, seed=0):
    layout, rows, before = write_rows(space, observations, seed)
    got = leaf_arrays(batch_views(layout, rows), space)
    expected = leaf_arrays(reference, space)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, e.dtype, g.shape, e.shape)
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(e).tobytes(), (g, e)
    padding = np.ones(layout.record_size, bool)
    for leaf in layout.leaves:
        padding[leaf.offset:leaf.offset + leaf.nbytes] = False
    np.testing.assert_array_equal(rows[:, padding], before[:, padding])


def check_against_gymnasium(space, observations, name):
    """Accepted with Gymnasium's bytes, or rejected naming the first bad env and ``name``."""
    reference = gymnasium_batch(space, observations)
    if reference is not None:
        assert_bit_identical(space, observations, reference)
        return True
    bad = next(i for i, obs in enumerate(observations) if gymnasium_batch(space, [obs]) is None)
    with pytest.raises(ObservationError) as info:
        write_rows(space, observations)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert re.search(rf"\benv {bad}\b", message), message
    assert name in message, message
    assert "expected" in message, message
    return False


# -- random leaves, random inputs ----------------------------------------------------

shapes = st.lists(st.sampled_from([0, 1, 2, 3]), min_size=0, max_size=3).map(tuple)


@st.composite
def leaves(draw):
    kind = draw(st.sampled_from(["box", "box", "box", "discrete", "multi_discrete", "binary"]))
    if kind == "discrete":
        return spaces.Discrete(5, dtype=draw(st.sampled_from([np.int64, np.int32, np.uint8])))
    if kind == "multi_discrete":
        return spaces.MultiDiscrete([3, 4], dtype=draw(st.sampled_from([np.int64, np.int16])))
    if kind == "binary":
        return spaces.MultiBinary(draw(st.sampled_from([3, [2, 2]])))
    dtype = np.dtype(draw(st.sampled_from([*LEAF_DTYPES, np.float32, np.float32])))
    shape = draw(shapes)
    if dtype.kind == "b" or dtype.kind in "iu":
        return spaces.Box(0, 1, shape, dtype)
    return spaces.Box(-1.0, 1.0, shape, dtype)


def _elements(dtype):
    if dtype.kind == "U":
        return st.sampled_from(["", "1", "a", "1.5"])
    if dtype.kind == "O":
        return st.sampled_from([None, 1, 0.5, "x"])
    return None  # hypothesis' own: full ranges, NaN, infinities, subnormals


@st.composite
def leaf_inputs(draw, leaf):
    """A value for ``leaf``: of its shape (mostly) in any dtype, in any form."""
    shape = () if isinstance(leaf, spaces.Discrete) else leaf.shape
    if draw(st.integers(0, 9)) == 0:  # a wrong shape
        shape = draw(shapes.filter(lambda s, want=shape: s != want))
    source = np.dtype(draw(st.one_of(st.just(leaf.dtype), st.just(np.float64),
                                     st.sampled_from(SOURCE_DTYPES))))
    value = draw(hnp.arrays(source, shape, elements=_elements(source)))
    form = draw(st.sampled_from(FORMS))
    if form == "strided" and value.ndim and value.size:
        wide = np.zeros((*value.shape[:-1], value.shape[-1] * 2), dtype=value.dtype)
        wide[..., ::2] = value
        return wide[..., ::2]
    if form == "fortran" and value.ndim >= 2:
        return np.asfortranarray(value)
    if form == "byteswapped" and value.dtype.kind not in "OU":
        return value.astype(value.dtype.newbyteorder("S"))
    if form == "list":
        return value.tolist()
    if form == "tuple":
        def to_tuple(x):
            return tuple(to_tuple(y) for y in x) if isinstance(x, list) else x
        return to_tuple(value.tolist())
    if form == "items" and value.ndim == 1:
        return list(value)  # numpy scalars in a list
    if form == "scalar" and value.ndim == 0:
        return value[()]
    if form == "python" and value.ndim == 0:
        return value.item()
    return value


@settings(max_examples=400, deadline=None)
@given(leaves(), st.integers(1, 3), st.sampled_from(["top", "dict", "tuple"]), st.data())
def test_acceptance_and_bytes_match_gymnasium(leaf, n, wrap, data):
    values = [data.draw(leaf_inputs(leaf)) for _ in range(n)]
    if wrap == "top":
        space, observations, name = leaf, values, "obs"
    elif wrap == "dict":
        space = spaces.Dict({"image": leaf, "id": spaces.Discrete(3)})
        observations = [{"image": v, "id": 2} for v in values]
        name = 'obs["image"]'
    else:
        space = spaces.Tuple((spaces.Box(-1, 1, (2,), np.float32), leaf))
        observations = [(np.array([0.5, -1], np.float32), v) for v in values]
        name = "obs[1]"
    check_against_gymnasium(space, observations, name)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(LEAF_DTYPES), st.sampled_from(SOURCE_DTYPES[:-2]), shapes, st.data())
def test_every_dtype_pair_casts_as_numpy_same_kind(leaf_dtype, source_dtype, shape, data):
    # An array of the right shape is accepted iff numpy casts it with same_kind.
    leaf = spaces.Box(0, 1, shape, leaf_dtype)
    value = data.draw(hnp.arrays(np.dtype(source_dtype), shape))
    accepted = check_against_gymnasium(leaf, [value], "obs")
    assert accepted == np.can_cast(np.dtype(source_dtype), np.dtype(leaf_dtype), "same_kind")


# -- the cases users meet, spelled out -----------------------------------------------

F32 = spaces.Box(-10, 10, (3,), np.float32)
F32_SCALAR = spaces.Box(-10, 10, (), np.float32)
I32 = spaces.Box(-10, 10, (2,), np.int32)
I64_SCALAR = spaces.Box(-10, 10, (), np.int64)
U8 = spaces.Box(0, 255, (2, 2), np.uint8)
DICT = spaces.Dict({"pos": F32, "count": I32, "image": U8, "id": spaces.Discrete(4)})
GOOD = {"pos": np.zeros(3, np.float32), "count": np.zeros(2, np.int32),
        "image": np.zeros((2, 2), np.uint8), "id": 1}

ACCEPTED = [
    pytest.param(F32, np.array([0.1, 1 / 3, 1e-46]), id="float64-array-for-float32"),
    pytest.param(F32, [0.1, 1 / 3, -2.5], id="list-of-floats"),
    pytest.param(F32, (0.1, 1, True), id="tuple-of-mixed-scalars"),
    pytest.param(F32, [np.float64(0.1), np.float32(2), np.int8(-3)], id="list-of-numpy-scalars"),
    pytest.param(F32, np.array([1, 2, 3], np.int64), id="int64-for-float32"),
    pytest.param(F32, np.array([True, False, True]), id="bool-for-float32"),
    pytest.param(F32, np.array([1e300, -1e300, np.nan]), id="float64-overflowing-float32"),
    pytest.param(F32_SCALAR, 0.1, id="python-float"),
    pytest.param(F32_SCALAR, 7, id="python-int-for-float32"),
    pytest.param(F32_SCALAR, np.float64(0.1), id="numpy-float64-scalar"),
    pytest.param(F32_SCALAR, np.array(0.1), id="0d-float64-array"),
    pytest.param(I32, np.array([5, -(2**40)], np.int64), id="int64-for-int32-wraps"),
    pytest.param(I32, [True, False], id="list-of-bools-for-int32"),
    pytest.param(I32, np.array([7, 255], np.uint8), id="uint8-for-int32"),
    pytest.param(I64_SCALAR, 2**63, id="python-int-past-int64-wraps-as-uint64"),
    pytest.param(I64_SCALAR, np.uint64(2**64 - 1), id="uint64-for-int64"),
    pytest.param(U8, np.array([[True, False], [False, True]]), id="bool-for-uint8"),
    pytest.param(U8, np.arange(4, dtype=np.uint16).reshape(2, 2), id="uint16-for-uint8"),
    pytest.param(U8, np.arange(4, dtype=np.uint8).reshape(2, 2)[::-1], id="negative-strides"),
    pytest.param(spaces.Discrete(4), np.int32(3), id="int32-for-discrete"),
    pytest.param(spaces.Discrete(4), True, id="bool-for-discrete"),
    pytest.param(spaces.MultiBinary(3), [1, 0, 1], id="python-ints-for-multibinary-int8"),
    pytest.param(spaces.MultiDiscrete([3, 3]), (2, 1), id="tuple-for-multidiscrete"),
    pytest.param(DICT, {**GOOD, "pos": [1.5, 2.5, 3.5], "count": np.array([1, 2], np.int64)},
                 id="dict-with-list-and-int64-leaves"),
    pytest.param(DICT, {**GOOD, "extra": "ignored"}, id="dict-with-an-extra-key"),
]

REJECTED = [
    pytest.param(U8, np.full((2, 2), 3.0), 'obs', "float64", id="float-for-uint8"),
    pytest.param(U8, [[1, 2], [3, 4]], "obs", "int64", id="python-ints-for-uint8"),
    pytest.param(U8, np.zeros((2, 2), np.int8), "obs", "int8", id="int8-for-uint8"),
    pytest.param(I32, np.array([1.0, 2.0]), "obs", "float64", id="float-for-int32"),
    pytest.param(I32, [1.0, 2.0], "obs", "float64", id="python-floats-for-int32"),
    pytest.param(spaces.Discrete(4), 1.0, "obs", "float64", id="python-float-for-discrete"),
    pytest.param(F32, np.zeros(3, np.complex64), "obs", "complex64", id="complex-for-float32"),
    pytest.param(F32, ["1", "2", "3"], "obs", "<U1", id="strings-for-float32"),
    pytest.param(F32, [None, 1.0, 2.0], "obs", "object", id="objects-for-float32"),
    pytest.param(F32, np.zeros(4, np.float32), "obs", "shape", id="too-long"),
    pytest.param(F32, np.zeros((1, 3), np.float32), "obs", "shape", id="extra-dimension"),
    pytest.param(F32, np.zeros(1, np.float32), "obs", "shape", id="broadcastable-shape"),
    pytest.param(F32, 0.5, "obs", "shape", id="scalar-for-vector"),
    pytest.param(F32_SCALAR, [0.5], "obs", "shape", id="vector-for-scalar"),
    pytest.param(F32, [[1.0], [2.0, 3.0]], "obs", "array-like", id="ragged-list"),
    pytest.param(I64_SCALAR, 2**64, "obs", "object", id="python-int-past-uint64"),
    pytest.param(spaces.Box(0, 1, (2,), np.bool_), [1, 0], "obs", "int64", id="ints-for-bool"),
    pytest.param(DICT, {**GOOD, "image": np.zeros((2, 2))}, 'obs["image"]', "float64",
                 id="dict-float-image"),
    pytest.param(DICT, {**GOOD, "count": np.zeros(3, np.int32)}, 'obs["count"]', "shape",
                 id="dict-wrong-shape"),
    pytest.param(DICT, {k: v for k, v in GOOD.items() if k != "id"}, 'obs["id"]', "",
                 id="dict-missing-key"),
]


@pytest.mark.parametrize("space, value", ACCEPTED)
def test_accepted_like_gymnasium(space, value):
    observations = [value, value]
    assert gymnasium_batch(space, observations) is not None  # the premise
    assert check_against_gymnasium(space, observations, "obs")


@pytest.mark.parametrize("space, value, name, detail", REJECTED)
def test_rejected_like_gymnasium(space, value, name, detail):
    good = space.sample() if space is not DICT else GOOD
    observations = [good, good, value]  # env 2 is the bad one
    with pytest.raises((ValueError, TypeError, KeyError)):  # the premise
        concatenate(space, observations, create_empty_array(space, 3))
    layout = layout_of(space)
    rows = np.zeros((3, layout.record_size), np.uint8)
    flatten_into(layout.table, good, rows[0], 0)
    with pytest.raises(ObservationError) as info:
        flatten_into(layout.table, value, rows[2], 2)
    message = str(info.value)
    assert re.search(r"\benv 2\b", message), message
    assert name in message and detail in message and "expected" in message, message


def test_dtype_error_says_what_was_expected_and_what_came():
    layout = layout_of(DICT)
    row = np.zeros(layout.record_size, np.uint8)
    with pytest.raises(ObservationError) as info:
        flatten_into(layout.table, {**GOOD, "image": [[0.5, 1], [2, 3]]}, row, 6)
    message = str(info.value)
    assert message.startswith('env 6 returned obs["image"] with dtype float64 (from a list), '
                              "expected dtype uint8 (shape (2, 2))"), message
    assert "same_kind" in message, message


def test_slow_path_into_an_unaligned_row():
    layout = layout_of(spaces.Box(-1, 1, (3,), np.float64))
    buffer = np.zeros(layout.record_size + 1, np.uint8)
    row = buffer[1:]
    flatten_into(layout.table, [0.25, np.float32(1 / 3), 2], row, 0)
    np.testing.assert_array_equal(row[:24].view(np.float64),
                                  np.array([0.25, np.float32(1 / 3), 2.0]))


def test_nan_payloads_survive_like_gymnasium():
    bits = np.array([0x7FF8000000000001, 0xFFF0000000000123, 0x7FF0000000000000],
                    np.uint64).view(np.float64)
    for leaf_dtype in (np.float16, np.float32, np.float64):
        space = spaces.Box(-1, 1, (3,), leaf_dtype)
        assert check_against_gymnasium(space, [bits, bits[::-1].copy()], "obs")


# -- the one-time note in the log ----------------------------------------------------

def test_a_cast_is_noted_once_per_leaf_and_dtype(caplog):
    space = spaces.Dict({"note_once_pos": F32, "note_once_count": I32})
    layout = layout_of(space)
    row = np.zeros(layout.record_size, np.uint8)
    exact = {"note_once_pos": np.zeros(3, np.float32), "note_once_count": np.zeros(2, np.int32)}
    with caplog.at_level(logging.INFO, logger="fastvec"):
        flatten_into(layout.table, exact, row, 0)
        assert not caplog.records  # exact matches take the fast path and say nothing
        for _ in range(5):
            flatten_into(layout.table, {**exact, "note_once_pos": np.zeros(3)}, row, 3)
        (record,) = caplog.records
        assert record.name == "fastvec" and record.levelno == logging.WARNING
        assert 'obs["note_once_pos"]' in record.getMessage()
        assert "float64" in record.getMessage() and "float32" in record.getMessage()
        flatten_into(layout.table, {**exact, "note_once_pos": [1.0, 2.0, 3.0]}, row, 3)
        assert len(caplog.records) == 1  # the same leaf and dtype, another form
        for _ in range(3):
            flatten_into(layout.table, {**exact, "note_once_count": np.zeros(2, np.int64)},
                         row, 1)
        assert len(caplog.records) == 2
        assert 'obs["note_once_count"]' in caplog.records[1].getMessage()
        with pytest.raises(ObservationError):
            flatten_into(layout.table, {**exact, "note_once_count": np.zeros(2)}, row, 1)
        assert len(caplog.records) == 2  # a rejection is an error, not a note
