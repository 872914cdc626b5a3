"""``fastvec.pool.process.shm``: one shared segment carved into aligned regions, with no name.

The plan (offsets, sizes, alignment) against arithmetic; the block against what
a second mapping of the same file descriptor and a forked child see; close
idempotent; nothing in ``/dev/shm``.
"""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastvec.pool.process.shm import ALIGN, SharedSegment, plan_regions
from tests.support import leaks

DTYPES = ["u1", "?", "i2", "<i4", "f4", "f8", "i8", "c16"]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.lists(st.integers(0, 9), max_size=3), st.sampled_from(DTYPES)),
                max_size=8))
def test_plan_lays_regions_out_in_order_aligned_and_apart(arrays):
    specs = [(f"r{k}", tuple(shape), dtype) for k, (shape, dtype) in enumerate(arrays)]
    plan = plan_regions(specs)
    assert [r.name for r in plan.regions] == [name for name, *_ in specs]
    end = 0
    for region, (_, shape, dtype) in zip(plan.regions, specs, strict=True):
        assert region.shape == shape and np.dtype(region.dtype) == np.dtype(dtype)
        assert region.nbytes == int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        assert region.offset % ALIGN == 0, f"{region} not {ALIGN}-byte aligned"
        assert region.offset >= end, f"{region} overlaps the region before it"
        assert region.offset - end < ALIGN, f"{region}: a gap of a whole cache line or more"
        end = region.offset + max(region.nbytes, 1)  # an empty region still takes a line
    assert plan.size % mmap.PAGESIZE == 0 and plan.size >= max(end, 1)
    assert plan.size - max(end, 1) < mmap.PAGESIZE


def test_plan_of_nothing_is_one_page():
    plan = plan_regions([])
    assert plan.regions == () and plan.size == mmap.PAGESIZE


def test_plan_sizes_by_hand():
    plan = plan_regions([("a", (3,), "f8"), ("b", (0,), "u1"), ("c", (2, 5), "i4"), ("d", (), "?")])
    assert [(r.offset, r.nbytes) for r in plan.regions] == [(0, 24), (64, 0), (128, 40),
                                                            (192, 1)]
    assert plan.size == mmap.PAGESIZE
    big = plan_regions([("rows", (3, mmap.PAGESIZE), "u1")])
    assert big.size == 3 * mmap.PAGESIZE


SPECS = [("rewards", (5,), "f8"), ("flags", (5,), "?"), ("rows", (5, 13), "u1"),
         ("empty", (0, 4), "i4")]


@pytest.fixture
def block():
    block = SharedSegment.create(plan_regions(SPECS))
    yield block
    block.close()


def test_create_gives_zeroed_views_of_the_planned_shapes(block):
    for name, shape, dtype in SPECS:
        array = block.arrays[name]
        assert array.shape == shape and array.dtype == np.dtype(dtype), name
        assert not array.any(), f"{name} is not zero-filled"
        assert array.flags.c_contiguous and array.flags.writeable, name
    base = block.arrays["rewards"].__array_interface__["data"][0]
    for region in block.plan.regions:
        address = block.arrays[region.name].__array_interface__["data"][0]
        assert address - base == region.offset, region.name


def test_a_second_mapping_of_the_fd_shares_the_memory(block):
    other = SharedSegment(block.plan, os.dup(block.fd))
    try:
        block.arrays["rewards"][:] = np.arange(5) / 2
        block.arrays["rows"][3] = 7
        np.testing.assert_array_equal(other.arrays["rewards"], np.arange(5) / 2)
        assert (other.arrays["rows"][3] == 7).all() and not other.arrays["rows"][2].any()
        other.arrays["flags"][1] = True
        assert block.arrays["flags"].tolist() == [False, True, False, False, False]
    finally:
        other.close()
    assert block.arrays["flags"][1]  # the first mapping lives on


@pytest.mark.subprocess
def test_a_forked_child_writes_what_the_parent_reads(block):
    block.arrays["rewards"][:] = 1.5
    pid = os.fork()
    if pid == 0:  # the child: read, write, leave without running the test's teardown
        ok = False
        try:
            ok = bool((block.arrays["rewards"] == 1.5).all())
            block.arrays["rows"][:, :] = np.arange(13, dtype=np.uint8)
            block.arrays["flags"][4] = True
        finally:
            os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child did not see the parent's write"
    assert (block.arrays["rows"] == np.arange(13, dtype=np.uint8)).all()
    assert block.arrays["flags"].tolist() == [False, False, False, False, True]


def test_close_is_idempotent_and_releases_the_fd(block):
    fd = block.fd
    block.close()
    assert block.fd == -1 and block.arrays == {}
    with pytest.raises(OSError):
        os.fstat(fd)
    block.close()
    assert block.fd == -1


def test_close_while_a_view_is_held_keeps_the_view_valid():
    block = SharedSegment.create(plan_regions(SPECS))
    view = block.arrays["rewards"]  # as with copy=False: the caller still holds a view
    view[:] = 4.0
    block.close()
    assert block.fd == -1
    assert view.tolist() == [4.0] * 5  # freed with the last view, not under it
    del view


@pytest.mark.skipif(not os.path.isdir(leaks.SHM_DIR), reason="no /dev/shm")
def test_the_block_has_no_name_in_dev_shm():
    before = leaks.shm_entries()
    block = SharedSegment.create(plan_regions([("big", (1 << 20,), "u1")]))
    try:
        assert leaks.shm_entries() == before
        if hasattr(os, "memfd_create"):
            target = os.readlink(f"/proc/self/fd/{block.fd}")
            assert target.startswith("/memfd:fastvec"), target
    finally:
        block.close()
    assert leaks.shm_entries() == before
