# Stub of the compiled module built from csrc/rows.pyx (see csrc/README.md).

import numpy as np
import numpy.typing as npt

def gather_rows(
    src: npt.NDArray[np.uint8], index: npt.NDArray[np.int64], out: npt.NDArray[np.uint8]
) -> None: ...
def scatter_rows(
    src: npt.NDArray[np.uint8], index: npt.NDArray[np.int64], out: npt.NDArray[np.uint8]
) -> None: ...
