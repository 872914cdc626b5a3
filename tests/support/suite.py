"""The suite's fixtures and hooks (loaded by ``tests/conftest.py`` where fastvec imports):
the implementation under test, and vector envs that always get closed.

``--impl`` picks the implementation the tests run against:

- ``fastvec`` (the default): the package itself.
- ``gymnasium``: Gymnasium's own ``SyncVectorEnv`` in place of ``fastvec.SyncVecEnv``
  (and ``AsyncVectorEnv`` in place of ``fastvec.SubprocVecEnv``), to check the tests'
  own logic against the reference; tests marked ``fastvec_only`` (features
  Gymnasium's classes do not have) are skipped.
- ``some.module``: any module with fastvec's public names (``SyncVecEnv``,
  ``SubprocVecEnv``, ``make``, ``tile_images``, ``errors``).

The contract suite (``tests/test_contract_*.py``) runs each test on every
backend of ``tests/support/backends.py``: the ``backend`` fixture, and ``make_envs`` to
build a vector env of it (closed after the test).

Tests marked ``subprocess`` are checked for leaks afterwards: no live worker
processes, nothing new in ``/dev/shm`` (see ``tests/support/leaks.py``).

Tests marked ``ray`` share one Ray (``ray_session``), started on first use,
bound to 127.0.0.1, and shut down at the end of the run; they are skipped when
Ray is not installed.
"""

from __future__ import annotations

import functools
import gc
import importlib
import os
import types
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from tests.support import backends, leaks, ray_head

ray_head.set_environment()  # before anything imports Ray

CHILD_GRACE_SECONDS = 2.0  # for workers that are exiting to be reaped
SHM_GRACE_SECONDS = 0.5


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--impl",
        default="fastvec",
        help="implementation under test: fastvec (default), gymnasium, or a module name",
    )
    # The stress tier (tests/test_soak.py, test_chaos.py, test_fuzz.py): a short run
    # by default, long runs behind these options.
    parser.addoption(
        "--soak", type=int, default=0, metavar="STEPS",
        help="soak: env-steps over all cases (default: the CI tier, ~2.4e6; try 1e8)",
    )
    parser.addoption(
        "--soak-json", default=None, metavar="PATH",
        help="soak: write the RSS / fd / thread series to this JSON file "
             "(or set FASTVEC_SOAK_JSON)",
    )
    parser.addoption(
        "--chaos-seconds", type=float, default=None, metavar="S",
        help="chaos: seconds of random faults (default: the CI tier, ~20 s)",
    )
    parser.addoption(
        "--chaos-seed", type=int, default=None, metavar="SEED",
        help="chaos: seed of the fault schedule (default: fixed per test)",
    )
    parser.addoption(
        "--fuzz-examples", type=int, default=None, metavar="N",
        help="fuzz: hypothesis examples per test (default: the CI tier)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fastvec_only: tests a feature Gymnasium's vector envs do not have"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--impl") != "gymnasium":
        return
    skip = pytest.mark.skip(reason="fastvec-only feature; --impl gymnasium")
    for item in items:
        if "fastvec_only" in item.keywords:
            item.add_marker(skip)


def _gymnasium_sync(
    env_fns: Sequence[Callable[[], gym.Env]],
    copy: bool = True,
    autoreset_mode: Any = gym.vector.AutoresetMode.NEXT_STEP,
    episode_statistics: bool = False,
) -> SyncVectorEnv:
    if episode_statistics:
        pytest.skip("episode_statistics is fastvec-only; --impl gymnasium")
    return SyncVectorEnv(env_fns, copy=copy, autoreset_mode=autoreset_mode)


def _gymnasium_async(
    env_fns: Sequence[Callable[[], gym.Env]],
    num_workers: int | None = None,
    context: str | None = None,
    autoreset_mode: Any = gym.vector.AutoresetMode.NEXT_STEP,
    copy: bool = True,
    timeout: float | None = None,
    on_worker_failure: str = "raise",
    episode_statistics: bool = False,
    batch_size: int | None = None,
    local_block: bool = False,
) -> AsyncVectorEnv:
    # One process per env: num_workers and local_block have no counterpart: ignored.
    if batch_size not in (None, len(env_fns)):
        pytest.skip("async batches are fastvec-only; --impl gymnasium")
    if episode_statistics or timeout is not None or on_worker_failure != "raise":
        pytest.skip("a fastvec-only SubprocVecEnv option; --impl gymnasium")
    # Gymnasium's shared memory does not hold Text, Graph or Sequence faithfully; without
    # it, its workers keep a pending NEXT_STEP autoreset across reset() (Gymnasium 1.4).
    probe = env_fns[0]()
    shared = _flat_record_space(probe.observation_space)
    probe.close()
    if not shared and gym.vector.AutoresetMode(autoreset_mode) is \
            gym.vector.AutoresetMode.NEXT_STEP:
        pytest.skip("AsyncVectorEnv without shared memory keeps a pending autoreset "
                    "across reset(); --impl gymnasium")
    return AsyncVectorEnv(env_fns, shared_memory=shared, copy=copy, context=context,
                          autoreset_mode=autoreset_mode)


def _flat_record_space(space: gym.Space) -> bool:
    if isinstance(space, gym.spaces.Dict):
        return all(_flat_record_space(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return all(_flat_record_space(s) for s in space.spaces)
    return isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                              gym.spaces.MultiBinary))


def _gymnasium_make(env_id, num_envs, backend="sync", vector_kwargs=None, wrappers=None, **kw):
    if backend != "sync":
        raise ValueError(f"backend {backend!r} is not available with --impl gymnasium")
    return gym.make_vec(
        env_id, num_envs, vectorization_mode="sync", vector_kwargs=vector_kwargs,
        wrappers=wrappers, **kw,
    )


@pytest.fixture(scope="session")
def impl(pytestconfig: pytest.Config) -> Any:
    """The implementation under test, as a module-like object with fastvec's public names."""
    name = pytestconfig.getoption("--impl")
    if name == "gymnasium":
        return types.SimpleNamespace(
            __name__="gymnasium", SyncVecEnv=_gymnasium_sync, SubprocVecEnv=_gymnasium_async,
            make=_gymnasium_make, tile_images=None, errors=None,
        )
    return importlib.import_module(name)


class VecEnvs:
    """Makes vector envs for one test and closes every one of them afterwards."""

    def __init__(self, impl: Any) -> None:
        self._impl = impl
        self._made: list[Any] = []

    def track(self, env: Any) -> Any:
        """Close ``env`` at the end of the test."""
        self._made.append(env)
        return env

    def make(self, env_fns: Sequence[Callable[[], gym.Env]], **kwargs: Any) -> Any:
        """A ``SyncVecEnv`` of the implementation under test."""
        return self.track(self._impl.SyncVecEnv(env_fns, **kwargs))

    def make_subproc(self, env_fns: Sequence[Callable[[], gym.Env]], **kwargs: Any) -> Any:
        """A ``SubprocVecEnv`` of the implementation under test."""
        return self.track(self._impl.SubprocVecEnv(env_fns, **kwargs))

    def make_backend(self, backend: str, env_fns: Sequence[Callable[[], gym.Env]],
                     **kwargs: Any) -> Any:
        """A vector env of the implementation under test for ``backend`` (see
        ``tests/support/backends.py``)."""
        return self.track(backends.make(self._impl, backend, env_fns, **kwargs))

    def make_ref(self, env_fns: Sequence[Callable[[], gym.Env]], **kwargs: Any) -> SyncVectorEnv:
        """Gymnasium's ``SyncVectorEnv``, the reference."""
        return self.track(SyncVectorEnv(env_fns, **kwargs))

    def close_all(self) -> None:
        errors = []
        for env in reversed(self._made):
            try:
                env.close()
            except Exception as exc:  # close the rest, then report
                errors.append(exc)
        self._made.clear()
        if errors:
            raise errors[0]


@pytest.fixture
def vec_envs(impl: Any):
    """A :class:`VecEnvs` whose envs are closed after the test, whether it passed or not."""
    envs = VecEnvs(impl)
    yield envs
    envs.close_all()


@pytest.fixture
def make_vec(vec_envs: VecEnvs) -> Callable[..., Any]:
    """``make_vec(env_fns, **kwargs)``: a ``SyncVecEnv`` under test, closed after the test."""
    return vec_envs.make


@pytest.fixture
def make_subproc(vec_envs: VecEnvs) -> Callable[..., Any]:
    """``make_subproc(env_fns, **kwargs)``: a ``SubprocVecEnv`` under test, closed after
    the test."""
    return vec_envs.make_subproc


@pytest.fixture(scope="session")
def ray_session() -> Any:
    """The one Ray of the test run (skip without Ray): 2 CPUs, 127.0.0.1 only, no dashboard.

    Started with ``ray start --head`` (``tests/support/ray_head.py``), so that its processes
    are not children of this one, and stopped at the end of the run.  Actors ask for
    ``num_cpus=0`` (``RayVecEnv``'s default), so any number fit.
    """
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        yield ray
        return
    from ray._private import ray_constants

    # Ray's single-machine mode in this process too (Ray reads the variable when it is
    # imported), or it would resolve 127.0.0.1 to the machine's address and connect there.
    ray_constants.ENABLE_RAY_CLUSTER = False
    os.environ.update(ray_head.LOOPBACK_ENV)
    address, temp_dir = ray_head.start(num_cpus=2)
    try:
        ray.init(address=address, _node_ip_address="127.0.0.1", log_to_driver=False)
        yield ray
    finally:
        ray.shutdown()
        ray_head.stop(temp_dir)


@pytest.fixture(params=[pytest.param(b, marks=backends.marks(b)) for b in backends.BACKENDS])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend a contract test runs on: each of ``tests.backends.BACKENDS``."""
    if request.param == backends.RAY and request.config.getoption("--impl") != "gymnasium":
        request.getfixturevalue("ray_session")
    return request.param


@pytest.fixture
def fastvec_only(impl: Any, request: pytest.FixtureRequest) -> None:
    """For a test of what only fastvec has: skip under ``--impl gymnasium``; and where
    the test parametrizes ``backend`` itself, start the test run's Ray (or skip) for Ray,
    as the ``backend`` fixture does."""
    if backends.is_gymnasium(impl):
        pytest.skip(f"fastvec only ({request.module.__name__}): Gymnasium's vector envs "
                    "lack it")
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == backends.RAY:
        request.getfixturevalue("ray_session")


@pytest.fixture
def make_envs(vec_envs: VecEnvs, backend: str) -> Callable[..., Any]:
    """``make_envs(env_fns, **kwargs)``: a vector env of ``backend`` under test, closed
    after the test."""
    return functools.partial(vec_envs.make_backend, backend)


@pytest.fixture
def make_ref(vec_envs: VecEnvs) -> Callable[..., SyncVectorEnv]:
    """``make_ref(env_fns, **kwargs)``: Gymnasium's ``SyncVectorEnv``, closed after the test."""
    return vec_envs.make_ref


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_tmp(tmp_path_factory: pytest.TempPathFactory):
    """Stable-Baselines3 makes a log folder in the system's temp dir on each ``learn``
    (``SB3-<date>``), even when it only prints: send those into pytest's temp area."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3-logs")))
        yield


@pytest.fixture(autouse=True)
def _check_no_leaks(request: pytest.FixtureRequest):
    """After a test marked ``subprocess``: no live workers, nothing new in /dev/shm.

    Autouse fixtures are set up first and torn down last, so the check runs after
    every other fixture of the test (``vec_envs`` included) has closed what it
    made.  Leaked processes are killed once reported, so that the next test
    starts clean.
    """
    if request.node.get_closest_marker("subprocess") is None:
        yield
        return
    children_before = leaks.live_children()
    shm_before = leaks.shm_entries()
    yield
    problems = []
    left = leaks.wait_no_children(CHILD_GRACE_SECONDS)
    if left:
        problems.append(f"live child processes {CHILD_GRACE_SECONDS} s after the test:\n"
                        f"{leaks.describe(left)}")
        if children_before:
            problems.append(f"(already there before the test: {children_before})")
        leaks.kill_processes(left)
    new_shm = leaks.shm_entries() - shm_before
    if new_shm:  # (a full collection takes ~0.1 s: only when there is something to free)
        gc.collect()  # what only a reference cycle still holds is not a leak
        new_shm = leaks.wait_shm_released(shm_before, SHM_GRACE_SECONDS)
    if new_shm:
        problems.append(f"new entries in {leaks.SHM_DIR}: {sorted(new_shm)}")
    if problems:
        pytest.fail("leak check: " + "\n".join(problems), pytrace=False)
