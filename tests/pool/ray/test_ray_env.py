"""RayVecEnv beyond the contract suite: parity over env cases, async batches, failures,
restart, timeouts, close, inner SubprocVecEnv, ``make(backend="ray")``.

Every test runs on the one Ray of the test run (``ray_session`` in conftest, bound to
127.0.0.1); a Ray that ``RayVecEnv`` starts by itself and a multi-node cluster are
tested in child processes (``test_cluster.py``).  Actor start-up (~0.5 s of CPU
each) is most of the time here, so each test makes as few vector envs as it can.
"""

from __future__ import annotations

import os
import signal
import time
import warnings

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import fastvec
from fastvec.errors import EnvFnError, FastVecError, WorkerError, WorkerTimeout
from tests.support.backends import FullBatches
from tests.support.cases import ENV_CASES, MODES
from tests.support.compare import run_parity
from tests.support.envs import CountingEnv, EnvBoom, HangingEnv, RaisingEnv, SlowEnv, make_fns

pytestmark = [pytest.mark.ray, pytest.mark.fastvec_only]

DEATH_SECONDS = 5.0  # an actor's death is reported within this


@pytest.fixture
def ray(ray_session):
    return ray_session


@pytest.fixture
def make_ray(ray, vec_envs):
    """``make_ray(env_fns, **kwargs)``: a RayVecEnv (2 actors by default), closed after."""
    def make(env_fns, **kwargs):
        kwargs.setdefault("num_actors", min(2, len(env_fns)))
        return vec_envs.track(fastvec.RayVecEnv(env_fns, **kwargs))
    return make


def actor_pids(vec) -> list[int]:
    """The pid of each actor (of the process each block's first env is in)."""
    per_env = vec.call_each(lambda env: os.getpid())
    return [per_env[start] for start, _ in vec._pool.bounds]


def wait_gone(pids, seconds=DEATH_SECONDS) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if os.path.exists(f"/proc/{p}")
                and open(f"/proc/{p}/stat").read().split(")")[-1].split()[0] != "Z"]
        if not left:
            return []
        time.sleep(0.05)
    return left


# ---------------------------------------------------------------------------
# results: bit-identical to Gymnasium's SyncVectorEnv (and so to SyncVecEnv)

# One case per path through the packed reply: Box, infos whose type changes, Tuple,
# Dict, odd leaf sizes, images, mixed info types, the object path; every autoreset mode.
CASES = ["cartpole", "frozenlake", "blackjack", "counting", "synthetic_dict",
         "synthetic_tuple", "synthetic_odd_leaves", "synthetic_image_no_infos",
         "synthetic_mixed_info_types", "object_dict_text"]
PARITY_STEPS = 80
PARITY = [(case, MODES[k % 3], bool(k % 2)) for k, case in enumerate(CASES)]


@pytest.mark.parametrize("case, mode, copy", PARITY,
                         ids=[f"{c}-{m.value}-{'copy' if p else 'nocopy'}" for c, m, p in PARITY])
def test_parity_with_gymnasium(case, mode, copy, make_ray, make_ref):
    env_case = ENV_CASES[case]
    fns = env_case.fns(env_case.num_envs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the object-path warning
        vec = make_ray(fns, copy=copy, autoreset_mode=mode)
    ref = make_ref(fns, copy=copy, autoreset_mode=mode)
    assert run_parity(vec, ref, mode=mode, copy=copy,
                      steps=min(env_case.steps_subprocess, PARITY_STEPS)) > 0


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_inner_subproc_and_uneven_blocks(mode, make_ray, make_ref):
    """Three actors over 7 envs (3, 2, 2), each stepping its block through a SubprocVecEnv."""
    fns = make_fns(CountingEnv, 7, per_env={"episode_len": [1, 2, 3, 4, 5, 2, 3]})
    vec = make_ray(fns, num_actors=3, inner="subproc",
                   inner_options={"num_workers": 1, "context": "fork"},
                   autoreset_mode=mode, episode_statistics=False)
    ref = make_ref(fns, autoreset_mode=mode)
    assert vec.num_actors == 3 and vec.inner == "subproc"
    assert run_parity(vec, ref, mode=mode, copy=True, steps=30) > 0


def test_async_batches_give_the_full_batches(make_ray, make_ref):
    case = ENV_CASES["cartpole"]
    fns = case.fns(case.num_envs)
    vec = FullBatches(make_ray(fns, batch_size=2))
    ref = make_ref(fns)
    assert run_parity(vec, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=80) > 0


def test_recv_returns_the_first_actor_ready(make_ray):
    """A slow block does not hold a batch back: recv takes whichever actor is done."""
    fns = make_fns(SlowEnv, 4, per_env={"delay": [0.3, 0.3, 0.0, 0.0]})
    vec = make_ray(fns, batch_size=2)
    vec.async_reset(seed=0)
    assert vec.recv()[-1].tolist() == [2, 3]
    vec.send(np.zeros(2, np.int64), np.array([2, 3]))
    assert vec.recv()[-1].tolist() == [2, 3]  # again, while block 0 is still resetting
    assert vec.recv()[-1].tolist() == [0, 1]


def test_episode_statistics_stay_in_the_trainer(make_ray, make_vec):
    fns = make_fns(CountingEnv, 4, per_env={"episode_len": [2, 3, 4, 5]})
    vec = make_ray(fns, episode_statistics=True)
    ref = make_vec(fns, episode_statistics=True)
    vec.reset(seed=0)
    ref.reset(seed=0)
    for _ in range(6):
        *_, infos = vec.step(np.ones(4, np.int64))
        *_, ref_infos = ref.step(np.ones(4, np.int64))
        assert infos.keys() == ref_infos.keys()
        if "episode" in infos:
            np.testing.assert_array_equal(infos["_episode"], ref_infos["_episode"])
            np.testing.assert_array_equal(infos["episode"]["r"], ref_infos["episode"]["r"])
            np.testing.assert_array_equal(infos["episode"]["l"], ref_infos["episode"]["l"])


def test_make_with_the_ray_backend(ray):
    with fastvec.make("CartPole-v1", 4, backend="ray", vector_kwargs={"num_actors": 2}) as vec:
        ref = fastvec.make("CartPole-v1", 4)
        assert isinstance(vec, fastvec.RayVecEnv) and vec.spec.id == "CartPole-v1"
        np.testing.assert_array_equal(vec.reset(seed=3)[0], ref.reset(seed=3)[0])
        ref.close()


def test_bad_arguments_are_value_errors(ray):
    fns = make_fns(CountingEnv, 4)
    for kwargs in ({"num_actors": 5}, {"num_actors": 0}, {"num_actors": True},
                   {"num_actors": 2.0}, {"inner": "threads"},
                   {"on_worker_failure": "ignore"}, {"timeout": 0}, {"timeout": float("nan")},
                   {"num_actors": 2, "batch_size": 3}):
        with pytest.raises(ValueError):
            fastvec.RayVecEnv(fns, **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"inner": "subproc", "inner_options": {"copy": False}},
     r"inner_options takes .*num_workers, context, daemon, local_block; got \['copy'\]"),
    ({"inner": "sync", "inner_options": {"num_workers": 2}},
     r"inner_options is for inner='subproc', got it with inner='sync'"),
])
def test_inner_options_other_than_the_workers_are_refused(ray, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fastvec.RayVecEnv(make_fns(CountingEnv, 4), num_actors=1, **kwargs)


# ---------------------------------------------------------------------------
# failures


def test_an_env_that_raises_is_a_worker_error_naming_env_and_actor(make_ray):
    fns = make_fns(RaisingEnv, 4, per_env={"faulty": [False, False, False, True]}, raise_at=2)
    vec = make_ray(fns)
    vec.reset(seed=0)
    vec.step(np.zeros(4, np.int64))
    with pytest.raises(WorkerError) as info:
        vec.step(np.zeros(4, np.int64))
    error = info.value
    assert (error.env_index, error.worker_index, error.exitcode) == (3, 1, None)
    assert "env 3 (actor 1)" in str(error) and "EnvBoom" in str(error)
    assert "raised on purpose" in str(error.__cause__)  # the remote traceback
    assert "Traceback" in str(error.__cause__)
    vec.reset(seed=0)  # an env that raised leaves the vector env usable
    vec.step(np.zeros(4, np.int64))


@pytest.mark.parametrize("inner", ["sync", "subproc"])
def test_the_envs_own_message_is_kept_as_it_is(ray, inner):
    # the env's text names an env of its own; only fastvec's part names env 2 (actor 1)
    fns = make_fns(CountingEnv, 4)
    fns[2] = lambda: (_ for _ in ()).throw(EnvBoom("env 0 of my sim failed"))
    options = {"inner_options": {"num_workers": 1}} if inner == "subproc" else {}
    with pytest.raises(WorkerError) as info:
        fastvec.RayVecEnv(fns, num_actors=2, inner=inner, **options)
    error = info.value
    assert str(error) == ("env 2 (actor 1) raised EnvBoom during building its envs: "
                          "env 0 of my sim failed")
    assert (error.env_index, error.worker_index) == (2, 1)
    assert error.raised == ("EnvBoom", "env 0 of my sim failed")


def test_an_env_that_fails_to_build_names_its_env(ray):
    fns = make_fns(RaisingEnv, 4, raise_at=0)
    fns[2] = lambda: (_ for _ in ()).throw(EnvBoom("no env 2"))
    with pytest.raises(WorkerError, match="env 2 .actor 1.") as info:
        fastvec.RayVecEnv(fns, num_actors=2)
    assert info.value.env_index == 2


@pytest.mark.parametrize("inner", ["sync", "subproc"])
def test_an_env_fn_returning_no_env_is_named_by_its_index_in_the_vector_env(ray, inner):
    fns = make_fns(CountingEnv, 4)
    fns[3] = lambda: None  # actor 1's second
    with pytest.raises(EnvFnError, match=r"^env_fns\[3\] returned None") as info:
        fastvec.RayVecEnv(fns, num_actors=2, inner=inner,
                          inner_options={"num_workers": 1, "context": "fork"}
                          if inner == "subproc" else None)
    assert "Traceback" in str(info.value.__cause__)  # found in the actor


def test_messages_speak_of_actors(make_ray):
    with pytest.raises(ValueError, match=r"multiple of num_envs // num_actors = 2 \(batches are "
                                         r"whole actor blocks\)"):
        make_ray(make_fns(CountingEnv, 4), batch_size=3)
    vec = make_ray(make_fns(CountingEnv, 4), batch_size=2)
    vec.async_reset(seed=0)
    ids = vec.recv()[-1]
    with pytest.raises(ValueError, match=r"whole actor blocks of 2 envs: actor \d holds"):
        vec.send(np.zeros(1, np.int64), ids[:1])
    other = [2, 3] if ids[0] == 0 else [0, 1]
    with pytest.raises(ValueError, match=rf"envs {other[0]}..{other[1]} \(actor {other[0] // 2}\) "
                                         "are already in flight"):
        vec.send(np.zeros(2, np.int64), np.array(other))


def test_a_killed_actor_is_a_worker_error_and_the_env_unusable(make_ray):
    vec = make_ray(make_fns(CountingEnv, 4))
    vec.reset(seed=0)
    pids = actor_pids(vec)
    os.kill(pids[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        vec.step(np.zeros(4, np.int64))
    assert time.monotonic() - start < DEATH_SECONDS
    assert info.value.worker_index == 1 and "died" in str(info.value)
    with pytest.raises(FastVecError, match="unusable"):
        vec.step(np.zeros(4, np.int64))
    vec.close()
    assert wait_gone(pids) == []


def test_restart_replaces_a_killed_actor(make_ray):
    fns = make_fns(CountingEnv, 4, episode_len=50)
    vec = make_ray(fns, on_worker_failure="restart")
    vec.reset(seed=0)
    vec.step(np.zeros(4, np.int64))
    old = actor_pids(vec)
    os.kill(old[0], signal.SIGKILL)
    obs, rewards, terminations, truncations, infos = vec.step(np.zeros(4, np.int64))
    assert truncations.tolist() == [True, True, False, False]
    assert infos["_worker_restarted"].tolist() == [True, True, False, False]
    assert obs.tolist() == [0, 0, 2, 2]  # the new actor's envs start afresh
    new = actor_pids(vec)
    assert old[0] not in new and old[1] in new
    obs, *_ = vec.step(np.zeros(4, np.int64))
    assert obs.tolist() == [1, 1, 3, 3]


def test_restart_covers_an_env_that_raises(make_ray):
    fns = make_fns(RaisingEnv, 4, per_env={"faulty": [True, False, False, False]}, raise_at=2)
    vec = make_ray(fns, on_worker_failure="restart")
    vec.reset(seed=0)
    vec.step(np.zeros(4, np.int64))
    _, _, _, truncations, infos = vec.step(np.zeros(4, np.int64))
    assert truncations.tolist() == [True, True, False, False]
    assert infos["_worker_restarted"].tolist() == [True, True, False, False]


def test_a_hanging_env_is_a_worker_timeout(make_ray):
    fns = make_fns(HangingEnv, 4, per_env={"faulty": [False, True, False, False]}, hang_at=1)
    vec = make_ray(fns, timeout=1.0)
    vec.reset(seed=0)
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"actors \[0\]"):
        vec.step(np.zeros(4, np.int64))
    assert time.monotonic() - start < 3.0
    with pytest.raises(FastVecError, match="unusable"):
        vec.step(np.zeros(4, np.int64))
    start = time.monotonic()
    vec.close()  # a hung actor is killed, not waited for beyond the grace
    assert time.monotonic() - start < 5.0


# ---------------------------------------------------------------------------
# close


def test_close_kills_every_actor_and_leaves_the_callers_ray_running(make_ray, ray):
    vec = make_ray(make_fns(CountingEnv, 4), inner="subproc",
                   inner_options={"num_workers": 2, "context": "fork"})
    vec.reset(seed=0)
    pids = sorted(set(vec.call_each(lambda env: os.getpid())))
    assert len(pids) == 4  # two actors, each with two worker processes
    vec.close()
    assert wait_gone(pids) == []
    assert ray.is_initialized()


def test_close_with_a_batch_in_flight(make_ray):
    vec = make_ray(make_fns(CountingEnv, 4), batch_size=2)
    vec.async_reset(seed=0)
    vec.recv()
    vec.close()
    assert vec.closed
