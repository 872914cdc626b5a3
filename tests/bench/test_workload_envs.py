"""The bench's workloads: its synthetic envs (seeded, typed, checked by Gymnasium's
env checker), their CPU-burning step costs, and every workload run in a vector env."""

from __future__ import annotations

import math
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env, data_equivalence

from fastvec.bench import cli, envs
from fastvec.bench.envs import (
    EPISODE_LENGTH,
    AtariLikeEnv,
    DictObsEnv,
    HeavyEnv,
    InfoEnv,
    LongTailEnv,
    StepCost,
)
from fastvec.bench.workloads import WORKLOADS

SYNTHETIC = [AtariLikeEnv, DictObsEnv, InfoEnv, HeavyEnv, LongTailEnv]


@pytest.mark.parametrize("env_cls", SYNTHETIC)
def test_synthetic_env_passes_check_env(env_cls: type[gym.Env]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env_cls(), skip_render_check=True)


def test_synthetic_spaces() -> None:
    assert AtariLikeEnv().observation_space == spaces.Box(0, 255, (84, 84, 4), np.uint8)
    assert AtariLikeEnv().action_space == spaces.Discrete(6)
    dict_space = DictObsEnv().observation_space
    assert isinstance(dict_space, spaces.Dict)
    assert dict_space["image"] == spaces.Box(0, 255, (64, 64, 3), np.uint8)
    assert dict_space["vec"] == spaces.Box(-1.0, 1.0, (32,), np.float32)
    assert dict_space["mask"] == spaces.MultiBinary(8)
    assert dict_space["mode"] == spaces.Discrete(10)
    assert isinstance(DictObsEnv().action_space, spaces.Discrete)
    assert isinstance(InfoEnv().observation_space, spaces.Box)
    for env_cls in (HeavyEnv, LongTailEnv):
        assert env_cls().observation_space == spaces.Box(-1.0, 1.0, (4,), np.float32)
        assert env_cls().action_space == spaces.Discrete(2)


def _rollout(env: gym.Env, seed: int, steps: int) -> list[tuple]:
    """Every reset and step output, copied, with actions drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    out: list[tuple] = [env.reset(seed=seed)]
    for _ in range(steps):
        obs, reward, term, trunc, info = env.step(np.int64(rng.integers(env.action_space.n)))
        assert env.observation_space.contains(obs)
        out.append((obs, reward, term, trunc, info))
        if term or trunc:
            out.append(env.reset())
    return out


@pytest.mark.parametrize("env_cls", SYNTHETIC)
def test_synthetic_env_is_deterministic_given_seed(env_cls: type[gym.Env]) -> None:
    steps = 2 * EPISODE_LENGTH[1] + 1  # crosses at least two resets
    first, second = _rollout(env_cls(), 3, steps), _rollout(env_cls(), 3, steps)
    assert data_equivalence(first, second, exact=True)
    assert not data_equivalence(first, _rollout(env_cls(), 4, steps))


@pytest.mark.parametrize("env_cls", SYNTHETIC)
def test_synthetic_episode_length_is_seeded_and_in_range(env_cls: type[gym.Env]) -> None:
    lengths = []
    for seed in range(5):
        env = env_cls()
        env.reset(seed=seed)
        steps, done = 0, False
        while not done:
            _, _, done, _, _ = env.step(np.int64(0))
            steps += 1
        lengths.append(steps)
    assert all(EPISODE_LENGTH[0] <= n <= EPISODE_LENGTH[1] for n in lengths)
    assert len(set(lengths)) > 1


def test_synthetic_observations_change_every_step() -> None:
    for env_cls in SYNTHETIC:
        env = env_cls()
        before, _ = env.reset(seed=0)
        after = env.step(np.int64(1))[0]
        assert not data_equivalence(before, after), env_cls.__name__


def test_info_env_reports_four_typed_keys() -> None:
    env = InfoEnv()
    _, info = env.reset(seed=0)
    *_, info = env.step(np.int64(1))
    assert set(info) == {"count", "score", "flag", "vector"}
    assert isinstance(info["count"], int) and isinstance(info["score"], float)
    assert isinstance(info["flag"], bool)
    assert info["vector"].dtype == np.float32 and info["vector"].shape == (3,)


@pytest.mark.parametrize("name", [n for n, w in WORKLOADS.items() if not w.game])
def test_workload_runs_in_gymnasium_vector_env(name: str) -> None:
    workload = WORKLOADS[name]
    why = cli.workload_unavailable_reason(name)
    if why:
        pytest.skip(why)
    vec = gym.vector.SyncVectorEnv([workload.make_env] * 2)
    try:
        vec.reset(seed=0)
        for _ in range(3):
            vec.step(vec.action_space.sample())
    finally:
        vec.close()


@pytest.mark.parametrize("name", [n for n, w in WORKLOADS.items() if w.game])
def test_game_workload_passes_pettingzoo_api_test_and_runs_as_rows(name: str) -> None:
    why = cli.workload_unavailable_reason(name)
    if why:
        pytest.skip(why)
    from pettingzoo.test import parallel_api_test

    import fastvec

    parallel_api_test(WORKLOADS[name].make_env(), num_cycles=300)
    vec = fastvec.SyncVecEnv([WORKLOADS[name].make_env] * 2)
    try:
        vec.reset(seed=0)
        assert vec.num_envs == 4
        for _ in range(3):
            vec.step(vec.action_space.sample())
    finally:
        vec.close()


# ------------------------------------------------------- CPU-burning workloads


def _step_costs(monkeypatch, env_cls: type, seed: int, steps: int) -> np.ndarray:
    """The cost each step asked to burn (burning replaced by a no-op)."""
    asked: list[float] = []
    monkeypatch.setattr(envs, "burn", asked.append)
    env = env_cls()
    env.reset(seed=seed)
    for _ in range(steps):
        if env.step(np.int64(0))[2]:
            env.reset()
    return np.array(asked)


@pytest.mark.parametrize(("env_cls", "sigma"), [(LongTailEnv, 1.0), (HeavyEnv, 0.1)])
def test_step_cost_distribution(monkeypatch, env_cls: type, sigma: float) -> None:
    costs = _step_costs(monkeypatch, env_cls, seed=0, steps=40_000)
    assert env_cls.cost == StepCost(300.0, sigma)
    assert costs.mean() == pytest.approx(300.0, rel=0.05)
    assert np.log(costs).std() == pytest.approx(sigma, rel=0.05)
    assert np.median(costs) == pytest.approx(300.0 * math.exp(-(sigma**2) / 2), rel=0.05)


def test_step_costs_are_seeded_per_env(monkeypatch) -> None:
    first = _step_costs(monkeypatch, LongTailEnv, seed=1, steps=300)
    again = _step_costs(monkeypatch, LongTailEnv, seed=1, steps=300)
    other = _step_costs(monkeypatch, LongTailEnv, seed=2, steps=300)
    assert np.array_equal(first, again) and not np.array_equal(first, other)


def test_burn_takes_roughly_the_asked_time() -> None:
    # The fastest of several runs is close to the calibrated cost even on a busy machine.
    best = math.inf
    for _ in range(20):
        start = time.perf_counter()
        envs.burn(300.0)
        best = min(best, time.perf_counter() - start)
    assert 100e-6 < best < 3e-3


def test_spin_rate_can_be_preset(monkeypatch) -> None:
    envs.spin_rate.cache_clear()
    monkeypatch.setenv(envs.SPIN_RATE_VAR, "12.5")
    try:
        assert envs.spin_rate() == 12.5
    finally:
        envs.spin_rate.cache_clear()
