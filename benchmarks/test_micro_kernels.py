"""Micro-benchmarks: each compiled kernel vs the numpy / Gymnasium code it replaces, 16 envs.

Run: python -m pytest benchmarks/test_micro_kernels.py --benchmark-only
     --benchmark-columns=min,median,mean,rounds

One test per kernel, parametrized over ``impl``; ``benchmark.group`` is the case,
so each table shows the kernel and its references side by side.  Every
implementation writes into preallocated output where the real caller does.
"""

import time

import numpy as np
import pytest
from fastvec._layout import batch_views, layout_of
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array

from fastvec._kernels.autoreset import update_episode_stats
from fastvec._kernels.flatten import flatten_into
from fastvec._kernels.rows import gather_rows
from fastvec._kernels.stacking import find_out_of_range, stack_flags, stack_rewards

NUM_ENVS = 16

SPACES = {
    "box": spaces.Box(0, 255, (84, 84, 4), np.uint8),
    "dict": spaces.Dict({
        "image": spaces.Box(0, 255, (64, 64, 3), np.uint8),
        "vec": spaces.Box(-1, 1, (32,), np.float32),
        "mask": spaces.MultiBinary(8),
        "mode": spaces.Discrete(10),
    }),
}


def env_observations(space):
    """What 16 envs return from one step: fresh arrays, a numpy int64 for Discrete."""
    space.seed(0)
    return [space.sample() for _ in range(NUM_ENVS)]


# --- flattening: 16 observations into their batch rows ---------------------------------

@pytest.mark.benchmark
@pytest.mark.parametrize("impl", ["flatten_into", "gymnasium_concatenate"])
@pytest.mark.parametrize("kind", ["box", "dict"])
def test_write_batch(benchmark, kind, impl):
    """``flatten_into`` once per env (from Python; ``EnvStepper`` calls it from C) vs
    ``concatenate(space, obs_list, out)`` into ``create_empty_array``'s output."""
    benchmark.group = f"write {kind}"
    space, obs = SPACES[kind], env_observations(SPACES[kind])
    if impl == "flatten_into":
        layout = layout_of(space)
        rows = np.zeros((NUM_ENVS, layout.record_size), np.uint8)
        row_list = list(rows)

        def write():
            for i, o in enumerate(obs):
                flatten_into(layout.table, o, row_list[i], i)

        benchmark(write)
        out = batch_views(layout, rows)
    else:
        out = create_empty_array(space, NUM_ENVS)
        benchmark(concatenate, space, obs, out)
    first = out if kind == "box" else out["image"]
    assert np.array_equal(first[3], obs[3] if kind == "box" else obs[3]["image"])


@pytest.mark.benchmark
@pytest.mark.parametrize("impl", ["batch_views", "create_empty_array", "nothing"])
@pytest.mark.parametrize("kind", ["box", "dict"])
def test_read_batch(benchmark, kind, impl):
    """The batched structure over 16 rows.  ``batch_views`` builds zero-copy views of a
    row block (per ``recv`` of the async env); Gymnasium's sync env builds its output
    once with ``create_empty_array`` and then pays nothing per step (``nothing``)."""
    benchmark.group = f"read {kind}"
    space = SPACES[kind]
    if impl == "batch_views":
        layout = layout_of(space)
        rows = np.zeros((NUM_ENVS, layout.record_size), np.uint8)
        benchmark(batch_views, layout, rows)
    elif impl == "create_empty_array":
        benchmark(create_empty_array, space, NUM_ENVS)
    else:
        out = create_empty_array(space, NUM_ENVS)
        benchmark(lambda: out)


# --- stacking: per-env Python results into batch arrays --------------------------------

def _loop_store(values, out):
    for i, v in enumerate(values):
        out[i] = v


@pytest.mark.benchmark
@pytest.mark.parametrize("impl", ["kernel", "item_loop", "np_array"])
@pytest.mark.parametrize("kind", ["rewards", "flags"])
def test_stack(benchmark, kind, impl):
    """16 Python floats (or bools) into a float64 (bool) array."""
    benchmark.group = f"stack {kind}"
    if kind == "rewards":
        values, dtype, kernel = [0.25 * i for i in range(NUM_ENVS)], np.float64, stack_rewards
    else:
        values, dtype, kernel = [i % 3 == 0 for i in range(NUM_ENVS)], np.bool_, stack_flags
    out = np.zeros(NUM_ENVS, dtype)
    if impl == "kernel":
        benchmark(kernel, values, out)
    elif impl == "item_loop":
        benchmark(_loop_store, values, out)
    else:
        out = benchmark(np.array, values, dtype)
    assert out.tolist() == values


def _numpy_out_of_range(values, low, high):
    bad = (values < low) | (values > high)
    return tuple(np.argwhere(bad)[0]) if bad.any() else None


@pytest.mark.benchmark
@pytest.mark.parametrize("impl", ["kernel", "numpy"])
@pytest.mark.parametrize("shape", [(16, 1), (256, 4)], ids=["16", "256x4"])
def test_find_out_of_range(benchmark, shape, impl):
    """An int64 action batch, all in range (the every-step case): the kernel's one scan
    vs the mask, ``.any()`` and (only when something is out of range) ``argwhere``."""
    benchmark.group = f"out of range {shape[0]}x{shape[1]}"
    values = np.random.default_rng(0).integers(0, 6, shape, dtype=np.int64)
    low, high = np.zeros(shape[1], np.int64), np.full(shape[1], 5, np.int64)
    check = find_out_of_range if impl == "kernel" else _numpy_out_of_range
    assert benchmark(check, values, low, high) is None


# --- episode statistics ----------------------------------------------------------------

class _Stats:
    """Per-env episode state, NEXT_STEP autoreset: env 3 ends an episode every other step."""

    def __init__(self):
        self.prev_dones = np.zeros(NUM_ENVS, np.bool_)
        self.returns = np.zeros(NUM_ENVS)
        self.lengths = np.zeros(NUM_ENVS, np.int64)
        self.starts = np.zeros(NUM_ENVS)
        self.rewards = np.full(NUM_ENVS, 0.5)
        self.terminations = np.zeros(NUM_ENVS, np.bool_)
        self.terminations[3] = True
        self.truncations = np.zeros(NUM_ENVS, np.bool_)


def numpy_episode_stats(s, now):
    """The numpy statements of Gymnasium's ``RecordEpisodeStatistics.step`` (NEXT_STEP)."""
    reset, running = s.prev_dones, ~s.prev_dones
    s.returns[reset] = 0.0
    s.returns[running] += s.rewards[running]
    s.lengths[reset] = 0
    s.lengths[running] += 1
    s.starts[reset] = now
    dones = np.logical_or(s.terminations, s.truncations)
    s.prev_dones = dones
    if not np.sum(dones):
        return None
    elapsed = np.round(now - s.starts, 6)
    return {"r": np.where(dones, s.returns, 0.0), "l": np.where(dones, s.lengths, 0),
            "t": np.where(dones, elapsed, 0.0)}


@pytest.mark.benchmark
@pytest.mark.parametrize("impl", ["kernel", "numpy"])
def test_episode_stats(benchmark, impl):
    """One step of 16 envs' statistics; the kernel writes ``r``/``l``/``t`` into the
    caller's arrays, the numpy code allocates them with ``np.where`` when an env is done."""
    benchmark.group = "episode stats"
    s, now = _Stats(), time.perf_counter()
    if impl == "kernel":
        out = (np.zeros(NUM_ENVS), np.zeros(NUM_ENVS, np.int64), np.zeros(NUM_ENVS))
        benchmark(lambda: update_episode_stats(
            s.terminations, s.truncations, s.rewards, s.prev_dones, s.returns, s.lengths,
            s.starts, now, False, *out))
    else:
        benchmark(numpy_episode_stats, s, now)


# --- rows: gather 8 of 16 rows ---------------------------------------------------------

@pytest.mark.benchmark
@pytest.mark.parametrize("impl", ["gather_rows", "np_take_out", "np_take_clip", "fancy_index"])
@pytest.mark.parametrize("width", [84 * 84 * 4, 8], ids=["28224B", "8B"])
def test_gather_rows(benchmark, width, impl):
    """Rows 0, 2, ..., 14 of a (16, width) uint8 block into an (8, width) batch;
    ``gather_rows`` and ``np.take`` write into a preallocated batch, ``src[index]`` allocates.
    ``np.take`` buffers ``out`` in its default ``mode="raise"``; ``"clip"`` writes directly."""
    benchmark.group = f"gather 8 of 16 x {width} B"
    src = np.arange(NUM_ENVS * width, dtype=np.uint64).astype(np.uint8).reshape(NUM_ENVS, width)
    index = np.arange(0, NUM_ENVS, 2, dtype=np.int64)
    out = np.empty((len(index), width), np.uint8)
    if impl == "gather_rows":
        benchmark(gather_rows, src, index, out)
    elif impl == "np_take_out":
        benchmark(np.take, src, index, 0, out)
    elif impl == "np_take_clip":
        benchmark(np.take, src, index, 0, out, "clip")
    else:
        out = benchmark(src.__getitem__, index)
    assert np.array_equal(out, src[index])
