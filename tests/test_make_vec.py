"""``gymnasium.make_vec`` reaches fastvec through ``fastvec/<id>`` (the spec's
``vector_entry_point``), bit-identical to Gymnasium's ``SyncVectorEnv``."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import EnvSpec, VectorizeMode, WrapperSpec
from gymnasium.vector import AutoresetMode

import fastvec
from tests.support.compare import run_parity
from tests.support.envs import CountingEnv


@pytest.fixture
def registered():
    """Ids the test registers, removed from Gymnasium's registry afterwards."""
    ids: list[str] = []
    yield ids
    for env_id in ids:
        gym.registry.pop(env_id, None)


def test_import_registers_gymnasiums_own_envs():
    for env_id in ("CartPole-v1", "Pendulum-v1", "FrozenLake-v1", "LunarLander-v3"):
        spec, ours = gym.spec(env_id), gym.spec(f"fastvec/{env_id}")
        assert ours.entry_point == spec.entry_point
        assert ours.max_episode_steps == spec.max_episode_steps
        assert ours.kwargs == spec.kwargs
        assert callable(ours.vector_entry_point)
    assert gym.spec("CartPole-v1").vector_entry_point != gym.spec(
        "fastvec/CartPole-v1").vector_entry_point  # Gymnasium's own spec untouched


def test_make_vec_matches_gymnasium_sync(vec_envs):
    ours = vec_envs.track(gym.make_vec("fastvec/CartPole-v1", 4))
    ref = vec_envs.track(gym.make_vec("CartPole-v1", 4, vectorization_mode="sync"))
    assert isinstance(ours, fastvec.SyncVecEnv)
    assert ours.spec.id == "fastvec/CartPole-v1"
    assert ours.spec.kwargs == {"max_episode_steps": 500, "num_envs": 4,
                                "vectorization_mode": "vector_entry_point"}
    ends = run_parity(ours, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=400)
    assert ends > 10  # the run went through many autoresets


def test_explicit_vectorization_modes(vec_envs):
    explicit = vec_envs.track(gym.make_vec(
        "fastvec/CartPole-v1", 2, vectorization_mode=VectorizeMode.VECTOR_ENTRY_POINT))
    assert isinstance(explicit, fastvec.SyncVecEnv)
    # "sync" keeps Gymnasium's own vector env, over the same single envs.
    theirs = vec_envs.track(gym.make_vec("fastvec/CartPole-v1", 2, vectorization_mode="sync"))
    assert type(theirs) is gym.vector.SyncVectorEnv


def test_env_kwargs_and_backend_kwargs(vec_envs):
    ours = vec_envs.track(gym.make_vec(
        "fastvec/CartPole-v1", 3, max_episode_steps=9, sutton_barto_reward=True,
        backend_kwargs={"autoreset_mode": "same_step"}))
    ref = vec_envs.track(gym.make_vec(
        "CartPole-v1", 3, vectorization_mode="sync", max_episode_steps=9,
        sutton_barto_reward=True, vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}))
    assert ours.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert ours.get_attr("_sutton_barto_reward") == (True,) * 3
    assert ours.spec.kwargs["backend_kwargs"] == {"autoreset_mode": "same_step"}
    ends = run_parity(ours, ref, mode=AutoresetMode.SAME_STEP, copy=True, steps=200)
    assert ends > 10


@pytest.mark.subprocess
def test_subproc_backend_matches_gymnasium_sync(vec_envs):
    ours = vec_envs.track(gym.make_vec("fastvec/CartPole-v1", 4, backend="subproc",
                                       backend_kwargs={"num_workers": 2}))
    ref = vec_envs.track(gym.make_vec("CartPole-v1", 4, vectorization_mode="sync"))
    assert isinstance(ours, fastvec.SubprocVecEnv) and ours.num_workers == 2
    run_parity(ours, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=300)


@pytest.mark.subprocess
def test_a_users_own_id(registered, vec_envs):
    gym.register("CountingTest-v0", entry_point=CountingEnv, kwargs={"episode_len": 4},
                 disable_env_checker=True)
    registered.append("CountingTest-v0")
    registered.append(fastvec.register("CountingTest-v0", backend="subproc"))
    assert registered[-1] == "fastvec/CountingTest-v0"
    ours = vec_envs.track(gym.make_vec("fastvec/CountingTest-v0", 3, episode_len=5))
    ref = vec_envs.track(gym.make_vec("CountingTest-v0", 3, vectorization_mode="sync",
                                      episode_len=5))
    assert isinstance(ours, fastvec.SubprocVecEnv)
    assert ours.get_attr("episode_len") == (5, 5, 5)
    assert run_parity(ours, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=40) > 0


def test_register_options_and_new_id(registered, vec_envs):
    env_id = fastvec.register("Pendulum-v1", backend_kwargs={"autoreset_mode": "same_step"},
                              new_id="fastvec/SlowPendulum-v1")
    registered.append(env_id)
    envs = vec_envs.track(gym.make_vec(env_id, 2, g=1.62))
    assert envs.get_attr("g") == (1.62, 1.62)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    # make-time backend_kwargs add to the registered ones
    envs = vec_envs.track(gym.make_vec(env_id, 2, backend_kwargs={"copy": False}))
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP and envs.copy is False
    # registering again replaces, without Gymnasium's override warning
    assert fastvec.register("Pendulum-v1", new_id=env_id) == env_id
    envs = vec_envs.track(gym.make_vec(env_id, 2))
    assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP


def test_namespaced_id_gets_a_dash(registered):
    gym.register("TestNs/Counting-v0", entry_point=CountingEnv)
    registered += ["TestNs/Counting-v0", fastvec.register("TestNs/Counting-v0")]
    assert registered[-1] == "fastvec/TestNs-Counting-v0"


def test_module_prefix_imports_fastvec_in_a_fresh_interpreter():
    """What RLlib's env runner does: ``make_vec(id, n, vectorization_mode, **env_config)``."""
    code = ("import sys, gymnasium as gym; assert 'fastvec' not in sys.modules; "
            "envs = gym.make_vec('fastvec:fastvec/CartPole-v1', num_envs=2, "
            "vectorization_mode=gym.VectorizeMode.VECTOR_ENTRY_POINT); "
            "print(type(envs).__name__); envs.close()")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "SyncVecEnv"


# -- errors ------------------------------------------------------------------------------


def test_what_gymnasium_refuses_in_this_mode():
    with pytest.raises(gym.error.Error, match="vector_kwargs"):
        gym.make_vec("fastvec/CartPole-v1", 2, vector_kwargs={"copy": False})
    with pytest.raises(gym.error.Error, match="wrappers"):
        gym.make_vec("fastvec/CartPole-v1", 2, wrappers=[gym.wrappers.RecordEpisodeStatistics])


def test_make_time_errors():
    with pytest.raises(ValueError, match="'sync', 'subproc'"):
        gym.make_vec("fastvec/CartPole-v1", 2, backend="threads")
    with pytest.raises(TypeError, match="backend_kwargs to be a dict"):
        gym.make_vec("fastvec/CartPole-v1", 2, backend_kwargs=["copy"])
    with pytest.raises(ValueError, match="positive int"):
        gym.make_vec("fastvec/CartPole-v1", 0)
    # backend is fastvec's: with Gymnasium's own vector env it reaches the env
    with pytest.raises(TypeError, match="backend"):
        gym.make_vec("fastvec/CartPole-v1", 2, vectorization_mode="sync", backend="subproc")


def test_register_errors(registered):
    with pytest.raises(gym.error.Error):
        fastvec.register("NoSuchEnv-v0")
    with pytest.raises(TypeError, match="registered id or an EnvSpec"):
        fastvec.register(42)
    with pytest.raises(ValueError, match="'sync', 'subproc'"):
        fastvec.register("CartPole-v1", backend="threads")
    with pytest.raises(TypeError, match="backend_kwargs to be a dict"):
        fastvec.register("CartPole-v1", backend_kwargs="copy")
    only_vector = EnvSpec("OnlyVector-v0", vector_entry_point="some.module:Vec")
    with pytest.raises(ValueError, match="no entry_point"):
        fastvec.register(only_vector)
    wrapped = EnvSpec("Wrapped-v0", entry_point=CountingEnv, additional_wrappers=(
        WrapperSpec("TimeLimit", "gymnasium.wrappers:TimeLimit", {"max_episode_steps": 3}),))
    with pytest.raises(ValueError, match="additional_wrappers"):
        fastvec.register(wrapped)
    clash = EnvSpec("Clash-v0", entry_point=CountingEnv, kwargs={"backend": "numpy"})
    with pytest.raises(ValueError, match="backend"):
        fastvec.register(clash)
    assert not {"fastvec/OnlyVector-v0", "fastvec/Wrapped-v0", "fastvec/Clash-v0"} & set(
        gym.registry)


def test_results_equal_over_a_long_run_by_hand():
    """Without the comparison helpers: the raw arrays of 300 steps are equal."""
    ours = gym.make_vec("fastvec/Acrobot-v1", 3, max_episode_steps=60)
    ref = gym.make_vec("Acrobot-v1", 3, vectorization_mode="sync", max_episode_steps=60)
    rng = np.random.default_rng(1)
    a, _ = ours.reset(seed=11)
    b, _ = ref.reset(seed=11)
    np.testing.assert_array_equal(a, b)
    truncated = 0
    for _ in range(300):
        actions = rng.integers(0, 3, size=3)
        out, exp = ours.step(actions), ref.step(actions)
        for x, y in zip(out[:4], exp[:4], strict=True):
            np.testing.assert_array_equal(x, y)
        truncated += int(exp[3].sum())
    assert truncated >= 12  # every env was cut at 60 steps, then autoreset
    ours.close()
    ref.close()


def test_a_module_prefixed_id_imports_its_module_first(registered, tmp_path, monkeypatch):
    """``"module:Id-v0"``, as ``gymnasium.make`` takes it: the module registers the id."""
    (tmp_path / "fastvec_prefix_mod.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('PrefixModEnv-v0', entry_point='gymnasium.envs.classic_control:"
        "CartPoleEnv', max_episode_steps=7)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fastvec_prefix_mod", raising=False)
    registered.append("PrefixModEnv-v0")
    registered.append(fastvec.register("fastvec_prefix_mod:PrefixModEnv-v0"))
    assert registered[-1] == "fastvec/PrefixModEnv-v0"
    assert "fastvec_prefix_mod" in sys.modules
    envs = fastvec.make("fastvec_prefix_mod:PrefixModEnv-v0", 2)
    assert envs.spec.id == "PrefixModEnv-v0" and envs.spec.max_episode_steps == 7
    envs.close()
    with pytest.raises(ModuleNotFoundError, match="expected an importable module"):
        fastvec.register("no_such_module_here:PrefixModEnv-v0")
