"""The TorchRL adapter (FastVecEnv) and torchrl's own GymWrapper over fastvec envs,
against single Gymnasium envs on the same seeds and against the counting model."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

pytest.importorskip("torchrl")

import torch  # noqa: E402
import torchrl.collectors  # noqa: E402
from torchrl.envs import GymWrapper, SerialEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs, step_mdp  # noqa: E402

import fastvec  # noqa: E402
from fastvec.errors import ClosedEnvError  # noqa: E402
from fastvec.integrations.torchrl import FastVecEnv  # noqa: E402
from tests.support.envs import CountingEnv, DictCountingEnv, make_fns  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ["sync", pytest.param("subproc", marks=pytest.mark.subprocess)]
# torchrl 0.14 renamed SyncDataCollector to Collector
COLLECTOR = getattr(torchrl.collectors, "Collector", None) or torchrl.collectors.SyncDataCollector
LENS = [3, 4, 5, 6]


@pytest.fixture
def track():
    """``track(env)``: closed after the test, whether it passed or not."""
    made = []
    yield lambda env: made.append(env) or env
    for env in reversed(made):
        env.close()


def vector(backend, fns, mode):
    """A fastvec vector env of ``backend`` (2 workers for subproc)."""
    if backend == "sync":
        return fastvec.SyncVecEnv(fns, autoreset_mode=mode)
    return fastvec.SubprocVecEnv(fns, autoreset_mode=mode, num_workers=2)


def counting(backend, mode, cls=CountingEnv):
    return vector(backend, make_fns(cls, len(LENS), per_env={"episode_len": LENS}), mode)


def native(backend, fns):
    return FastVecEnv(vector(backend, fns, AutoresetMode.DISABLED),
                      categorical_action_encoding=True)


def actions(td, values):
    td["action"] = torch.as_tensor(values, dtype=torch.int64)
    return td


# -- torchrl's GymWrapper over a fastvec env ------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_gym_wrapper_rollout_equals_gymnasiums_vector_env(track, backend, mode):
    fns = [functools.partial(gym.make, "CartPole-v1", max_episode_steps=15)] * 3
    ours = track(GymWrapper(vector(backend, fns, mode), categorical_action_encoding=True))
    ref = track(GymWrapper(gym.vector.SyncVectorEnv(fns, autoreset_mode=mode),
                           categorical_action_encoding=True))
    check_env_specs(ours)
    got, want = [], []
    for env, out in ((ours, got), (ref, want)):
        env.set_seed(7)
        td = env.reset()
        rng = np.random.default_rng(0)
        for _ in range(40):
            td, td_next = env.step_and_maybe_reset(actions(td, rng.integers(0, 2, 3)))
            out.append(td.exclude("_reset"))
            td = td_next
    for a, b in zip(got, want, strict=True):
        assert set(a.keys(True, True)) == set(b.keys(True, True))
        for key in b.keys(True, True):
            torch.testing.assert_close(a[key], b[key], msg=str(key))
    assert sum(int(t["next", "done"].sum()) for t in want) >= 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_gym_wrapper_same_step_gives_the_final_observation(track, backend):
    env = track(GymWrapper(counting(backend, AutoresetMode.SAME_STEP),
                           categorical_action_encoding=True))
    td = env.reset()
    for t in range(1, 13):
        step, td = env.step_and_maybe_reset(actions(td, [1] * 4))
        done = step["next", "done"].squeeze(-1)
        for i, n in enumerate(LENS):
            count = (t - 1) % n + 1
            assert step["next", "observation"][i] == count  # the final obs, then 0
            assert bool(done[i]) == (count == n)
            assert td["observation"][i] == (0 if count == n else count)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gym_wrapper_reset_mask_keeps_the_other_envs(track, backend):
    env = track(GymWrapper(counting(backend, AutoresetMode.DISABLED),
                           categorical_action_encoding=True))
    check_env_specs(env)
    td = env.reset()
    for _ in range(2):
        td = step_mdp(env.step(actions(td, [1] * 4)))
    td["_reset"] = torch.tensor([[True], [False], [True], [False]])
    td = env.reset(td)
    assert td["observation"].tolist() == [0, 2, 0, 2]
    td = step_mdp(env.step(actions(td, [2] * 4)))
    assert td["observation"].tolist() == [1, 3, 1, 3]


# -- the native env ----------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [CountingEnv, DictCountingEnv])
def test_native_env_specs_check(track, backend, cls):
    env = track(FastVecEnv(counting(backend, AutoresetMode.DISABLED, cls),
                           categorical_action_encoding=True))
    check_env_specs(env)
    assert env.batch_size == (4,)
    assert env.full_reward_spec["reward"].shape == (4, 1)
    assert set(env.full_done_spec.keys()) == {"done", "terminated", "truncated"}
    td = env.rollout(12, break_when_any_done=False)
    obs = td["next", "count"] if cls is DictCountingEnv else td["next", "observation"]
    assert obs.shape == (4, 12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_env_from_an_id_matches_gym_env_specs(track, backend):
    vector_kwargs = {"num_workers": 2} if backend == "subproc" else None
    env = track(FastVecEnv("CartPole-v1", 3, backend=backend, vector_kwargs=vector_kwargs))
    # GymEnv("CartPole-v1", num_envs=3)'s specs, on Gymnasium's SyncVectorEnv
    ref = track(GymWrapper(gym.make_vec("CartPole-v1", 3, vectorization_mode="sync",
                                        vector_kwargs={"autoreset_mode": "Disabled"})))
    check_env_specs(env)
    assert env.envs.autoreset_mode is AutoresetMode.DISABLED
    for name in ("full_observation_spec", "full_action_spec", "full_reward_spec",
                 "full_done_spec"):
        ours, theirs = getattr(env, name), getattr(ref, name)  # (composites' devices differ)
        assert set(ours.keys(True, True)) == set(theirs.keys(True, True)), name
        for key in theirs.keys(True, True):
            assert ours[key] == theirs[key], (name, key)


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_reset_mask_resets_only_those_envs(track, backend):
    env = track(native(backend, make_fns(CountingEnv, 4, per_env={"episode_len": [9] * 4})))
    td = env.reset()
    for _ in range(3):
        td = step_mdp(env.step(actions(td, [1] * 4)))
    td["_reset"] = torch.tensor([[False], [True], [False], [True]])
    td = env.reset(td)
    assert td["observation"].tolist() == [3, 0, 3, 0]
    assert not td["done"].any()
    td = step_mdp(env.step(actions(td, [1] * 4)))
    assert td["observation"].tolist() == [4, 1, 4, 1]
    assert tuple(env.envs.call("t")) == (4, 1, 4, 1)  # the envs themselves


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_partial_reset_is_seeded_like_fastvec(track, backend):
    env = track(native(backend, [functools.partial(gym.make, "CartPole-v1")] * 3))
    td = env.reset()
    env.set_seed(20)
    before = td["observation"].clone()
    td["_reset"] = torch.tensor([[False], [False], [True]])
    td = env.reset(td)
    want, _ = gym.make("CartPole-v1").reset(seed=22)  # env i gets seed + i
    np.testing.assert_array_equal(td["observation"][2].numpy(), want)
    torch.testing.assert_close(td["observation"][:2], before[:2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_partial_steps_step_only_those_envs(track, backend):
    n, seed = 4, 5
    env = track(native(backend, [functools.partial(gym.make, "CartPole-v1")] * n))
    singles = [gym.make("CartPole-v1") for _ in range(n)]
    env.set_seed(seed)
    td = env.reset()
    obs = np.stack([s.reset(seed=seed + i)[0] for i, s in enumerate(singles)])
    np.testing.assert_array_equal(td["observation"].numpy(), obs)
    rng = np.random.default_rng(1)
    ended = 0
    for _ in range(120):
        mask, acts = rng.random(n) < 0.6, rng.integers(0, 2, n)
        td = actions(td, acts)
        td["_step"] = torch.as_tensor(mask)
        td = env.step(td)
        reward, done = np.zeros(n, np.float32), np.zeros(n, bool)
        for i in np.flatnonzero(mask):
            obs[i], reward[i], term, trunc, _ = singles[i].step(int(acts[i]))
            done[i] = term or trunc
        np.testing.assert_array_equal(td["next", "observation"].numpy(), obs)
        np.testing.assert_array_equal(td["next", "reward"].squeeze(-1).numpy(), reward)
        np.testing.assert_array_equal(td["next", "done"].squeeze(-1).numpy(), done)
        td = step_mdp(td)
        if done.any():  # unseeded resets: each env's generator goes on, as the singles' do
            ended += int(done.sum())
            td["_reset"] = td["done"].clone()
            td = env.reset(td)
            for i in np.flatnonzero(done):
                obs[i] = singles[i].reset()[0]
            np.testing.assert_array_equal(td["observation"].numpy(), obs)
    assert ended >= 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_partial_step_fills_the_others_as_serial_env_does(track, backend):
    """The envs left out of a partial step: what the input holds for them (an ended
    env stays done), reward 0, exactly as TorchRL's own SerialEnv gives."""
    serial = track(SerialEnv(4, [functools.partial(
        GymWrapper, CountingEnv(episode_len=n, env_id=i), categorical_action_encoding=True)
        for i, n in enumerate(LENS)]))
    ours = track(native(backend, make_fns(CountingEnv, 4, per_env={"episode_len": LENS})))
    got = []
    for env in (serial, ours):
        td = env.reset()
        for _ in range(3):  # env 0 (3 steps long) ends
            td = step_mdp(env.step(actions(td, [1, 2, 3, 1])))
        td = actions(td, [2, 2, 2, 2])
        td["_step"] = torch.tensor([False, True, False, True])
        got.append(env.step(td)["next"])
    for key in ("observation", "reward", "done", "terminated", "truncated"):
        assert got[1][key].flatten().tolist() == got[0][key].flatten().tolist(), key
    assert got[1]["observation"].tolist() == [3, 4, 3, 4]
    assert got[1]["done"].flatten().tolist() == [True, True, False, False]


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_rollout_stops_stepping_ended_envs(track, backend):
    """TorchRL's rollout with break_when_all_done steps only the envs still running
    (a partial step); a DISABLED fastvec env would refuse to step an ended one."""
    env = track(FastVecEnv(counting(backend, AutoresetMode.DISABLED)))
    td = env.rollout(20, break_when_any_done=False, break_when_all_done=True)
    assert td.shape == (4, max(LENS))
    for i, n in enumerate(LENS):
        counts = td["next", "observation"][i].tolist()
        assert counts == list(range(1, n + 1)) + [n] * (max(LENS) - n)
        ended = [t >= n for t in range(1, max(LENS) + 1)]  # and stays so, not stepped
        assert td["next", "done"][i].squeeze(-1).tolist() == ended
        assert td["next", "terminated"][i].squeeze(-1).tolist() == ended
        rewards = td["next", "reward"][i, :n].squeeze(-1)  # the action (later rows: the
        assert rewards.tolist() == td["action"][i, :n].argmax(-1).float().tolist()  # rollout's)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("system", ["native", "gym-wrapper-same-step", "gym-wrapper-disabled"])
def test_collector_runs_on_it(track, backend, system):
    if system == "native":
        env = FastVecEnv(counting(backend, AutoresetMode.DISABLED))
    else:
        mode = AutoresetMode.SAME_STEP if system.endswith("same-step") else AutoresetMode.DISABLED
        env = GymWrapper(counting(backend, mode))
    track(env)
    collector = COLLECTOR(env, None, frames_per_batch=64, total_frames=320)
    frames = 0
    for batch in collector:
        frames += batch.numel()
        obs, nxt = batch["observation"], batch["next", "observation"]
        done = batch["next", "done"].squeeze(-1)
        assert (nxt == obs + 1).all()  # every step counts up by one from its start
        for i, n in enumerate(LENS):  # an episode ends at its length, and only there
            assert (done[i] == (nxt[i] == n)).all()
        later = batch["observation"][:, 1:]
        assert (later[done[:, :-1]] == 0).all()  # after an end, a new episode
    collector.shutdown()
    assert frames == 320


def test_close_closes_the_fastvec_env_once():
    envs = counting("sync", AutoresetMode.DISABLED)
    env = FastVecEnv(envs)
    env.close()
    env.close()
    assert envs.closed and env.is_closed


def test_refuses_what_it_cannot_run(track):
    fns = [functools.partial(gym.make, "CartPole-v1")] * 2
    same_step = track(fastvec.SyncVecEnv(fns, autoreset_mode="same_step"))
    with pytest.raises(ValueError, match="autoreset_mode='disabled'"):
        FastVecEnv(same_step)
    with pytest.raises(ValueError, match="GymWrapper"):
        FastVecEnv(track(gym.vector.SyncVectorEnv(fns)))
    with pytest.raises(ValueError, match="needs num_envs"):
        FastVecEnv("CartPole-v1")
    with pytest.raises(ValueError, match="autoreset_mode='disabled'"):
        FastVecEnv("CartPole-v1", 2, backend="sync",
                   vector_kwargs={"autoreset_mode": "same_step"})
    disabled = track(fastvec.SyncVecEnv(fns, autoreset_mode="disabled"))
    with pytest.raises(ValueError, match="num_envs=3 but the fastvec env has 2"):
        FastVecEnv(disabled, 3)
    with pytest.raises(ValueError, match="already made"):
        FastVecEnv(disabled, vector_kwargs={"copy": False})
    closed = fastvec.SyncVecEnv(fns, autoreset_mode="disabled")
    closed.close()
    with pytest.raises(ClosedEnvError):
        FastVecEnv(closed)
    tuple_obs = functools.partial(TupleObsEnv)
    with pytest.raises(ValueError, match="observation spaces Box"):
        FastVecEnv(tuple_obs, 2, backend="sync")
    env = track(FastVecEnv(disabled))
    td = env.reset()
    td["_reset"] = torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="one flag per env"):
        env.reset(td)


def test_refuses_multi_agent_games(track):
    pytest.importorskip("pettingzoo")
    from tests.support.games import RelayGame

    games = track(fastvec.make_multiagent(RelayGame, 2, vector_kwargs={
        "autoreset_mode": "disabled"}))
    with pytest.raises(ValueError, match="single-agent"):
        FastVecEnv(games)


@pytest.mark.subprocess
def test_refuses_async_batches():
    envs = fastvec.SubprocVecEnv([functools.partial(gym.make, "CartPole-v1")] * 4,
                                 num_workers=2, batch_size=2, autoreset_mode="disabled")
    with pytest.raises(ValueError, match="batch_size"):
        FastVecEnv(envs)
    envs.close()


class TupleObsEnv(CountingEnv):
    """A counting env whose observation space is a Tuple (FastVecEnv refuses it)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Tuple((gym.spaces.Discrete(3),))


def test_without_torchrl_the_import_says_how_to_install():
    code = ("import sys; sys.modules['torchrl'] = None\n"
            "try:\n    import fastvec.integrations.torchrl\n"
            "except ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert '.[torchrl]' in out.stdout, out.stdout + out.stderr


@pytest.mark.subprocess
@pytest.mark.slow
def test_ppo_example_runs_quick():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "torchrl_ppo.py"), "--quick"],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "agent steps" in out.stdout and "env-steps/s" in out.stdout, out.stdout
    assert "collecting:" in out.stdout, out.stdout
    assert "Traceback" not in out.stderr
