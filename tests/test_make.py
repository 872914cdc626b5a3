"""``fastvec.make`` mirrors ``gymnasium.make_vec`` on every backend.

The tests at the end go through the implementation under test (``impl``), so
that ``--impl gymnasium`` checks them against ``gymnasium.make_vec``.
"""

import functools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import VectorizeMode
from gymnasium.vector import AutoresetMode

import fastvec
from tests.support.compare import assert_tree_equal, run_parity
from tests.support.envs import CountingEnv

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


# ---------------------------------------------------------------------------
# through the implementation under test


@pytest.mark.fastvec_only
def test_make_defaults_to_sync(impl, vec_envs):
    vec = vec_envs.track(impl.make("CartPole-v1", 3))
    assert isinstance(vec, impl.SyncVecEnv)
    assert vec.num_envs == 3
    assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP


def test_make_gives_the_same_results_as_gymnasium(impl, vec_envs):
    vec = vec_envs.track(impl.make("CartPole-v1", 3))
    ref = vec_envs.track(gym.make_vec("CartPole-v1", 3, vectorization_mode="sync"))
    run_parity(vec, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=120)


def test_make_passes_keyword_arguments_to_the_env(impl, vec_envs):
    vec = vec_envs.track(impl.make("Pendulum-v1", 2, g=1.62))
    assert vec.get_attr("g") == (1.62, 1.62)


def test_make_vector_kwargs(impl, vec_envs):
    vec = vec_envs.track(
        impl.make("CartPole-v1", 2, vector_kwargs={"autoreset_mode": "SameStep", "copy": False})
    )
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP


def test_make_wrappers(impl, vec_envs):
    wrappers = [functools.partial(gym.wrappers.TimeLimit, max_episode_steps=5)]
    vec = vec_envs.track(impl.make("Pendulum-v1", 2, wrappers=wrappers))
    vec.reset(seed=0)
    for _ in range(4):
        _, _, _, truncations, _ = vec.step(np.zeros((2, 1), dtype=np.float32))
        assert not truncations.any()
    _, _, _, truncations, _ = vec.step(np.zeros((2, 1), dtype=np.float32))
    assert_tree_equal(truncations, np.array([True, True]), "truncations at step 5")


def test_make_unknown_backend(impl):
    with pytest.raises(ValueError):
        impl.make("CartPole-v1", 2, backend="carrier-pigeon")


@pytest.mark.fastvec_only
@pytest.mark.subprocess
def test_make_with_the_subproc_backend(impl, vec_envs):
    vec = vec_envs.track(impl.make("CartPole-v1", 4, backend="subproc",
                                   vector_kwargs={"num_workers": 2}))
    assert isinstance(vec, impl.SubprocVecEnv)
    assert vec.num_workers == 2 and vec.num_envs == 4
    assert vec.spec is not None and vec.spec.id == "CartPole-v1"
    ref = vec_envs.track(gym.make_vec("CartPole-v1", 4, vectorization_mode="sync"))
    run_parity(vec, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=100)


@pytest.mark.fastvec_only
@pytest.mark.subprocess
def test_make_subproc_passes_env_kwargs_wrappers_and_vector_kwargs(impl, vec_envs):
    wrappers = [functools.partial(gym.wrappers.TimeLimit, max_episode_steps=3)]
    vec = vec_envs.track(impl.make(
        "Pendulum-v1", 3, backend="subproc", wrappers=wrappers, g=1.62,
        vector_kwargs={"num_workers": 2, "autoreset_mode": "SameStep", "context": "fork"}))
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert vec.context == "fork"
    assert vec.get_attr("g") == (1.62,) * 3
    vec.reset(seed=0)
    for _ in range(2):
        _, _, _, truncations, _ = vec.step(np.zeros((3, 1), dtype=np.float32))
        assert not truncations.any()
    _, _, _, truncations, infos = vec.step(np.zeros((3, 1), dtype=np.float32))
    assert_tree_equal(truncations, np.ones(3, dtype=bool), "truncations at step 3")
    assert "final_obs" in infos
