"""Atari at the speed of the emulator: ``fastvec.atari.make``.

The same vector env as Gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation``
over ``gym.make(env_id, frameskip=1)``, on any fastvec backend, bit for bit, with each
env's frame loop calling the emulator directly (:mod:`fastvec.atari.env`) and the
frames stacked in the batch's records (the vector env's ``frame_stack``).
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import gymnasium as gym

from fastvec.atari.env import _INSTALL, PreprocessedAtari
from fastvec.make import make as make_vector_env
from fastvec.spaces.frame_stack import FrameStack

__all__ = ["PreprocessedAtari", "make"]


def make(env_id: str, num_envs: int, *, backend: str = "subproc",
         vector_kwargs: dict[str, Any] | None = None, env_kwargs: dict[str, Any] | None = None,
         noop_max: int = 30, frame_skip: int = 4, screen_size: int | tuple[int, int] = 84,
         terminal_on_life_loss: bool = False, grayscale_obs: bool = True,
         stack_size: int = 4) -> gym.vector.VectorEnv:
    """``num_envs`` preprocessed Atari envs as one fastvec vector env.

    Equal, for the same seeds and actions, to ``SyncVectorEnv([lambda:
    FrameStackObservation(AtariPreprocessing(gym.make(env_id, frameskip=1,
    **env_kwargs), noop_max=..., frame_skip=..., screen_size=...,
    terminal_on_life_loss=..., grayscale_obs=...), stack_size)] * num_envs)``.
    Each env is a :class:`PreprocessedAtari` (one frame per step); the vector env
    keeps the last ``stack_size`` frames of each in its record (``frame_stack``).

    Args:
        env_id: An ALE id, e.g. ``"ALE/Pong-v5"`` (sticky actions as its spec says).
        num_envs: How many envs.
        backend: ``"subproc"`` (default), ``"sync"`` or ``"ray"``, as in :func:`fastvec.make`.
        vector_kwargs: Options of the vector env (``num_workers``, ``autoreset_mode``,
            ``batch_size``...; not ``frame_stack``, which ``stack_size`` sets).
        env_kwargs: Keyword arguments of ``gym.make`` (``repeat_action_probability``...).
        noop_max: At most this many no-ops at reset (``AtariPreprocessing``'s).
        frame_skip: Emulator frames per step; the last two are max-pooled.
        screen_size: The frames' size after the resize (an int or ``(width, height)``).
        terminal_on_life_loss: End the episode when a life is lost.
        grayscale_obs: Grayscale frames (else RGB).
        stack_size: Frames stacked in each observation, oldest first.

    Returns:
        The vector env; observations ``(num_envs, stack_size, height, width)`` uint8
        (``(num_envs, stack_size, height, width, 3)`` with ``grayscale_obs=False``).
    """
    if vector_kwargs and "frame_stack" in vector_kwargs:
        raise ValueError("expected stack_size to set the frame stack, not vector_kwargs"
                         "['frame_stack']")
    if any(importlib.util.find_spec(name) is None for name in ("ale_py", "cv2")):
        raise ImportError(_INSTALL)  # here, not in each worker as it builds its envs
    stack = FrameStack(stack_size)  # checked before any env is built
    env_fn = functools.partial(
        PreprocessedAtari, env_id, env_kwargs, noop_max=noop_max, frame_skip=frame_skip,
        screen_size=screen_size, terminal_on_life_loss=terminal_on_life_loss,
        grayscale_obs=grayscale_obs)
    return make_vector_env(env_fn, num_envs, backend=backend,
                           vector_kwargs={**(vector_kwargs or {}), "frame_stack": stack})
