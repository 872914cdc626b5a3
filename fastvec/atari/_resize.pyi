# Stub of the compiled module built from csrc/atari/_resize.pyx (see csrc/README.md).
"""Typed interface of ``fastvec.atari._resize`` (built from ``csrc/atari/_resize.pyx``)."""

from typing import Literal

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

# The vector helpers the module was built with.
SIMD: str  # "sse2", "vector" (GCC/Clang vector extensions) or "scalar"

@disjoint_base
class AreaResize:
    """OpenCV's ``INTER_AREA`` downscale of uint8 ``(H, W[, C])`` images to ``(h, w[, C])``."""

    def __init__(
        self, src_height: int, src_width: int, dst_height: int, dst_width: int,
        channels: int = 1,
    ) -> None: ...
    @property
    def src_shape(self) -> tuple[int, ...]: ...
    @property
    def dst_shape(self) -> tuple[int, ...]: ...
    @property
    def path(self) -> Literal["area", "2x2", "integer"]: ...
    def __reduce__(self) -> tuple[type[AreaResize], tuple[int, int, int, int, int]]: ...
    def resize(self, src: npt.NDArray[np.uint8], dst: npt.NDArray[np.uint8]) -> None: ...
    def pool_resize(
        self, a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8], dst: npt.NDArray[np.uint8]
    ) -> None: ...
