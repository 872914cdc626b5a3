"""Frame stacks kept in the record: the vector envs' ``frame_stack`` option.

With ``frame_stack=k`` each env's record holds its last ``k`` observations,
oldest first, as Gymnasium's ``FrameStackObservation(env, k)`` returns them:
a step moves the record's frames back by one and writes the new observation
into the newest slot (compiled, in the process that steps the env), so nothing
is re-stacked per step.  A reset pads the older slots with the reset
observation (``padding_type="reset"``), the space's zero (``"zero"``) or a
given observation, as that wrapper does.

:func:`stack_plan` turns an observation space and a :class:`FrameStack` into
what the step kernel needs (``EnvStepper.stack_frames``): the stacked space,
where each leaf's frames sit in the record, the padding bytes.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.utils import create_zero_array

from fastvec._kernels.flatten import FieldTable, flatten_into
from fastvec.spaces.layout import Layout, batch_views, layout_of, leaf_name

__all__ = ["FrameStack", "StackPlan", "parse_frame_stack", "stack_plan", "stacked_space"]

PADDINGS = ("reset", "zero")


@dataclass(frozen=True)
class FrameStack:
    """Keep each env's last ``stack_size`` observations, oldest first.

    ``padding_type``: what fills the older slots at a reset, as in Gymnasium's
    ``FrameStackObservation``: ``"reset"`` (the reset observation), ``"zero"``
    (the space's zero) or an observation of the env's space.
    """

    stack_size: int
    padding_type: Any = "reset"

    def __post_init__(self) -> None:
        size = self.stack_size
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
            raise ValueError(f"expected frame_stack's stack_size to be a positive int, "
                             f"got {size!r}")
        if isinstance(self.padding_type, str) and self.padding_type not in PADDINGS:
            raise ValueError(f"expected padding_type 'reset', 'zero' or an observation of "
                             f"the env's space, got {self.padding_type!r}")


def parse_frame_stack(value: int | FrameStack | None) -> FrameStack | None:
    """The ``frame_stack`` argument of a vector env as a :class:`FrameStack` (or None).

    Raises:
        ValueError: neither None, a positive int nor a ``FrameStack``.
    """
    if value is None or isinstance(value, FrameStack):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"expected frame_stack to be None, a positive int or a "
                         f"fastvec.FrameStack, got {value!r}")
    return FrameStack(int(value))


def stacked_space(space: spaces.Space, frame_stack: FrameStack) -> spaces.Space:
    """``FrameStackObservation``'s observation space: ``batch_space(space, stack_size)``.

    Raises:
        ValueError: the space has no flat record layout (a leaf other than Box,
            Discrete, MultiDiscrete or MultiBinary), or the padding observation is
            not in it.
    """
    if layout_of(space) is None:
        raise ValueError(f"frame_stack keeps frames in the record, which needs Box, Discrete, "
                         f"MultiDiscrete or MultiBinary leaves; the env's observation space "
                         f"is {space}")
    padding = frame_stack.padding_type
    if not isinstance(padding, str) and padding not in space:
        raise ValueError(f"expected padding_type 'reset', 'zero' or an observation of the "
                         f"env's space {space}, got {padding!r}")
    return batch_space(space, frame_stack.stack_size)


@dataclass(frozen=True)
class StackPlan:
    """What the step kernel needs to keep frames in a stacked record.

    ``frame_table`` writes one observation straight into the newest slot of
    each leaf; ``offsets``/``nbytes``: each leaf's first byte in the stacked
    record and the bytes of one frame of it; ``padding``: a stacked record whose
    older slots hold the padding (None: pad with the reset observation).
    """

    stack_size: int
    layout: Layout  # of the stacked space
    frame_table: FieldTable
    offsets: np.ndarray
    nbytes: np.ndarray
    padding: np.ndarray | None

    def observation(self, record: np.ndarray) -> Any:
        """One env's stacked observation, copied out of its record (``final_obs``)."""
        return _first(batch_views(self.layout, record.reshape(1, -1)))


def _first(node: Any) -> Any:
    """Row 0 of a batched structure, copied."""
    if isinstance(node, dict):
        return {key: _first(value) for key, value in node.items()}
    if isinstance(node, tuple):
        return tuple(_first(value) for value in node)
    return node[0].copy()


def stack_plan(space: spaces.Space, frame_stack: FrameStack) -> StackPlan:
    """The kernel's plan for records of ``stacked_space(space, frame_stack)``."""
    k = frame_stack.stack_size
    frame, stacked = layout_of(space), layout_of(stacked_space(space, frame_stack))
    assert frame is not None and stacked is not None
    pairs = list(zip(frame.leaves, stacked.leaves, strict=True))

    def slot_table(j: int) -> FieldTable:  # writes one frame into slot j of every leaf
        return FieldTable([f.path for f, _ in pairs], [leaf_name(f.path) for f, _ in pairs],
                          [f.dtype for f, _ in pairs], [f.shape for f, _ in pairs],
                          [s.offset + j * f.nbytes for f, s in pairs])

    padding = None
    if not (isinstance(frame_stack.padding_type, str) and frame_stack.padding_type == "reset"):
        value = create_zero_array(space) if isinstance(frame_stack.padding_type, str) \
            else frame_stack.padding_type
        padding = np.zeros(stacked.record_size, dtype=np.uint8)
        for j in range(k - 1):
            flatten_into(slot_table(j), value, padding)
    return StackPlan(k, stacked, slot_table(k - 1),
                     np.array([s.offset for _, s in pairs], dtype=np.intp),
                     np.array([f.nbytes for f, _ in pairs], dtype=np.intp), padding)
