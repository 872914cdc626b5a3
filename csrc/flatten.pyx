"""Dict-obs flattening: write one env's observation into its flat record row.

The layout (leaf paths, dtypes, shapes, offsets) is computed once in Python by
``fastvec._layout``; a :class:`FieldTable` holds it in C arrays.  ``write``
walks each leaf's path, checks the value against the leaf and copies its bytes.
A C-contiguous ndarray of the exact dtype and shape (or, for a scalar leaf, a
numpy scalar of its type or a Python int for int64) is copied without touching
Python; anything else goes through a
slower path that converts what can be converted safely and otherwise raises a
``ObservationError`` (a ``ValueError``) naming the env and the leaf (``obs["image"]``).
"""

from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from libc.stdint cimport int64_t
from libc.string cimport memcpy

cimport numpy as cnp

import numpy as np

from fastvec.errors import ObservationError

cnp.import_array()

_PYTHON_SCALARS = (int, float, bool)


cdef class FieldTable:
    """The leaves of a flat record, as C arrays for the write loop."""

    def __init__(self, paths, names, dtypes, shapes, offsets):
        cdef Py_ssize_t field, dim
        self.n_fields = len(paths)
        self.paths = [tuple(p) for p in paths]
        self.names = list(names)
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.scalar_types = [d.type for d in self.dtypes]
        self.shapes = [tuple(int(x) for x in s) for s in shapes]
        max_ndim = max([1] + [len(s) for s in self.shapes])
        self.offsets = np.asarray(offsets, dtype=np.intp)
        self.nbytes = np.asarray(
            [int(np.prod(s, dtype=np.int64)) * d.itemsize
             for s, d in zip(self.shapes, self.dtypes)], dtype=np.intp)
        self.ndims = np.asarray([len(s) for s in self.shapes], dtype=np.intp)
        self.type_nums = np.asarray([d.num for d in self.dtypes], dtype=np.intc)
        self.dims = np.zeros((self.n_fields, max_ndim), dtype=np.intp)
        for field in range(self.n_fields):
            for dim in range(len(self.shapes[field])):
                self.dims[field, dim] = self.shapes[field][dim]

    cdef int write(self, object obs, char* row, Py_ssize_t env_index) except -1:
        cdef Py_ssize_t f
        cdef object value
        for f in range(self.n_fields):
            value = obs
            path = <tuple>self.paths[f]
            if path:
                value = self._lookup(f, obs, env_index)
            if not self._write_fast(f, value, row + self.offsets[f]):
                self._write_slow(f, value, row + self.offsets[f], env_index)
        return 0

    cdef object _lookup(self, Py_ssize_t f, object obs, Py_ssize_t env_index):
        value = obs
        for key in self.paths[f]:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                raise ObservationError(
                    f"env {env_index} returned an observation without {self.names[f]}; "
                    f"expected a value of shape {self.shapes[f]} and dtype {self.dtypes[f]} "
                    f"there, got {_describe(value)}"
                ) from None
        return value

    cdef bint _write_fast(self, Py_ssize_t f, object value, char* dst) noexcept:
        cdef cnp.ndarray arr
        cdef cnp.npy_intp* shape
        cdef Py_ssize_t d
        cdef int overflow = 0
        cdef long long v
        if cnp.PyArray_CheckExact(value):
            arr = <cnp.ndarray>value
            if (cnp.PyArray_TYPE(arr) != self.type_nums[f]
                    or cnp.PyArray_NDIM(arr) != self.ndims[f]
                    or not cnp.PyArray_ISCARRAY_RO(arr)
                    or not cnp.PyArray_ISNOTSWAPPED(arr)):
                return False
            shape = cnp.PyArray_DIMS(arr)
            for d in range(self.ndims[f]):
                if shape[d] != self.dims[f, d]:
                    return False
            memcpy(dst, cnp.PyArray_DATA(arr), self.nbytes[f])
            return True
        if self.ndims[f] != 0:
            return False
        if type(value) is self.scalar_types[f]:  # a numpy scalar of the leaf's own type
            cnp.PyArray_ScalarAsCtype(value, dst)
            return True
        if self.type_nums[f] == cnp.NPY_INT64 and PyLong_CheckExact(value):
            v = PyLong_AsLongLongAndOverflow(value, &overflow)
            if overflow != 0:
                return False
            (<int64_t*>dst)[0] = v
            return True
        return False

    cdef int _write_slow(self, Py_ssize_t f, object value, char* dst,
                         Py_ssize_t env_index) except -1:
        cdef cnp.ndarray arr = _convert(
            value, self.dtypes[f], self.shapes[f], self.names[f], env_index)
        memcpy(dst, cnp.PyArray_DATA(arr), self.nbytes[f])
        return 0


def _convert(value, dtype, shape, name, env_index):
    """``value`` as a C-contiguous array of ``dtype`` and ``shape``, or ObservationError."""
    # Python scalars carry no dtype of their own: any same-kind cast that keeps
    # the value is fine (5 -> uint8).  Arrays must cast safely (no float64 -> float32).
    python_scalar = type(value) in _PYTHON_SCALARS
    try:
        source = np.asarray(value)
    except Exception as exc:
        raise ObservationError(
            f"env {env_index} returned {name} that is not array-like ({exc}); "
            f"expected shape {shape} and dtype {dtype}") from None
    if source.shape != shape:
        raise ObservationError(
            f"env {env_index} returned {name} with shape {source.shape}, "
            f"expected shape {shape} (dtype {dtype})")
    casting = "same_kind" if python_scalar else "safe"
    # A Python int may go into any integer leaf, unsigned too (int64 -> uint8 is not a
    # same-kind cast); one that does not fit raises OverflowError below.
    python_int = python_scalar and source.dtype.kind in "iu" and dtype.kind in "iu"
    if not (python_int or np.can_cast(source.dtype, dtype, casting=casting)):
        raise ObservationError(
            f"env {env_index} returned {name} with dtype {source.dtype}, "
            f"expected dtype {dtype} (shape {shape})")
    try:
        if python_scalar:
            return np.ascontiguousarray(np.asarray(value, dtype=dtype))
        return np.ascontiguousarray(source, dtype=dtype)
    except OverflowError:
        raise ObservationError(
            f"env {env_index} returned {name} = {value!r}, which does not fit dtype {dtype}"
        ) from None


def _describe(value):
    if isinstance(value, dict):
        return f"a dict with keys {list(value)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


def flatten_into(FieldTable table, obs, unsigned char[::1] row, Py_ssize_t env_index=0):
    """Write ``obs`` into ``row`` (one record) by ``table``; ValueError if it does not fit."""
    cdef Py_ssize_t end = 0, f
    for f in range(table.n_fields):
        end = max(end, table.offsets[f] + table.nbytes[f])
    if row.shape[0] < end:
        raise ValueError(f"expected a row of at least {end} bytes, got {row.shape[0]}")
    if end == 0:
        table.write(obs, NULL, env_index)
    else:
        table.write(obs, <char*>&row[0], env_index)
