"""Dict-obs flattening: write one env's observation into its flat record row.

The layout (leaf paths, dtypes, shapes, offsets) is computed once in Python by
``fastvec.spaces.layout``; a :class:`FieldTable` holds it in C arrays.  ``write``
walks each leaf's path, checks the value against the leaf and copies its bytes.
A C-contiguous ndarray of the exact dtype and shape (or, for a scalar leaf, a
numpy scalar of its type or a Python int for int64) is copied without touching
Python.  Anything else goes through a slower path that accepts exactly what
Gymnasium's vector envs accept and writes the same bytes: their
``concatenate`` is ``np.stack(items, out=batch)``, so each value is taken as
``np.asanyarray(value)`` (lists, tuples, Python and numpy scalars), must have
the leaf's exact shape, and is cast with numpy's default ``casting="same_kind"``
(float64 -> float32, int64 -> int32, bool -> int; not float -> int, nor signed
-> unsigned).  What does not fit raises ``ObservationError`` (a ``ValueError``)
naming the env and the leaf (``obs["image"]``).  A cast is noted once per
process, leaf and dtype on the ``"fastvec"`` logger (a WARNING; a worker's notes
reach the trainer's logger, see ``fastvec/pool/notes.py``).
"""

from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int64_t
from libc.string cimport memcpy

cimport numpy as cnp

import logging

import numpy as np

from fastvec.errors import ObservationError

cnp.import_array()


cdef extern from "numpy/arrayobject.h":
    # Not in Cython's numpy declarations (NewFromDescr steals a reference to descr).
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.dtype descr, int nd,
                                cnp.npy_intp* dims, cnp.npy_intp* strides, void* data,
                                int flags, PyObject* obj)
    bint PyArray_CanCastTypeTo(cnp.dtype from_, cnp.dtype to, cnp.NPY_CASTING casting)


_log = logging.getLogger("fastvec")
# (leaf name, source type number, leaf type number) already noted in this process.
cdef set _noted_casts = set()


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
        # Gymnasium's concatenate for a leaf is np.stack(items, out=batch): each item
        # becomes np.asanyarray(item), must have the leaf's exact shape, and is
        # assigned with casting="same_kind".  Do the same, straight into the row.
        cdef cnp.ndarray source, target
        cdef cnp.dtype want = <cnp.dtype>self.dtypes[f]
        cdef cnp.dtype got
        cdef cnp.npy_intp* shape
        cdef int d, ndim = <int>self.ndims[f]
        try:
            source = <cnp.ndarray>cnp.PyArray_FROM_O(value)  # = np.asanyarray(value)
        except Exception as exc:
            raise ObservationError(
                f"env {env_index} returned {self.names[f]} that is not array-like ({exc}); "
                f"expected shape {self.shapes[f]} and dtype {want}") from None
        shape = cnp.PyArray_DIMS(source)
        if cnp.PyArray_NDIM(source) != ndim:
            _shape_error(self, f, value, source, env_index)
        for d in range(ndim):
            if shape[d] != self.dims[f, d]:
                _shape_error(self, f, value, source, env_index)
        got = source.descr
        if not PyArray_CanCastTypeTo(got, want, cnp.NPY_SAME_KIND_CASTING):
            raise ObservationError(
                f"env {env_index} returned {self.names[f]} with dtype {got}"
                f"{_source_note(value)}, expected dtype {want} (shape {self.shapes[f]}); "
                f"observations are cast as Gymnasium's vector envs cast them, within a "
                f"kind only (numpy casting='same_kind': float64 -> float32 and "
                f"int64 -> int32 are fine, {got} -> {want} is not)")
        if not cnp.PyArray_EquivTypes(got, want):
            _note_cast(self.names[f], got, want, value, env_index)
        if self.nbytes[f] == 0:
            return 0
        Py_INCREF(want)  # stolen by PyArray_NewFromDescr
        target = <cnp.ndarray>PyArray_NewFromDescr(
            <PyTypeObject*>cnp.ndarray, want, ndim, <cnp.npy_intp*>&self.dims[f, 0], NULL,
            dst, cnp.NPY_ARRAY_CARRAY, NULL)
        cnp.PyArray_UpdateFlags(target, cnp.NPY_ARRAY_UPDATE_ALL)  # the row may be unaligned
        cnp.PyArray_CopyInto(target, source)  # numpy's cast, as in np.stack's assignment
        return 0


cdef int _shape_error(FieldTable table, Py_ssize_t f, object value, cnp.ndarray source,
                      Py_ssize_t env_index) except -1:
    raise ObservationError(
        f"env {env_index} returned {table.names[f]} with shape {(<object>source).shape}"
        f"{_source_note(value)}, expected shape {table.shapes[f]} (dtype {table.dtypes[f]})")


cdef object _source_note(object value):
    """What the env returned, when it was not an ndarray: `` (from the int 256)``."""
    if isinstance(value, np.ndarray):
        return ""
    if isinstance(value, (int, float, bool, complex, np.generic)):
        text = str(value)
        if len(text) > 40:
            text = text[:37] + "..."
        return f" (from the {type(value).__name__} {text})"
    return f" (from a {type(value).__name__})"


cdef void _note_cast(object name, cnp.dtype got, cnp.dtype want, object value,
                     Py_ssize_t env_index) noexcept:
    """Log once per process, leaf and dtype that an env's observation is being cast."""
    key = (name, got.type_num, want.type_num)  # ints: cheap to hash on every cast
    if key in _noted_casts:
        return
    try:
        _noted_casts.add(key)
        _log.warning(
            "env %d returns %s as %s%s where its space says %s; fastvec casts it every "
            "step, as Gymnasium's vector envs do (returning %s skips the conversion; "
            "noted once per leaf and dtype)", env_index, name, got, _source_note(value),
            want, want, extra={"note_key": key})
    except Exception:
        pass  # a note must never fail a step


def first_note(key):
    """True the first time ``key`` is seen in this process (a note's identity: a cast's
    is its leaf and dtypes), so a note logged here and relayed from a worker shows once."""
    if key in _noted_casts:
        return False
    _noted_casts.add(key)
    return True


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
