"""A zoo of small environments for the vector-env tests.

Every env here is a module-level class, so an env factory such as
``functools.partial(CountingEnv, episode_len=3)`` pickles and can be sent to a
worker process.  Where the logic is more than a line, it lives in a plain
function of the env's state so that a test can compute the expected result
without an env.

Envs take an ``env_id`` (their index in the vector env) so that a value landing
in the wrong env's slot shows up.  Use :func:`make_fns` to build the list of
factories.
"""

from __future__ import annotations

import ctypes
import functools
import multiprocessing
import os
import signal
import string
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

# ---------------------------------------------------------------------------
# factories


def make_fns(
    env_cls: Callable[..., gym.Env],
    num_envs: int,
    per_env: Mapping[str, Sequence[Any]] | None = None,
    **common: Any,
) -> list[Callable[[], gym.Env]]:
    """Factories ``env_cls(env_id=i, **common, **{k: v[i] for k, v in per_env})``."""
    per_env = dict(per_env or {})
    for name, values in per_env.items():
        if len(values) != num_envs:
            raise ValueError(f"per_env[{name!r}] has {len(values)} values for {num_envs} envs")
    return [
        functools.partial(
            env_cls, env_id=i, **common, **{k: v[i] for k, v in per_env.items()}
        )
        for i in range(num_envs)
    ]


def gym_fns(env_id: str, num_envs: int, **kwargs: Any) -> list[Callable[[], gym.Env]]:
    """Factories for a registered Gymnasium env, ``gym.make(env_id, **kwargs)``."""
    return [functools.partial(gym.make, env_id, **kwargs) for _ in range(num_envs)]


# ---------------------------------------------------------------------------
# counting envs: the observation is the step count, so autoreset bugs show up
# as arithmetic failures.


def counting_step(t: int, episode_len: int, truncate: bool) -> tuple[int, bool, bool]:
    """Step count after a step from ``t``, and whether it terminates / truncates."""
    t += 1
    done = t >= episode_len
    return t, done and not truncate, done and truncate


def counting_model(lens: Sequence[int], truncate: Sequence[bool], actions: Any,
                   mode: AutoresetMode):
    """What counting envs (observation: steps since reset; reward: the action) give
    each step: a dict of obs, rewards, terminations, truncations, final_obs (env
    index -> value) and the episode statistics r and l (0 where no episode ended).
    In DISABLED mode the caller resets done envs right after the step."""
    n = len(lens)
    t = np.zeros(n, dtype=np.int64)
    ret, length = np.zeros(n), np.zeros(n, dtype=np.int64)
    pending = np.zeros(n, dtype=bool)
    for step_actions in actions:
        out = {
            "rewards": np.zeros(n),
            "terminations": np.zeros(n, dtype=bool),
            "truncations": np.zeros(n, dtype=bool),
            "final_obs": {},
            "r": np.zeros(n),
            "l": np.zeros(n, dtype=np.int64),
        }
        for i in range(n):
            if mode is AutoresetMode.NEXT_STEP and pending[i]:
                t[i], pending[i] = 0, False
                continue
            t[i] += 1
            out["rewards"][i] = float(step_actions[i])
            ret[i] += float(step_actions[i])
            length[i] += 1
            done = t[i] >= lens[i]
            out["terminations"][i] = done and not truncate[i]
            out["truncations"][i] = done and truncate[i]
            if not done:
                continue
            out["r"][i], out["l"][i], ret[i], length[i] = ret[i], length[i], 0.0, 0
            if mode is AutoresetMode.NEXT_STEP:
                pending[i] = True
            else:  # SAME_STEP resets now; in DISABLED mode the caller does
                out["final_obs"][i], t[i] = t[i], 0
        out["obs"] = t.copy()
        yield out


class CountingEnv(gym.Env):
    """Observation: the number of steps since reset (an int64 scalar).

    Reward: the action, as a float, so that actions routed to the wrong env
    show up.  The episode ends after ``episode_len`` steps, by termination or,
    with ``truncate=True``, by truncation.  Infos are empty.
    """

    metadata = {"render_modes": [], "render_fps": 4}

    def __init__(self, episode_len: int = 5, env_id: int = 0, truncate: bool = False):
        self.episode_len = episode_len
        self.env_id = env_id
        self.truncate = truncate
        self.label = f"counting-{env_id}"
        self.observation_space = spaces.Box(0, 10**6, shape=(), dtype=np.int64)
        self.action_space = spaces.Discrete(4)
        self.t = 0
        self.last_action: Any = None
        self.close_count = 0
        self.reset_count = 0
        self.last_options: dict | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.reset_count += 1
        self.last_options = None if options is None else dict(options)
        return np.int64(self.t), {}

    def step(self, action):
        self.last_action = action
        self.t, terminated, truncated = counting_step(self.t, self.episode_len, self.truncate)
        return np.int64(self.t), float(action), terminated, truncated, {}

    def scaled_count(self, scale: int, offset: int = 0) -> int:
        """A method for ``call`` tests: depends on the env, the args and the kwargs."""
        return self.t * scale + offset + 100 * self.env_id

    def close(self):
        self.close_count += 1


class PaddedObsEnv(CountingEnv):
    """A (3,) float32 observation: 12 bytes in a 16-byte record, so views are strided."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_space = spaces.Box(-1e9, 1e9, (3,), np.float32)

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return np.full(3, obs, np.float32), info

    def step(self, action):
        obs, *rest = super().step(action)
        return (np.full(3, obs, np.float32), *rest)


class DictCountingEnv(CountingEnv):
    """A counting env with a Dict observation and a per-step info."""

    def __init__(self, episode_len: int = 5, env_id: int = 0, truncate: bool = False):
        super().__init__(episode_len, env_id, truncate)
        self.observation_space = spaces.Dict(
            {
                "count": spaces.Box(0, 10**6, shape=(), dtype=np.int64),
                "env_id": spaces.Discrete(1000),
                "progress": spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32),
            }
        )

    def _obs(self) -> dict[str, Any]:
        frac = self.t / self.episode_len
        return {
            "count": np.int64(self.t),
            "env_id": self.env_id,
            "progress": np.array([frac, 1.0 - frac], dtype=np.float32),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed, options=options)
        return self._obs(), {"env_id": self.env_id}

    def step(self, action):
        _, reward, terminated, truncated, _ = super().step(action)
        return self._obs(), reward, terminated, truncated, {"count": self.t}


class ActionEchoEnv(gym.Env):
    """Records the action it received (unchanged) in ``last_action`` and echoes it.

    Observation: the action as float64; ``info["action"]`` is the action as given.
    Used to check what reaches the env (dtype conversion, out-of-bounds values).
    """

    metadata: dict[str, Any] = {}

    def __init__(self, action_space: spaces.Space, env_id: int = 0):
        self.env_id = env_id
        self.action_space = action_space
        shape = action_space.shape if action_space.shape else ()
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float64)
        self.last_action: Any = None
        self.step_count = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, dtype=np.float64), {}

    def step(self, action):
        self.last_action = action
        self.step_count += 1
        obs = np.asarray(action, dtype=np.float64).reshape(self.observation_space.shape)
        return obs, 0.0, False, False, {}


class RenderEnv(CountingEnv):
    """A counting env whose ``render()`` returns an rgb frame ``(height, width, 3)``.

    Pixel values: channel 0 is ``env_id``, channel 1 the step count, channel 2 the
    column index, so frames of different envs and steps all differ.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        episode_len: int = 5,
        env_id: int = 0,
        render_mode: str | None = "rgb_array",
        height: int = 4,
        width: int = 6,
    ):
        super().__init__(episode_len, env_id)
        self.render_mode = render_mode
        self.height, self.width = height, width

    def render(self):
        return render_frame(self.env_id, self.t, self.height, self.width)


def render_frame(env_id: int, t: int, height: int, width: int) -> np.ndarray:
    """The frame :class:`RenderEnv` renders."""
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[..., 0] = env_id
    frame[..., 1] = t
    frame[..., 2] = np.arange(width, dtype=np.uint8)[None, :]
    return frame


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


# ---------------------------------------------------------------------------
# misbehaving envs


def bad_obs_space(kind: str) -> spaces.Space:
    """The declared space of :class:`BadObsEnv`: ``box``, ``dict`` or ``tuple``."""
    if kind == "box":
        return spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)
    if kind == "dict":
        return spaces.Dict(
            {
                "image": spaces.Box(0, 255, shape=(2, 3, 3), dtype=np.uint8),
                "pos": spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32),
            }
        )
    if kind == "tuple":
        return spaces.Tuple(
            (spaces.Discrete(3), spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32))
        )
    raise ValueError(f"unknown kind {kind!r}")


BAD_OBS_PATH = {"box": "obs", "dict": 'obs["image"]', "tuple": "obs[1]"}
"""The key path of the leaf :class:`BadObsEnv` gets wrong, as error messages name it."""


def _corrupt(leaf: np.ndarray, fault: str) -> np.ndarray:
    if fault == "shape":
        return np.zeros((*leaf.shape[:-1], leaf.shape[-1] + 2), dtype=leaf.dtype)
    if fault == "dtype":  # a dtype Gymnasium's batching refuses too (not a same-kind cast)
        return leaf.astype(np.int16 if leaf.dtype == np.uint8 else np.complex64)
    raise ValueError(f"unknown fault {fault!r}")


class BadObsEnv(gym.Env):
    """Returns an observation that does not fit its space, if ``faulty``.

    The wrong leaf is the one :data:`BAD_OBS_PATH` names, with a wrong shape (the
    last dimension 2 longer) or dtype (``fault``), from step ``at_step`` on (0:
    from the first reset on).
    """

    metadata: dict[str, Any] = {}

    def __init__(
        self,
        kind: str = "dict",
        fault: str = "shape",
        at_step: int = 0,
        faulty: bool = False,
        env_id: int = 0,
    ):
        self.kind, self.fault, self.at_step, self.faulty = kind, fault, at_step, faulty
        self.env_id = env_id
        self.observation_space = bad_obs_space(kind)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self) -> Any:
        obs = self.observation_space.sample()
        if not (self.faulty and self.t >= self.at_step):
            return obs
        if self.kind == "box":
            return _corrupt(obs, self.fault)
        if self.kind == "dict":
            return {**obs, "image": _corrupt(obs["image"], self.fault)}
        return (obs[0], _corrupt(obs[1], self.fault))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, False, {}


class EnvBoom(RuntimeError):
    """The exception :class:`RaisingEnv` raises."""


class RaisingEnv(CountingEnv):
    """A counting env that raises :class:`EnvBoom` at step ``raise_at`` if ``faulty``.

    ``raise_at=0`` raises in ``reset``.
    """

    def __init__(self, raise_at: int = 3, faulty: bool = True, episode_len: int = 100,
                 env_id: int = 0):
        super().__init__(episode_len, env_id)
        self.raise_at, self.faulty = raise_at, faulty

    def _maybe_raise(self, t: int) -> None:
        if self.faulty and t == self.raise_at:
            raise EnvBoom(f"env {self.env_id} raised on purpose at step {t}")

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._maybe_raise(0)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self._maybe_raise(self.t + 1)
        return super().step(action)


class SlowEnv(CountingEnv):
    """A counting env that sleeps ``delay`` seconds in every step (and reset)."""

    def __init__(self, delay: float = 0.05, episode_len: int = 100, env_id: int = 0):
        super().__init__(episode_len, env_id)
        self.delay = delay

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        time.sleep(self.delay)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        time.sleep(self.delay)
        return super().step(action)


class HangingEnv(CountingEnv):
    """A counting env that never returns from step ``hang_at`` if ``faulty``."""

    def __init__(self, hang_at: int = 2, faulty: bool = True, episode_len: int = 100,
                 env_id: int = 0):
        super().__init__(episode_len, env_id)
        self.hang_at, self.faulty = hang_at, faulty

    def step(self, action):
        if self.faulty and self.t + 1 == self.hang_at:
            while True:
                time.sleep(3600)
        return super().step(action)


class CrashingEnv(CountingEnv):
    """A counting env whose process dies at step ``crash_at`` if ``faulty``.

    ``mode``: ``"exit"`` (``os._exit(exitcode)``), ``"sigkill"`` or ``"segfault"``
    (a real one, by reading address 0).  Only meant for worker processes: the
    factory records the pid it was made in (``parent_pid``), and in that process
    the env raises :class:`EnvBoom` instead of taking the test runner down.
    """

    def __init__(self, mode: str = "exit", crash_at: int = 2, faulty: bool = True,
                 exitcode: int = 3, parent_pid: int | None = None, episode_len: int = 100,
                 env_id: int = 0):
        super().__init__(episode_len, env_id)
        self.mode, self.crash_at, self.faulty, self.exitcode = mode, crash_at, faulty, exitcode
        self.parent_pid = parent_pid

    def step(self, action):
        if self.faulty and self.t + 1 == self.crash_at:
            self._crash()
        return super().step(action)

    def _crash(self) -> None:
        if self.parent_pid is None or os.getpid() == self.parent_pid:
            raise EnvBoom("CrashingEnv refuses to crash the process that made it")
        if self.mode == "exit":
            os._exit(self.exitcode)
        elif self.mode == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif self.mode == "segfault":
            ctypes.string_at(0)
        raise ValueError(f"unknown crash mode {self.mode!r}")


def crashing_fns(num_envs: int, crash_env: int, **kwargs: Any) -> list[Callable[[], gym.Env]]:
    """Factories of :class:`CrashingEnv` where only env ``crash_env`` crashes."""
    faulty = [i == crash_env for i in range(num_envs)]
    return make_fns(
        CrashingEnv, num_envs, per_env={"faulty": faulty}, parent_pid=os.getpid(), **kwargs
    )


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
# probing where an env runs


class ProbeEnv(CountingEnv):
    """A counting env with methods that report on the process it runs in, for ``call``.

    With ``close_log`` (a file path), ``close()`` appends ``"<env_id>\\n"`` to that
    file, so a test can check from outside that every env was closed once.
    """

    def __init__(self, episode_len: int = 5, env_id: int = 0, close_log: str | None = None):
        super().__init__(episode_len, env_id)
        self.close_log = close_log

    def process(self) -> dict[str, Any]:
        """Pid, parent pid, multiprocessing name and daemon flag of this env's process."""
        current = multiprocessing.current_process()
        return {"pid": os.getpid(), "ppid": os.getppid(), "name": current.name,
                "daemon": current.daemon}

    def environ_with_prefix(self, *prefixes: str) -> dict[str, str]:
        """The environment variables of this process whose names start with ``prefixes``."""
        return {k: v for k, v in os.environ.items() if k.startswith(prefixes)}

    def sigint_handler(self) -> Any:
        """``signal.getsignal(SIGINT)`` in this process."""
        return signal.getsignal(signal.SIGINT)

    def fail_if(self, env_ids: Sequence[int]) -> int:
        """Raise :class:`EnvBoom` in the envs named by ``env_ids``; others return env_id."""
        if self.env_id in env_ids:
            raise EnvBoom(f"env {self.env_id} raised in a call on purpose")
        return self.env_id

    def close(self):
        super().close()
        if self.close_log is not None:
            with open(self.close_log, "a") as f:
                f.write(f"{self.env_id}\n")


class AnyActionEnv(CountingEnv):
    """A counting env with any ``action_space``; keeps the last action and a step count."""

    def __init__(self, action_space: spaces.Space, episode_len: int = 100, env_id: int = 0):
        super().__init__(episode_len, env_id)
        self.action_space = action_space
        self.step_count = 0

    def step(self, action):
        self.step_count += 1
        obs, _, terminated, truncated, info = super().step(0)
        self.last_action = action
        return obs, 0.0, terminated, truncated, info


# ---------------------------------------------------------------------------
# chaos: an env whose every observation says whose it is, and faults on request

CHAOS_RAISE, CHAOS_DIE, CHAOS_SLOW = 999, 998, 997
"""Actions of :class:`ChaosEnv` that raise, kill its process, or sleep ``slow`` seconds."""
_chaos_episodes = iter(range(1, 2**24))  # per process: with the pid, unique episode ids


class ChaosEnv(gym.Env):
    """Observation ``[env_id, episode, t, last action]`` (int64), so a row that shows
    another env's data, a skipped or repeated step, or a lost action is caught.

    ``episode`` is unique per process and episode (``pid << 24 | counter``), so a
    rebuilt env starts an episode never seen before.  Episodes last 10 to 40 steps
    (terminated).  Reward: the action.  Actions :data:`CHAOS_RAISE` raise
    :class:`EnvBoom`, :data:`CHAOS_DIE` SIGKILLs the env's own process (except in
    ``trainer_pid``, where it raises instead) and :data:`CHAOS_SLOW` sleeps
    ``slow`` seconds first; ``reset(options={"raise_in_reset": ids})`` raises in
    the envs named.  ``info["t"]`` on every third step.
    """

    metadata: dict[str, Any] = {}

    def __init__(self, env_id: int = 0, trainer_pid: int | None = None, slow: float = 0.002):
        self.env_id, self.trainer_pid, self.slow = env_id, trainer_pid, slow
        self.observation_space = spaces.Box(-1, 2**62, shape=(4,), dtype=np.int64)
        self.action_space = spaces.Discrete(1000)
        self.episode, self.t, self.last, self.length = 0, 0, -1, 0

    def _obs(self) -> np.ndarray:
        return np.array([self.env_id, self.episode, self.t, self.last], dtype=np.int64)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if options and self.env_id in options.get("raise_in_reset", ()):
            raise EnvBoom(f"env {self.env_id} raised in reset on purpose")
        self.episode = os.getpid() << 24 | next(_chaos_episodes)
        self.t, self.last = 0, -1
        self.length = 10 + self.episode % 31
        return self._obs(), {}

    def step(self, action):
        action = int(action)
        if action == CHAOS_RAISE:
            raise EnvBoom(f"env {self.env_id} raised in step on purpose")
        if action == CHAOS_DIE:
            if os.getpid() == self.trainer_pid:
                raise EnvBoom(f"env {self.env_id} would have killed the trainer")
            os.kill(os.getpid(), signal.SIGKILL)
        if action == CHAOS_SLOW:
            time.sleep(self.slow)
        self.t += 1
        self.last = action
        info = {"t": self.t} if self.t % 3 == 0 else {}
        return self._obs(), float(action), self.t >= self.length, False, info

    def ping(self, delay: float = 0.0) -> int:
        """For ``call``: sleep ``delay`` seconds, then return ``env_id``."""
        time.sleep(delay)
        return self.env_id


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
