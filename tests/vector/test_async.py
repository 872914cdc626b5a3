"""Async batches (``batch_size < num_envs``): what only they do.

Each env sees what ``SyncVectorEnv`` would give it while batches interleave;
``DISABLED`` resets by mask; ``recv`` twice; ``batch_size`` checks; misuse is
an error, never a hang; contiguous blocks come back as views, others gathered;
control calls wait for the envs in flight; episode statistics per env.  The
full-batch contract (results, autoreset, infos, episode statistics, errors) runs
on async batches too, through ``tests.backends.FullBatches``: see
``test_contract_*.py``.  Failures of workers in async mode:
``test_faults.py``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import fastvec
from fastvec.errors import FastVecError, NoAsyncCallError
from tests.support import internals
from tests.support.compare import assert_tree_equal
from tests.support.envs import CountingEnv, JitterEnv, RenderEnv, make_fns

pytestmark = pytest.mark.subprocess

SEED = 11


@pytest.fixture
def make_async():
    made: list[fastvec.SubprocVecEnv] = []

    def make(env_fns, **kwargs: Any) -> fastvec.SubprocVecEnv:
        envs = fastvec.SubprocVecEnv(env_fns, **kwargs)
        made.append(envs)
        return envs

    yield make
    for envs in made:
        envs.close()


def env_part(infos: dict, k: int) -> dict:
    """The infos of batch position ``k``, as a one-env batch would have them."""
    out = {}
    for key, value in infos.items():
        if isinstance(key, str) and key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if isinstance(value, dict):
            part = env_part(value, k)
            if mask is not None and mask[k]:
                out[key] = part
        elif mask is not None and mask[k]:
            out[key] = value[k]
    return out


def leaf_at(obs: Any, k: int) -> Any:
    if isinstance(obs, dict):
        return {key: leaf_at(value, k) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(leaf_at(value, k) for value in obs)
    return np.asarray(obs[k])


def reference_run(env_fn, seed: int, actions: list, mode: AutoresetMode) -> list:
    """What ``SyncVectorEnv`` gives one env fed ``actions``: (obs, r, term, trunc, info)s."""
    ref = SyncVectorEnv([env_fn], autoreset_mode=mode)
    obs, infos = ref.reset(seed=seed)
    out = [(leaf_at(obs, 0), 0.0, False, False, env_part(infos, 0))]
    for action in actions:
        obs, rew, term, trunc, infos = ref.step(np.asarray([action]))
        out.append((leaf_at(obs, 0), float(rew[0]), bool(term[0]), bool(trunc[0]),
                    env_part(infos, 0)))
    ref.close()
    return out


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_each_env_sees_what_sync_vector_env_gives_it(make_async, mode):
    num_envs, workers, batch = 8, 4, 4
    fns = make_fns(JitterEnv, num_envs, info_kind="rich", max_len=6)
    envs = make_async(fns, num_workers=workers, batch_size=batch, autoreset_mode=mode)
    rngs = [np.random.default_rng(100 + e) for e in range(num_envs)]
    seen: dict[int, list] = {e: [] for e in range(num_envs)}
    sent: dict[int, list] = {e: [] for e in range(num_envs)}
    batches = []
    envs.async_reset(seed=SEED)
    for _ in range(60):
        obs, rew, term, trunc, infos, ids = envs.recv()
        assert len(ids) == batch and ids.dtype == np.int64 and list(ids) == sorted(ids)
        batches.append(tuple(ids))
        for k, e in enumerate(ids):
            seen[e].append((leaf_at(obs, k), float(rew[k]), bool(term[k]), bool(trunc[k]),
                            env_part(infos, k)))
        actions = np.array([rngs[e].integers(0, 3) for e in ids])
        for k, e in enumerate(ids):
            sent[e].append(actions[k])
        envs.send(actions, ids)
    assert len(set(batches)) > 2, f"batches never interleaved: {set(batches)}"
    for e in range(num_envs):
        expected = reference_run(fns[e], SEED + e, sent[e][: len(seen[e]) - 1], mode)
        assert len(seen[e]) > 5
        for t, (got, want) in enumerate(zip(seen[e], expected, strict=True)):
            assert_tree_equal(got[0], want[0], f"env {e} step {t} obs")
            assert got[1:4] == want[1:4], f"env {e} step {t}: {got[1:4]} != {want[1:4]}"
            assert_tree_equal(got[4], want[4], f"env {e} step {t} infos")


def test_disabled_mode_resets_by_mask(make_async):
    fns = make_fns(CountingEnv, 4, per_env={"episode_len": [2, 3, 4, 5]})
    envs = make_async(fns, num_workers=4, batch_size=2, autoreset_mode="Disabled")
    envs.async_reset(seed=0)
    ends = 0
    for _ in range(40):
        obs, rew, term, trunc, infos, ids = envs.recv()
        done = ids[term | trunc]
        if len(done):
            ends += len(done)
            with pytest.raises(RuntimeError, match="DISABLED"):
                envs.send(np.ones(len(ids), np.int64), ids)
            mask = np.zeros(4, bool)
            mask[done] = True
            envs.async_reset(options={"reset_mask": mask})
            continue
        envs.send(np.ones(len(ids), np.int64), ids)
    assert ends > 3


def test_masked_reset_keeps_the_flags_of_the_blocks_other_envs(make_async):
    fns = make_fns(CountingEnv, 4, per_env={"episode_len": [1, 9, 9, 9]})
    envs = make_async(fns, num_workers=2, batch_size=2)
    envs.async_reset(seed=0)
    envs.recv()
    envs.recv()  # both blocks held; envs 2 and 3 stay held from here on
    both = np.array([0, 1])
    envs.send(np.ones(2, np.int64), both)
    obs, rew, term, trunc, infos, ids = envs.recv()
    assert ids.tolist() == [0, 1] and term.tolist() == [True, False]  # env 0 ended
    envs.async_reset(options={"reset_mask": np.array([False, True, False, False])})
    obs, rew, term, trunc, infos, ids = envs.recv()
    assert ids.tolist() == [0, 1]
    assert term.tolist() == [True, False]  # env 0 is still reported as ended
    assert obs.tolist() == [1, 0]
    envs.send(np.ones(2, np.int64), ids)
    obs, rew, term, trunc, infos, ids = envs.recv()
    assert obs.tolist() == [0, 1] and rew.tolist() == [0.0, 1.0]  # env 0 autoreset


def test_second_recv_returns_the_next_ready_batch_then_raises(make_async):
    envs = make_async(make_fns(CountingEnv, 4), num_workers=4, batch_size=2)
    envs.async_reset(seed=0)
    first = envs.recv()[-1]
    second = envs.recv()[-1]
    assert sorted([*first, *second]) == [0, 1, 2, 3]
    with pytest.raises(NoAsyncCallError):
        envs.recv()


@pytest.mark.parametrize("kwargs, message", [
    ({"num_envs": 6, "num_workers": 3, "batch_size": 3}, r"multiple of .* = 2"),
    ({"num_envs": 6, "num_workers": 4, "batch_size": 2}, r"not divisible"),
    ({"num_envs": 4, "num_workers": 2, "batch_size": 5}, r"batch_size <= num_envs"),
    ({"num_envs": 4, "num_workers": 2, "batch_size": 0}, r"positive"),
])
def test_bad_batch_size_is_a_value_error_saying_what_works(kwargs, message):
    # batch_size counts rows, known once the workers say what they built (a game fills
    # several): a bad one is rejected at start-up, before anything steps.
    n = kwargs.pop("num_envs")
    start = time.monotonic()
    with pytest.raises(ValueError, match=message):
        fastvec.SubprocVecEnv(make_fns(CountingEnv, n), context="fork", **kwargs)
    assert time.monotonic() - start < 2.0


def test_misuse_is_an_error_never_a_hang(make_async):
    envs = make_async(make_fns(CountingEnv, 6), num_workers=3, batch_size=2)
    with pytest.raises(NoAsyncCallError):
        envs.recv()
    with pytest.raises(FastVecError, match="recv"):
        envs.step(np.zeros(6, np.int64))
    with pytest.raises(FastVecError, match="async_reset"):
        envs.reset(seed=0)
    envs.async_reset(seed=0)
    obs, rew, term, trunc, infos, ids = envs.recv()
    others = [e for e in range(6) if e not in ids][:2]
    with pytest.raises(ValueError, match="in flight"):
        envs.send(np.zeros(2, np.int64), others)
    with pytest.raises(ValueError, match="out of range"):
        envs.send(np.zeros(2, np.int64), [ids[0], 6])
    with pytest.raises(ValueError, match="repeat"):
        envs.send(np.zeros(2, np.int64), [ids[0], ids[0]])
    with pytest.raises(ValueError, match="whole worker blocks"):
        envs.send(np.zeros(1, np.int64), ids[:1])
    # bad actions name the envs by their env_ids, not by their place in the batch
    with pytest.raises(ValueError, match=rf"shape \(2,\) for the 2 envs env_ids "
                                         rf"\[{ids[0]}, {ids[1]}\]"):
        envs.send(np.zeros(3, np.int64), ids)
    with pytest.raises(ValueError, match=rf"the action for env {ids[1]} is out of range"):
        envs.send(np.array([0, 7]), ids)
    changed = ids.copy()
    changed[:] = others  # the returned array, edited in place, is checked again
    with pytest.raises(ValueError, match="in flight"):
        envs.send(np.zeros(2, np.int64), changed)
    envs.send(np.zeros(2, np.int64), ids)  # still usable
    with pytest.raises(ValueError, match="in flight"):
        envs.send(np.zeros(2, np.int64), ids)  # sent already
    assert len(envs.recv()[-1]) == 2


def test_contiguous_blocks_are_views_others_are_gathered(make_async):
    envs = make_async(make_fns(CountingEnv, 4), num_workers=4, batch_size=2, copy=False)
    envs.async_reset(seed=0)
    for _ in range(20):
        obs, rew, term, trunc, infos, ids = envs.recv()
        contiguous = ids[1] == ids[0] + 1
        assert np.shares_memory(obs, internals.shared_rows(envs)) == contiguous
        assert obs.tolist() == internals.obs_views(envs)[ids].tolist()
        envs.send(np.ones(2, np.int64), ids)


def test_episode_statistics_per_env(make_async):
    lengths = [2, 3, 4, 5]
    fns = make_fns(CountingEnv, 4, per_env={"episode_len": lengths})
    envs = make_async(fns, num_workers=4, batch_size=2, episode_statistics=True)
    envs.async_reset(seed=0)
    reported = []
    for _ in range(40):
        obs, rew, term, trunc, infos, ids = envs.recv()
        if "episode" in infos:
            for k in np.flatnonzero(infos["_episode"]):
                reported.append((int(ids[k]), int(infos["episode"]["l"][k]),
                                 float(infos["episode"]["r"][k])))
        envs.send(np.ones(2, np.int64), ids)
    assert reported
    for env, length, ret in reported:
        assert length == lengths[env] and ret == float(lengths[env])  # reward = action = 1


@pytest.mark.parametrize(
    "use",
    [lambda v: v.call("label"), lambda v: v.get_attr("t"), lambda v: v.set_attr("label", "x"),
     lambda v: v.render(), lambda v: v.call_each(len)],
    ids=["call", "get_attr", "set_attr", "render", "call_each"],
)
def test_control_calls_while_envs_are_in_flight_are_refused(make_async, use):
    # (the counterpart of a call while a step_async is pending, in the contract suite)
    envs = make_async(make_fns(RenderEnv, 4), num_workers=2, batch_size=2)
    envs.async_reset(seed=0)
    ids = envs.recv()[-1]
    with pytest.raises(FastVecError, match="in flight"):
        use(envs)
    envs.recv()
    assert envs.get_attr("label") == tuple(f"counting-{i}" for i in range(4))
    envs.send(np.full(2, 2), ids)
    with pytest.raises(FastVecError, match="in flight"):
        use(envs)
    assert envs.recv()[1].tolist() == [2.0, 2.0]
    stepped = [int(i in ids) for i in range(4)]
    assert envs.get_attr("t") == tuple(stepped)
