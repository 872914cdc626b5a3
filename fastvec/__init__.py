"""fastvec: many copies of an RL environment as one fast, robust batch.

Every vector env is a ``gymnasium.vector.VectorEnv`` with Gymnasium 1.x
semantics, so trainers written for Gymnasium work unchanged.

- :class:`SyncVecEnv`: every env in this process.
- :class:`SubprocVecEnv`: envs in worker processes, through shared memory; also
  async batches (``async_reset``/``recv``/``send``).
- :class:`RayVecEnv`: blocks of envs in Ray actors, on one machine or a cluster
  (needs the ``ray`` extra; Ray is imported when the first one is made, so
  ``import fastvec`` works without it).
- :func:`make`: a vector env from a registered id, like ``gymnasium.make_vec``.
- :func:`register`: an id that ``gymnasium.make_vec`` makes with fastvec
  (``import fastvec`` registers ``fastvec/<id>`` for Gymnasium's own envs).
- :func:`make_multiagent`: PettingZoo games as rows, one per seat (self-play:
  :mod:`fastvec.selfplay`).
- :func:`tile_images`: the frames of ``render()`` as one image.
- :class:`FrameStack`: the vector envs' ``frame_stack`` option (frames stacked in
  the batch's records, as ``FrameStackObservation`` stacks them).
- :class:`RestartBudget`: ``max_restarts`` with rate limits (restarts per worker or
  actor, and in all, within a window of seconds) for ``on_worker_failure="restart"``.
- :mod:`fastvec.errors`: the errors fastvec raises.
- :mod:`fastvec.selfplay` (a self-play league), :mod:`fastvec.openspiel` (OpenSpiel's
  games, the ``openspiel`` extra) and :mod:`fastvec.integrations` (adapters for other
  RL libraries): imported when first used, so ``fastvec.selfplay.League`` works
  after ``import fastvec`` and ``import fastvec`` does not pay for them.

Example:
    >>> import gymnasium as gym
    >>> import numpy as np
    >>> import fastvec
    >>> envs = fastvec.SyncVecEnv([lambda: gym.make("CartPole-v1")] * 4)
    >>> obs, infos = envs.reset(seed=0)
    >>> obs, rewards, terminations, truncations, infos = envs.step(np.zeros(4, dtype=np.int64))
    >>> obs.shape, rewards.tolist()
    ((4, 4), [1.0, 1.0, 1.0, 1.0])
    >>> envs.close()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

try:
    from fastvec._kernels import (  # noqa: F401
        autoreset,
        barrier,
        flatten,
        games,
        infos,
        rows,
        stacking,
        stepping,
    )
    from fastvec.atari import _resize  # noqa: F401  (the Atari env's own kernel)
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "fastvec's compiled kernels are not built or do not load "
        f"({exc}). Install with `pip install .` (or `pip install -e .`) from a checkout, "
        "which compiles csrc/ (needs a C compiler, Cython>=3 and numpy), or "
        "`python setup.py build_ext --inplace` for a development tree."
    ) from exc

from fastvec import errors
from fastvec._version import __version__ as __version__
from fastvec.make import make
from fastvec.multiagent import make_multiagent
from fastvec.pool.restarts import RestartBudget
from fastvec.registration import register
from fastvec.spaces.frame_stack import FrameStack
from fastvec.tiling import tile_images
from fastvec.vector.ray import RayVecEnv
from fastvec.vector.subproc import SubprocVecEnv
from fastvec.vector.sync import SyncVecEnv

__all__ = ["FrameStack", "RayVecEnv", "RestartBudget", "SubprocVecEnv", "SyncVecEnv", "errors",
           "make", "make_multiagent", "register", "tile_images"]

# Subpackages that ``import fastvec`` does not load: each is imported when first read
# as an attribute (PEP 562).  A type checker sees them as plain imports.  dir() lists
# those that need no extra: tools that read every name of dir() (inspect.getmembers,
# pydoc) would otherwise fail where the openspiel extra is not installed.
_LAZY_SUBMODULES = ("integrations", "openspiel", "selfplay")
_LISTED_SUBMODULES = ("integrations", "selfplay")

if TYPE_CHECKING:
    from fastvec import integrations as integrations
    from fastvec import openspiel as openspiel
    from fastvec import selfplay as selfplay
else:
    def __getattr__(name: str):
        """``fastvec.selfplay`` and the other lazy subpackages, imported on first use."""
        if name in _LAZY_SUBMODULES:
            return importlib.import_module(f"fastvec.{name}")
        raise AttributeError(f"module 'fastvec' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LISTED_SUBMODULES})
