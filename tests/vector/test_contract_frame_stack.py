"""``frame_stack``: frames kept in the record equal ``FrameStackObservation``, on every backend.

The reference is Gymnasium's ``SyncVectorEnv`` over ``FrameStackObservation(env, k,
padding_type=...)``; the vector env under test gets the bare envs and
``frame_stack=FrameStack(k, padding_type)``.  Observations (``final_obs`` in
``SAME_STEP`` included), rewards, flags and infos must be equal in every autoreset
mode, through full and partial resets, with ``copy`` on and off.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import FrameStackObservation

import fastvec
from fastvec import FrameStack
from tests.support import backends, internals
from tests.support.compare import check_attributes, run_parity
from tests.support.envs import SyntheticEnv
from tests.support.faulty import RaisingEnv

pytestmark = pytest.mark.fastvec_only

N = 4
MODES = list(AutoresetMode)


def synthetic_fns(layout: str, n: int = N) -> list:
    return [lambda i=i: SyntheticEnv(layout=layout, info_kind="rich", max_len=7, env_id=i)
            for i in range(n)]


def stacked_fns(fns: list, k: int, padding: Any) -> list:
    return [lambda fn=fn: FrameStackObservation(fn(), k, padding_type=padding) for fn in fns]


@pytest.mark.parametrize("padding", ["reset", "zero"])
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
@pytest.mark.parametrize("layout", ["image", "dict"])
def test_frames_stacked_in_the_record_equal_frame_stack_observation(
        layout: str, mode: AutoresetMode, padding: str, backend: str, make_envs: Any,
        make_ref: Any) -> None:
    k = 3 if layout == "image" else 2
    copy = padding == "reset"  # both ways, over the combinations
    vec = make_envs(synthetic_fns(layout), autoreset_mode=mode, copy=copy,
                    frame_stack=FrameStack(k, padding))
    ref = make_ref(stacked_fns(synthetic_fns(layout), k, padding), autoreset_mode=mode,
                   copy=copy)
    check_attributes(vec, ref, mode)
    assert vec.frame_stack == FrameStack(k, padding)
    ends = run_parity(vec, ref, mode=mode, copy=copy, steps=40)
    assert ends > 0, "no episode ended: autoreset untested"


@pytest.mark.parametrize("backend_name", [backends.SYNC, backends.SUBPROC])
def test_a_given_padding_observation_fills_the_older_frames(backend_name: str, vec_envs: Any,
                                                            make_ref: Any) -> None:
    space = spaces.Box(0, 255, (4, 4), np.uint8)
    padding = np.full((4, 4), 7, np.uint8)
    fns = [lambda i=i: SyntheticEnv(space=space, info_kind="none", env_id=i) for i in range(N)]
    vec = vec_envs.make_backend(backend_name, fns, frame_stack=FrameStack(4, padding))
    ref = make_ref(stacked_fns(fns, 4, padding))
    obs, _ = vec.reset(seed=3)
    assert (obs[:, :3] == 7).all()
    run_parity(vec, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=20)


def test_an_int_is_a_frame_stack_with_reset_padding(make_envs: Any) -> None:
    vec = make_envs(synthetic_fns("image"), frame_stack=2)
    assert vec.frame_stack == FrameStack(2, "reset")
    assert vec.single_observation_space.shape == (2, 8, 8, 3)
    obs, _ = vec.reset(seed=0)
    np.testing.assert_array_equal(obs[:, 0], obs[:, 1])


def test_a_restarted_block_starts_a_fresh_stack(make_envs: Any, backend: str) -> None:
    if backend == backends.SYNC:
        pytest.skip("SyncVecEnv does not restart: an env's exception reaches the caller")
    backends.skip_async(backend, "the restart's rows come back in a later batch")
    fns = [lambda i=i: RaisingEnv(raise_at=3, faulty=i == 3, env_id=i) for i in range(6)]
    vec = make_envs(fns, on_worker_failure="restart", frame_stack=3)
    obs, _ = vec.reset(seed=0)
    np.testing.assert_array_equal(obs, np.zeros((6, 3)))
    for _ in range(3):
        obs, _, _, truncations, _ = vec.step(np.ones(6, np.int64))
    a, z = next((a, z) for a, z in internals.block_bounds(vec) if a <= 3 < z)
    for i in range(6):  # the failed block was rebuilt and reset: its stacks start again
        expected = [0, 0, 0] if a <= i < z else [1, 2, 3]
        np.testing.assert_array_equal(obs[i], expected, err_msg=f"env {i}")
        assert truncations[i] == (a <= i < z)
    obs, *_ = vec.step(np.ones(6, np.int64))
    for i in range(6):
        np.testing.assert_array_equal(obs[i], [0, 0, 1] if a <= i < z else [2, 3, 4])


@pytest.mark.parametrize("value", [0, -1, 1.5, "4", True])
def test_a_bad_frame_stack_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="frame_stack"):
        fastvec.SyncVecEnv(synthetic_fns("image", 1), frame_stack=value)


def test_a_bad_padding_is_refused() -> None:
    with pytest.raises(ValueError, match="padding_type 'reset', 'zero'"):
        FrameStack(2, "repeat")
    wrong = np.zeros((3, 3), np.uint8)  # not an observation of the (8, 8, 3) space
    with pytest.raises(ValueError, match="expected padding_type"):
        fastvec.SyncVecEnv(synthetic_fns("image", 1), frame_stack=FrameStack(2, wrong))


def test_spaces_without_records_and_games_are_refused() -> None:
    class TextEnv(gym.Env):
        observation_space = spaces.Text(5)
        action_space = spaces.Discrete(2)

    with pytest.raises(ValueError, match="frame_stack keeps frames in the record"):
        fastvec.SyncVecEnv([TextEnv], frame_stack=2)
    pytest.importorskip("pettingzoo")
    from tests.support.games import RelayGame

    with pytest.raises(ValueError, match="single-agent envs"):
        fastvec.SyncVecEnv([RelayGame], frame_stack=2)


def test_zero_padding_needs_the_same_spaces() -> None:
    with pytest.raises(ValueError, match="observation_mode='same'"):
        fastvec.SyncVecEnv(synthetic_fns("image", 2), observation_mode="different",
                           frame_stack=FrameStack(2, "zero"))
