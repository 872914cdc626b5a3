# C declarations (for cimport) of the module built from csrc/stepping.pyx (see csrc/README.md).

cimport numpy as cnp

from fastvec._kernels.flatten cimport FieldTable

cpdef enum Autoreset:
    NEXT_STEP = 0
    SAME_STEP = 1
    DISABLED = 2


cdef class Stepper:
    cdef readonly list envs
    cdef readonly Py_ssize_t first_index
    cdef readonly Py_ssize_t current  # row in the block of the env (game: first seat) being run
    cdef readonly int mode
    cdef FieldTable table
    cdef unsigned char[:, ::1] rows
    cdef list obs_objects
    cdef double[::1] rewards
    cdef cnp.npy_bool[::1] terminations, truncations, needs_reset

    cdef int _set_buffers(self, list envs, Py_ssize_t n, int mode, FieldTable table,
                          object rows, list obs_objects, double[::1] rewards,
                          cnp.npy_bool[::1] terminations, cnp.npy_bool[::1] truncations,
                          cnp.npy_bool[::1] needs_reset, Py_ssize_t first_index,
                          str counted) except -1


cdef const cnp.npy_bool[::1] check_mask(object mask, Py_ssize_t n)
