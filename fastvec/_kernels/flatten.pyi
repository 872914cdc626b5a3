# Stub of the compiled module built from csrc/flatten.pyx (see csrc/README.md).
"""Typed interface of ``fastvec._kernels.flatten`` (built from ``csrc/flatten.pyx``)."""

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

_PathKey = str | int

@disjoint_base
class FieldTable:
    """The leaves of a flat record, as C arrays for the write loop."""

    def __init__(
        self,
        paths: Sequence[Sequence[_PathKey]],
        names: Sequence[str],
        dtypes: Sequence[npt.DTypeLike],
        shapes: Sequence[Sequence[int]],
        offsets: Sequence[int] | npt.NDArray[np.integer[Any]],
    ) -> None: ...
    @property
    def n_fields(self) -> int: ...
    @property
    def paths(self) -> list[tuple[_PathKey, ...]]: ...
    @property
    def names(self) -> list[str]: ...
    @property
    def dtypes(self) -> list[np.dtype[Any]]: ...
    @property
    def shapes(self) -> list[tuple[int, ...]]: ...

def flatten_into(
    table: FieldTable, obs: object, row: npt.NDArray[np.uint8], env_index: int = 0
) -> None: ...

def first_note(key: object) -> bool: ...
