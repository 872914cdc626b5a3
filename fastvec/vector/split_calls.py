"""The calls in two parts: ``reset_async`` / ``reset_wait`` and ``step_async`` / ``step_wait``.

Written once for every vector env, as Gymnasium's ``AsyncVectorEnv`` has them;
each part passes the vector env's guard (:func:`~fastvec.vector.call_state.guarded`),
and the work is the vector env's own (``_post_reset`` / ``_finish_reset``,
``_post_step`` / ``_finish_step``), the same as the one-part ``reset`` and ``step`` use.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from fastvec.vector.call_state import CallState, guarded

__all__ = ["SplitCalls", "check_wait_timeout"]


def check_wait_timeout(timeout: float | None) -> None:
    if timeout is not None and not timeout >= 0:
        raise ValueError(f"expected a timeout in seconds >= 0 or None, got {timeout}")


class SplitCalls(ABC):
    """``reset_async``/``reset_wait`` and ``step_async``/``step_wait`` of a vector env."""

    _state: CallState

    @abstractmethod
    def _post_reset(self, seed: Any, options: Any) -> tuple:
        """Check the arguments and start resetting; what ``_finish_reset`` takes."""

    @abstractmethod
    def _finish_reset(self, blocks: list[int], mask: Any) -> tuple[Any, dict[str, Any]]:
        """Wait for the reset; ``(obs, infos)``."""

    @abstractmethod
    def _post_step(self, actions: Any) -> None:
        """Check ``actions`` and start the step."""

    @abstractmethod
    def _finish_step(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Wait for the step; its batch."""

    @guarded("reset_async")
    def reset_async(
        self,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Start a :meth:`reset`; finish it with :meth:`reset_wait` (as Gymnasium's
        ``AsyncVectorEnv``).  The arguments are checked here; nothing is pending when
        they are refused.

        Raises:
            ValueError: As for :meth:`reset`.
            ClosedEnvError: The vector env is closed.
            AlreadyPendingCallError: A ``step_async`` or a ``reset_async`` is pending.
        """
        self._reset_pending = self._post_reset(seed, options)
        self._state = CallState.WAITING_RESET

    @guarded("reset_wait")
    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        """Finish the reset started by :meth:`reset_async`: ``(obs, infos)`` as :meth:`reset`.

        Args:
            timeout: Seconds this wait may take (``SubprocVecEnv``; None: the
                vector env's own ``timeout``).  Past it, ``WorkerTimeout`` (also a
                ``multiprocessing.TimeoutError``, as Gymnasium raises), and the
                vector env is unusable but closes promptly.

        Raises:
            NoAsyncCallError: No ``reset_async`` is pending.
            ClosedEnvError: The vector env is closed.
            WorkerTimeout: The wait took longer than ``timeout``.
        """
        check_wait_timeout(timeout)
        self._state = CallState.IDLE
        blocks, mask = self.__dict__.pop("_reset_pending")
        with self._wait_limit(timeout):
            return self._finish_reset(blocks, mask)

    def _wait_limit(self, timeout: float | None) -> contextlib.AbstractContextManager:
        """Limit the next wait for workers to ``timeout`` seconds (where envs run
        elsewhere; a ``SyncVecEnv`` has done the work before any wait).
        """
        return contextlib.nullcontext()

    @guarded("step_async")
    def step_async(self, actions: Any) -> None:
        """Check ``actions`` and start a step; finish it with :meth:`step_wait`.

        The whole batch is checked before anything reaches an env: its shape (a
        scalar where a batch is expected is refused), integer dtype and range for
        discrete spaces.  ``Box`` actions out of bounds pass through, and a dtype
        that converts (float64 for a float32 ``Box``) is converted.  A refused
        batch leaves nothing pending.

        Args:
            actions: A batch from ``action_space`` (see :meth:`step`).

        Raises:
            ValueError: The actions do not fit; the message names the env and
                what was expected.
            RuntimeError: ``DISABLED`` mode and an env whose episode ended has not
                been reset.
            ClosedEnvError: The vector env is closed.
            AlreadyPendingCallError: A step is already pending (it is kept).
        """
        self._post_step(actions)
        self._state = CallState.WAITING_STEP

    @guarded("step_wait")
    def step_wait(self, timeout: float | None = None
                  ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Finish the step started by :meth:`step_async` and return its batch.

        Args:
            timeout: Seconds this wait may take (``SubprocVecEnv``; None: the
                vector env's own ``timeout``).  Past it, ``WorkerTimeout`` (also a
                ``multiprocessing.TimeoutError``, as Gymnasium raises), and the
                vector env is unusable but closes promptly.

        Returns:
            ``(obs, rewards, terminations, truncations, infos)``, as :meth:`step`.

        Raises:
            NoAsyncCallError: No ``step_async`` is pending.
            ClosedEnvError: The vector env is closed.
            WorkerTimeout: The wait took longer than ``timeout``.

        Example:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from fastvec import SyncVecEnv
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> _ = envs.reset(seed=0)
            >>> envs.step_async(np.array([0, 1]))
            >>> obs, rewards, terminations, truncations, infos = envs.step_wait()
            >>> envs.close()
        """
        check_wait_timeout(timeout)
        self._state = CallState.IDLE
        if timeout is None:
            return self._finish_step()
        with self._wait_limit(timeout):
            return self._finish_step()
