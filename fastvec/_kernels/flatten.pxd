# C declarations (for cimport) of the module built from csrc/flatten.pyx (see csrc/README.md).

cdef class FieldTable:
    cdef readonly Py_ssize_t n_fields
    cdef readonly list paths, names, dtypes, shapes
    cdef list scalar_types
    cdef Py_ssize_t[::1] offsets, nbytes, ndims
    cdef int[::1] type_nums
    cdef Py_ssize_t[:, ::1] dims

    cdef int write(self, object obs, char* row, Py_ssize_t env_index) except -1
    cdef object _lookup(self, Py_ssize_t f, object obs, Py_ssize_t env_index)
    cdef bint _write_fast(self, Py_ssize_t f, object value, char* dst) noexcept
    cdef int _write_slow(self, Py_ssize_t f, object value, char* dst,
                         Py_ssize_t env_index) except -1
