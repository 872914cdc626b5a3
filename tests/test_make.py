"""``fastvec.make`` mirrors ``gymnasium.make_vec`` on every backend."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import VectorizeMode

import fastvec
from tests.envs import CountingEnv

BACKENDS = ["sync", pytest.param("subproc", marks=pytest.mark.subprocess)]


def run(envs, steps=30, seed=3):
    """Reset with ``seed``, then step with fixed actions; all outputs, stacked."""
    out = [envs.reset(seed=seed)[0]]
    rng = np.random.default_rng(0)
    for _ in range(steps):
        actions = rng.integers(0, 2, size=envs.num_envs)
        obs, rewards, terminations, truncations, _ = envs.step(actions)
        out += [obs, rewards, terminations, truncations]
    envs.close()
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_registered_id_matches_make_vec(backend):
    kwargs = dict(max_episode_steps=12)
    ours = fastvec.make("CartPole-v1", 4, backend=backend, **kwargs)
    ref = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync", **kwargs)
    assert ours.spec.kwargs["max_episode_steps"] == ref.spec.kwargs["max_episode_steps"] == 12
    for a, b in zip(run(ours), run(ref), strict=True):
        np.testing.assert_array_equal(a, b)


def double_reward(env):
    return gym.wrappers.TransformReward(env, lambda r: 2 * r)


@pytest.mark.parametrize("backend", BACKENDS)
def test_env_spec_and_wrappers(backend):
    spec = gym.spec("CartPole-v1")
    wrappers = [double_reward]
    ours = fastvec.make(spec, 3, backend=backend, wrappers=wrappers)
    ref = gym.make_vec(spec, 3, vectorization_mode="sync", wrappers=wrappers)
    for a, b in zip(run(ours), run(ref), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_callable_gets_env_kwargs(backend):
    with fastvec.make(CountingEnv, 2, backend=backend, episode_len=3) as envs:
        assert envs.get_attr("episode_len") == (3, 3)
        assert envs.spec is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_vector_kwargs_reach_the_vector_env(backend):
    with fastvec.make(
        "CartPole-v1", 2, backend=backend, vector_kwargs={"autoreset_mode": "same_step"}
    ) as envs:
        assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP


@pytest.mark.parametrize(
    "backend, cls",
    [
        ("sync", fastvec.SyncVecEnv),
        (VectorizeMode.SYNC, fastvec.SyncVecEnv),
        pytest.param("subproc", fastvec.SubprocVecEnv, marks=pytest.mark.subprocess),
        pytest.param("async", fastvec.SubprocVecEnv, marks=pytest.mark.subprocess),
        pytest.param(VectorizeMode.ASYNC, fastvec.SubprocVecEnv, marks=pytest.mark.subprocess),
    ],
)
def test_backend_names(backend, cls):
    with fastvec.make("CartPole-v1", 2, backend=backend) as envs:
        assert type(envs) is cls


def test_spec_records_kwargs_and_num_envs():
    with fastvec.make("CartPole-v1", 3, max_episode_steps=7) as envs:
        assert envs.spec.id == "CartPole-v1"
        assert envs.spec.kwargs == {"max_episode_steps": 7, "num_envs": 3}
    assert gym.spec("CartPole-v1").kwargs == {}  # the registry's spec is untouched


@pytest.mark.parametrize("num_envs", [0, -1, 2.0, True, "4"])
def test_bad_num_envs(num_envs):
    with pytest.raises(ValueError, match="positive int"):
        fastvec.make("CartPole-v1", num_envs)


def test_bad_backend_names_the_choices():
    with pytest.raises(ValueError, match="'sync', 'subproc'"):
        fastvec.make("CartPole-v1", 2, backend="threads")


def test_bad_env_id():
    with pytest.raises(gym.error.Error):
        fastvec.make("NoSuchEnv-v0", 2)
    with pytest.raises(TypeError, match="registered id, an EnvSpec or a callable"):
        fastvec.make(42, 2)
