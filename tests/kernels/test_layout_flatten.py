"""Flat record layouts and ``flatten_into``, against Gymnasium's own batching.

Every observation written into record rows by ``flatten_into`` and read back
through ``batch_views`` must equal ``gymnasium.vector.utils.concatenate`` of the
same observations, for random nested Dict/Tuple spaces; the layout itself must
keep every leaf aligned, disjoint and in the space's order.
"""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array
from hypothesis import given, settings
from hypothesis import strategies as st

from fastvec._kernels.flatten import flatten_into
from fastvec.errors import ObservationError
from fastvec.spaces.layout import MIN_ALIGN, batch_views, layout_of, leaf_name

DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.int64,
          np.float16, np.float32, np.float64, np.bool_]

# -- random spaces -----------------------------------------------------------------

small_shapes = st.lists(st.sampled_from([0, 1, 2, 3, 5, 7]), min_size=0, max_size=3).map(tuple)


@st.composite
def boxes(draw):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(small_shapes)
    if dtype == np.bool_:
        return spaces.Box(low=0, high=1, shape=shape, dtype=dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return spaces.Box(low=max(int(info.min), -1000), high=min(int(info.max), 1000),
                          shape=shape, dtype=dtype)
    return spaces.Box(low=-100.0, high=100.0, shape=shape, dtype=dtype)


discretes = st.builds(spaces.Discrete, st.integers(1, 9), start=st.integers(-5, 5))


@st.composite
def multi_discretes(draw):
    shape = draw(st.sampled_from([(1,), (3,), (2, 2), (1, 3)]))
    nvec = np.array(draw(st.lists(st.integers(1, 6), min_size=int(np.prod(shape)),
                                  max_size=int(np.prod(shape))))).reshape(shape)
    start = np.array(draw(st.lists(st.integers(-3, 3), min_size=nvec.size,
                                   max_size=nvec.size))).reshape(shape)
    return spaces.MultiDiscrete(nvec, start=start)


multi_binaries = st.one_of(st.integers(1, 9), st.sampled_from([[2, 3], [1], [3, 1, 2]])).map(
    spaces.MultiBinary)
leaf_spaces = st.one_of(boxes(), discretes, multi_discretes(), multi_binaries)
keys = st.text(alphabet="abcxyz_", min_size=1, max_size=3)


def _composites(children):
    dicts = st.lists(st.tuples(keys, children), min_size=1, max_size=4,
                     unique_by=lambda kv: kv[0]).map(lambda kvs: spaces.Dict(dict(kvs)))
    tuples = st.lists(children, min_size=0, max_size=3).map(lambda cs: spaces.Tuple(cs))
    return st.one_of(dicts, tuples)


obs_spaces = st.recursive(leaf_spaces, _composites, max_leaves=8)


def leaves_in_order(space, path=()):
    """(path, leaf space) for every array leaf, walking Dict keys and Tuple items in order."""
    if isinstance(space, spaces.Dict):
        return [leaf for key, sub in space.spaces.items()
                for leaf in leaves_in_order(sub, (*path, key))]
    if isinstance(space, spaces.Tuple):
        return [leaf for index, sub in enumerate(space.spaces)
                for leaf in leaves_in_order(sub, (*path, index))]
    return [(path, space)]


def get_path(value, path):
    for key in path:
        value = value[key]
    return value


def map_leaves(space, value, fn, path=()):
    """``value`` with every leaf replaced by ``fn(path, leaf_space, leaf_value)``."""
    if isinstance(space, spaces.Dict):
        return {key: map_leaves(sub, value[key], fn, (*path, key))
                for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(map_leaves(sub, v, fn, (*path, i))
                     for i, (sub, v) in enumerate(zip(space.spaces, value, strict=True)))
    return fn(path, space, value)


def assert_same_batch(got, expected, where="obs"):
    """The same nested structure, dtypes, shapes and values."""
    if isinstance(expected, dict):
        assert isinstance(got, dict), where
        assert list(got) == list(expected), where
        for key in expected:
            assert_same_batch(got[key], expected[key], f'{where}["{key}"]')
    elif isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_same_batch(g, e, f"{where}[{i}]")
    else:
        assert isinstance(got, np.ndarray), where
        assert got.dtype == expected.dtype, (where, got.dtype, expected.dtype)
        assert got.shape == expected.shape, (where, got.shape, expected.shape)
        np.testing.assert_array_equal(got, expected, err_msg=where, strict=True)


def samples_of(space, n, seed):
    space.seed(seed)
    return [space.sample() for _ in range(n)]


def reference_batch(space, samples):
    return concatenate(space, samples, create_empty_array(space, len(samples)))


def garbage_rows(n, record_size, seed):
    return np.random.default_rng(seed).integers(0, 256, (n, record_size), dtype=np.uint8)


def leaf_byte_mask(layout):
    mask = np.zeros(layout.record_size, dtype=bool)
    for leaf in layout.leaves:
        mask[leaf.offset:leaf.offset + leaf.nbytes] = True
    return mask


# -- the layout ----------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(obs_spaces)
def test_layout_invariants(space):
    layout = layout_of(space)
    assert layout is not None
    expected = leaves_in_order(space)
    assert [leaf.path for leaf in layout.leaves] == [path for path, _ in expected]
    spans = []
    for leaf, (_, sub) in zip(layout.leaves, expected, strict=True):
        shape = () if isinstance(sub, spaces.Discrete) else tuple(sub.shape)
        assert leaf.dtype == np.dtype(sub.dtype) and leaf.shape == shape
        assert leaf.nbytes == int(np.prod(shape, dtype=np.int64)) * leaf.dtype.itemsize
        assert leaf.offset % max(8, leaf.dtype.alignment) == 0, leaf
        assert 0 <= leaf.offset and leaf.offset + leaf.nbytes <= layout.record_size
        spans.append((leaf.offset, leaf.offset + leaf.nbytes))
    nonempty = sorted(span for span in spans if span[0] < span[1])
    for (_, end), (start, _) in zip(nonempty, nonempty[1:], strict=False):
        assert end <= start, f"overlapping leaves: {nonempty}"
    alignment = max([8, *(leaf.dtype.alignment for leaf in layout.leaves)])
    assert layout.record_size > 0 and layout.record_size % alignment == 0
    assert layout.table.n_fields == len(layout.leaves)
    assert layout.table.names == [leaf_name(leaf.path) for leaf in layout.leaves]


def test_min_align_is_eight():
    assert MIN_ALIGN == 8
    layout = layout_of(spaces.Tuple((spaces.MultiBinary(3), spaces.Box(0, 1, (1,), np.uint8))))
    assert [leaf.offset for leaf in layout.leaves] == [0, 8]
    assert layout.record_size == 16


def test_leaf_name():
    assert leaf_name(()) == "obs"
    assert leaf_name(("image",)) == 'obs["image"]'
    assert leaf_name(("a", 1, "b")) == 'obs["a"][1]["b"]'


def test_dict_leaf_order_is_the_space_order():
    # A Dict built from a list of pairs keeps that order (a plain dict is sorted).
    space = spaces.Dict([("z", spaces.Discrete(2)), ("a", spaces.Box(0, 1, (2,)))])
    assert list(space.spaces) == ["z", "a"]
    layout = layout_of(space)
    assert [leaf.path for leaf in layout.leaves] == [("z",), ("a",)]
    assert layout.leaves[0].offset < layout.leaves[1].offset
    assert list(batch_views(layout, np.zeros((2, layout.record_size), np.uint8))) == ["z", "a"]


# -- round trip against concatenate --------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(obs_spaces, st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_round_trip_matches_concatenate(space, n, seed):
    layout = layout_of(space)
    samples = samples_of(space, n, seed)
    rows = garbage_rows(n, layout.record_size, seed)
    before = rows.copy()
    for i, obs in enumerate(samples):
        flatten_into(layout.table, obs, rows[i], i)
    assert_same_batch(batch_views(layout, rows), reference_batch(space, samples))
    # Nothing outside the leaves' bytes was touched (padding keeps its garbage).
    padding = ~leaf_byte_mask(layout)
    np.testing.assert_array_equal(rows[:, padding], before[:, padding])


@settings(max_examples=60, deadline=None)
@given(obs_spaces, st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_a_pickled_layout_writes_the_same_records(space, n, seed):
    """The trainer lays records out once and sends the layout to its workers."""
    layout = layout_of(space)
    again = pickle.loads(pickle.dumps(layout))
    assert (again.leaves, again.record_size, again.template) == \
        (layout.leaves, layout.record_size, layout.template)
    samples = samples_of(space, n, seed)
    rows, rows_again = np.zeros((2, n, layout.record_size), np.uint8)
    for i, obs in enumerate(samples):
        flatten_into(layout.table, obs, rows[i], i)
        flatten_into(again.table, obs, rows_again[i], i)
    np.testing.assert_array_equal(rows_again, rows)


@settings(max_examples=60, deadline=None)
@given(obs_spaces, st.integers(2, 4), st.integers(0, 2**32 - 1), st.data())
def test_writing_one_row_leaves_the_others_alone(space, n, seed, data):
    layout = layout_of(space)
    rows = garbage_rows(n, layout.record_size, seed)
    before = rows.copy()
    i = data.draw(st.integers(0, n - 1))
    flatten_into(layout.table, samples_of(space, 1, seed)[0], rows[i], i)
    others = np.arange(n) != i
    np.testing.assert_array_equal(rows[others], before[others])


def _safe_narrower(value, dtype):
    """``value`` in a narrower dtype that casts safely to ``dtype`` and keeps it, or None."""
    for source in (np.bool_, np.uint8, np.int8, np.int16, np.uint16, np.int32, np.float16,
                   np.float32):
        source = np.dtype(source)
        if source == dtype or not np.can_cast(source, dtype, casting="safe"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            narrow = value.astype(source)
        if np.array_equal(narrow.astype(dtype), value):
            return narrow
    return None


def make_variant(kind, value, dtype):
    """An input of the same value that takes ``flatten_into``'s slow path (or a fast one)."""
    value = np.asarray(value, dtype=dtype)
    if kind == "strided" and value.ndim >= 1 and value.size:
        wide = np.zeros((*value.shape[:-1], value.shape[-1] * 2), dtype=dtype)
        wide[..., ::2] = value
        out = wide[..., ::2]
        assert value.shape[-1] == 1 or not out.flags.c_contiguous
        return out
    if kind == "fortran" and value.ndim >= 2:
        return np.asfortranarray(value)
    if kind == "byteswapped":
        return value.astype(value.dtype.newbyteorder("S"))
    if kind == "narrower":
        narrow = _safe_narrower(value, dtype)
        return value if narrow is None else narrow
    if kind == "python" and (value.ndim == 0 or (
            value.size and dtype in (np.int64, np.float64, np.bool_))):
        # (an empty list would lose the shape and the dtype.)  Only where Gymnasium's
        # batching takes it: a Python int is an int64 array to numpy, which does not go
        # into an unsigned leaf (same_kind casting).
        if np.can_cast(np.asarray(value.tolist()).dtype, dtype, casting="same_kind"):
            return value.tolist()
        return value
    if kind == "scalar" and value.ndim == 0:
        return value[()]  # a numpy scalar, not an ndarray
    return value


VARIANTS = ["as_is", "strided", "fortran", "byteswapped", "narrower", "python", "scalar"]


@settings(max_examples=150, deadline=None)
@given(obs_spaces, st.integers(1, 3), st.integers(0, 2**32 - 1), st.data())
def test_slow_path_inputs_round_trip(space, n, seed, data):
    layout = layout_of(space)
    samples = samples_of(space, n, seed)
    rows = garbage_rows(n, layout.record_size, seed)

    def vary(path, sub, value):
        return make_variant(data.draw(st.sampled_from(VARIANTS)), value, np.dtype(sub.dtype))

    for i, obs in enumerate(samples):
        flatten_into(layout.table, map_leaves(space, obs, vary), rows[i], i)
    assert_same_batch(batch_views(layout, rows), reference_batch(space, samples))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", VARIANTS)
def test_each_variant_for_each_dtype(kind, dtype):
    dtype = np.dtype(dtype)
    space = spaces.Dict({"x": spaces.Box(0, 1, (3, 2), dtype=dtype),
                         "s": spaces.Box(0, 1, (), dtype=dtype)})
    layout = layout_of(space)
    rng = np.random.default_rng(0)
    obs = {"x": (rng.integers(0, 2, (3, 2))).astype(dtype), "s": np.array(1, dtype=dtype)}
    rows = garbage_rows(1, layout.record_size, 1)
    varied = {key: make_variant(kind, value, dtype) for key, value in obs.items()}
    flatten_into(layout.table, varied, rows[0], 0)
    assert_same_batch(batch_views(layout, rows), reference_batch(space, [obs]))


def test_python_ints_go_where_gymnasium_takes_them():
    # A Python int is an int64 array to numpy: same_kind casts it into signed and float
    # leaves, not into unsigned or bool ones (Gymnasium's SyncVectorEnv raises there too).
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.float16, np.float32):
        layout = layout_of(spaces.Box(0, 100, (), dtype=dtype))
        rows = np.zeros((1, layout.record_size), np.uint8)
        flatten_into(layout.table, 5, rows[0], 0)
        assert batch_views(layout, rows)[0] == 5
    for dtype in (np.uint8, np.uint16, np.uint64, np.bool_):
        layout = layout_of(spaces.Box(0, 1, (), dtype=dtype))
        rows = np.zeros((1, layout.record_size), np.uint8)
        with pytest.raises(ObservationError, match=rf"int64.*expected dtype {np.dtype(dtype)}"):
            flatten_into(layout.table, 1, rows[0], 0)


# -- zero copy -----------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(obs_spaces, st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_views_share_memory_with_rows(space, n, seed):
    layout = layout_of(space)
    rows = np.zeros((n, layout.record_size), np.uint8)
    views = batch_views(layout, rows)
    flat = [get_path(views, path) for path, _ in leaves_in_order(space)]
    for view, leaf in zip(flat, layout.leaves, strict=True):
        assert view.base is not None
        if leaf.nbytes:
            assert np.shares_memory(view, rows)
    samples = samples_of(space, n, seed)
    for i, obs in enumerate(samples):
        flatten_into(layout.table, obs, rows[i], i)
    assert_same_batch(views, reference_batch(space, samples))  # views made before the writes


def test_writing_a_row_shows_up_in_views():
    space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32),
                         "id": spaces.Discrete(5)})
    layout = layout_of(space)
    rows = np.zeros((3, layout.record_size), np.uint8)
    views = batch_views(layout, rows)
    flatten_into(layout.table, {"pos": np.array([0.5, -0.25], np.float32), "id": 4}, rows[1], 1)
    np.testing.assert_array_equal(views["pos"], [[0, 0], [0.5, -0.25], [0, 0]])
    np.testing.assert_array_equal(views["id"], [0, 4, 0])
    (id_leaf,) = [leaf for leaf in layout.leaves if leaf.path == ("id",)]
    rows[2, id_leaf.offset:id_leaf.offset + 8] = np.array([3], np.int64).view(np.uint8)
    assert views["id"][2] == 3


def test_single_leaf_view_is_a_reshape_of_the_rows():
    layout = layout_of(spaces.Box(0, 255, (2, 4), np.uint8))
    rows = np.arange(16, dtype=np.uint8).reshape(2, 8)
    view = batch_views(layout, rows)
    assert view.shape == (2, 2, 4) and np.shares_memory(view, rows)
    np.testing.assert_array_equal(view.reshape(2, 8), rows)


# -- errors --------------------------------------------------------------------------

IMAGE = spaces.Dict({"image": spaces.Box(0, 255, (4, 4, 3), np.uint8),
                     "speed": spaces.Box(-1, 1, (), np.float32)})
NESTED = spaces.Dict({"a": spaces.Tuple((spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float32))),
                      "b": spaces.MultiBinary(2)})
GOOD_NESTED = {"a": (1, np.zeros(2, np.float32)), "b": np.array([0, 1], np.int8)}

ERROR_CASES = [
    pytest.param(IMAGE, {"image": np.zeros((4, 4), np.uint8), "speed": np.float32(0)},
                 'obs["image"]', "shape", id="wrong-shape"),
    pytest.param(IMAGE, {"image": np.zeros((4, 4, 3)), "speed": np.float32(0)},
                 'obs["image"]', "float64", id="float64-for-uint8"),
    pytest.param(NESTED, {**GOOD_NESTED, "a": (1, np.zeros(2, np.complex64))},
                 'obs["a"][1]', "complex64", id="nested-complex-for-float32"),
    pytest.param(NESTED, {"a": GOOD_NESTED["a"]}, 'obs["b"]', "", id="missing-key"),
    pytest.param(NESTED, {**GOOD_NESTED, "a": (1,)}, 'obs["a"][1]', "", id="short-tuple"),
    pytest.param(NESTED, {**GOOD_NESTED, "a": (1.5, np.zeros(2, np.float32))},
                 'obs["a"][0]', "", id="float-for-discrete"),
    pytest.param(NESTED, None, 'obs["a"][0]', "", id="not-a-dict"),
    pytest.param(spaces.Dict({"px": spaces.Box(0, 255, (), np.uint8)}), {"px": 256},
                 'obs["px"]', "256", id="python-int-256-for-uint8"),
    pytest.param(spaces.Dict({"px": spaces.Box(0, 255, (), np.uint8)}), {"px": -1},
                 'obs["px"]', "-1", id="python-int-minus-1-for-uint8"),
    pytest.param(spaces.Tuple((spaces.Box(0, 1, (3,), np.uint8),)), (np.zeros(3, np.int16),),
                 "obs[0]", "int16", id="int16-for-uint8"),
    pytest.param(spaces.Box(0, 1, (2,), np.float32), np.zeros(3, np.float32),
                 "obs ", "shape", id="top-level-shape"),
]


@pytest.mark.parametrize("space, obs, name, detail", ERROR_CASES)
def test_bad_observations_name_env_and_leaf(space, obs, name, detail):
    layout = layout_of(space)
    rows = np.zeros((1, layout.record_size), np.uint8)
    with pytest.raises(ValueError) as info:
        flatten_into(layout.table, obs, rows[0], 13)
    assert isinstance(info.value, ObservationError)
    message = str(info.value)
    assert re.search(r"\benv 13\b", message), message
    assert name in message, message
    assert detail in message, message


@pytest.mark.parametrize("space, obs", [
    pytest.param(IMAGE, {"image": np.zeros((4, 4, 3), np.uint8), "speed": np.zeros(())},
                 id="float64-for-float32"),
    pytest.param(NESTED, {**GOOD_NESTED, "a": (1, [0.5, -0.25])}, id="nested-list"),
    pytest.param(spaces.Tuple((spaces.Box(0, 1, (3,), np.int8),)), (np.arange(3, dtype=np.int16),),
                 id="int16-for-int8"),
])
def test_same_kind_casts_are_accepted_as_gymnasium_does(space, obs):
    # What used to be rejected as unsafe: now cast as Gymnasium's concatenate casts it.
    layout = layout_of(space)
    rows = np.zeros((1, layout.record_size), np.uint8)
    flatten_into(layout.table, obs, rows[0], 13)
    assert_same_batch(batch_views(layout, rows), reference_batch(space, [obs]))


def test_row_too_short():
    layout = layout_of(IMAGE)
    with pytest.raises(ValueError, match=f"at least {layout.leaves[-1].offset + 4} bytes"):
        flatten_into(layout.table, IMAGE.sample(), np.zeros(layout.record_size - 8, np.uint8))


def test_row_must_be_contiguous_uint8():
    layout = layout_of(IMAGE)
    with pytest.raises(ValueError):
        flatten_into(layout.table, IMAGE.sample(), np.zeros(2 * layout.record_size, np.uint8)[::2])
    with pytest.raises(ValueError):
        flatten_into(layout.table, IMAGE.sample(), np.zeros(layout.record_size, np.int8))


# -- spaces without a layout ---------------------------------------------------------

@pytest.mark.parametrize("space", [
    spaces.Text(5),
    spaces.Sequence(spaces.Discrete(3)),
    spaces.Graph(node_space=spaces.Box(0, 1, (2,)), edge_space=None),
    spaces.Dict({"ok": spaces.Box(0, 1, (2,)), "text": spaces.Text(4)}),
    spaces.Tuple((spaces.Discrete(2), spaces.Tuple((spaces.Sequence(spaces.Box(0, 1)),)))),
    spaces.Dict({"g": spaces.Graph(node_space=spaces.Discrete(3), edge_space=spaces.Discrete(2))}),
], ids=["text", "sequence", "graph", "dict-text", "nested-sequence", "dict-graph"])
def test_non_flat_spaces_have_no_layout(space):
    assert layout_of(space) is None
