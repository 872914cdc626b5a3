# Stub of the compiled module built from csrc/games.pyx (see csrc/README.md).
"""Typed interface of ``fastvec._kernels.games`` (built from ``csrc/games.pyx``)."""

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

from fastvec._kernels.flatten import FieldTable
from fastvec._kernels.stepping import Stepper

_InfoEntry = tuple[int, dict[str, Any]]

@disjoint_base
class GameStepper(Stepper):
    """A block of games and the batch buffers their rows go into."""

    def __init__(
        self,
        envs: list[Any],
        games: list[Any],
        agents: tuple[str, ...],
        mode: int,
        table: FieldTable | None,
        rows: npt.NDArray[np.uint8] | None,
        obs_objects: list[Any] | None,
        zero_obs: Any,
        rewards: npt.NDArray[np.float64],
        terminations: npt.NDArray[np.bool_],
        truncations: npt.NDArray[np.bool_],
        needs_reset: npt.NDArray[np.bool_],
        alive: npt.NDArray[np.bool_],
        active: npt.NDArray[np.bool_],
        first_index: int = 0,
    ) -> None: ...
    @property
    def agents(self) -> tuple[str, ...]: ...
    @property
    def seats(self) -> int: ...
    def step(
        self, actions: list[Any], mask: npt.NDArray[np.bool_] | Sequence[bool] | None = None
    ) -> list[_InfoEntry]: ...
    def reset(
        self,
        seeds: list[int | None],
        options: dict[str, Any] | None,
        mask: npt.NDArray[np.bool_] | Sequence[bool] | None = None,
    ) -> list[_InfoEntry]: ...
