# C declarations (for cimport) of the module built from csrc/stacking.pyx (see csrc/README.md).

cimport numpy as cnp

cdef int store_step(object reward, object terminated, object truncated, double* rewards,
                    cnp.npy_bool* terminations, cnp.npy_bool* truncations,
                    Py_ssize_t i) except -1
