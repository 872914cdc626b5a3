"""Exact comparison of nested observations, infos and step results.

"Equal" here means bit-identical: same container types and keys, same array
dtypes and shapes, same bytes; object arrays are compared element by element,
recursively.  Failure messages name the path of the first difference, such as
``infos["nested"]["b"]: dtype uint8 != int64``.

Also: whole trajectories side by side with Gymnasium's (:func:`run_parity`),
infos without wall-clock episode times (:func:`drop_episode_time`), and frames
tiled into a grid (:func:`check_tiling`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode


def _describe_mismatch(actual: np.ndarray, expected: np.ndarray) -> str:
    a = actual.reshape(-1) if actual.ndim else actual.reshape(1)
    e = expected.reshape(-1) if expected.ndim else expected.reshape(1)
    if expected.dtype.kind == "f":
        same = (a == e) | (np.isnan(a) & np.isnan(e))
    else:
        same = a == e
    bad = np.flatnonzero(~same)
    if bad.size == 0:  # equal values, different bits (e.g. -0.0 vs 0.0)
        return "values equal but bits differ"
    first = np.unravel_index(bad[0], expected.shape) if expected.ndim else ()
    return (
        f"{bad.size} of {e.size} elements differ; first at index {tuple(map(int, first))}: "
        f"{a[bad[0]]!r} != {e[bad[0]]!r}"
    )


def _assert_array_equal(actual: Any, expected: np.ndarray, path: str) -> None:
    assert isinstance(actual, np.ndarray), (
        f"{path}: expected a numpy array, got {type(actual).__name__}: {actual!r}"
    )
    assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
    if expected.dtype == object:
        for index in np.ndindex(expected.shape):
            suffix = "".join(f"[{i}]" for i in index)
            assert_tree_equal(actual[index], expected[index], f"{path}{suffix}")
        return
    a, e = np.ascontiguousarray(actual), np.ascontiguousarray(expected)
    assert a.tobytes() == e.tobytes(), f"{path}: {_describe_mismatch(a, e)}"


def assert_tree_equal(actual: Any, expected: Any, path: str = "value") -> None:
    """Assert ``actual`` is bit-identical to ``expected``, recursing into containers."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected a dict, got {type(actual).__name__}"
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        assert not missing and not extra, (
            f"{path}: keys differ: missing {missing}, unexpected {extra}"
        )
        for key in expected:
            assert_tree_equal(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (tuple, list)):  # namedtuples (GraphInstance) included
        assert type(actual) is type(expected), (
            f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
        )
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_tree_equal(a, e, f"{path}[{i}]")
    elif isinstance(expected, np.ndarray):
        _assert_array_equal(actual, expected, path)
    elif isinstance(expected, np.generic):
        assert type(actual) is type(expected), (
            f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
        )
        _assert_array_equal(np.asarray(actual), np.asarray(expected), path)
    else:
        assert type(actual) is type(expected), (
            f"{path}: type {type(actual).__name__} != {type(expected).__name__} "
            f"({actual!r} vs {expected!r})"
        )
        both_nan = isinstance(expected, float) and math.isnan(expected) and math.isnan(actual)
        assert both_nan or actual == expected, f"{path}: {actual!r} != {expected!r}"


def assert_obs_equal(actual: Any, expected: Any, path: str = "obs") -> None:
    """Assert two (batched or single) observations are bit-identical."""
    assert_tree_equal(actual, expected, path)


def assert_infos_equal(actual: Any, expected: Any, path: str = "infos") -> None:
    """Assert two batched infos are identical: keys, ``_key`` masks, dtypes, values."""
    assert_tree_equal(actual, expected, path)


def assert_step_equal(actual: tuple, expected: tuple, where: str = "") -> None:
    """Assert two ``step`` results ``(obs, rewards, terminations, truncations, infos)``
    are identical (dtypes included)."""
    prefix = f"{where}: " if where else ""
    assert isinstance(actual, tuple) and len(actual) == 5, (
        f"{prefix}step returned {type(actual).__name__} of length {len(actual)}, expected a 5-tuple"
    )
    obs, rewards, terminations, truncations, infos = actual
    exp_obs, exp_rewards, exp_terminations, exp_truncations, exp_infos = expected
    assert_obs_equal(obs, exp_obs, f"{prefix}obs")
    assert_tree_equal(rewards, exp_rewards, f"{prefix}rewards")
    assert_tree_equal(terminations, exp_terminations, f"{prefix}terminations")
    assert_tree_equal(truncations, exp_truncations, f"{prefix}truncations")
    assert_infos_equal(infos, exp_infos, f"{prefix}infos")


def assert_reset_equal(actual: tuple, expected: tuple, where: str = "") -> None:
    """Assert two ``reset`` results ``(obs, infos)`` are identical."""
    prefix = f"{where}: " if where else ""
    assert isinstance(actual, tuple) and len(actual) == 2, (
        f"{prefix}reset returned {type(actual).__name__}, expected a 2-tuple (obs, infos)"
    )
    assert_obs_equal(actual[0], expected[0], f"{prefix}obs")
    assert_infos_equal(actual[1], expected[1], f"{prefix}infos")


def snapshot(value: Any) -> Any:
    """A deep copy to check later that ``value`` was not changed in place."""
    return deepcopy(value)


# ---------------------------------------------------------------------------
# whole trajectories


def check_attributes(vec: Any, ref: Any, mode: AutoresetMode) -> None:
    """Assert ``vec`` has the attributes Gymnasium's ``ref`` has, and autoreset ``mode``."""
    assert vec.num_envs == ref.num_envs
    assert vec.single_observation_space == ref.single_observation_space
    assert vec.observation_space == ref.observation_space
    assert vec.single_action_space == ref.single_action_space
    assert vec.action_space == ref.action_space
    assert vec.metadata["autoreset_mode"] is mode, (
        f'metadata["autoreset_mode"] is {vec.metadata["autoreset_mode"]!r}, expected {mode!r}'
    )
    assert vec.render_mode == ref.render_mode


class Recorder:
    """Keeps what the vector env returned, with a snapshot, to check at the end that
    later steps did not change any of it in place.  Observations are only kept with
    ``copy=True``: with ``copy=False`` they may be views that later steps overwrite."""

    def __init__(self, include_obs: bool) -> None:
        self.include_obs = include_obs
        self.kept: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    def keep(self, where: str, result: tuple) -> None:
        names = ("obs", "infos") if len(result) == 2 else (
            "obs", "rewards", "terminations", "truncations", "infos"
        )
        kept = {n: v for n, v in zip(names, result, strict=True) if self.include_obs or n != "obs"}
        self.kept.append((where, kept, snapshot(kept)))

    def check(self) -> None:
        for where, kept, before in self.kept:
            for name, value in kept.items():
                assert_tree_equal(
                    value, before[name], f"{name} returned by {where}, after later steps,"
                )


InfoFilter = Callable[[dict, str], dict]


def run_parity(
    vec: Any,
    ref: Any,
    *,
    mode: AutoresetMode,
    copy: bool,
    steps: int,
    seed: int = 7,
    action_seed: int = 123,
    infos_filter: InfoFilter | None = None,
    partial_resets: bool = True,
) -> int:
    """Step ``vec`` and ``ref`` side by side and compare every result.

    In DISABLED mode, done envs are reset with ``reset_mask`` (or, with
    ``partial_resets=False``, all envs are reset when any is done).  Halfway,
    both get a full reset with a list of seeds.  Returns the number of episode
    ends seen, so callers can check the run exercised autoreset.
    """
    filt = infos_filter or (lambda infos, where: infos)
    rec = Recorder(include_obs=copy)
    num_envs = ref.num_envs

    def reset_both(where: str, **kwargs: Any) -> None:
        opts = kwargs.pop("mask", None)
        out = vec.reset(**kwargs, options=None if opts is None else {"reset_mask": opts.copy()})
        exp = ref.reset(**kwargs, options=None if opts is None else {"reset_mask": opts.copy()})
        assert_reset_equal((out[0], filt(out[1], where)), (exp[0], filt(exp[1], where)), where)
        rec.keep(where, out)

    reset_both("reset(seed)", seed=seed)
    ref.action_space.seed(action_seed)
    episode_ends = 0
    for t in range(steps):
        actions = ref.action_space.sample()
        out = vec.step(snapshot(actions))
        exp = ref.step(snapshot(actions))
        where = f"step {t}"
        assert_step_equal((*out[:4], filt(out[4], where)), (*exp[:4], filt(exp[4], where)), where)
        rec.keep(where, out)
        done = np.logical_or(exp[2], exp[3])
        episode_ends += int(done.sum())
        if t == steps // 2:
            seeds = [seed + 100 + 3 * i for i in range(num_envs)]
            reset_both(f"full reset after step {t}", seed=seeds)
        elif mode is AutoresetMode.DISABLED and done.any():
            if not partial_resets:
                reset_both(f"reset after step {t}")
            elif t % 2:
                reset_both(f"partial reset after step {t}", mask=done)
            else:
                seeds = [1000 * t + i for i in range(num_envs)]
                reset_both(f"seeded partial reset after step {t}", mask=done, seed=seeds)
    rec.check()
    return episode_ends


def drop_episode_time(infos: dict, where: str) -> dict:
    """``infos`` without ``episode["t"]`` (wall-clock time), after checking it."""
    if not isinstance(infos, dict) or "episode" not in infos:
        return infos
    episode = dict(infos["episode"])
    assert "t" in episode, f"{where}: infos['episode'] has no 't'"
    t = episode.pop("t")
    assert isinstance(t, np.ndarray) and t.dtype == np.float64, (
        f"{where}: infos['episode']['t'] should be a float64 array, got {t!r}"
    )
    assert t.shape == infos["_episode"].shape, f"{where}: episode t shape {t.shape}"
    assert np.all(t >= 0) and np.all(np.isfinite(t)), f"{where}: episode t {t}"
    return {**infos, "episode": episode}


# ---------------------------------------------------------------------------
# rendered frames


def check_tiling(frames: list[np.ndarray], grid: np.ndarray) -> None:
    """``grid`` holds ``frames`` row-major in a roughly square grid, zeros elsewhere."""
    n = len(frames)
    h, w, c = frames[0].shape
    assert isinstance(grid, np.ndarray) and grid.dtype == frames[0].dtype
    assert grid.ndim == 3 and grid.shape[2] == c, f"grid shape {grid.shape}"
    assert grid.shape[0] % h == 0 and grid.shape[1] % w == 0, f"grid shape {grid.shape}"
    rows, cols = grid.shape[0] // h, grid.shape[1] // w
    assert rows * cols >= n, f"{rows}x{cols} grid for {n} frames"
    assert abs(rows - cols) <= 1, f"{rows}x{cols} grid for {n} frames is not roughly square"
    assert min(rows, cols) <= math.ceil(math.sqrt(n)), f"{rows}x{cols} grid for {n} frames"
    assert (rows - 1) * cols < n and (cols - 1) * rows < n, f"{rows}x{cols}: an empty row/col"
    for k in range(rows * cols):
        r, col = divmod(k, cols)
        cell = grid[r * h:(r + 1) * h, col * w:(col + 1) * w]
        expected = frames[k] if k < n else np.zeros_like(frames[0])
        assert_tree_equal(cell, expected, f"cell ({r}, {col}) of a {rows}x{cols} grid")
