"""The test env zoo does what the other tests rely on: factories pickle, the
synthetic envs are deterministic and stay in their spaces, and the misbehaving
envs misbehave exactly as documented."""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import threading
import time

import cloudpickle
import numpy as np
import pytest

from tests.support.envs import (
    ActionEchoEnv,
    BadObsEnv,
    CountingEnv,
    DictCountingEnv,
    EnvBoom,
    HangingEnv,
    ObjectSpaceEnv,
    RaisingEnv,
    RenderEnv,
    SlowEnv,
    SyntheticEnv,
    crashing_fns,
    gym_fns,
    make_fns,
    render_frame,
    synthetic_action_space,
)

FACTORIES = {
    "counting": lambda: make_fns(CountingEnv, 2, per_env={"episode_len": [2, 3]}),
    "dict_counting": lambda: make_fns(DictCountingEnv, 2),
    "action_echo": lambda: make_fns(ActionEchoEnv, 2, action_space=synthetic_action_space("box")),
    "render": lambda: make_fns(RenderEnv, 2),
    "synthetic_dict": lambda: make_fns(SyntheticEnv, 2, layout="dict", action_kind="box"),
    "synthetic_tuple": lambda: make_fns(SyntheticEnv, 2, layout="tuple"),
    "synthetic_odd": lambda: make_fns(SyntheticEnv, 2, layout="odd"),
    "object_text": lambda: make_fns(ObjectSpaceEnv, 2, kind="text"),
    "object_graph": lambda: make_fns(ObjectSpaceEnv, 2, kind="graph"),
    "object_sequence": lambda: make_fns(ObjectSpaceEnv, 2, kind="sequence"),
    "object_dict_text": lambda: make_fns(ObjectSpaceEnv, 2, kind="dict_text"),
    "bad_obs_off": lambda: make_fns(BadObsEnv, 2, kind="tuple"),
    "raising_off": lambda: make_fns(RaisingEnv, 2, faulty=False),
    "slow": lambda: make_fns(SlowEnv, 2, delay=0.0),
    "hanging_off": lambda: make_fns(HangingEnv, 2, faulty=False),
    "crashing": lambda: crashing_fns(2, crash_env=1, crash_at=100),
    "gym_cartpole": lambda: gym_fns("CartPole-v1", 2),
}


@pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")  # scalar Box obs
@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_factories_pickle_and_make_working_envs(name, dumps):
    for i, fn in enumerate(pickle.loads(dumps(FACTORIES[name]()))):
        env = fn()
        obs, _ = env.reset(seed=i)
        assert env.observation_space.contains(obs), f"{name}: reset obs not in its space"
        for _ in range(3):
            obs, *_ = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs), f"{name}: obs not in its space"
        env.close()


def test_counting_env_counts_and_ends():
    env = CountingEnv(episode_len=3, truncate=True)
    assert env.reset(seed=0)[0] == 0
    results = [env.step(2) for _ in range(3)]
    assert [int(r[0]) for r in results] == [1, 2, 3]
    assert [r[1] for r in results] == [2.0, 2.0, 2.0]
    assert [(r[2], r[3]) for r in results] == [(False, False)] * 2 + [(False, True)]


def trajectory(env, seed: int, steps: int) -> list:
    out = [env.reset(seed=seed)]
    env.action_space.seed(seed)
    for _ in range(steps):
        out.append(env.step(env.action_space.sample()))
        if out[-1][2] or out[-1][3]:
            out.append(env.reset())
    return out


@pytest.mark.parametrize("layout", ["dict", "tuple", "image", "odd"])
def test_synthetic_env_is_deterministic_and_stays_in_its_space(layout):
    from tests.support.compare import assert_tree_equal

    a = trajectory(SyntheticEnv(layout=layout), seed=3, steps=60)
    b = trajectory(SyntheticEnv(layout=layout), seed=3, steps=60)
    assert_tree_equal(a, b, "trajectory")
    c = trajectory(SyntheticEnv(layout=layout), seed=4, steps=60)
    with pytest.raises(AssertionError):
        assert_tree_equal(a, c, "trajectory")
    space = SyntheticEnv(layout=layout).observation_space
    assert all(space.contains(step[0]) for step in a)
    ends = [s for s in a if len(s) == 5 and (s[2] or s[3])]
    assert len(ends) >= 5, "episodes should be short enough to end often"
    assert any(s[2] and s[3] for s in ends) or len(ends) < 10


def test_rich_infos_vary_between_steps():
    env = SyntheticEnv(layout="dict", info_kind="rich")
    keys = [frozenset(s[-1]) for s in trajectory(env, seed=0, steps=80)]
    assert len(set(keys)) >= 4, "keys present on some steps only"


@pytest.mark.parametrize("kind", ["box", "dict", "tuple"])
@pytest.mark.parametrize("fault", ["shape", "dtype"])
def test_bad_obs_env_goes_wrong_at_its_step(kind, fault):
    env = BadObsEnv(kind=kind, fault=fault, at_step=2, faulty=True)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert env.observation_space.contains(env.step(0)[0])
    assert not env.observation_space.contains(env.step(0)[0])


def test_raising_env_raises_at_its_step():
    env = RaisingEnv(raise_at=2)
    env.reset(seed=0)
    env.step(0)
    with pytest.raises(EnvBoom, match="env 0 raised on purpose at step 2"):
        env.step(0)
    with pytest.raises(EnvBoom):
        RaisingEnv(raise_at=0).reset(seed=0)


def test_slow_env_sleeps():
    env = SlowEnv(delay=0.05)
    env.reset(seed=0)
    start = time.perf_counter()
    env.step(0)
    assert time.perf_counter() - start >= 0.05


def test_hanging_env_hangs_at_its_step():
    env = HangingEnv(hang_at=2)
    env.reset(seed=0)
    env.step(0)
    thread = threading.Thread(target=env.step, args=(0,), daemon=True)
    thread.start()
    thread.join(0.2)
    assert thread.is_alive()


def test_render_env_frames():
    env = RenderEnv(env_id=3, height=2, width=5)
    env.reset(seed=0)
    env.step(0)
    frame = env.render()
    assert frame.shape == (2, 5, 3) and frame.dtype == np.uint8
    assert np.array_equal(frame, render_frame(3, 1, 2, 5))


def test_crashing_env_does_not_crash_the_process_that_made_it():
    env = crashing_fns(2, crash_env=1, mode="sigkill", crash_at=1)[1]()
    env.reset(seed=0)
    with pytest.raises(EnvBoom):
        env.step(0)


def _step_twice(fn) -> None:
    env = fn()
    env.reset(seed=0)
    env.step(0)
    env.step(0)


@pytest.mark.crash
@pytest.mark.parametrize(
    "mode, exitcode",
    [("exit", 3), ("sigkill", -signal.SIGKILL), ("segfault", -signal.SIGSEGV)],
)
def test_crashing_env_kills_a_child_process(mode, exitcode):
    fn = crashing_fns(2, crash_env=1, mode=mode, crash_at=2)[1]
    proc = multiprocessing.get_context("spawn").Process(target=_step_twice, args=(fn,))
    proc.start()
    proc.join(30)
    assert proc.exitcode == exitcode
