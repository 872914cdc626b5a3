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


def find_out_of_range(cnp.ndarray values not None, cnp.ndarray low not None,
                      cnp.ndarray high not None):
    """First ``(row, column)`` of 2-D int64 ``values`` outside ``[low, high]`` (per column).

    Returns None when every value is in range.  All three arrays must be int64 and
    C-contiguous; ``low`` and ``high`` hold one bound per column.
    """
    cdef Py_ssize_t i, j, rows, cols, bad = -1
    cdef const int64_t* v
    cdef const int64_t* lo
    cdef const int64_t* hi
    for arr in (values, low, high):
        if cnp.PyArray_TYPE(arr) != cnp.NPY_INT64 or not cnp.PyArray_IS_C_CONTIGUOUS(arr):
            raise ValueError(f"expected C-contiguous int64 arrays, got {arr.dtype}")
    if cnp.PyArray_NDIM(values) != 2:
        raise ValueError(f"expected 2-D values, got {cnp.PyArray_NDIM(values)}-D")
    rows, cols = values.shape[0], values.shape[1]
    if low.size != cols or high.size != cols:
        raise ValueError(f"expected bounds of length {cols}, got {low.size} and {high.size}")
    v = <const int64_t*>cnp.PyArray_DATA(values)
    lo = <const int64_t*>cnp.PyArray_DATA(low)
    hi = <const int64_t*>cnp.PyArray_DATA(high)
    with nogil:
        for i in range(rows * cols):
            j = i % cols
            if v[i] < lo[j] or v[i] > hi[j]:
                bad = i
                break
    return None if bad < 0 else (bad // cols, bad % cols)
