"""``fastvec.atari.make`` against Gymnasium's own Atari pipeline, bit for bit.

The reference is ``SyncVectorEnv`` over ``FrameStackObservation(AtariPreprocessing(
gym.make(env_id, frameskip=1, ...), ...), stack_size)``, on the same seeds and
actions: observations, rewards, terminations and truncations, through resets
(short episodes via ``max_num_frames_per_episode``, lives lost with
``terminal_on_life_loss``), with and without sticky actions, in every autoreset mode
and on each backend.
"""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation  # noqa: E402

import fastvec.atari  # noqa: E402
from fastvec.atari import PreprocessedAtari  # noqa: E402

BACKENDS = ["sync", pytest.param("subproc", marks=pytest.mark.subprocess),
            pytest.param("local", marks=pytest.mark.subprocess)]


def reference_env(env_id, env_kwargs, stack_size, **options):
    import ale_py

    gym.register_envs(ale_py)
    env = AtariPreprocessing(gym.make(env_id, frameskip=1, **env_kwargs), **options)
    return env if stack_size is None else FrameStackObservation(env, stack_size)


def assert_same(ours, theirs, steps, seed, num_envs):
    rng = np.random.default_rng(seed)
    try:
        a, _ = ours.reset(seed=seed)
        b, _ = theirs.reset(seed=seed)
        assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape
        assert np.array_equal(a, b), "reset"
        ends = 0
        for step in range(steps):
            actions = rng.integers(0, ours.single_action_space.n, num_envs)
            got, want = ours.step(actions), theirs.step(actions)
            for name, x, y in zip(("obs", "rewards", "terminations", "truncations"),
                                  got[:4], want[:4], strict=True):
                assert np.array_equal(x, y), f"step {step}: {name}"
            done = want[2] | want[3]
            ends += int(np.sum(done))
            if "final_obs" in want[4]:  # SAME_STEP: the stacked last observation
                assert np.array_equal(got[4]["_final_obs"], want[4]["_final_obs"]), step
                for i in np.flatnonzero(want[4]["_final_obs"]):
                    assert np.array_equal(got[4]["final_obs"][i], want[4]["final_obs"][i])
            if theirs.metadata["autoreset_mode"].value == "Disabled" and done.any():
                a, _ = ours.reset(options={"reset_mask": done.copy()})
                b, _ = theirs.reset(options={"reset_mask": done.copy()})
                assert np.array_equal(a, b), f"partial reset after step {step}"
        return ends
    finally:
        ours.close()
        theirs.close()


CASES = {
    # name: (env_id, env_kwargs, options, stack_size)
    "pong": ("ALE/Pong-v5", {"max_num_frames_per_episode": 600}, {}, 4),
    "breakout-lives": ("ALE/Breakout-v5", {"repeat_action_probability": 0.0},
                       {"terminal_on_life_loss": True}, 4),
    "breakout-sticky-rgb": ("ALE/Breakout-v5", {"max_num_frames_per_episode": 400},
                            {"grayscale_obs": False, "screen_size": (64, 48), "noop_max": 5,
                             "frame_skip": 3}, 2),
}


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
@pytest.mark.parametrize("case", list(CASES))
def test_equal_to_gymnasiums_pipeline(case, mode, backend):
    env_id, env_kwargs, options, stack_size = CASES[case]
    num_envs = 4
    vector_kwargs = {"autoreset_mode": mode}
    if backend == "local":
        backend, vector_kwargs = "subproc", {**vector_kwargs, "local_block": True,
                                             "num_workers": 1}
    elif backend == "subproc":
        vector_kwargs["num_workers"] = 2
    ours = fastvec.atari.make(env_id, num_envs, backend=backend, vector_kwargs=vector_kwargs,
                              env_kwargs=env_kwargs, stack_size=stack_size, **options)
    theirs = gym.vector.SyncVectorEnv(
        [functools.partial(reference_env, env_id, env_kwargs, stack_size, **options)]
        * num_envs, autoreset_mode=mode)
    ends = assert_same(ours, theirs, steps=220, seed=3, num_envs=num_envs)
    assert ends > 0, "the run crossed no episode end: resets were not compared"


def test_one_env_alone_is_gymnasiums_preprocessing():
    ours = PreprocessedAtari("ALE/Pong-v5", {"max_num_frames_per_episode": 300})
    theirs = reference_env("ALE/Pong-v5", {"max_num_frames_per_episode": 300}, None)
    assert ours.observation_space == theirs.observation_space
    assert ours.action_space == theirs.action_space
    a, _ = ours.reset(seed=1)
    b, _ = theirs.reset(seed=1)
    assert np.array_equal(a, b)
    for step in range(100):
        got, want = ours.step(step % 6), theirs.step(step % 6)
        assert np.array_equal(got[0], want[0]) and got[1:4] == want[1:4], step
        assert got[4]["lives"] == want[4]["lives"]
        if got[2] or got[3]:
            a, _ = ours.reset()
            b, _ = theirs.reset()
            assert np.array_equal(a, b)
    ours.close()
    theirs.close()


@pytest.mark.parametrize("bad, match", [({"frame_skip": 0}, "frame_skip"),
                                        ({"noop_max": -1}, "noop_max"),
                                        ({"screen_size": (84,)}, "screen_size")])
def test_bad_options_say_what_was_expected(bad, match):
    with pytest.raises(ValueError, match=match):
        PreprocessedAtari("ALE/Pong-v5", **bad)


@pytest.mark.parametrize("bad, match", [({"stack_size": 0}, "stack_size"),
                                        ({"vector_kwargs": {"frame_stack": 2}}, "stack_size")])
def test_bad_stacks_are_refused_before_any_env_is_built(bad, match):
    with pytest.raises(ValueError, match=match):
        fastvec.atari.make("ALE/Pong-v5", 2, backend="sync", **bad)


@pytest.mark.subprocess
def test_async_batches_give_each_env_its_own_trajectory():
    """``recv``/``send`` on blocks of 2: each env's observations and rewards are the
    ones it has alone (NEXT_STEP autoreset), whichever batch it came back in."""
    env_kwargs = {"max_num_frames_per_episode": 300}
    envs = fastvec.atari.make("ALE/Pong-v5", 4, vector_kwargs={"num_workers": 2,
                                                                "batch_size": 2},
                              env_kwargs=env_kwargs)
    steps = 90
    seen: list[list] = [[] for _ in range(4)]
    try:
        envs.async_reset(seed=5)
        while min(len(s) for s in seen) <= steps:
            obs, rewards, terms, truncs, _, env_ids = envs.recv()
            for row, i in enumerate(env_ids):
                seen[i].append((obs[row].copy(), float(rewards[row]),
                                bool(terms[row] or truncs[row])))
            envs.send(np.array([(len(seen[i]) - 1) % 6 for i in env_ids]), env_ids)
    finally:
        envs.close()
    for i in range(4):
        alone = reference_env("ALE/Pong-v5", env_kwargs, 4)
        obs, _ = alone.reset(seed=5 + i)
        want, done = [(obs, 0.0, False)], False
        for t in range(steps):
            if done:
                obs, _ = alone.reset()
                want.append((obs, 0.0, False))
                done = False
                continue
            obs, reward, term, trunc, _ = alone.step(t % 6)
            done = term or trunc
            want.append((obs, float(reward), done))
        alone.close()
        for t, (got, exp) in enumerate(zip(seen[i][:steps + 1], want, strict=True)):
            assert np.array_equal(got[0], exp[0]) and got[1:] == exp[1:], (i, t)


@pytest.mark.slow
@pytest.mark.parametrize("restart", [False, True], ids=["ray", "ray-restart-policy"])
def test_equal_to_gymnasiums_pipeline_on_ray(ray_session, restart):
    """On ``RayVecEnv`` (2 actors), with and without the restart policy armed."""
    env_id, env_kwargs, options, stack_size = CASES["breakout-lives"]
    vector_kwargs = {"num_actors": 2}
    if restart:
        vector_kwargs["on_worker_failure"] = "restart"
    ours = fastvec.atari.make(env_id, 4, backend="ray", vector_kwargs=vector_kwargs,
                              env_kwargs=env_kwargs, stack_size=stack_size, **options)
    theirs = gym.vector.SyncVectorEnv(
        [functools.partial(reference_env, env_id, env_kwargs, stack_size, **options)] * 4)
    assert assert_same(ours, theirs, steps=150, seed=11, num_envs=4) > 0


class FailingAtari(PreprocessedAtari):
    """Env 3 of the restart test: raises once, at its 30th step."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 30:
            raise RuntimeError("env 3 failed on purpose")
        return super().step(action)


@pytest.mark.subprocess
def test_a_restart_mid_run_leaves_the_other_envs_on_gymnasiums_trajectory():
    """Env 3's block is rebuilt and reset mid-run: its rows report a truncation and a
    fresh stack (the reset frame four times); the other envs never notice."""
    env_id, env_kwargs, options, stack_size = CASES["breakout-lives"]
    fns = [functools.partial(FailingAtari if i == 3 else PreprocessedAtari, env_id, env_kwargs,
                             **options) for i in range(6)]
    ours = fastvec.SubprocVecEnv(fns, num_workers=3, context="fork", frame_stack=stack_size,
                                 on_worker_failure="restart")
    theirs = gym.vector.SyncVectorEnv(
        [functools.partial(reference_env, env_id, env_kwargs, stack_size, **options)] * 6)
    failed = [2, 3]  # the block of env 3 (6 envs, 3 workers)
    others = [0, 1, 4, 5]
    rng = np.random.default_rng(2)
    try:
        assert np.array_equal(ours.reset(seed=4)[0], theirs.reset(seed=4)[0])
        restarted_at = -1
        for step in range(40):
            actions = rng.integers(0, 4, 6)
            got, want = ours.step(actions), theirs.step(actions)
            for name, x, y in zip(("obs", "rewards", "terminations", "truncations"),
                                  got[:4], want[:4], strict=True):
                assert np.array_equal(x[others], y[others]), f"step {step}: {name}"
            if "worker_restarted" in got[4]:  # env 3's 30th step (resets are not steps)
                restarted_at = step
                assert list(np.flatnonzero(got[4]["_worker_restarted"])) == failed
                assert got[3][failed].all()
                for i in failed:
                    assert all(np.array_equal(frame, got[0][i][-1]) for frame in got[0][i])
        assert ours.total_restarts == 1 and 29 <= restarted_at < 40
    finally:
        ours.close()
        theirs.close()


def test_the_compiled_resize_is_used_only_where_it_gives_opencvs_bytes():
    import cv2

    from fastvec.atari.env import compiled_area_resize

    assert compiled_area_resize((210, 160), (84, 84), cv2) is not None
    assert compiled_area_resize((210, 160, 3), (48, 64, 3), cv2) is not None
    assert compiled_area_resize((84, 84), (210, 160), cv2) is None  # an upscale

    class OtherOpenCV:  # an OpenCV whose INTER_AREA rounds another way
        INTER_AREA = cv2.INTER_AREA

        @staticmethod
        def resize(image, size, interpolation):
            return cv2.resize(image, size, interpolation=interpolation) ^ 1

    assert compiled_area_resize((210, 160), (84, 84), OtherOpenCV) is None
