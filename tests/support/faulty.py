"""Envs that misbehave on purpose: bad observations, raising, slow, hanging and crashing
envs, an env that reports where it runs, and the chaos env whose every observation
says whose it is."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tests.support.counting import CountingEnv, make_fns

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
