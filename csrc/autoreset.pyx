"""Auto-reset bookkeeping: per-env episode return, length and start time.

``update_episode_stats`` advances every env by one step with the exact rules of
Gymnasium's ``RecordEpisodeStatistics`` vector wrapper, for each autoreset mode:
with ``NEXT_STEP``/``DISABLED`` the step after an episode's end is a reset step
that starts the next episode's statistics; with ``SAME_STEP`` every step counts
and a finished env's statistics restart at once.
"""

from libc.math cimport rint
from libc.stdint cimport int64_t

cimport numpy as cnp

cnp.import_array()


def update_episode_stats(const cnp.npy_bool[::1] terminations,
                         const cnp.npy_bool[::1] truncations,
                         const double[::1] rewards,
                         cnp.npy_bool[::1] prev_dones,
                         double[::1] returns,
                         int64_t[::1] lengths,
                         double[::1] start_times,
                         double now,
                         bint same_step,
                         double[::1] out_r,
                         int64_t[::1] out_l,
                         double[::1] out_t):
    """Advance the statistics one step; write finished episodes to ``out_*`` (0 elsewhere).

    Returns the number of envs whose episode ended on this step.
    """
    cdef Py_ssize_t i, n = terminations.shape[0], finished = 0
    cdef bint done
    for arr_len in (truncations.shape[0], rewards.shape[0], prev_dones.shape[0],
                    returns.shape[0], lengths.shape[0], start_times.shape[0],
                    out_r.shape[0], out_l.shape[0], out_t.shape[0]):
        if arr_len != n:
            raise ValueError(f"expected arrays of length {n}, got one of length {arr_len}")
    with nogil:
        for i in range(n):
            if same_step or not prev_dones[i]:
                returns[i] += rewards[i]
                lengths[i] += 1
            else:
                returns[i] = 0.0
                lengths[i] = 0
                start_times[i] = now
            done = terminations[i] or truncations[i]
            prev_dones[i] = done
            if done:
                finished += 1
                out_r[i] = returns[i]
                out_l[i] = lengths[i]
                out_t[i] = rint((now - start_times[i]) * 1e6) / 1e6
                if same_step:
                    returns[i] = 0.0
                    lengths[i] = 0
                    start_times[i] = now
            else:
                out_r[i] = 0.0
                out_l[i] = 0
                out_t[i] = 0.0
    return finished
