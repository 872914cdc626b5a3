"""The Tianshou adapter against single envs, Tianshou's own DummyVectorEnv and its collectors."""

from __future__ import annotations

import functools
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("tianshou")

from tianshou.algorithm.algorithm_base import Policy, RandomActionPolicy  # noqa: E402
from tianshou.data import AsyncCollector, Batch, Collector, VectorReplayBuffer  # noqa: E402
from tianshou.env import BaseVectorEnv, DummyVectorEnv, VectorEnvNormObs  # noqa: E402

import fastvec  # noqa: E402
from fastvec.integrations.tianshou import TianshouVecEnv  # noqa: E402
from tests.support.envs import CountingEnv, DictCountingEnv  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ["sync", pytest.param("subproc", marks=pytest.mark.subprocess)]
CARTPOLE = functools.partial(gym.make, "CartPole-v1")


class LeanPolicy(Policy):
    """Push the cart the way the pole leans: deterministic, so that runs compare.

    It returns a hidden state and a ``policy`` entry: Tianshou 2.0.1's AsyncCollector
    fails without them, with Tianshou's own SubprocVectorEnv too (it indexes the
    policy entries it keeps, an empty Batch, at tianshou/data/collector.py:1308, and
    the hidden states, None, at line 1339).
    """

    def forward(self, batch, state=None, **kwargs):
        act = (np.asarray(batch.obs)[:, 2] > 0).astype(np.int64)
        if state is None:
            state = np.zeros((len(act), 1))
        return Batch(act=act, state=state, policy=Batch(lean=act.astype(np.float32)))


@pytest.fixture
def make_ts(vec_envs):
    """``make_ts(...)``: a ``TianshouVecEnv``, closed after the test."""
    def make(*args, **kwargs):
        return vec_envs.track(TianshouVecEnv(*args, **kwargs))
    return make


def options(backend, workers=2):
    return {"num_workers": workers} if backend == "subproc" else None


def lean(obs):
    return int(obs[2] > 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_len_spaces_and_what_tianshou_checks(backend, make_ts):
    envs = make_ts("CartPole-v1", 4, backend=backend, vector_kwargs=options(backend))
    assert len(envs) == envs.env_num == 4
    assert isinstance(envs, BaseVectorEnv) and not envs.is_async
    assert envs.action_space == [gym.spaces.Discrete(2)] * 4
    assert len({id(space) for space in envs.action_space}) == 4  # one each, seeded apart
    assert [space.shape for space in envs.observation_space] == [(4,)] * 4
    assert [spec.id for spec in envs.spec] == ["CartPole-v1"] * 4
    assert envs.waiting_id == []
    assert envs.envs.autoreset_mode is gym.vector.AutoresetMode.DISABLED


@pytest.mark.parametrize("backend", BACKENDS)
def test_subset_steps_equal_single_envs(backend, make_ts):
    n = 5
    envs = make_ts("CartPole-v1", n, backend=backend, vector_kwargs=options(backend, 1))
    singles = [gym.make("CartPole-v1") for _ in range(n)]
    obs, infos = envs.reset(seed=40)
    assert obs.shape == (n, 4) and list(infos) == [{}] * n
    for i, env in enumerate(singles):
        np.testing.assert_array_equal(obs[i], env.reset(seed=40 + i)[0])  # seed + i
    rng = np.random.default_rng(0)
    last = obs.copy()
    episodes = 0
    for _ in range(300):
        ids = rng.permutation(n)[:rng.integers(1, n + 1)]  # any subset, any order
        actions = np.array([lean(last[i]) for i in ids])
        obs, rewards, terms, truncs, infos = envs.step(actions, ids)
        assert [info["env_id"] for info in infos] == ids.tolist()
        assert rewards.dtype == np.float64 and terms.dtype == np.bool_
        for k, i in enumerate(ids):
            want = singles[i].step(actions[k])
            np.testing.assert_array_equal(obs[k], want[0])
            assert (rewards[k], terms[k], truncs[k]) == want[1:4]
            last[i] = obs[k]
        done = ids[terms | truncs]
        if done.size:
            episodes += done.size
            with pytest.raises(RuntimeError, match="reset"):  # DISABLED: no autoreset
                envs.step(np.zeros(done.size, np.int64), done)
            fresh, _ = envs.reset(env_id=done)
            for k, i in enumerate(done):
                np.testing.assert_array_equal(fresh[k], singles[i].reset()[0])
                last[i] = fresh[k]
    assert episodes >= 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_partial_resets_leave_the_other_envs_alone(backend, make_ts):
    envs = make_ts(CountingEnv, 4, backend=backend, vector_kwargs=options(backend),
                   episode_len=50)
    envs.reset()
    for _ in range(3):
        envs.step(np.ones(4, np.int64))
    obs, infos = envs.reset(env_id=[2, 0])
    assert obs.tolist() == [0, 0] and len(infos) == 2
    obs, *_ = envs.step(np.ones(4, np.int64))
    assert obs.tolist() == [1, 4, 1, 4]
    obs, _ = envs.reset(env_id=3)  # one index
    assert obs.tolist() == [0]
    assert envs.get_env_attr("reset_count") == [2, 1, 2, 2]
    with pytest.raises(ValueError, match="seed and options"):
        envs.reset(env_id=[1], return_info=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_seeds_and_options_per_env(backend, make_ts):
    envs = make_ts("CartPole-v1", 3, backend=backend, vector_kwargs=options(backend, 1))
    obs, _ = envs.reset(env_id=[2, 0], seed=[7, 8])  # one per env named
    np.testing.assert_array_equal(obs[0], gym.make("CartPole-v1").reset(seed=7)[0])
    np.testing.assert_array_equal(obs[1], gym.make("CartPole-v1").reset(seed=8)[0])
    obs, _ = envs.reset(env_id=[1], seed=5)  # an int: env i gets seed + i
    np.testing.assert_array_equal(obs[0], gym.make("CartPole-v1").reset(seed=6)[0])
    obs, _ = envs.reset(env_id=[1], options={"low": 0.2, "high": 0.2})
    np.testing.assert_allclose(obs[0], 0.2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attributes_by_id(backend, make_ts):
    envs = make_ts(CountingEnv, 4, backend=backend, vector_kwargs=options(backend),
                   episode_len=9)
    assert envs.get_env_attr("episode_len") == [9] * 4
    envs.set_env_attr("episode_len", 2, id=[1, 3])
    assert envs.get_env_attr("episode_len") == [9, 2, 9, 2]
    assert envs.get_env_attr("episode_len", id=3) == [2]
    assert envs.get_env_attr("episode_len", id=[2, 1]) == [9, 2]
    envs.reset()
    _, _, terms, _, _ = envs.step(np.zeros(4, np.int64))
    _, _, terms, _, _ = envs.step(np.zeros(4, np.int64))
    assert terms.tolist() == [False, True, False, True]  # the attribute reached the envs
    with pytest.raises(AttributeError, match="env 0 has no attribute 'nothing_here'"):
        envs.get_env_attr("nothing_here")
    with pytest.raises(ValueError, match="action_space"):
        envs.set_env_attr("action_space", gym.spaces.Discrete(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_seeds_action_spaces_and_the_episodes_that_follow(backend, make_ts):
    envs = make_ts("CartPole-v1", 3, backend=backend, vector_kwargs=options(backend, 1))
    assert envs.seed(5) == [[5], [6], [7]]
    obs, _ = envs.reset()  # continues from the seeded generators, as in Tianshou
    for i in range(3):
        single = gym.make("CartPole-v1")
        single.reset(seed=5 + i)
        np.testing.assert_array_equal(obs[i], single.reset()[0])
    samples = [space.sample() for space in envs.action_space]
    expected = []
    for i in range(3):
        space = gym.spaces.Discrete(2)
        space.seed(5 + i)
        expected.append(space.sample())
    assert samples == expected
    assert envs.seed([1, 2, 3]) == [[1], [2], [3]]
    assert envs.seed(None) == [None] * 3
    with pytest.raises(ValueError, match="expected 3 seeds"):
        envs.seed([1, 2])


@pytest.mark.subprocess
def test_close_stops_the_workers(make_ts):
    envs = make_ts("CartPole-v1", 4, backend="subproc", vector_kwargs={"num_workers": 2})
    envs.reset()
    envs.close()
    assert envs.is_closed and envs.envs.closed
    envs.close()  # a second close (Collector.close, then the user) does nothing
    with pytest.raises(fastvec.errors.ClosedEnvError):
        envs.reset()
    # the leak check (tests/support/suite.py) sees no worker left


def collect_with(envs, n_step=None, n_episode=None, seed=3):
    """What Tianshou's Collector collects with LeanPolicy from ``envs``: the buffer."""
    space = gym.spaces.Discrete(2)
    buffer = VectorReplayBuffer(2000, len(envs))
    collector = Collector(LeanPolicy(action_space=space), envs, buffer)
    envs.seed(seed)
    collector.reset()
    stats = collector.collect(n_step=n_step, n_episode=n_episode)
    return buffer, stats


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", [{"n_step": 400}, {"n_episode": 9}])
def test_collector_collects_what_it_collects_from_dummy_vector_env(backend, how, make_ts):
    ours = make_ts([functools.partial(gym.make, "CartPole-v1", max_episode_steps=60)] * 4,
                   backend=backend, vector_kwargs=options(backend))
    theirs = DummyVectorEnv([functools.partial(gym.make, "CartPole-v1",
                                               max_episode_steps=60)] * 4)
    got, got_stats = collect_with(ours, **how)
    want, want_stats = collect_with(theirs, **how)
    theirs.close()
    assert got_stats.n_collected_steps == want_stats.n_collected_steps >= 300
    assert got_stats.n_collected_episodes == want_stats.n_collected_episodes >= 4
    np.testing.assert_array_equal(got_stats.returns, want_stats.returns)
    for key in ("obs", "act", "rew", "terminated", "truncated", "obs_next"):
        np.testing.assert_array_equal(getattr(got, key), getattr(want, key), err_msg=key)
    np.testing.assert_array_equal(got.info["env_id"], want.info["env_id"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_policy_float_actions_are_cast(backend, make_ts):
    # Tianshou 2.0.1's RandomActionPolicy gives float32 actions for Discrete spaces
    # (CartPole refuses them from Tianshou's own DummyVectorEnv): whole numbers are cast.
    envs = make_ts("CartPole-v1", 4, backend=backend, vector_kwargs=options(backend))
    policy = RandomActionPolicy(gym.spaces.Discrete(2))
    collector = Collector(policy, envs, VectorReplayBuffer(1000, 4))
    collector.reset()
    stats = collector.collect(n_step=200)
    assert stats.n_collected_steps == 200
    collector.collect(n_step=40, random=True)  # the collector's own sampling
    envs.reset()
    envs.step(np.array([0.0, 1.0, 1.0, 0.0], np.float32))
    with pytest.raises(ValueError, match=r"env 2: 0\.5"):
        envs.step(np.array([0.0, 1.0, 0.5, 0.0]))


def lean_episodes(seed, steps):
    """Observations and rewards of one CartPole stepped by LeanPolicy, resets included."""
    env = gym.make("CartPole-v1", max_episode_steps=40)
    env.reset(seed=seed)
    obs, _ = env.reset()
    seen, rewards = [], []
    for _ in range(steps):
        seen.append(obs)
        obs, reward, term, trunc, _ = env.step(lean(obs))
        rewards.append(reward)
        if term or trunc:
            obs, _ = env.reset()
    return np.array(seen), np.array(rewards)


@pytest.mark.subprocess
def test_async_collector_on_async_batches(make_ts):
    envs = make_ts([functools.partial(gym.make, "CartPole-v1", max_episode_steps=40)] * 8,
                   vector_kwargs={"num_workers": 4}, wait_num=4)
    assert envs.is_async and envs.wait_num == 4 and envs.envs.batch_size == 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Using async setting may collect extra transitions"
        collector = AsyncCollector(LeanPolicy(action_space=gym.spaces.Discrete(2)), envs,
                                   VectorReplayBuffer(8 * 500, 8))
    envs.seed(11)
    collector.reset()
    stats = collector.collect(n_step=600)
    assert stats.n_collected_steps >= 600 and stats.n_collected_episodes > 8
    for i, buffer in enumerate(collector.buffer.buffers):  # each env, its own episodes
        count = len(buffer)
        assert count >= 20, (i, count)
        obs, rewards = lean_episodes(11 + i, count)
        np.testing.assert_array_equal(buffer.obs[:count], obs, err_msg=f"env {i}")
        np.testing.assert_array_equal(buffer.rew[:count], rewards, err_msg=f"env {i}")
    assert collector.collect(n_episode=10).n_collected_episodes >= 10
    collector.reset()  # waits for what is stepping, then resets every env
    assert envs.waiting_id == []


@pytest.mark.subprocess
def test_async_misuse_is_refused_with_what_works(make_ts):
    envs = make_ts("CartPole-v1", 4, vector_kwargs={"num_workers": 2}, wait_num=2)
    envs.reset()
    envs.step(np.zeros(4, np.int64))  # sends to all, returns one block of 2
    waiting = envs.waiting_id
    assert len(waiting) == 2
    with pytest.raises(ValueError, match="still stepping"):
        envs.step(np.zeros(2, np.int64), waiting)
    with pytest.raises(ValueError, match="are stepping"):
        envs.reset(env_id=waiting)
    with pytest.raises(RuntimeError, match="stepping"):
        envs.get_env_attr("gravity")
    obs, *_, infos = envs.step(None)  # the rest
    assert sorted(info["env_id"] for info in infos) == waiting and envs.waiting_id == []
    with pytest.raises(ValueError, match="no envs stepping"):
        envs.step(None)
    with pytest.raises(ValueError, match="whole worker blocks"):
        envs.step(np.zeros(1, np.int64), [0])


@pytest.mark.subprocess
def test_async_partial_reset_keeps_results_that_arrive_meanwhile(make_ts):
    envs = make_ts(CountingEnv, 6, vector_kwargs={"num_workers": 3}, wait_num=2,
                   episode_len=100)
    envs.reset()
    obs, _, _, _, infos = envs.step(np.ones(6, np.int64))  # all sent, one block back
    first = [info["env_id"] for info in infos]
    fresh, _ = envs.reset(env_id=first[::-1])  # may receive the other blocks meanwhile
    assert fresh.tolist() == [0, 0]
    seen = {}
    while envs.waiting_id:
        obs, rewards, _, _, infos = envs.step(None)
        seen.update({info["env_id"]: int(o) for info, o in zip(infos, obs, strict=True)})
    assert sorted(seen) == sorted(set(range(6)) - set(first))
    assert set(seen.values()) == {1}  # their first step, each returned once


def test_dict_observations_reach_the_collector(make_ts):
    fns = [functools.partial(DictCountingEnv, episode_len=3 + i, env_id=i) for i in range(3)]
    envs = make_ts(fns, backend="sync")
    obs, infos = envs.reset()
    assert obs.dtype == object and obs[2]["env_id"] == 2 and infos[1] == {"env_id": 1}
    theirs = DummyVectorEnv(fns)
    want, _ = theirs.reset()
    for got_obs, want_obs in zip(obs, want, strict=True):
        assert got_obs.keys() == want_obs.keys()
        for key in want_obs:
            np.testing.assert_array_equal(got_obs[key], want_obs[key])
    theirs.close()
    collector = Collector(RandomActionPolicy(gym.spaces.Discrete(4)), envs,
                          VectorReplayBuffer(300, 3))
    collector.reset()
    assert collector.collect(n_step=30).n_collected_episodes >= 6
    assert collector.buffer.obs.count.shape == (300,)


def test_tianshou_wrappers_take_it(make_ts):
    envs = VectorEnvNormObs(make_ts("CartPole-v1", 2, backend="sync"))
    obs, _ = envs.reset()
    obs, *_ = envs.step(np.array([0, 1]))
    assert obs.shape == (2, 4) and np.isfinite(obs).all()
    assert envs.action_space == [gym.spaces.Discrete(2)] * 2


def test_made_from_a_fastvec_env_or_factories(make_ts, make_vec):
    given = make_vec([CARTPOLE] * 2, autoreset_mode="disabled")
    assert make_ts(given).envs is given
    listed = make_ts([CARTPOLE] * 3, backend="sync")
    assert isinstance(listed.envs, fastvec.SyncVecEnv) and len(listed) == 3
    made = make_ts("CartPole-v1", 2, backend="sync", max_episode_steps=7)
    assert made.envs.spec.kwargs["max_episode_steps"] == 7


def test_refuses_what_it_cannot_run(make_vec):
    with pytest.raises(ValueError, match="autoreset_mode='disabled'"):
        TianshouVecEnv(make_vec([CARTPOLE] * 2))
    with pytest.raises(ValueError, match="fastvec SyncVecEnv"):
        TianshouVecEnv(gym.vector.SyncVectorEnv([CARTPOLE] * 2,
                                                autoreset_mode="Disabled"))
    with pytest.raises(ValueError, match="must be 'disabled'"):
        TianshouVecEnv("CartPole-v1", 2, backend="sync",
                       vector_kwargs={"autoreset_mode": "next_step"})
    with pytest.raises(ValueError, match="timeout is not supported.*wait_num"):
        TianshouVecEnv("CartPole-v1", 2, backend="sync", timeout=0.1)
    with pytest.raises(ValueError, match="backend='subproc' or 'ray'"):
        TianshouVecEnv("CartPole-v1", 4, backend="sync", wait_num=2)
    with pytest.raises(ValueError, match="expected num_envs"):
        TianshouVecEnv("CartPole-v1", backend="sync")
    with pytest.raises(ValueError, match="expected backend"):
        TianshouVecEnv("CartPole-v1", 2, backend="threads")
    with pytest.raises(ValueError, match="with an env id"):
        TianshouVecEnv(make_vec([CARTPOLE] * 2, autoreset_mode="disabled"), 2)
    envs = TianshouVecEnv("CartPole-v1", 2, backend="sync")
    with pytest.raises(ValueError, match="must not be None"):
        envs.step(None)
    envs.close()


@pytest.mark.subprocess
def test_wait_num_must_match_a_given_envs_batch_size(make_subproc):
    given = make_subproc([CARTPOLE] * 4, num_workers=2, batch_size=2, autoreset_mode="disabled")
    with pytest.raises(ValueError, match="batch_size"):
        TianshouVecEnv(given, wait_num=4)
    assert TianshouVecEnv(given).wait_num == 2


@pytest.mark.subprocess
@pytest.mark.slow
def test_ppo_example_runs_quick():
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "tianshou_ppo.py"),
                           "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "env-steps/s" in proc.stdout and "mean test return" in proc.stdout, proc.stdout
