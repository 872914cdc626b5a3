"""Infos through the workers' info areas: the block layout, the merge, and the fallbacks."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import SyncVectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

from fastvec._kernels.infos import batch_block_infos, batch_infos
from fastvec.pool.process import shared_infos as slab
from tests.support import internals
from tests.support.compare import assert_tree_equal

# ---------------------------------------------------------------------------
# batch_block_infos: the "stored as it came" flag


@pytest.mark.parametrize(
    "entries, exact",
    [
        ([(0, {"a": 1}), (1, {"a": 2})], True),
        ([(0, {"a": 1.5}), (1, {"a": np.float64(2)})], True),
        ([(0, {"a": np.float32(1)}), (1, {"a": np.float32(2)})], True),
        ([(0, {"v": np.zeros(3, np.int16)}), (1, {"v": np.ones(3, np.int16)})], True),
        ([(0, {"n": {"x": True}}), (1, {"n": {"x": False}})], True),
        ([(0, {"a": 1}), (1, {"a": 2.5})], False),  # 2.5 cast into an int array
        ([(0, {"a": 1.5}), (1, {"a": np.float32(2)})], False),
        ([(0, {"v": np.zeros(3, np.int16)}), (1, {"v": np.ones(3, np.int64)})], False),
        ([(0, {"s": "text"})], False),  # an object array
        ([(0, {"b": np.bool_(True)})], False),  # numpy bools batch into object arrays
    ],
)
def test_exact_flag(entries, exact):
    batched, flag = batch_block_infos(entries, 2)
    assert flag is exact
    assert_tree_equal(batched, batch_infos(entries, 2))


# ---------------------------------------------------------------------------
# leaves, schema, areas


def test_leaves_round_trip_through_an_area():
    batched = batch_infos([(0, {"a": 1, "n": {"v": np.arange(3.0)}}), (1, {"b": 2.5})], 2)
    leaves = slab.leaves_of(batched)
    assert [path for path, _ in leaves] == [("a",), ("_a",), ("n", "v"), ("n", "_v"), ("_n",),
                                            ("b",), ("_b",)]
    schema = slab.schema_of(leaves)
    area = np.zeros(slab.INFO_BYTES, np.uint8)
    views = slab.area_views(schema, area)
    slab.write_leaves(views, leaves)
    block = slab.BlockInfos(tuple(path for path, _, _ in schema), views, 2, 0)
    rebuilt = slab.batch_entries([(0, block)], 2)
    assert_tree_equal(rebuilt, batched)
    assert list(rebuilt) == list(batched)  # same key order
    area[:] = 0
    assert rebuilt["a"][0] == 1  # fresh arrays, not views of the area


@pytest.mark.parametrize(
    "batched",
    [
        {"s": np.array(["x", None], dtype=object), "_s": np.array([True, False])},
        {"a": np.zeros(2), "b": np.zeros(2)},  # not a key followed by its mask
        {1: np.zeros(2), "_1": np.zeros(2, bool)},  # not a str key
        {"e": {}, "_e": np.zeros(2, bool)},  # an empty dict would vanish
        {"a": np.zeros(2)},
    ],
)
def test_not_plain(batched):
    assert slab.leaves_of(batched) is None


def test_too_big_for_the_area():
    schema = (((("big",), "<f8", (2, 4096))),)
    assert slab.area_views(schema, np.zeros(slab.INFO_BYTES, np.uint8)) is None


# ---------------------------------------------------------------------------
# merging blocks equals batching every env's info in env order

_VALUE_KINDS = {
    "int": st.integers(-(2**40), 2**40),
    "float": st.floats(allow_nan=False, width=64),
    "bool": st.booleans(),
    "f32": st.floats(allow_nan=False, width=32).map(np.float32),
    "vec": st.lists(st.integers(0, 255), min_size=3, max_size=3).map(
        lambda v: np.array(v, np.uint8)),
}


@st.composite
def block_entries(draw):
    """Entries of several blocks; each key has one kind per block (maybe not across blocks)."""
    num_blocks = draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 3)) for _ in range(num_blocks)]
    keys = ["a", "b", "c"]
    blocks, start = [], 0
    for size in sizes:
        kinds = {k: draw(st.sampled_from(sorted(_VALUE_KINDS))) for k in keys}
        entries = []
        for i in range(start, start + size):
            present = draw(st.lists(st.sampled_from(keys), unique=True, max_size=3))
            info = {k: draw(_VALUE_KINDS[kinds[k]]) for k in present}
            if draw(st.booleans()):
                info["nested"] = {"x": draw(_VALUE_KINDS[kinds["a"]])}
            if info:
                entries.append((i, info))
        blocks.append((start, size, entries))
        start += size
    return blocks, start


def _batch_by_blocks(blocks: list, num_envs: int) -> dict:
    """What the parent does: exact plain blocks merged, the rest raw, raw again when blocks
    disagree."""
    mixed: list = []
    for w, (start, size, entries) in enumerate(blocks):
        local = [(i - start, info) for i, info in entries]
        batched, exact = batch_block_infos(local, size)
        leaves = slab.leaves_of(batched) if exact and entries else None
        if leaves is None:
            mixed.extend(entries)
        else:
            mixed.append((start, slab.BlockInfos.of(batched, size, w)))
    try:
        return slab.batch_entries(mixed, num_envs)
    except slab.InfosDisagree:
        by_start = {start: entries for start, _, entries in blocks}
        return batch_infos(slab.fetch_raw(mixed, by_start), num_envs)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=300, deadline=None)
@given(block_entries())
def test_merged_blocks_equal_batching_every_env(drawn):
    blocks, num_envs = drawn
    raw = [entry for _, _, entries in blocks for entry in entries]
    try:
        expected = batch_infos(raw, num_envs)
    except (ValueError, OverflowError, TypeError) as exc:  # Gymnasium's own error
        with pytest.raises(type(exc)):
            _batch_by_blocks(blocks, num_envs)
        return
    got = _batch_by_blocks(blocks, num_envs)
    assert_tree_equal(got, expected)
    assert list(got) == list(expected)


def test_blocks_that_disagree_raise_mismatch():
    ints = slab.BlockInfos.of(batch_infos([(0, {"a": 1})], 1), 1, 0)
    floats = slab.BlockInfos.of(batch_infos([(0, {"a": 1.5})], 1), 1, 1)
    with pytest.raises(slab.InfosDisagree):
        slab.batch_entries([(0, ints), (1, floats)], 2)


# ---------------------------------------------------------------------------
# through real workers


def numeric_info(env_id: int, t: int, variant: str) -> dict:
    """Numeric infos whose keys, types and shapes change with ``variant`` and time."""
    info: dict = {"count": t, "score": t * 0.5, "vec": np.full(3, t, np.float32)}
    if variant == "per_worker_types" and env_id % 2:
        info["count"] = t + 0.25  # a float where other workers have ints
    if variant == "changing":
        if t % 3 == 0:
            info["sometimes"] = {"x": t}
        if t % 5 == 0:
            info["vec"] = np.full(4, t, np.float32)  # another shape now and then
        if t % 11 == 0:
            info["name"] = "object"  # an object array: not plain
    return info


class NumericInfoEnv(gym.Env):
    """Observation ``env_id + t / 100``; infos from :func:`numeric_info`."""

    def __init__(self, env_id: int = 0, variant: str = "steady"):
        self.env_id, self.variant = env_id, variant
        self.observation_space = spaces.Box(-10.0, 10.0, (2,), np.float64)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), numeric_info(self.env_id, self.t, self.variant)

    def step(self, action):
        self.t += 1
        return (self._obs(), float(action), self.t % 7 == 0, False,
                numeric_info(self.env_id, self.t, self.variant))

    def _obs(self) -> np.ndarray:
        return np.full(2, self.env_id + self.t / 100)


def _run(vec, ref, steps=40):
    got, want = vec.reset(seed=3), ref.reset(seed=3)
    assert_tree_equal(got[1], want[1])
    rng = np.random.default_rng(0)
    for t in range(steps):
        actions = rng.integers(0, 2, size=ref.num_envs)
        got, want = vec.step(actions), ref.step(actions)
        for name, a, b in zip(("obs", "rewards", "terminations", "truncations", "infos"),
                              got, want, strict=True):
            assert_tree_equal(a, b, f"step {t} {name}")


@pytest.mark.subprocess
@pytest.mark.parametrize("variant", ["steady", "changing"])
@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_infos_equal_sync_vector_env(make_subproc, variant, num_workers):
    fns = [functools.partial(NumericInfoEnv, i, variant) for i in range(6)]
    vec = make_subproc(fns, num_workers=num_workers)
    _run(vec, SyncVectorEnv(fns))
    if variant == "steady":  # the areas were used: nothing asked workers to stop
        assert not internals.infos_raw_only(vec)


@pytest.mark.subprocess
def test_workers_that_disagree_on_types_fall_back_to_raw_infos(make_subproc):
    fns = [functools.partial(NumericInfoEnv, i, "per_worker_types") for i in range(4)]
    vec = make_subproc(fns, num_workers=4)  # one env per worker: each block is exact
    _run(vec, SyncVectorEnv(fns))
    assert internals.infos_raw_only(vec)


@pytest.mark.subprocess
def test_async_batches_with_disagreeing_workers(make_subproc):
    fns = [functools.partial(NumericInfoEnv, i, "per_worker_types") for i in range(4)]
    vec = make_subproc(fns, num_workers=4, batch_size=2)
    vec.async_reset(seed=3)
    seen = set()
    for _ in range(30):
        obs, rewards, terminations, truncations, infos, ids = vec.recv()
        seen.update(ids.tolist())
        steps = [round((obs[k, 0] - e) * 100) for k, e in enumerate(ids)]
        expected = batch_infos([(k, numeric_info(e, t, "per_worker_types"))
                                for k, (e, t) in enumerate(zip(ids, steps, strict=True))],
                               len(ids))
        assert_tree_equal(infos, expected)
        vec.send(np.zeros(len(ids), np.int64), ids)
    assert seen == {0, 1, 2, 3}
