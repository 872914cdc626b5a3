"""SyncVecEnv: every env in this process, stepped by the compiled block loop."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from fastvec.pool.build import local_pool
from fastvec.pool.env_fns import close_quietly, env_functions, make_envs
from fastvec.spaces.frame_stack import FrameStack, parse_frame_stack
from fastvec.spaces.observation_mode import ObservationMode, check_observation_mode
from fastvec.vector.arguments import mode_code, parse_autoreset_mode
from fastvec.vector.base import BatchedVecEnv

__all__ = ["SyncVecEnv"]


class SyncVecEnv(BatchedVecEnv):
    """Runs ``num_envs`` envs one after another in this process.

    A drop-in for ``gymnasium.vector.SyncVectorEnv`` with the same results for the
    same seeds and actions, but the per-env work (writing observations into one
    flat batch buffer, stacking rewards and flags, batching infos, autoreset
    bookkeeping) runs in compiled code.  An exception raised by an env reaches the
    caller unchanged.

    Args:
        env_fns: Callables that each return a ``gymnasium.Env``; all are called
            here, once.  Every env must have the same action space, and the same
            observation space unless ``observation_mode`` says otherwise.
        autoreset_mode: ``AutoresetMode`` or its value (``"NextStep"``, ``"SameStep"``,
            ``"Disabled"``) or name (``"next_step"``...); see ``docs/autoreset.md``.
        copy: If True (the default), observations are fresh arrays fastvec never
            touches again.  If False, they are views of the batch buffer, valid
            until the next ``step``/``reset``.
        episode_statistics: Add ``infos["episode"] = {"r", "l", "t"}`` and
            ``infos["_episode"]`` when episodes end, as Gymnasium's
            ``RecordEpisodeStatistics`` does.
        observation_mode: As Gymnasium's: ``"same"`` (every env has env 0's
            observation space), ``"different"`` (spaces may differ in bounds, not in
            shapes and dtypes; the batched space is ``batch_differing_spaces`` of
            them, the single one env 0's) or a tuple ``(observation_space,
            single_observation_space)``. Games need ``"same"``.
        frame_stack: Keep each env's last ``k`` observations, oldest first, in its
            record: ``k`` (an int) or a :class:`fastvec.FrameStack` (``padding_type``).
            The same observations as Gymnasium's ``FrameStackObservation(env, k)``
            around every env, stacked where the env steps (see ``docs/api.md``).

    Attributes:
        envs: The sub-envs, in order.
        env_fns: The callables the envs were made with.

    Raises:
        ValueError: ``env_fns`` is empty, the envs' spaces differ (the message names
            the env and, apart from ``"same"``, what differs), or ``autoreset_mode`` or
            ``observation_mode`` is unknown.
        EnvFnError: an env function returned something that is not an env (a
            ``TypeError`` and a ``ValueError``; the envs made before are closed).

    Example:
        >>> import fastvec
        >>> envs = fastvec.SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
        >>> obs, infos = envs.reset(seed=0)
        >>> obs.shape
        (2, 4)
        >>> envs.close()
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        episode_statistics: bool = False,
        observation_mode: ObservationMode = "same",
        *,
        frame_stack: int | FrameStack | None = None,
    ) -> None:
        env_fns = env_functions(env_fns)
        mode = parse_autoreset_mode(autoreset_mode)
        check_observation_mode(observation_mode)
        self.frame_stack = parse_frame_stack(frame_stack)
        self.observation_mode = observation_mode
        self.env_fns = env_fns
        self.envs: list[gym.Env] = make_envs(env_fns)  # closed again if one fails
        try:
            pool = local_pool(self.envs, mode_code(mode), bool(copy), observation_mode,
                              self.frame_stack)
        except BaseException:
            close_quietly(self.envs)
            raise
        self._setup(pool, mode, copy, episode_statistics)
