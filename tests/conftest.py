"""Shared fixtures: the implementation under test, and vector envs that always get closed.

``--impl`` picks the implementation the tests run against:

- ``fastvec`` (the default): the package itself.
- ``gymnasium``: Gymnasium's own ``SyncVectorEnv`` in place of ``fastvec.SyncVecEnv``,
  to check the tests' own logic against the reference; tests marked ``fastvec_only``
  (features Gymnasium's class does not have) are skipped.
- ``some.module``: any module with fastvec's public names (``SyncVecEnv``, ``make``,
  ``tile_images``, ``errors``).
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.vector import SyncVectorEnv


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--impl",
        default="fastvec",
        help="implementation under test: fastvec (default), gymnasium, or a module name",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fastvec_only: tests a feature Gymnasium's SyncVectorEnv does not have"
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
            __name__="gymnasium", SyncVecEnv=_gymnasium_sync, make=_gymnasium_make,
            tile_images=None, errors=None,
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
def make_ref(vec_envs: VecEnvs) -> Callable[..., SyncVectorEnv]:
    """``make_ref(env_fns, **kwargs)``: Gymnasium's ``SyncVectorEnv``, closed after the test."""
    return vec_envs.make_ref
