"""Counting envs: the observation is the step count, so autoreset bugs show up as
arithmetic failures; and the factories every test builds its env list with."""

from __future__ import annotations

import functools
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
