"""Batch stacking: per-env step results into batch arrays, action batches checked once.

``store_step`` (declared in the .pxd for the step loop) converts one env's
reward and flags exactly as numpy's item assignment does (``float(r)``,
``bool(flag)``).  ``stack_rewards`` / ``stack_flags`` do the same for a list of
values; ``find_out_of_range`` scans a whole integer action batch against its
bounds in one ``nogil`` loop.
"""

from cpython.float cimport PyFloat_AsDouble
from cpython.object cimport PyObject_IsTrue
from libc.stdint cimport int64_t

cimport numpy as cnp

cnp.import_array()


cdef int store_step(object reward, object terminated, object truncated, double* rewards,
                    cnp.npy_bool* terminations, cnp.npy_bool* truncations,
                    Py_ssize_t i) except -1:
    rewards[i] = PyFloat_AsDouble(reward)  # errors propagate (declared except? -1)
    terminations[i] = PyObject_IsTrue(terminated)
    truncations[i] = PyObject_IsTrue(truncated)
    return 0


def stack_rewards(list values, double[::1] out):
    """``out[i] = float(values[i])``; ``out`` must hold ``len(values)`` items."""
    cdef Py_ssize_t i, n = len(values)
    if out.shape[0] < n:
        raise ValueError(f"expected an output of at least {n} rewards, got {out.shape[0]}")
    for i in range(n):
        out[i] = PyFloat_AsDouble(values[i])


def stack_flags(list values, cnp.npy_bool[::1] out):
    """``out[i] = bool(values[i])``; ``out`` must hold ``len(values)`` items."""
    cdef Py_ssize_t i, n = len(values)
    if out.shape[0] < n:
        raise ValueError(f"expected an output of at least {n} flags, got {out.shape[0]}")
    for i in range(n):
        out[i] = PyObject_IsTrue(values[i])


def find_out_of_range(const int64_t[:, ::1] values, const int64_t[::1] low,
                      const int64_t[::1] high):
    """First ``(row, column)`` with ``values`` outside ``[low, high]`` (per column), or None."""
    cdef Py_ssize_t i, j, rows = values.shape[0], cols = values.shape[1]
    cdef Py_ssize_t bad = -1
    if low.shape[0] != cols or high.shape[0] != cols:
        raise ValueError(f"expected bounds of length {cols}, got {low.shape[0]} and {high.shape[0]}")
    with nogil:
        for i in range(rows):
            for j in range(cols):
                if values[i, j] < low[j] or values[i, j] > high[j]:
                    bad = i * cols + j
                    break
            if bad >= 0:
                break
    return None if bad < 0 else (bad // cols, bad % cols)
