"""Starting a process pool: its workers, the trainer's own block, the shared block.

The workers build their envs while this process builds the envs of the
trainer's block (``local_block=True``); then every block says what it built
(an ``About``) and the pool checks that they agree and lays out one shared
block: the barrier, each row's observation and action record, rewards and
flags, and each block's info area.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastvec._kernels.barrier import barrier_nbytes
from fastvec.errors import EnvFnError, WorkerError
from fastvec.pool.buffers import RESULT_FIELDS
from fastvec.pool.env_fns import checked, close_quietly
from fastvec.pool.process.protocol import RegionName
from fastvec.pool.process.shared_infos import INFO_BYTES
from fastvec.pool.process.shm import SegmentPlan, plan_block
from fastvec.pool.reports import env_failure
from fastvec.spaces.layout import Layout

__all__ = ["build_local_envs", "local_error", "plan_shared_block"]


def plan_shared_block(num_rows: int, num_blocks: int, obs_layout: Layout | None,
                      action_layout: Layout | None) -> SegmentPlan:
    """The regions of the shared block: barrier, records, results, info areas."""
    return plan_block([
        (RegionName.BARRIER, (barrier_nbytes(num_blocks),), "u1"),
        (RegionName.OBS, (num_rows, obs_layout.record_size if obs_layout else 0), "u1"),
        (RegionName.ACTIONS, (num_rows, action_layout.record_size if action_layout else 0), "u1"),
        *((field.name, (num_rows,), field.dtype.str) for field in RESULT_FIELDS),
        (RegionName.INFOS, (num_blocks, INFO_BYTES), "u1"),
        (RegionName.INFOS_RAW_ONLY, (1,), "u1"),
    ])


def local_error(exc: Exception, env_index: int | None, what: str,
                unit: str = "env") -> WorkerError:
    """The error a worker would report for ``exc`` in env (game) ``env_index`` of the
    trainer's own block (``worker_index`` None, the exception itself as ``__cause__``).
    """
    where = f"{unit} {env_index} (local block)" if env_index is not None else "the local block"
    return env_failure(where, type(exc).__name__, str(exc), what, env_index=env_index,
                       worker_index=None, cause=exc)


def build_local_envs(env_fns: Sequence[Callable[[], Any]]) -> list:
    """The trainer's block's envs (block 0); an env that raises is the ``WorkerError`` a
    worker's would be, one that returns no env an ``EnvFnError`` (the ones built
    before are closed).
    """
    envs: list = []
    for index, env_fn in enumerate(env_fns):
        try:
            envs.append(checked(env_fn(), index))
        except EnvFnError:
            close_quietly(envs)
            raise
        except Exception as exc:
            close_quietly(envs)
            raise local_error(exc, index, "building its envs") from exc
    return envs
