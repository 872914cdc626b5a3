"""Moving whole record rows: the batch of an async ``recv`` out of the shared segment.

Rows are bytes (``uint8[:, ::1]``), so one kernel serves every dtype: an array
of float64 rewards is gathered as ``(n, 8)`` rows, a bool array as ``(n, 1)``.
The caller validates shapes and indices once; the loops run without the GIL.
"""

from libc.stdint cimport int64_t
from libc.string cimport memcpy


def gather_rows(const unsigned char[:, ::1] src, const int64_t[::1] index,
                unsigned char[:, ::1] out):
    """``out[k] = src[index[k]]`` for every k; ``out`` needs ``len(index)`` rows."""
    cdef Py_ssize_t k, n = index.shape[0], width = src.shape[1]
    _check(src.shape[0], width, index, out.shape[0], out.shape[1])
    if width == 0:
        return
    with nogil:
        for k in range(n):
            memcpy(&out[k, 0], &src[index[k], 0], width)


def scatter_rows(const unsigned char[:, ::1] src, const int64_t[::1] index,
                 unsigned char[:, ::1] out):
    """``out[index[k]] = src[k]`` for every k; ``src`` has ``len(index)`` rows."""
    cdef Py_ssize_t k, n = index.shape[0], width = src.shape[1]
    _check(out.shape[0], width, index, src.shape[0], out.shape[1])
    if width == 0:
        return
    with nogil:
        for k in range(n):
            memcpy(&out[index[k], 0], &src[k, 0], width)


cdef _check(Py_ssize_t rows, Py_ssize_t width, const int64_t[::1] index,
            Py_ssize_t batch_rows, Py_ssize_t other_width):
    cdef Py_ssize_t k
    if other_width != width:
        raise ValueError(f"expected rows of {width} bytes on both sides, got {other_width}")
    if batch_rows != index.shape[0]:
        raise ValueError(f"expected {index.shape[0]} batch rows, got {batch_rows}")
    for k in range(index.shape[0]):
        if index[k] < 0 or index[k] >= rows:
            raise IndexError(f"row index {index[k]} out of range [0, {rows})")
