"""One Atari env as Gymnasium's ``AtariPreprocessing`` gives it, with a direct frame loop.

Gymnasium's pipeline steps the emulator through its wrapper stack once per frame:
four ``AtariEnv.step`` calls per agent step, each copying an RGB screen nobody
looks at, then the max-pool and the resize.  Here the loop calls ``ale.act``
itself, reads the two screens that are pooled straight into two preallocated
buffers (``getScreenGrayscale``), and pools and resizes them into a new frame in
one compiled pass (``fastvec.atari._resize``: the bytes of OpenCV's
``INTER_AREA``, as ``AtariPreprocessing`` resizes, checked against the installed
OpenCV when the env is made; OpenCV itself where they would differ).  Resets (seeding,
no-ops) go through Gymnasium's own ``AtariEnv``, so the same seeds and actions
give the same observations, rewards, terminations and truncations, sticky
actions included.  The frames are stacked by the vector env (its ``frame_stack``
option), in the batch's records: see :func:`fastvec.atari.make`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fastvec.atari._resize import AreaResize

__all__ = ["PreprocessedAtari"]

_INSTALL = 'fastvec.atari needs ale-py and opencv: pip install -e ".[atari]"'


def _screen_size(screen_size: int | tuple[int, int]) -> tuple[int, int]:
    """``(width, height)`` as ``AtariPreprocessing`` takes it (OpenCV's order)."""
    if isinstance(screen_size, int) and not isinstance(screen_size, bool) and screen_size > 0:
        return (screen_size, screen_size)
    if (isinstance(screen_size, tuple) and len(screen_size) == 2
            and all(isinstance(s, int) and s > 0 for s in screen_size)):
        return screen_size
    raise ValueError(f"expected screen_size to be a positive int or a pair of them, "
                     f"got {screen_size!r}")


def compiled_area_resize(screen: tuple[int, ...], frame: tuple[int, ...], cv2: Any
                         ) -> AreaResize | None:
    """The compiled ``INTER_AREA`` resize from ``screen`` to ``frame`` shapes, if it gives
    the installed OpenCV's bytes (checked once on a random screen); else None (cv2).
    """
    channels = screen[2] if len(screen) == 3 else 1
    try:
        area = AreaResize(screen[0], screen[1], frame[0], frame[1], channels)
    except ValueError:  # a size OpenCV resizes another way (an upscale)
        return None
    image = np.random.default_rng(0).integers(0, 256, screen, dtype=np.uint8)
    ours = np.empty(frame, dtype=np.uint8)
    area.resize(image, ours)
    theirs = cv2.resize(image, (frame[1], frame[0]), interpolation=cv2.INTER_AREA)
    return area if np.array_equal(ours, theirs.reshape(frame)) else None


class PreprocessedAtari(gym.Env):
    """Gymnasium's Atari preprocessing as one env, bit for bit, with a direct frame loop.

    That is ``AtariPreprocessing(gym.make(env_id, frameskip=1, **env_kwargs), ...)``.

    The option names and defaults are Gymnasium's (``scale_obs`` and
    ``grayscale_newaxis`` are not offered: uint8 frames).  Observations are
    ``(height, width)`` uint8 (``(height, width, 3)`` with ``grayscale_obs=False``).
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                 noop_max: int = 30, frame_skip: int = 4,
                 screen_size: int | tuple[int, int] = 84,
                 terminal_on_life_loss: bool = False, grayscale_obs: bool = True) -> None:
        try:
            import ale_py
            import cv2
        except ImportError as exc:
            raise ImportError(_INSTALL) from exc
        gym.register_envs(ale_py)
        if isinstance(frame_skip, bool) or not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(f"expected frame_skip to be a positive int, got {frame_skip!r}")
        if isinstance(noop_max, bool) or not isinstance(noop_max, int) or noop_max < 0:
            raise ValueError(f"expected noop_max to be a non-negative int, got {noop_max!r}")
        self.size = _screen_size(screen_size)
        self.inner = gym.make(env_id, frameskip=1, **(env_kwargs or {}))
        atari: Any = self.inner.unwrapped  # ale_py's AtariEnv
        if noop_max > 0 and atari.get_action_meanings()[0] != "NOOP":
            raise ValueError("noop_max > 0 needs an env whose first action is NOOP")
        self.atari, self.ale = atari, atari.ale
        self.action_set = list(atari._action_set)
        self.noop_max, self.frame_skip = noop_max, frame_skip
        self.terminal_on_life_loss, self.grayscale_obs = terminal_on_life_loss, grayscale_obs
        height, width = self.ale.getScreenDims()
        screen = (height, width) if grayscale_obs else (height, width, 3)
        self.screens = np.zeros((2, *screen), dtype=np.uint8)  # the two frames pooled
        self.frame_shape = (self.size[1], self.size[0], *screen[2:])
        self.cv2 = cv2  # resizes where the compiled resize would give other bytes
        self.area = compiled_area_resize(screen, self.frame_shape, cv2)
        self.observation_space = spaces.Box(0, 255, self.frame_shape, np.uint8)
        self.action_space = self.inner.action_space
        self.metadata = self.inner.metadata
        self.render_mode = self.inner.render_mode
        self.spec = None
        self.lives = 0

    def _grab(self, into: np.ndarray) -> None:
        if self.grayscale_obs:
            self.ale.getScreenGrayscale(into)
        else:
            self.ale.getScreenRGB(into)

    def _frame(self) -> np.ndarray:
        """The two screens pooled and resized, into a new array."""
        screens, frame = self.screens, np.empty(self.frame_shape, dtype=np.uint8)
        if self.frame_skip > 1:  # in place, as AtariPreprocessing: a step that ends before
            np.maximum(screens[0], screens[1], out=screens[0])  # its last frame reuses it
        if self.area is not None:
            self.area.resize(screens[0], frame)
        else:
            self.cv2.resize(screens[0], self.size, dst=frame, interpolation=self.cv2.INTER_AREA)
        return frame

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset as ``AtariPreprocessing`` does: the no-ops are drawn from the env's own
        RNG, and the first frame is the screen as it is (no pooling).
        """
        _, info = self.inner.reset(seed=seed, options=options)
        noops = self.atari.np_random.integers(1, self.noop_max + 1) if self.noop_max > 0 else 0
        for _ in range(noops):
            _, _, terminated, truncated, step_info = self.inner.step(0)
            info.update(step_info)
            if terminated or truncated:
                _, info = self.inner.reset(seed=seed, options=options)
        self.lives = self.ale.lives()
        self._grab(self.screens[0])
        self.screens[1].fill(0)
        return self._frame(), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """``frame_skip`` emulator frames with ``action``; the two last screens pooled."""
        ale, act, index = self.ale, self.ale.act, self.action_set[action]
        total, terminated, truncated = 0.0, False, False
        last = self.frame_skip - 1
        for t in range(self.frame_skip):
            total += act(index, 1.0)
            terminated = ale.game_over(with_truncation=False)
            truncated = ale.game_truncated()
            if self.terminal_on_life_loss:
                lives = ale.lives()
                terminated = terminated or lives < self.lives
                self.lives = lives
            if terminated or truncated:
                break
            if t == last - 1:
                self._grab(self.screens[1])
            elif t == last:
                self._grab(self.screens[0])
        info = {"lives": ale.lives(), "episode_frame_number": ale.getEpisodeFrameNumber(),
                "frame_number": ale.getFrameNumber()}
        return self._frame(), total, terminated, truncated, info

    def render(self) -> Any:
        """The inner env's frame (``render_mode`` as given in ``env_kwargs``)."""
        return self.inner.render()

    def close(self) -> None:
        """Close the emulator."""
        self.inner.close()
