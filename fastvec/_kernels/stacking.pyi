# Stub of the compiled module built from csrc/stacking.pyx (see csrc/README.md).
"""Typed interface of ``fastvec._kernels.stacking`` (built from ``csrc/stacking.pyx``)."""

from typing import Any

import numpy as np
import numpy.typing as npt

# ``values`` must be a ``list`` (not any sequence); its items are whatever ``float()``
# (rewards) or ``bool()`` (flags) accepts.
def stack_rewards(values: list[Any], out: npt.NDArray[np.float64]) -> None: ...
def stack_flags(values: list[Any], out: npt.NDArray[np.bool_]) -> None: ...
def find_out_of_range(
    values: npt.NDArray[np.int64], low: npt.NDArray[np.int64], high: npt.NDArray[np.int64]
) -> tuple[int, int] | None: ...
