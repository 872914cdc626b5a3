"""Steps and resets of some envs (``env_ids``) on every backend: each env named steps
exactly as it would alone, the others do nothing.

The reference is one Gymnasium ``SyncVectorEnv`` of one env per env: a property test
(hypothesis) draws sequences of subsets in any order, with resets of subsets
between them, and compares every result of every env named with what its own
``SyncVectorEnv`` gives for the same seed and actions, in all three autoreset modes.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import backends
from tests.support.backends import LOCAL, RAY, SUBPROC, SYNC, merge_infos, merge_obs
from tests.support.cases import ENV_CASES, MODES
from tests.support.compare import assert_infos_equal, assert_obs_equal
from tests.support.envs import CountingEnv, RaisingEnv, make_fns

CASES = ["counting", "synthetic_dict", "synthetic_tuple", "object_text", "cartpole"]


def subset_params() -> list:
    """Every case and mode in process; shared out over the process backends; Ray once
    per mode."""
    params = []
    for c, case in enumerate(CASES):
        for m, mode in enumerate(MODES):
            name = f"{case}-{mode.value}"
            params.append(backends.param(SYNC, case, mode, id=name))
            if (c + m) % 2 == 0:
                params.append(backends.param(SUBPROC, case, mode, id=name))
            else:
                params.append(backends.param(LOCAL, case, mode, id=name))
            if case == "counting":
                params.append(backends.param(RAY, case, mode, id=name))
    return params


class Singles:
    """One ``SyncVectorEnv`` of one env per env: what each env does alone."""

    def __init__(self, fns: list, mode: AutoresetMode) -> None:
        self.envs = [SyncVectorEnv([fn], autoreset_mode=mode) for fn in fns]
        self.space = self.envs[0].single_observation_space
        self.ended = np.zeros(len(fns), dtype=bool)

    def reset(self, ids: list[int], seed: int | None) -> tuple[Any, dict]:
        parts = [(i, self.envs[i].reset(seed=None if seed is None else seed + i))
                 for i in ids]
        self.ended[ids] = False
        return self._merge(ids, [(i, obs, infos) for i, (obs, infos) in parts])

    def step(self, ids: list[int], actions: list) -> tuple:
        results = []
        for i, action in zip(ids, actions, strict=True):
            obs, reward, terminated, truncated, infos = self.envs[i].step(action)
            self.ended[i] = terminated[0] or truncated[0]
            results.append((i, obs, infos, reward, terminated, truncated))
        obs, infos = self._merge(ids, [r[:3] for r in results])
        flags = [np.concatenate([r[k] for r in results]) for k in (3, 4, 5)]
        return (obs, *flags, infos)

    def _merge(self, ids: list[int], parts: list[tuple]) -> tuple[Any, dict]:
        """One batch of the envs ``ids`` in that order; infos typed by the lowest env
        that reports a key, as a batch of every env is."""
        where = {i: np.array([k]) for k, i in enumerate(ids)}
        obs = merge_obs(self.space, [(where[i], o) for i, o, _ in parts], len(ids))
        infos = merge_infos([(where[i], inf) for i, _, inf in sorted(parts, key=lambda p: p[0])],
                            len(ids))
        return obs, infos

    def close(self) -> None:
        for env in self.envs:
            env.close()


def action_batch(space: spaces.Space, count: int, seed: int) -> tuple[Any, list]:
    """A batch of ``count`` sampled actions, and the same actions one by one (batches of 1)."""
    space.seed(seed)
    singles = [space.sample() for _ in range(count)]
    batch = concatenate(space, singles, create_empty_array(space, count))
    ones = [concatenate(space, [a], create_empty_array(space, 1)) for a in singles]
    return batch, ones


@pytest.mark.usefixtures("fastvec_only")
@pytest.mark.parametrize("backend, case, mode", subset_params())
def test_subset_steps_match_each_env_alone(backend, case, mode, make_envs):
    env_case = ENV_CASES[case]
    n = env_case.num_envs
    fns = env_case.fns(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the object path's warning has its own test
        vec = make_envs(fns, autoreset_mode=mode)
    subsets = st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)
    examples = 12 if backend == SYNC else 4

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**16), plan=st.lists(st.tuples(st.booleans(), subsets),
                                                      min_size=1, max_size=25))
    def run(seed: int, plan: list[tuple[bool, list[int]]]) -> None:
        singles = Singles(fns, mode)
        try:
            obs, _ = vec.reset(seed=seed)
            expected, _ = singles.reset(list(range(n)), seed)
            assert_obs_equal(obs, expected)
            for t, (reset_first, ids) in enumerate(plan):
                ended = [i for i in ids if singles.ended[i]]
                if reset_first or (mode == AutoresetMode.DISABLED and ended):
                    again = ids if reset_first else ended
                    got = vec.reset(seed=seed + t, env_ids=again)
                    want = singles.reset(again, seed + t)
                    assert_obs_equal(got[0], want[0], f"reset {t} of {again}: obs")
                    assert_infos_equal(got[1], want[1], f"reset {t} of {again}: infos")
                batch, ones = action_batch(vec.single_action_space, len(ids), seed + t)
                got = vec.step(batch, env_ids=ids)
                want = singles.step(ids, ones)
                where = f"step {t} of {ids}"
                assert_obs_equal(got[0], want[0], f"{where}: obs")
                for k, name in ((1, "rewards"), (2, "terminations"), (3, "truncations")):
                    np.testing.assert_array_equal(got[k], want[k], f"{where}: {name}")
                    assert got[k].dtype == want[k].dtype
                assert_infos_equal(got[4], want[4], f"{where}: infos")
        finally:
            singles.close()

    run()


@pytest.mark.usefixtures("fastvec_only")
@pytest.mark.parametrize("backend", [backends.param(b) for b in (SYNC, SUBPROC, LOCAL, RAY)])
def test_envs_not_named_do_nothing(backend, make_envs):
    """An env left out is not stepped or reset: its count, its flags, its pending
    autoreset and its last action stay."""
    vec = make_envs(make_fns(CountingEnv, 4, episode_len=2))
    vec.reset(seed=0)
    vec.step(np.array([1, 1, 1, 1]))
    obs, rewards, terminations, _, _ = vec.step(np.array([3, 2]), env_ids=[2, 0])
    assert obs.tolist() == [2, 2] and rewards.tolist() == [3.0, 2.0]
    assert terminations.tolist() == [True, True]
    assert vec.get_attr("t") == (2, 1, 2, 1)
    assert vec.get_attr("last_action") == (2, 1, 3, 1)
    obs, *_ = vec.step(np.array([1, 1, 1, 1]))  # 0 and 2 autoreset; 1 and 3 step on
    assert obs.tolist() == [0, 2, 0, 2]
    vec.reset(seed=5, env_ids=[3])
    assert vec.get_attr("reset_count") == (2, 1, 2, 2)
    assert vec.get_attr("np_random_seed") == (0, 1, 2, 8)  # 5 + 3, as a full reset gives


@pytest.mark.usefixtures("fastvec_only")
@pytest.mark.parametrize("backend", [backends.param(b) for b in (SYNC, SUBPROC)])
@pytest.mark.parametrize("env_ids, actions, message", [
    ([1, 1], [0, 0], "distinct env_ids"),
    ([0, 4], [0, 0], r"env_ids in \[0, 4\), got \[4\]"),
    ([-1], [0], r"env_ids in \[0, 4\), got \[-1\]"),
    (np.array([0.0, 1.0]), [0, 0], "integers"),
    (np.array([True, False]), [0, 0], "integers"),
    ([], [], "non-empty"),
    ([[0, 1]], [[0, 1]], "1-D"),
    ([0, 1], [0, 0, 0], r"for the 2 envs env_ids \[0, 1\]"),
])
def test_bad_env_ids_are_refused_before_anything_runs(backend, make_envs, env_ids, actions,
                                                      message):
    vec = make_envs(make_fns(CountingEnv, 4, episode_len=5))
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        vec.step(np.asarray(actions, dtype=np.int64), env_ids=env_ids)
    obs, *_ = vec.step(np.ones(4, dtype=np.int64))  # nothing ran: every count is 1
    assert obs.tolist() == [1, 1, 1, 1]
    if len(env_ids) == len(actions):  # the ids alone are wrong: a reset refuses them too
        with pytest.raises(ValueError, match=message):
            vec.reset(env_ids=env_ids)


@pytest.mark.usefixtures("fastvec_only")
@pytest.mark.parametrize("backend", [backends.param(SYNC)])
def test_reset_seeds_of_a_subset(backend, make_envs):
    vec = make_envs(make_fns(CountingEnv, 4, episode_len=5))
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="one per env of env_ids"):
        vec.reset(seed=[1, 2, 3], env_ids=[0, 1])
    with pytest.raises(ValueError, match="not both"):
        vec.reset(env_ids=[0], options={"reset_mask": np.ones(4, bool)})
    vec.reset(seed=[7, 9], env_ids=[3, 1])
    assert vec.get_attr("np_random_seed") == (0, 9, 2, 7)


@pytest.mark.usefixtures("fastvec_only")
def test_async_batches_refuse_a_subset_step_clearly(vec_envs):
    vec = vec_envs.make_backend(SUBPROC, make_fns(CountingEnv, 4, episode_len=5),
                                num_workers=2, batch_size=2)
    vec.async_reset(seed=0)
    with pytest.raises(Exception, match="send"):
        vec.step(np.ones(2, dtype=np.int64), env_ids=[0, 1])



@pytest.mark.usefixtures("fastvec_only")
@pytest.mark.parametrize("backend", [backends.param(b) for b in (SUBPROC, LOCAL)])
def test_a_subset_step_that_fails_restarts_the_block(backend, make_envs):
    """The env named that raises is rebuilt with its block; the step reports the envs
    named (the failed one truncated, with infos["worker_restarted"])."""
    fns = make_fns(RaisingEnv, 4, per_env={"faulty": [False, True, False, False]},
                   raise_at=2)
    vec = make_envs(fns, num_workers=2 if backend == SUBPROC else 1,
                    on_worker_failure="restart")
    vec.reset(seed=0)
    vec.step(np.ones(2, np.int64), env_ids=[1, 3])
    obs, rewards, terminations, truncations, infos = vec.step(np.ones(2, np.int64),
                                                              env_ids=[3, 1])
    assert truncations.tolist() == [False, True] and rewards.tolist() == [1.0, 0.0]
    assert obs.tolist() == [2, 0]
    assert infos["_worker_restarted"].tolist() == [False, True]
    assert vec.total_restarts == 1


@pytest.mark.usefixtures("fastvec_only")
@pytest.mark.parametrize("backend", [backends.param(b) for b in (SYNC, SUBPROC)])
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_frames_stacked_move_only_for_the_envs_named(backend, mode, make_envs):
    """With ``frame_stack``, each env's stack is its own ``FrameStackObservation``'s:
    an env left out keeps its frames."""
    from gymnasium.wrappers import FrameStackObservation

    fns = ENV_CASES["counting"].fns(6)
    vec = make_envs(fns, autoreset_mode=mode, frame_stack=3)
    stacked = [lambda fn=fn: FrameStackObservation(fn(), 3, padding_type="reset")
               for fn in fns]
    singles = Singles(stacked, mode)
    try:
        rng = np.random.default_rng(0)
        assert_obs_equal(vec.reset(seed=1)[0], singles.reset(list(range(6)), 1)[0])
        for t in range(40):
            ids = rng.permutation(6)[:rng.integers(1, 7)].tolist()
            ended = [i for i in ids if singles.ended[i]]
            if mode == AutoresetMode.DISABLED and ended:
                assert_obs_equal(vec.reset(env_ids=ended)[0], singles.reset(ended, None)[0])
            batch, ones = action_batch(vec.single_action_space, len(ids), t)
            got, want = vec.step(batch, env_ids=ids), singles.step(ids, ones)
            assert_obs_equal(got[0], want[0], f"step {t} of {ids}: obs")
            assert_infos_equal(got[4], want[4], f"step {t} of {ids}: infos")
    finally:
        singles.close()
