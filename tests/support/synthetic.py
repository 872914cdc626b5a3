"""Synthetic envs: nested observations of mixed dtypes, random episode lengths, infos of
every kind Gymnasium batches, envs with slow random steps, and envs for fuzzing."""

from __future__ import annotations

import string
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

# ---------------------------------------------------------------------------
# synthetic envs: nested observations of mixed dtypes, random episode lengths,
# and infos of every kind Gymnasium batches.


def synthetic_observation_space(layout: str) -> spaces.Space:
    """An observation space; ``layout`` is ``"dict"``, ``"tuple"``, ``"image"`` or ``"odd"``."""
    if layout == "dict":
        return spaces.Dict(
            {
                "image": spaces.Box(0, 255, shape=(3, 5, 3), dtype=np.uint8),
                "pos": spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32),
                "vel": spaces.Box(-10.0, 10.0, shape=(2,), dtype=np.float64),
                "counts": spaces.Box(-100, 100, shape=(5,), dtype=np.int32),
                "ok": spaces.Box(0, 1, shape=(3,), dtype=np.bool_),
                "flags": spaces.MultiBinary(5),
                "mode": spaces.Discrete(4, start=-1),
                "cmd": spaces.MultiDiscrete([3, 5]),
                "nested": spaces.Tuple(
                    (
                        spaces.Box(-5, 5, shape=(2, 2), dtype=np.int32),
                        spaces.Dict(
                            {
                                "a": spaces.Discrete(3),
                                "b": spaces.Box(0.0, 1.0, shape=(), dtype=np.float32),
                            }
                        ),
                    )
                ),
            }
        )
    if layout == "tuple":
        return spaces.Tuple(
            (
                spaces.Box(0, 255, shape=(7,), dtype=np.uint8),
                spaces.Dict(
                    {
                        "x": spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float64),
                        "y": spaces.MultiBinary((2, 3)),
                    }
                ),
                spaces.Discrete(5),
                spaces.Tuple(
                    (
                        spaces.MultiDiscrete(np.array([[2, 3], [4, 5]])),
                        spaces.Box(0, 1, shape=(3,), dtype=np.bool_),
                    )
                ),
            )
        )
    if layout == "image":
        return spaces.Box(0, 255, shape=(8, 8, 3), dtype=np.uint8)
    if layout == "odd":  # less common dtypes, empty and one-byte leaves
        return spaces.Dict(
            {
                "half": spaces.Box(-2.0, 2.0, shape=(3,), dtype=np.float16),
                "u16": spaces.Box(0, 60000, shape=(2, 1), dtype=np.uint16),
                "u32": spaces.Box(0, 4_000_000_000, shape=(1,), dtype=np.uint32),
                "i8": spaces.Box(-128, 127, shape=(), dtype=np.int8),
                "empty": spaces.Box(0.0, 1.0, shape=(0,), dtype=np.float32),
                "empty2d": spaces.Box(0, 9, shape=(2, 0), dtype=np.int64),
                "big": spaces.Discrete(10**6, start=-(10**5)),
                "grid": spaces.MultiDiscrete(np.array([[2, 3, 4], [5, 6, 7]])),
                "one": spaces.MultiBinary(1),
            }
        )
    raise ValueError(f"unknown layout {layout!r}")


def sampler(
    space: spaces.Space, reverse_keys: bool = False
) -> Callable[[np.random.Generator], Any]:
    """A function drawing values of ``space`` from a generator, with the exact dtype
    of the space.  Built once per env: drawing is most of what the synthetic envs do.

    Discrete leaves come out as Python ints, as many envs return them.  With
    ``reverse_keys`` a Dict value lists its keys in the reverse order of the space.
    """
    if isinstance(space, spaces.Dict):
        keys = list(space.spaces)
        parts = [(k, sampler(space.spaces[k], reverse_keys)) for k in keys]
        order = keys[::-1] if reverse_keys else keys

        def draw_dict(rng):
            values = {k: f(rng) for k, f in parts}
            return {k: values[k] for k in order}

        return draw_dict
    if isinstance(space, spaces.Tuple):
        fns = [sampler(s, reverse_keys) for s in space.spaces]
        return lambda rng: tuple(f(rng) for f in fns)
    if isinstance(space, spaces.Discrete):
        start, n = int(space.start), int(space.n)
        return lambda rng: start + int(rng.integers(n))
    if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
        low = space.start if isinstance(space, spaces.MultiDiscrete) else 0
        high = low + (space.nvec if isinstance(space, spaces.MultiDiscrete) else 2)
        shape, dtype = space.shape, space.dtype
        return lambda rng: rng.integers(low, high, size=shape).astype(dtype)
    if isinstance(space, spaces.Box):
        shape, dtype = space.shape, space.dtype
        if dtype == np.bool_:
            return lambda rng: np.asarray(rng.random(shape) < 0.5)
        if np.issubdtype(dtype, np.integer):
            ilow, ihigh = space.low.astype(np.int64), space.high.astype(np.int64) + 1
            return lambda rng: np.asarray(rng.integers(ilow, ihigh)).astype(dtype)
        flow, fhigh = space.low.astype(np.float64), space.high.astype(np.float64)
        return lambda rng: np.asarray(rng.uniform(flow, fhigh)).astype(dtype)
    if isinstance(space, spaces.Text):
        chars, lo, hi = space.character_list, space.min_length, space.max_length + 1

        def draw_text(rng):
            length = int(rng.integers(lo, hi))
            return "".join(chars[int(i)] for i in rng.integers(len(chars), size=length))

        return draw_text
    if isinstance(space, spaces.Sequence):
        feature = sampler(space.feature_space)
        return lambda rng: tuple(feature(rng) for _ in range(int(rng.integers(0, 4))))
    if isinstance(space, spaces.Graph):
        node, edge = sampler(space.node_space), sampler(space.edge_space)

        def draw_graph(rng):
            num_nodes, num_edges = int(rng.integers(1, 4)), int(rng.integers(0, 3))
            nodes = np.stack([node(rng) for _ in range(num_nodes)])
            edges = np.array([edge(rng) for _ in range(num_edges)], dtype=np.int64)
            links = rng.integers(0, num_nodes, size=(num_edges, 2)).astype(np.int32)
            return spaces.GraphInstance(nodes=nodes, edges=edges, edge_links=links)

        return draw_graph
    raise TypeError(f"cannot draw from {space}")


def synthetic_action_space(kind: str) -> spaces.Space:
    """An action space; ``kind`` in ``discrete, box, multidiscrete, multibinary``."""
    return {
        "discrete": lambda: spaces.Discrete(3),
        "box": lambda: spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32),
        "multidiscrete": lambda: spaces.MultiDiscrete([2, 3]),
        "multibinary": lambda: spaces.MultiBinary(3),
    }[kind]()


def rich_info(env_id: int, t: int, rng: np.random.Generator, action: Any, ending: bool) -> dict:
    """Infos of every kind Gymnasium batches; some keys on some steps only."""
    info: dict[str, Any] = {
        "step": t,  # int
        "value": float(rng.normal()),  # float
        "flag": bool(t % 2),  # bool
        "np_f32": np.float32(rng.normal()),  # numpy float scalar
        "np_i16": np.int16(t - 7),  # numpy int scalar
        "np_bool": np.bool_(t % 3 == 0),  # numpy bool: an object array in Gymnasium
        "vec": rng.normal(size=3),  # float64 array
        "mat": np.full((2, 2), t, dtype=np.int32),
        "name": f"env{env_id}-t{t}",  # str: object array
        "action": np.asarray(action).copy(),
        "nested": {"a": env_id, "b": {"c": np.array([t, env_id], dtype=np.uint8)}, "d": "x"},
    }
    if rng.random() < 0.3:
        info["sometimes"] = float(t) / 2
    if rng.random() < 0.2:
        info["sometimes_nested"] = {"x": t, "y": np.float64(t) * 1.5}
    if rng.random() < 0.1:
        info["maybe_list"] = [t, "x", None]
    if rng.random() < 0.1:
        info["maybe_none"] = None
    if ending:
        info["bonus"] = np.float64(rng.normal())
        info["last_frame"] = np.arange(4, dtype=np.int16) + t
    return info


def mixed_type_info(env_id: int, t: int) -> dict:
    """One key whose Python type depends on the env: Gymnasium batches it with the
    type of the first env that reports it (an int array truncates later floats)."""
    value: Any = t + 0.75 if env_id % 2 else t
    flag: Any = (t + env_id) % 3 if env_id % 3 == 0 else bool(t % 2)
    return {"mixed": value, "flag_or_int": flag}


class SyntheticEnv(gym.Env):
    """Nested observations of mixed dtypes drawn from the env's seeded RNG.

    The observation space is ``synthetic_observation_space(layout)``, or ``space``
    when given.  Episode lengths are drawn at reset from ``[min_len, max_len]``; an
    episode ends by termination, truncation or both (drawn too).  Rewards come as Python
    floats, numpy float32 or ints.  ``info_kind`` is ``"rich"`` (see
    :func:`rich_info`), ``"mixed"`` (see :func:`mixed_type_info`) or ``"none"``.
    """

    metadata: dict[str, Any] = {"render_fps": 10}

    def __init__(
        self,
        layout: str = "dict",
        action_kind: str = "discrete",
        info_kind: str = "rich",
        min_len: int = 1,
        max_len: int = 12,
        reverse_keys: bool = False,
        env_id: int = 0,
        space: spaces.Space | None = None,
    ):
        self.layout, self.info_kind = layout, info_kind
        self.min_len, self.max_len = min_len, max_len
        self.reverse_keys = reverse_keys
        self.env_id = env_id
        self.observation_space = space if space is not None else synthetic_observation_space(layout)
        self.action_space = synthetic_action_space(action_kind)
        self.t = 0
        self.episode_len = 0
        self.ending = 0
        self._draw: Callable[[np.random.Generator], Any] | None = None

    def _obs(self) -> Any:
        if self._draw is None:
            self._draw = sampler(self.observation_space, self.reverse_keys)
        return self._draw(self.np_random)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.episode_len = int(self.np_random.integers(self.min_len, self.max_len + 1))
        self.ending = int(self.np_random.integers(3))
        info: dict[str, Any] = {}
        if self.info_kind == "rich":
            info = {"episode_len": self.episode_len, "on_reset": "yes", "env_id": self.env_id}
        elif self.info_kind == "mixed":
            info = mixed_type_info(self.env_id, self.t)
        return self._obs(), info

    def step(self, action):
        self.t += 1
        done = self.t >= self.episode_len
        terminated = done and self.ending in (0, 2)
        truncated = done and self.ending in (1, 2)
        reward: Any = float(self.np_random.normal())
        if self.env_id % 3 == 1:
            reward = np.float32(reward)
        elif self.env_id % 3 == 2:
            reward = int(self.t)
            terminated = np.bool_(terminated)
        if self.info_kind == "rich":
            info = rich_info(self.env_id, self.t, self.np_random, action, done)
        elif self.info_kind == "mixed":
            info = mixed_type_info(self.env_id, self.t)
        else:
            info = {}
        return self._obs(), reward, terminated, truncated, info


class ObjectSpaceEnv(SyntheticEnv):
    """Observations in spaces outside the flat-record path.

    ``kind``: ``"text"`` (Text), ``"sequence"`` (Sequence of Box),
    ``"graph"`` (Graph) or ``"dict_text"`` (a Dict holding a Text and a Box).
    """

    def __init__(self, kind: str = "text", env_id: int = 0, info_kind: str = "none"):
        super().__init__(layout="image", info_kind=info_kind, max_len=8, env_id=env_id)
        self.kind = kind
        self.observation_space = object_space(kind)


def object_space(kind: str) -> spaces.Space:
    """The observation space of :class:`ObjectSpaceEnv`."""
    if kind == "text":
        return spaces.Text(max_length=6, charset=string.ascii_lowercase)
    if kind == "sequence":
        return spaces.Sequence(spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32))
    if kind == "graph":
        return spaces.Graph(
            node_space=spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32),
            edge_space=spaces.Discrete(4),
        )
    if kind == "dict_text":
        return spaces.Dict(
            {
                "label": spaces.Text(max_length=5, charset=string.ascii_lowercase),
                "pos": spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32),
            }
        )
    raise ValueError(f"unknown object-space kind {kind!r}")



class JitterEnv(SyntheticEnv):
    """A synthetic env whose steps sleep for a random, env-dependent time.

    The sleep comes from a generator of its own (seeded by ``env_id``), so the
    trajectory is the same however the steps interleave in time; envs with a
    larger ``env_id`` are slower on average, so async batches really interleave.
    """

    def __init__(self, env_id: int = 0, mean_delay: float = 0.002, **kwargs: Any):
        super().__init__(env_id=env_id, **kwargs)
        self._delays = np.random.default_rng(1000 + env_id)
        self.mean_delay = mean_delay * (1 + env_id % 3)

    def step(self, action):
        time.sleep(self.mean_delay * float(self._delays.lognormal(0.0, 1.0)) / 1.65)
        return super().step(action)



# ---------------------------------------------------------------------------
# fuzzing: any observation space, generated infos, a fault on request


def fuzz_info(rng: np.random.Generator, kinds: Sequence[str], count: int) -> dict:
    """An info drawn from ``rng``: key ``k<j>`` of kind ``kinds[j]``, present with
    probability 0.6.  Array shapes follow ``count`` (see :class:`FuzzEnv`), so they
    change from step to step but not from env to env in one step (Gymnasium
    cannot batch one key's arrays of different shapes)."""
    info: dict[str, Any] = {}
    for j, kind in enumerate(kinds):
        if rng.random() >= 0.6:
            continue
        key = f"k{j}"
        if kind == "int":
            info[key] = int(rng.integers(-5, 5))
        elif kind == "float":
            info[key] = float(rng.normal())
        elif kind == "str":
            info[key] = "s" * int(rng.integers(0, 4))
        elif kind == "none":
            info[key] = None
        elif kind == "array":
            info[key] = rng.integers(0, 9, size=(count % 3, 2)).astype(np.int16)
        elif kind == "nested":
            inner: dict[str, Any] = {"x": float(rng.normal())}
            if rng.random() < 0.5:
                inner["deep"] = {"y": np.arange(count % 4, dtype=np.float32), "z": "t"}
            info[key] = inner
    return info


class FuzzEnv(SyntheticEnv):
    """A synthetic env with observation space ``space``, action space ``action``
    and :func:`fuzz_info` infos of ``info_kinds``.

    ``count`` (what the infos' array shapes follow) counts calls of ``step`` and
    ``reset``, so it is the same in every env of a ``NEXT_STEP`` vector env (an
    env due for an autoreset is reset instead of stepped); with ``shape_clock``
    False (other modes, where envs are reset apart) it stays 2.

    With ``bad_path`` (a tuple of Dict keys / Tuple indices naming a leaf), env
    ``bad_env`` corrupts that leaf of every observation from step ``bad_at`` on:
    ``"shape"`` (one more dimension of 2) or ``"dtype"`` (complex128).
    """

    def __init__(self, space: spaces.Space, action: spaces.Space, info_kinds: Sequence[str] = (),
                 env_id: int = 0, max_len: int = 6, bad_path: tuple | None = None,
                 bad_env: int = -1, bad_at: int = 1, fault: str = "shape",
                 shape_clock: bool = True):
        super().__init__(space=space, info_kind="none", max_len=max_len, env_id=env_id)
        self.action_space = action
        self.info_kinds = list(info_kinds)
        self.bad_path, self.bad_env, self.bad_at, self.fault = bad_path, bad_env, bad_at, fault
        self.count = 0 if shape_clock else 2
        self.shape_clock = shape_clock

    def _obs(self) -> Any:
        obs = super()._obs()
        if self.bad_path is None or self.env_id != self.bad_env or self.t < self.bad_at:
            return obs
        return _replace_leaf(obs, self.bad_path, self.fault)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, _ = super().reset(seed=seed, options=options)
        self.count += self.shape_clock
        return obs, fuzz_info(self.np_random, self.info_kinds, self.count)

    def step(self, action):
        self.count += self.shape_clock
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, fuzz_info(self.np_random, self.info_kinds,
                                                              self.count)


def _replace_leaf(obs: Any, path: tuple, fault: str) -> Any:
    if not path:
        leaf = np.asarray(obs)
        if fault == "shape":
            return np.zeros((*leaf.shape, 2), dtype=leaf.dtype)
        return leaf.astype(np.complex128)
    key, rest = path[0], path[1:]
    if isinstance(obs, dict):
        return {**obs, key: _replace_leaf(obs[key], rest, fault)}
    items = list(obs)
    items[key] = _replace_leaf(items[key], rest, fault)
    return tuple(items)
