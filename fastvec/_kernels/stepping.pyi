# Stub of the compiled module built from csrc/stepping.pyx (see csrc/README.md).
"""Typed interface of ``fastvec._kernels.stepping`` (built from ``csrc/stepping.pyx``)."""

import enum
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

from fastvec._kernels.flatten import FieldTable

_InfoEntry = tuple[int, dict[str, Any]]

OLD_API_HINT: str

def old_api_step(result: object, index: int) -> ValueError:
    """The error for a ``step()`` result that is not Gymnasium's 5-tuple."""

class Autoreset(enum.IntEnum):
    NEXT_STEP = 0
    SAME_STEP = 1
    DISABLED = 2

@disjoint_base
class Stepper:
    """What the step loops over a block share: its envs, its buffers, the row being run."""

    @property
    def envs(self) -> list[Any]: ...
    @property
    def first_index(self) -> int: ...
    @property
    def current(self) -> int: ...
    @property
    def mode(self) -> int: ...
    def set_rows(self, rows: npt.NDArray[np.uint8]) -> None:
        """Write observations into ``rows`` from now on (same shape as before)."""

@disjoint_base
class EnvStepper(Stepper):
    """A block of envs and the batch buffers their step results go into."""

    def __init__(
        self,
        envs: list[gym.Env[Any, Any]],
        mode: int,
        table: FieldTable | None,
        rows: npt.NDArray[np.uint8] | None,
        obs_objects: list[Any] | None,
        rewards: npt.NDArray[np.float64],
        terminations: npt.NDArray[np.bool_],
        truncations: npt.NDArray[np.bool_],
        needs_reset: npt.NDArray[np.bool_],
        first_index: int = 0,
    ) -> None: ...
    def stack_frames(self, plan: Any) -> None:
        """Keep each env's last frames in its record (``plan``: a ``StackPlan``)."""
    def step(
        self, actions: list[Any], mask: npt.NDArray[np.bool_] | Sequence[bool] | None = None
    ) -> list[_InfoEntry]: ...
    def reset(
        self,
        seeds: list[int | None],
        options: dict[str, Any] | None,
        mask: npt.NDArray[np.bool_] | Sequence[bool] | None = None,
    ) -> list[_InfoEntry]: ...
