"""SyncVecEnv: every env in this process, stepped by the compiled block loop."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from fastvec._base import BatchedVecEnv
from fastvec._buffers import Buffers, rows_of
from fastvec._games import describe
from fastvec._obs_store import make_obs_store
from fastvec._observation_mode import (
    ObservationMode,
    check_observation_mode,
    observation_spaces,
    same_space_hint,
)
from fastvec._pool import LocalPool
from fastvec.errors import SpacesMismatchError

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

    Attributes:
        envs: The sub-envs, in order.
        env_fns: The callables the envs were made with.

    Raises:
        ValueError: ``env_fns`` is empty, the envs' spaces differ (the message names
            the env and, apart from ``"same"``, what differs), or ``autoreset_mode`` or
            ``observation_mode`` is unknown.

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
    ) -> None:
        check_observation_mode(observation_mode)
        self.observation_mode = observation_mode
        self.env_fns = env_fns
        self.envs: list[gym.Env] = [env_fn() for env_fn in env_fns]
        if not self.envs:
            raise ValueError("expected at least one env function, got none")
        about = describe(self.envs)
        first_obs, first_act, first_agents = about.env_spaces[0]
        same = observation_mode == "same"
        for index, (obs_space, act_space, agents) in enumerate(about.env_spaces[1:], start=1):
            if same and obs_space != first_obs:
                raise SpacesMismatchError(f"env {index} has observation space {obs_space}, "
                                          f"expected {first_obs} (as env 0){same_space_hint}")
            if act_space != first_act:
                raise SpacesMismatchError(f"env {index} has action space {act_space}, "
                                          f"expected {first_act} (as env 0)")
            if agents != first_agents:
                raise SpacesMismatchError(f"env {index} has agents {agents}, expected "
                                          f"{first_agents} (as env 0)")
        single, batched = observation_spaces(
            observation_mode, [triple[0] for triple in about.env_spaces],
            games=about.agents is not None)
        self._setup(rows_of(self.envs), single, about.action_space,
                    about.metadata, about.render_mode, autoreset_mode, copy,
                    episode_statistics, about.agents, batched)
        store = make_obs_store(single, self.num_envs, self.copy, fresh_rows=True)
        self._use_pool(LocalPool(self.envs, Buffers.allocate(store, self.num_envs),
                                 self._mode_code))
