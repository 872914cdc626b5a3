"""The pool's interface: an ABC whose members must implement every method, and the
split of envs into blocks that every member uses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastvec.pool.base import Pool, split_blocks
from fastvec.pool.local import LocalPool
from fastvec.pool.process.pool import ProcessPool
from fastvec.pool.ray.pool import RayPool

ABSTRACT = {"post_step", "post_reset", "_wait", "_receive", "control", "close"}


def test_the_interface_is_abstract():
    assert Pool.__abstractmethods__ == ABSTRACT
    with pytest.raises(TypeError, match="abstract"):
        Pool()  # type: ignore[abstract]


@pytest.mark.parametrize("missing", sorted(ABSTRACT))
def test_a_member_that_lacks_a_method_fails_when_built(missing):
    methods = {name: (lambda self, *a, **k: None) for name in ABSTRACT - {missing}}
    Partial = type("Partial", (Pool,), methods)
    with pytest.raises(TypeError, match=missing):
        Partial()


@pytest.mark.parametrize("member", [LocalPool, ProcessPool, RayPool])
def test_every_member_implements_the_whole_interface(member):
    assert issubclass(member, Pool)
    assert not member.__abstractmethods__


@given(st.integers(1, 500), st.integers(1, 64))
def test_split_blocks_covers_every_env_once_in_near_equal_blocks(num_envs, num_blocks):
    num_blocks = min(num_blocks, num_envs)
    bounds = split_blocks(num_envs, num_blocks)
    assert len(bounds) == num_blocks
    assert bounds[0][0] == 0 and bounds[-1][1] == num_envs
    assert all(a[1] == b[0] for a, b in zip(bounds[:-1], bounds[1:], strict=True))
    sizes = [end - start for start, end in bounds]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # the larger blocks come first
