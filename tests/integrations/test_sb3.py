"""The Stable-Baselines3 adapter against SB3's own DummyVecEnv, wrappers and PPO."""

from __future__ import annotations

import functools
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import (  # noqa: E402
    DummyVecEnv,
    VecEnv,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
)

import fastvec  # noqa: E402
from fastvec.errors import ClosedEnvError  # noqa: E402
from fastvec.integrations import sb3 as adapter  # noqa: E402
from fastvec.integrations.sb3 import make_sb3_env, to_sb3  # noqa: E402
from tests.support.envs import CountingEnv, DictCountingEnv, RenderEnv  # noqa: E402

BACKENDS = ["sync", pytest.param("subproc", marks=pytest.mark.subprocess)]


class InfoCountingEnv(CountingEnv):
    """Counting env with step infos of several kinds and options echoed at reset."""

    def reset(self, *, seed=None, options=None):
        obs, _ = super().reset(seed=seed, options=options)
        return obs, {"options": dict(options or {}), "reset_of": self.env_id}

    def step(self, action):
        obs, reward, terminated, truncated, _ = super().step(action)
        info = {"t": self.t, "half": self.t / 2, "vec": np.full(2, self.t, np.float32)}
        if terminated or truncated:
            info["last"] = True
        return obs, reward, terminated, truncated, info


def counting_fns(cls, n, **kwargs):
    lengths = [3, 4, 5, 6, 7, 8][:n]
    return [functools.partial(cls, episode_len=lengths[i], env_id=i, truncate=i % 2 == 1,
                              **kwargs) for i in range(n)]


def cartpole_fns(n):
    return [functools.partial(gym.make, "CartPole-v1", max_episode_steps=15)] * n


def fastvec_env(backend, fns, **kwargs):
    cls = fastvec.SyncVecEnv if backend == "sync" else fastvec.SubprocVecEnv
    if backend == "subproc":
        kwargs.setdefault("num_workers", 2)
    return cls(fns, autoreset_mode="same_step", **kwargs)


def assert_obs_equal(got, want):
    if isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            assert_obs_equal(got[key], want[key])
    else:
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.shape == want.shape


def assert_infos_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(w), (g, w)
        for key in w:
            if isinstance(w[key], dict):
                assert_infos_equal([g[key]], [w[key]])
            elif key == "terminal_observation":
                assert_obs_equal(g[key], w[key])
            else:
                assert np.array_equal(g[key], w[key]), key


def run_both(ours, ref, steps, action_space):
    ours.seed(11)
    ref.seed(11)
    assert_obs_equal(ours.reset(), ref.reset())
    assert_infos_equal(ours.reset_infos, ref.reset_infos)
    action_space.seed(3)
    dones = truncated = 0
    for _ in range(steps):
        actions = np.array([action_space.sample() for _ in range(ref.num_envs)])
        got, want = ours.step(actions), ref.step(actions)
        assert_obs_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert got[1].dtype == want[1].dtype == np.float32
        np.testing.assert_array_equal(got[2], want[2])
        assert got[2].dtype == np.bool_
        assert_infos_equal(got[3], want[3])
        assert_infos_equal(ours.reset_infos, ref.reset_infos)
        dones += int(want[2].sum())
        truncated += sum(info["TimeLimit.truncated"] for info in want[3])
    assert dones > 3 and truncated > 0  # episodes ended both ways
    ours.close()
    ref.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_cartpole_equals_dummy_vec_env(backend):
    fns = cartpole_fns(4)
    run_both(to_sb3(fastvec_env(backend, fns)), DummyVecEnv(fns), 80,
             gym.spaces.Discrete(2))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [InfoCountingEnv, DictCountingEnv])
def test_counting_envs_equal_dummy_vec_env(backend, cls):
    fns = counting_fns(cls, 5)
    run_both(to_sb3(fastvec_env(backend, fns)), DummyVecEnv(fns), 40, gym.spaces.Discrete(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_and_options_reach_the_next_reset_once(backend):
    venv = to_sb3(fastvec_env(backend, counting_fns(InfoCountingEnv, 4)))
    assert venv.seed(5) == [5, 6, 7, 8]
    venv.set_options({"level": 2})
    venv.reset()
    assert [info["options"] for info in venv.reset_infos] == [{"level": 2}] * 4
    venv.set_options([{"level": 1}, {}, {"level": 1}, {"level": 3}])  # per env
    venv.reset()
    assert [info["options"] for info in venv.reset_infos] == \
        [{"level": 1}, {}, {"level": 1}, {"level": 3}]
    venv.reset()  # used once, then cleared, as in SB3
    assert [info["options"] for info in venv.reset_infos] == [{}] * 4
    venv.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_attributes_methods_and_wrappers_by_index(backend):
    venv = make_sb3_env(CountingEnv, 4, backend=backend, episode_len=9)
    assert venv.get_attr("episode_len") == [9] * 4
    venv.set_attr("episode_len", 2, indices=[1, 3])
    assert venv.get_attr("episode_len") == [9, 2, 9, 2]
    assert venv.get_attr("episode_len", indices=3) == [2]
    assert venv.env_method("get_wrapper_attr", "episode_len", indices=[2, 1]) == [9, 2]
    assert venv.env_is_wrapped(Monitor) == [True] * 4
    assert venv.env_is_wrapped(gym.wrappers.TimeLimit, indices=[0]) == [False]
    assert venv.has_attr("episode_len") and not venv.has_attr("no_such_attribute")
    with pytest.raises(ValueError, match="env indices"):
        venv.get_attr("episode_len", indices=[4])
    venv.close()


@pytest.mark.subprocess
def test_sb3_wrappers_wrap_it():
    venv = make_sb3_env("CartPole-v1", 4, backend="subproc", seed=0, monitor=False,
                        vector_kwargs={"num_workers": 2})
    wrapped = VecNormalize(VecFrameStack(VecMonitor(venv), n_stack=3))
    obs = wrapped.reset()
    assert obs.shape == (4, 12)
    for _ in range(60):
        obs, rewards, dones, infos = wrapped.step(np.ones(4, np.int64))
    assert obs.shape == (4, 12) and np.isfinite(obs).all()
    assert wrapped.venv.venv.episode_count > 0  # VecMonitor saw episodes end
    wrapped.close()
    with pytest.raises(ClosedEnvError):
        venv.envs.reset()


@pytest.mark.subprocess
@pytest.mark.slow
def test_ppo_trains_through_it():
    venv = make_sb3_env("CartPole-v1", 4, backend="subproc", seed=0,
                        vector_kwargs={"num_workers": 2})
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=256, n_epochs=2, seed=0, verbose=0)
    model.learn(total_timesteps=3072)
    assert model.num_timesteps >= 3072
    assert len(model.ep_info_buffer) > 10  # Monitor's episode infos reached SB3
    venv.close()


def test_render_and_images():
    venv = make_sb3_env(RenderEnv, 2, backend="sync", monitor=False)
    venv.reset()
    frames = venv.get_images()
    assert len(frames) == 2 and frames[0].shape == (4, 6, 3)
    assert venv.render().shape == (8, 6, 3)  # SB3 tiles the frames
    venv.close()
    plain = make_sb3_env(RenderEnv, 2, backend="sync", render_mode=None)
    with pytest.warns(UserWarning, match="rgb_array"):
        assert plain.get_images() == [None, None]
    plain.close()


def test_it_is_an_sb3_vec_env():
    venv = make_sb3_env("CartPole-v1", 2, backend="sync")
    assert isinstance(venv, VecEnv)
    assert venv.num_envs == 2 and venv.observation_space.shape == (4,)
    venv.close()


def test_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="same_step"):
        to_sb3(fastvec.SyncVecEnv(cartpole_fns(2)))
    with pytest.raises(ValueError, match="fastvec SyncVecEnv or SubprocVecEnv"):
        to_sb3(gym.vector.SyncVectorEnv(cartpole_fns(2)))
    closed = fastvec.SyncVecEnv(cartpole_fns(2), autoreset_mode="same_step")
    closed.close()
    with pytest.raises(ClosedEnvError):
        to_sb3(closed)
    with pytest.raises(ValueError, match="same_step"):
        make_sb3_env("CartPole-v1", 2, backend="sync",
                     vector_kwargs={"autoreset_mode": "next_step"})
    with pytest.raises(ValueError, match="expected autoreset_mode"):
        make_sb3_env("CartPole-v1", 2, backend="sync", vector_kwargs={"autoreset_mode": "soon"})


@pytest.mark.parametrize("spelling", ["same_step", "SameStep", "SAMESTEP", "sameStep",
                                      "SAME_STEP", AutoresetMode.SAME_STEP])
def test_make_sb3_env_takes_what_the_vector_envs_take(spelling):
    with fastvec.SyncVecEnv(cartpole_fns(1), autoreset_mode=spelling) as envs:
        assert envs.autoreset_mode is AutoresetMode.SAME_STEP
    venv = make_sb3_env("CartPole-v1", 2, backend="sync",
                        vector_kwargs={"autoreset_mode": spelling})
    assert venv.envs.autoreset_mode is AutoresetMode.SAME_STEP
    venv.close()


@pytest.mark.subprocess
def test_refuses_async_batches():
    envs = fastvec.SubprocVecEnv(cartpole_fns(4), num_workers=2, batch_size=2,
                                 autoreset_mode="same_step")
    with pytest.raises(ValueError, match="batch_size"):
        to_sb3(envs)
    envs.close()


def test_missing_sb3_says_how_to_install(monkeypatch):
    adapter._adapter_class.cache_clear()
    monkeypatch.setitem(sys.modules, "stable_baselines3.common.vec_env.base_vec_env", None)
    try:
        with pytest.raises(ImportError, match=r"\.\[sb3\]"):
            to_sb3(fastvec.SyncVecEnv(cartpole_fns(1), autoreset_mode="same_step"))
    finally:
        adapter._adapter_class.cache_clear()


class ScaledReward(gym.Wrapper):
    """A wrapper class with keyword arguments, as ``make_vec_env``'s ``wrapper_class``."""

    def __init__(self, env, scale=1.0):
        super().__init__(env)
        self.scale = scale

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward * self.scale, terminated, truncated, info


@pytest.mark.parametrize("backend", BACKENDS)
def test_make_vec_env_keywords_give_what_make_vec_env_gives(backend, tmp_path):
    from stable_baselines3.common.env_util import make_vec_env

    cls = {"sync": DummyVecEnv, "subproc": None}[backend]
    keywords = dict(seed=3, start_index=2, wrapper_class=ScaledReward,
                    wrapper_kwargs={"scale": 0.5}, env_kwargs={"max_episode_steps": 12},
                    monitor_kwargs={"info_keywords": ()})
    ours = make_sb3_env("CartPole-v1", 3, monitor_dir=str(tmp_path / "ours"),
                        vec_env_cls=cls, vec_env_kwargs={} if cls else {"num_workers": 2},
                        backend=None if cls else "subproc", **keywords)
    theirs = make_vec_env("CartPole-v1", 3, monitor_dir=str(tmp_path / "theirs"), **keywords)
    assert ours.render_mode == theirs.render_mode == "rgb_array"
    assert [s.sample() for s in ours.get_attr("action_space")] == \
        [s.sample() for s in theirs.get_attr("action_space")]  # seed + start_index + i
    assert np.array_equal(ours.reset(), theirs.reset())
    rng = np.random.default_rng(0)
    for _ in range(40):
        actions = rng.integers(0, 2, 3)
        got, want = ours.step(actions), theirs.step(actions)
        for a, b in zip(got[:3], want[:3], strict=True):
            assert np.array_equal(a, b)
        for a, b in zip(got[3], want[3], strict=True):
            assert a.keys() == b.keys()
            assert a["TimeLimit.truncated"] == b["TimeLimit.truncated"]
            if "episode" in b:
                assert (a["episode"]["r"], a["episode"]["l"]) == \
                    (b["episode"]["r"], b["episode"]["l"])
    names = {p.name for p in (tmp_path / "theirs").iterdir()}
    assert names == {"2.monitor.csv", "3.monitor.csv", "4.monitor.csv"}
    assert {p.name for p in (tmp_path / "ours").iterdir()} == names
    ours.close()
    theirs.close()


def test_vec_env_cls_picks_the_backend_and_start_method_becomes_context():
    from stable_baselines3.common.vec_env import SubprocVecEnv

    assert adapter._backend(None, DummyVecEnv) == "sync"
    assert adapter._backend(None, SubprocVecEnv) == "subproc"
    assert adapter._backend(None, None) == "subproc"
    with pytest.raises(ValueError, match="disagree"):
        adapter._backend("sync", SubprocVecEnv)
    with pytest.raises(ValueError, match="vec_env_cls"):
        adapter._backend(None, VecNormalize)


@pytest.mark.subprocess
def test_sb3_subproc_start_method_is_the_context():
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = make_sb3_env("CartPole-v1", 2, vec_env_cls=SubprocVecEnv,
                        vec_env_kwargs={"start_method": "spawn"})
    assert isinstance(venv.envs, fastvec.SubprocVecEnv) and venv.envs.context == "spawn"
    venv.close()
