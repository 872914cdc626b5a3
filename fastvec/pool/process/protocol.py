"""What the trainer and its worker processes say to each other, defined once.

Both sides import this module.  A step or reset is posted through the barrier
as a :class:`Command`; the worker answers with a :class:`Status` in the same
barrier.  Anything that carries Python objects travels as one of the named
messages below, pickled over the worker's control pipe:

start-up   worker -> an ``About`` (``fastvec.pool.about``: what it built); parent ->
           :class:`Attach` + the block's fd; worker -> :class:`Ready` (or an
           ``ErrorReport`` of ``fastvec.pool.reports`` at any point).
RESET      parent -> :class:`ResetRequest`; worker -> a :class:`BlockReply` when
           there are infos or object observations, else just ``Status.OK``.
STEP       actions are in the shared segment (or a :class:`StepActions` message for
           spaces without a record layout); worker -> ``Status.OK``,
           ``Status.INFOS`` (infos in its info area) or a :class:`BlockReply`.
STEP_SOME  as STEP, for the block's rows that the shared step mask selects (a
           :class:`StepActions` message carries its mask itself).
CONTROL    parent -> :class:`ControlRequest` (or :class:`ResendInfos`); worker ->
           :class:`ControlReply`.
Any command may be answered with ``Status.ERROR`` and an ``ErrorReport``.
CLOSE      no message; the worker closes its envs and exits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple

__all__ = [
    "Attach", "BlockReply", "Command", "ControlReply", "ControlRequest", "InfoSchema", "Ready",
    "RegionName", "ResendInfos", "ResetRequest", "Status", "StepActions", "Stop", "spin_budget_us",
]

InfoSchema = tuple[tuple[tuple[str, ...], str, tuple[int, ...]], ...]
"""Each leaf of a batched info dict: key path, dtype string, shape."""


class Command(IntEnum):
    """What the parent posts to a worker through the barrier."""

    STEP = 1
    RESET = 2
    CONTROL = 3
    CLOSE = 4
    STEP_SOME = 5  # step the rows of the block that the step-mask region selects


class Status(IntEnum):
    """How a worker finished its command (read from the barrier)."""

    OK = 0
    ERROR = 1  # an ErrorReport follows on the pipe
    MESSAGE = 2  # a reply follows on the pipe
    MESSAGE_SENT = 3  # a reply is whole on the pipe already
    INFOS = 4  # the step's infos are in the worker's info area


SPIN_US_VAR = "FASTVEC_SPIN_US"
DEFAULT_SPIN_US = 300.0


def spin_budget_us() -> float:
    """The barrier's longest spin per wait, in microseconds, on both sides.

    A waiter spins (yielding its core every few dozen checks) for an adaptive
    time up to this budget before it sleeps on the futex.  ``$FASTVEC_SPIN_US``
    overrides the default (0: never spin), for measuring; see benchmarks/README.md.
    """
    value = os.environ.get(SPIN_US_VAR)
    return DEFAULT_SPIN_US if value is None else max(float(value), 0.0)


class RegionName:
    """Names of the shared segment's regions (the layout of each: ``shm.Region``)."""

    BARRIER = "barrier"
    OBS = "obs"  # (num_envs, record_size) bytes: one observation record per env
    ACTIONS = "actions"  # (num_envs, action record_size) bytes
    STEP_MASK = "step_mask"  # (num_envs,) bools: the rows a STEP_SOME steps
    # and one region per result field, named as the field (pool/buffers.py RESULT_FIELDS)
    INFOS = "infos"  # (num_workers, INFO_BYTES): each worker's info area
    INFOS_RAW_ONLY = "infos_raw_only"  # set by the parent: workers send raw infos only


# -- start-up --------------------------------------------------------------------------

@dataclass(frozen=True)
class Stepping:
    """How every block of a pool steps: the kernels' autoreset code, and the frame stack
    each record keeps (a ``fastvec.spaces.frame_stack.FrameStack``, or None).
    """

    mode: int
    frame_stack: Any = None


class Attach(NamedTuple):
    """Where the worker's block sits in the shared segment (its fd follows): its first
    row, its line in the barrier and its info area (``block``); the record layouts
    the trainer made once for every block.
    """

    plan: Any  # fastvec.pool.process.shm.SegmentPlan
    first_row: int
    block: int
    num_blocks: int
    mode_code: int  # the kernels' autoreset code (an int, not the AutoresetMode)
    obs_layout: Any  # a fastvec.spaces.layout.Layout, or None: observations as objects
    action_layout: Any  # the same for actions: None, they come as messages
    frame_stack: Any = None  # a fastvec.spaces.frame_stack.FrameStack, or None


class Ready(NamedTuple):
    """The worker attached and serves commands through the barrier."""


class Stop(NamedTuple):
    """Exit before attaching (the parent gave up on start-up)."""


# -- commands --------------------------------------------------------------------------

class ResetRequest(NamedTuple):
    """Reset the block's envs (those where ``mask`` is true) with per-env seeds."""

    seeds: list
    options: dict | None
    mask: Any


class StepActions(NamedTuple):
    """Per-env actions, for action spaces without a record layout; ``mask``: the rows
    to step (None: all of them).
    """

    actions: list
    mask: Any = None


class ControlRequest(NamedTuple):
    """Run ``fn(env, *args)`` for the block's envs ``envs`` (``args_per_env`` aligned)."""

    fn: bytes  # cloudpickled
    envs: list[int]
    args_per_env: list[tuple] | None


class BlockReply(NamedTuple):
    """The Python objects of a step or reset.

    ``entries``: non-empty infos as ``(env_index, info)``; ``obs_objects``: the
    block's observations when the space has no record layout; ``info_schema``: the
    layout of the worker's info area from now on (its infos of this step are in
    ``entries`` too); ``notes``: what the worker logged for the user since its last
    reply (:mod:`fastvec.pool.notes`).
    """

    entries: list
    obs_objects: list | None = None
    info_schema: InfoSchema | None = None
    notes: list | None = None


class ResendInfos(NamedTuple):
    """Send the raw infos of the last step again (as a ``ControlReply``)."""


class ControlReply(NamedTuple):
    """One result per env asked for."""

    results: list
