"""Drivers: what the measuring loop of ``python -m fastvec.bench`` calls, one per API.

A driver has ``reset(seed)``, ``step(actions)`` returning how many env-steps it
took, ``close()``, and ``policy_us``: the CPU time, in microseconds, that a
policy forward pass over a batch of all ``num_envs`` actions costs
(``--policy-us``; 0 by default).  A driver burns it in the trainer's process
between receiving a batch and sending its actions: before each ``step`` of a
synchronous vector env, between ``recv()`` and ``send()`` of an async one.  A
batch of ``k`` of the ``num_envs`` envs burns ``policy_us * k / num_envs``, so
per env-step the policy costs the same on every system.  The burn is the
calibrated spin of the CPU-bound workloads (:func:`fastvec.bench.envs.burn`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from fastvec.bench import envs as bench_envs

__all__ = [
    "BaseDriver",
    "Builder",
    "DiscardLoop",
    "Driver",
    "EnvFn",
    "EnvPoolDriver",
    "PlainLoop",
    "PufferDriver",
    "RecvSendDriver",
    "SB3Driver",
    "VectorDriver",
    "stack",
]

EnvFn = Callable[[], gym.Env[Any, Any]]


class Driver(Protocol):
    """What the measuring loop calls; ``step`` returns the env-steps it took."""

    policy_us: float  # CPU burnt per batch of all num_envs actions (--policy-us)

    def reset(self, seed: int) -> None: ...  # noqa: D102

    def step(self, actions: np.ndarray) -> int: ...  # noqa: D102

    def close(self) -> None: ...  # noqa: D102


Builder = Callable[..., Driver]  # (env_fns, **vector_kwargs) -> Driver


class BaseDriver:
    """The policy in the loop: ``policy(k)`` burns the cost of ``k`` actions."""

    num_envs: int
    policy_us: float = 0.0

    def policy(self, batch: int) -> None:
        """Burn ``policy_us * batch / num_envs`` µs of CPU, as a forward pass would."""
        if self.policy_us > 0:
            bench_envs.burn(self.policy_us * batch / self.num_envs)


def stack(items: list[Any]) -> Any:
    """One batch of ``items`` (one per env), as a trainer without a vector env would make it.

    ``np.stack`` of arrays, field by field for ``Dict`` and ``Tuple`` observations.
    """
    first = items[0]
    if isinstance(first, dict):
        return {k: stack([item[k] for item in items]) for k in first}
    if isinstance(first, tuple):
        return tuple(stack(list(field)) for field in zip(*items, strict=True))
    return np.stack(items)


class PlainLoop(BaseDriver):
    """The baseline: the for-loop a trainer would write to get a batch without a vector env.

    Step each env with its action; when its episode ends, keep the step's observation and
    info as ``final_obs`` / ``final_info`` and reset it (its reset observation goes in the
    batch: Gymnasium's ``SAME_STEP`` autoreset); then stack the observations into one
    array (field by field for ``Dict`` observations) and the rewards, terminations and
    truncations into arrays.  The infos stay a list of dicts, one per env.  ``batch`` is
    the last ``(obs, rewards, terminations, truncations, infos)``.

    For PettingZoo parallel games: a loop over the games, a dict of the live agents'
    actions each, a row per agent (zeros for an agent not in its game's step), resetting
    a game when no agent is left.
    """

    def __init__(self, env_fns: list[EnvFn]) -> None:
        self.envs = [fn() for fn in env_fns]
        self.agents = list(getattr(self.envs[0], "possible_agents", []))
        self.num_envs = len(self.envs) * max(len(self.agents), 1)
        self.batch: tuple[Any, np.ndarray, np.ndarray, np.ndarray, list[Any]] | None = None

    def reset(self, seed: int) -> None:
        """Reset env (game) ``i`` with ``seed + i``, as the vector envs do; stack the batch."""
        results = [env.reset(seed=seed + i) for i, env in enumerate(self.envs)]
        if self.agents:
            self._blank = np.zeros_like(results[0][0][self.agents[0]])
            rows = [self._row(obs, a) for obs, _ in results for a in self.agents]
            infos = [info.get(a, {}) for _, info in results for a in self.agents]
        else:
            rows, infos = [obs for obs, _ in results], [info for _, info in results]
        zeros = np.zeros(self.num_envs, dtype=bool)
        self.batch = (stack(rows), np.zeros(self.num_envs), zeros, zeros.copy(), infos)

    def step(self, actions: np.ndarray) -> int:
        """Step every env once with its action, reset the ones that finished, stack."""
        self.policy(self.num_envs)
        if self.agents:
            return self._step_games(actions)
        obs, rewards, terms, truncs, infos = [], [], [], [], []
        for env, action in zip(self.envs, actions, strict=True):
            o, r, term, trunc, info = env.step(action)
            if term or trunc:
                final_obs, final_info = o, info
                o, info = env.reset()
                info = {**info, "final_obs": final_obs, "final_info": final_info}
            obs.append(o)
            rewards.append(r)
            terms.append(term)
            truncs.append(trunc)
            infos.append(info)
        self.batch = (stack(obs), np.array(rewards, dtype=np.float64),
                      np.array(terms, dtype=bool), np.array(truncs, dtype=bool), infos)
        return self.num_envs

    def _row(self, obs: dict[str, Any], agent: str) -> Any:
        return obs[agent] if agent in obs else self._blank

    def _step_games(self, actions: np.ndarray) -> int:
        seats = len(self.agents)
        games: list[Any] = self.envs  # PettingZoo parallel games
        rows: list[Any] = []
        rewards = np.zeros(self.num_envs)
        terms = np.zeros(self.num_envs, dtype=bool)
        truncs = np.zeros(self.num_envs, dtype=bool)
        infos: list[Any] = []
        for g, game in enumerate(games):
            live = {a: actions[g * seats + self.agents.index(a)] for a in game.agents}
            obs, rew, term, trunc, info = game.step(live)
            if not game.agents:
                obs, info = game.reset()
            for j, a in enumerate(self.agents):
                rows.append(self._row(obs, a))
                infos.append(info.get(a, {}))
                rewards[g * seats + j] = rew.get(a, 0.0)
                terms[g * seats + j] = term.get(a, False)
                truncs[g * seats + j] = trunc.get(a, False)
        self.batch = (stack(rows), rewards, terms, truncs, infos)
        return self.num_envs

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


class DiscardLoop(PlainLoop):
    """A floor, not a trainer's loop: each env's ``step`` called, its results thrown away.

    No batch is built (no stacked observations, no reward or flag arrays, no infos),
    so it costs less than any vector env or :class:`PlainLoop`: what stepping the envs
    alone costs.  The ``plain-discard`` system.
    """

    def step(self, actions: np.ndarray) -> int:
        """Step every env once with its action; reset the ones that finished."""
        self.policy(self.num_envs)
        if self.agents:
            return self._discard_games(actions)
        for i, env in enumerate(self.envs):
            obs, r, term, trunc, info = env.step(actions[i])
            if term or trunc:
                env.reset()
        return self.num_envs

    def _discard_games(self, actions: np.ndarray) -> int:
        seats = len(self.agents)
        games: list[Any] = self.envs
        for g, game in enumerate(games):
            game.step({a: actions[g * seats + self.agents.index(a)] for a in game.agents})
            if not game.agents:
                game.reset()
        return self.num_envs


class VectorDriver(BaseDriver):
    """Gymnasium's vector API: ``reset(seed=...)``, ``step`` of every env, ``close``."""

    def __init__(self, vec: Any, num_envs: int) -> None:
        self.vec, self.num_envs = vec, num_envs

    @classmethod
    def of(cls, factory: Callable[..., Any]) -> Builder:
        """A builder that wraps what ``factory(env_fns, **vector_kwargs)`` returns.

        Its ``num_envs`` counts rows: one per env, one per agent of a game.
        """
        def build(env_fns: list[EnvFn], **vector_kwargs: Any) -> VectorDriver:
            vec = factory(env_fns, **vector_kwargs)
            return cls(vec, getattr(vec, "num_envs", len(env_fns)))

        return build

    def reset(self, seed: int) -> None:
        """Reset env ``i`` with ``seed + i``."""
        self.vec.reset(seed=seed)

    def step(self, actions: np.ndarray) -> int:
        """The policy for every env, then one batched step of every env."""
        self.policy(self.num_envs)
        self.vec.step(actions)
        return self.num_envs

    def close(self) -> None:
        """Close the vector env."""
        self.vec.close()


class RecvSendDriver(VectorDriver):
    """Async batches: ``async_reset(seed=...)``, then each step is ``recv()`` + ``send()``.

    The batch's actions are the first ``len(env_ids)`` rows of the action batch;
    the policy for them is burnt between the two calls.
    """

    def reset(self, seed: int) -> None:
        """Start resetting every env; the first ``recv`` returns the reset results."""
        self.vec.async_reset(seed=seed)

    def step(self, actions: np.ndarray) -> int:
        """Receive the next ready batch, compute its actions, send them."""
        obs, rewards, terms, truncs, infos, env_ids = self.vec.recv()
        n = len(env_ids)
        self.policy(n)
        self.vec.send(actions[:n], env_ids)
        return n


class SB3Driver(VectorDriver):
    """Stable-Baselines3's VecEnv: ``seed(s)`` then ``reset()``; it auto-resets itself."""

    def reset(self, seed: int) -> None:
        """Seed env ``i`` with ``seed + i`` for the next reset, then reset."""
        self.vec.seed(seed)
        self.vec.reset()


class PufferDriver(VectorDriver):
    """PufferLib's vector API: ``async_reset(seed)``; sync ``step``, or ``recv`` + ``send``."""

    def __init__(self, vec: Any, num_envs: int, batched: bool) -> None:
        super().__init__(vec, num_envs)
        self.batched = batched

    def reset(self, seed: int) -> None:
        """Reset env ``i`` with ``seed + i`` (sync: wait for it)."""
        if self.batched:
            self.vec.async_reset(seed)
        else:
            self.vec.reset(seed)

    def step(self, actions: np.ndarray) -> int:
        """One step of every env, or one ``recv`` + ``send`` of a batch."""
        if not self.batched:
            return super().step(actions)
        rewards = self.vec.recv()[1]
        n = int(np.size(rewards))
        self.policy(n)
        self.vec.send(actions[:n])
        return n


class EnvPoolDriver(BaseDriver):
    """EnvPool: its pool takes the seed when it is made, so ``reset(seed)`` makes it.

    ``make(seed)`` returns an EnvPool env with Gymnasium's API (``env_type="gymnasium"``)
    and ``batch_size == num_envs``: each step is one synchronous ``step`` of every env.
    """

    def __init__(self, make: Callable[[int], Any], num_envs: int) -> None:
        self.make, self.num_envs = make, num_envs
        self.vec: Any = None

    def reset(self, seed: int) -> None:
        """Make the pool with ``seed`` (EnvPool seeds env ``i`` with ``seed + i``), reset it."""
        self.close()
        self.vec = self.make(seed)
        self.vec.reset()

    def step(self, actions: np.ndarray) -> int:
        """The policy for every env, then one step of every env."""
        self.policy(self.num_envs)
        self.vec.step(actions)
        return self.num_envs

    def close(self) -> None:
        """Close the pool, if made."""
        if self.vec is not None:
            self.vec.close()
            self.vec = None
