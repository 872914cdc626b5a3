"""One shared-memory block carved into aligned regions, gone however we exit.

The block is an anonymous file: ``memfd_create`` on Linux (elsewhere a temporary
file unlinked at once), so it has no name in ``/dev/shm`` or on disk and the
kernel frees it when the last process holding it exits, even after SIGKILL.
Workers get its file descriptor over their control pipe (``send_handle``), not
by name.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from dataclasses import dataclass

import numpy as np

__all__ = ["SegmentPlan", "Region", "SharedSegment", "plan_regions"]

ALIGN = 64  # every region starts on its own cache line


@dataclass(frozen=True)
class Region:
    """A named array inside the block."""

    name: str
    offset: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class SegmentPlan:
    """Where each region sits; small and picklable, sent to every worker."""

    regions: tuple[Region, ...]
    size: int


def plan_regions(arrays: list[tuple[str, tuple[int, ...], str]]) -> SegmentPlan:
    """Lay out ``(name, shape, dtype)`` arrays one after another, 64-byte aligned."""
    regions, offset = [], 0
    for name, shape, dtype in arrays:
        region = Region(name, offset, tuple(int(d) for d in shape), np.dtype(dtype).str)
        regions.append(region)
        offset += -(-max(region.nbytes, 1) // ALIGN) * ALIGN
    size = -(-max(offset, 1) // mmap.PAGESIZE) * mmap.PAGESIZE
    return SegmentPlan(tuple(regions), size)


def _anonymous_fd(size: int) -> int:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("fastvec", os.MFD_CLOEXEC)
    else:  # pragma: no cover - non-Linux
        fd, path = tempfile.mkstemp(prefix="fastvec-")
        os.unlink(path)
    os.ftruncate(fd, size)
    return fd


class SharedSegment:
    """The mapped block and numpy views of its regions (``block.arrays[name]``)."""

    def __init__(self, plan: SegmentPlan, fd: int) -> None:
        self.plan = plan
        self.fd = fd
        self._mmap = mmap.mmap(fd, plan.size)
        self.arrays: dict[str, np.ndarray] = {
            region.name: np.frombuffer(
                self._mmap, dtype=region.dtype,
                count=int(np.prod(region.shape, dtype=np.int64)), offset=region.offset,
            ).reshape(region.shape)
            for region in plan.regions
        }

    @classmethod
    def create(cls, plan: SegmentPlan) -> SharedSegment:
        """A new zero-filled block (the parent)."""
        return cls(plan, _anonymous_fd(plan.size))

    def close(self) -> None:
        """Drop this process's views, mapping and descriptor (idempotent)."""
        self.arrays = {}
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        try:
            self._mmap.close()
        except BufferError:
            pass  # a caller still holds a view (copy=False); freed with the last one
