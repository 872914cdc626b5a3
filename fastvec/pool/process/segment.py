"""The plan of a process pool's shared segment, laid out once every block said what it built.

The workers build their envs while this process builds the envs of the trainer's
block (``local_block=True``); then every block says what it built (an ``About``),
the pool checks that they agree and lays out one shared segment: the barrier,
each row's observation and action record and step mask, one region per result
field, and each block's info area.
"""

from __future__ import annotations

from fastvec._kernels.barrier import barrier_nbytes
from fastvec.pool.buffers import RESULT_FIELDS
from fastvec.pool.process.protocol import RegionName
from fastvec.pool.process.shared_infos import INFO_BYTES
from fastvec.pool.process.shm import SegmentPlan, plan_regions
from fastvec.spaces.layout import Layout

__all__ = ["plan_segment"]


def plan_segment(num_rows: int, num_blocks: int, obs_layout: Layout | None,
                 action_layout: Layout | None) -> SegmentPlan:
    """The regions of the shared segment: barrier, records, step mask, results, info areas."""
    return plan_regions([
        (RegionName.BARRIER, (barrier_nbytes(num_blocks),), "u1"),
        (RegionName.OBS, (num_rows, obs_layout.record_size if obs_layout else 0), "u1"),
        (RegionName.ACTIONS, (num_rows, action_layout.record_size if action_layout else 0), "u1"),
        (RegionName.STEP_MASK, (num_rows,), "|b1"),
        *((field.name, (num_rows,), field.dtype.str) for field in RESULT_FIELDS),
        (RegionName.INFOS, (num_blocks, INFO_BYTES), "u1"),
        (RegionName.INFOS_RAW_ONLY, (1,), "u1"),
    ])
