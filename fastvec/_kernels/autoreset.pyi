# Stub of the compiled module built from csrc/autoreset.pyx (see csrc/README.md).
"""Typed interface of ``fastvec._kernels.autoreset`` (built from ``csrc/autoreset.pyx``)."""

import numpy as np
import numpy.typing as npt

def update_episode_stats(
    terminations: npt.NDArray[np.bool_],
    truncations: npt.NDArray[np.bool_],
    rewards: npt.NDArray[np.float64],
    prev_dones: npt.NDArray[np.bool_],
    returns: npt.NDArray[np.float64],
    lengths: npt.NDArray[np.int64],
    start_times: npt.NDArray[np.float64],
    now: float,
    same_step: bool,
    out_r: npt.NDArray[np.float64],
    out_l: npt.NDArray[np.int64],
    out_t: npt.NDArray[np.float64],
) -> int: ...
