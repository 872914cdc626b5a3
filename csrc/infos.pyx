"""Batch per-env info dicts into Gymnasium's dict-of-arrays form with ``_key`` masks.

The result equals folding ``gymnasium.vector.VectorEnv._add_info`` over the infos:
same keys and order, dtypes, values and masks.  Common values (Python numbers,
numpy scalars and arrays of the target's own dtype, anything into a 1-D object
array) are written straight into the target's memory; everything else goes
through ``array[env_index] = value``, so numpy's casting and errors are unchanged.
Dicts that are not exact ``dict`` take the same steps through Python's protocols.

:func:`merge_entries` does the same for a list that also holds blocks batched
already (a worker's, from shared memory), copying each block's rows in place.
"""

cimport numpy as cnp
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.number cimport PyIndex_Check
from cpython.object cimport PyObject, Py_TYPE
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport int64_t
from libc.string cimport memmove

import numpy as np

cnp.import_array()


cdef extern from "numpy/arrayobject.h":
    # Both steal a reference to ``descr``: callers incref first.
    object fv_zeros "PyArray_Zeros" (int nd, cnp.npy_intp* dims, cnp.PyArray_Descr* descr,
                                     int fortran)
    object fv_empty "PyArray_Empty" (int nd, cnp.npy_intp* dims, cnp.PyArray_Descr* descr,
                                     int fortran)
    enum:
        NPY_HALF


cdef object _MISSING = object()
cdef object _NUMBER = np.number
cdef object _NP_BOOL = np.bool_
cdef object _OBJECT_DTYPE = np.dtype(object)
cdef object _BOOL_DTYPE = np.dtype(bool)
# ``type(value)`` -> the dtype ``np.zeros(n, dtype=type(value))`` uses, for numpy's own types.
cdef dict _SCALAR_DTYPES = {t: np.dtype(t) for t in set(np.sctypeDict.values())
                            if issubclass(t, np.number)}
_SCALAR_DTYPES.update({int: np.dtype(int), float: np.dtype(float), bool: _BOOL_DTYPE})
# ``key`` -> ``"_" + key`` for str keys; cleared when full, so it stays small.
cdef dict _MASK_NAMES = {}
cdef Py_ssize_t _CACHE_MAX = 4096
# Stores that went through Python (``array[i] = value``, objects): counted for
# ``batch_block_infos``, which reports whether every value was stored as it came.
cdef Py_ssize_t _python_stores = 0
cdef enum:
    _ZEROS_MAX_NDIM = 31


cdef object _zeros(int nd, cnp.npy_intp* dims, object descr):
    """``np.zeros(dims, dtype=descr)``."""
    Py_INCREF(descr)
    return fv_zeros(nd, dims, <cnp.PyArray_Descr*>descr, 0)


cdef object _none_array(Py_ssize_t n):
    """``np.full(n, None, dtype=object)``: numpy fills new object arrays with None."""
    cdef cnp.npy_intp dim = n
    Py_INCREF(_OBJECT_DTYPE)
    return fv_empty(1, &dim, <cnp.PyArray_Descr*>_OBJECT_DTYPE, 0)


cdef object _mask_name(object key):
    """``f"_{key}"``, cached for str keys."""
    if type(key) is not str:
        return "_" + format(key, "")
    name = _MASK_NAMES.get(key)
    if name is None:
        if len(_MASK_NAMES) >= _CACHE_MAX:
            _MASK_NAMES.clear()
        name = "_" + <str>key
        _MASK_NAMES[key] = name
    return name


cdef object _new_array(object value, Py_ssize_t n):
    """A fresh batch array for the first ``value`` seen under a key."""
    cdef cnp.npy_intp dims[_ZEROS_MAX_NDIM + 1]
    cdef cnp.ndarray arr
    cdef int d
    t = type(value)
    descr = _SCALAR_DTYPES.get(t)
    dims[0] = n
    if descr is not None:
        return _zeros(1, dims, descr)
    if issubclass(t, _NUMBER):
        return np.zeros(n, dtype=t)
    if t is cnp.ndarray and cnp.PyArray_NDIM(<cnp.ndarray>value) < _ZEROS_MAX_NDIM:
        arr = <cnp.ndarray>value
        for d in range(cnp.PyArray_NDIM(arr)):
            dims[d + 1] = cnp.PyArray_DIM(arr, d)
        return _zeros(cnp.PyArray_NDIM(arr) + 1, dims, _descr(arr))
    if isinstance(value, cnp.ndarray):
        return np.zeros((n, *value.shape), dtype=value.dtype)
    return _none_array(n)


cdef inline cnp.dtype _descr(cnp.ndarray arr):
    return <cnp.dtype><PyObject*>cnp.PyArray_DESCR(arr)


cdef inline bint _plain_scalar(int tn) noexcept nogil:
    """Bool and numbers: a scalar of the array's own type is just the item's bytes."""
    return tn <= cnp.NPY_CLONGDOUBLE or tn == NPY_HALF


cdef inline bint _plain_bytes(int tn) noexcept nogil:
    """Fixed-size dtypes with no references, which numpy also copies bytewise."""
    return (tn <= cnp.NPY_CLONGDOUBLE or tn == NPY_HALF or tn == cnp.NPY_STRING
            or tn == cnp.NPY_UNICODE or tn == cnp.NPY_DATETIME or tn == cnp.NPY_TIMEDELTA)


cdef bint _store_scalar(cnp.ndarray arr, char* slot, object value) except -1:
    """Write a Python or numpy scalar of the array's own type into ``slot``."""
    cdef int tn = cnp.PyArray_TYPE(arr)
    cdef int overflow = 0
    cdef long long v
    t = type(value)
    if t is float:
        if tn != cnp.NPY_DOUBLE:
            return False
        (<double*>slot)[0] = PyFloat_AS_DOUBLE(value)
    elif t is int:
        if not (cnp.PyTypeNum_ISSIGNED(tn) and cnp.PyArray_ITEMSIZE(arr) == 8):
            return False
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow:
            return False
        (<int64_t*>slot)[0] = v
    elif t is bool:
        if tn != cnp.NPY_BOOL:
            return False
        slot[0] = value is True
    elif Py_TYPE(value) == _descr(arr).typeobj and _plain_scalar(tn):
        cnp.PyArray_ScalarAsCtype(value, slot)
    else:
        return False
    return True


cdef bint _store_row(cnp.ndarray arr, char* row, cnp.ndarray value) except -1:
    """Copy an array of the same dtype and exactly the row's shape into ``row``."""
    cdef int d, nd = cnp.PyArray_NDIM(value)
    if nd != cnp.PyArray_NDIM(arr) - 1 or not _plain_bytes(cnp.PyArray_TYPE(arr)):
        return False
    if not (cnp.PyArray_IS_C_CONTIGUOUS(arr) and cnp.PyArray_IS_C_CONTIGUOUS(value)):
        return False
    for d in range(nd):
        if cnp.PyArray_DIM(value, d) != cnp.PyArray_DIM(arr, d + 1):
            return False
    if not cnp.PyArray_EquivTypes(_descr(arr), _descr(value)):
        return False
    memmove(row, cnp.PyArray_DATA(value), cnp.PyArray_NBYTES(value))
    return True


cdef inline void _store_object(char* slot, object value) noexcept:
    """Numpy stores any object by reference in a 1-D object array."""
    cdef PyObject* old = (<PyObject**>slot)[0]
    Py_INCREF(value)
    (<PyObject**>slot)[0] = <PyObject*>value
    Py_XDECREF(old)


cdef char* _slot(object array, Py_ssize_t i, Py_ssize_t n) noexcept:
    """Address of row ``i`` of a plain, behaved ndarray of length ``n``, else NULL."""
    if type(array) is not cnp.ndarray:
        return NULL
    cdef cnp.ndarray arr = <cnp.ndarray>array
    if cnp.PyArray_NDIM(arr) == 0 or cnp.PyArray_DIM(arr, 0) != n:
        return NULL
    if not cnp.PyArray_ISBEHAVED(arr):
        return NULL
    return cnp.PyArray_BYTES(arr) + i * cnp.PyArray_STRIDE(arr, 0)


cdef int _assign(object array, object index, Py_ssize_t i, Py_ssize_t n,
                 object value) except -1:
    """``array[index] = value``; 1 when done in C and no Python code ran."""
    global _python_stores
    cdef char* slot = _slot(array, i, n)
    cdef cnp.ndarray arr
    if slot != NULL:
        arr = <cnp.ndarray>array
        if cnp.PyArray_NDIM(arr) == 1:
            if cnp.PyArray_TYPE(arr) == cnp.NPY_OBJECT:
                _python_stores += 1
                _store_object(slot, value)  # may run the old value's __del__
                return 0
            if _store_scalar(arr, slot, value):
                return 1
        if type(value) is cnp.ndarray and _store_row(arr, slot, <cnp.ndarray>value):
            return 1
    _python_stores += 1
    array[index] = value
    return 0


cdef int _mark(object mask, object index, Py_ssize_t i, Py_ssize_t n) except -1:
    """``mask[index] = True``; 1 when done in C."""
    cdef char* slot = _slot(mask, i, n)
    if (slot != NULL and cnp.PyArray_NDIM(<cnp.ndarray>mask) == 1
            and cnp.PyArray_TYPE(<cnp.ndarray>mask) == cnp.NPY_BOOL):
        slot[0] = 1
        return 1
    mask[index] = True
    return 0


cdef inline bint _is_final_obs(object key) except -1:
    """``key == "final_obs"``, cheaply for str keys."""
    if type(key) is str:
        return len(<str>key) == 9 and <str>key == "final_obs"
    return key == "final_obs"


cdef object _fold(object infos, object info, object index, Py_ssize_t i, Py_ssize_t n):
    """Add one env's ``info`` to ``infos`` (Gymnasium's ``_add_info``)."""
    cdef cnp.npy_intp dim = n
    if type(infos) is not dict or type(info) is not dict or infos is info:
        return _fold_generic(infos, info, index, i, n)
    cdef dict out = <dict>infos
    cdef bint kept  # out[key] is array and no Python code ran that could change that
    for key, value in (<dict>info).items():
        kept = False
        if _is_final_obs(key):
            array = out.get("final_obs", _MISSING)
            if array is _MISSING:
                array = _none_array(n)
            _assign(array, index, i, n, value)
        elif isinstance(value, dict):
            array = out.get(key, _MISSING)
            array = _fold({} if array is _MISSING else array, value, index, i, n)
        else:
            array = out.get(key, _MISSING)
            if array is _MISSING:
                array = _new_array(value, n)
                _assign(array, index, i, n, value)
            else:
                kept = _assign(array, index, i, n, value) and type(key) is str
        name = _mask_name(key)
        mask = out.get(name, _MISSING)
        if mask is _MISSING:
            mask = _zeros(1, &dim, _BOOL_DTYPE)
            _mark(mask, index, i, n)
        elif _mark(mask, index, i, n) and kept:
            continue
        out[key] = array
        out[name] = mask
    return out


cdef object _fold_generic(object infos, object info, object index, Py_ssize_t i,
                          Py_ssize_t n):
    """The same steps through Python's protocols, for dict subclasses and odd nesting."""
    global _python_stores
    _python_stores += 1
    cdef cnp.npy_intp dim = n
    for key, value in info.items():
        if key == "final_obs":
            array = infos["final_obs"] if "final_obs" in infos else _none_array(n)
            array[index] = value
        elif isinstance(value, dict):
            array = _fold(infos.get(key, {}), value, index, i, n)
        else:
            array = infos[key] if key in infos else _new_array(value, n)
            array[index] = value
        name = "_" + format(key, "")
        mask = infos.get(name, _zeros(1, &dim, _BOOL_DTYPE))
        mask[index] = True
        infos[key] = array
        infos[name] = mask
    return infos


cdef Py_ssize_t _check_index(object env_index, Py_ssize_t num_envs) except -1:
    """Validate an env index and return it in ``[0, num_envs)``."""
    if type(env_index) is not int and (isinstance(env_index, bool)
                                       or type(env_index) is _NP_BOOL
                                       or not PyIndex_Check(env_index)):
        raise TypeError(f"env_index must be an int, got {type(env_index).__name__}")
    cdef Py_ssize_t i = env_index
    if not -num_envs <= i < num_envs:
        raise IndexError(f"env_index {i} is out of range for num_envs={num_envs}")
    return i + num_envs if i < 0 else i


def add_info(vector_infos, info, env_index, Py_ssize_t num_envs):
    """Add ``info`` of env ``env_index`` to ``vector_infos``; mutates and returns it.

    Same result as ``gymnasium.vector.VectorEnv._add_info`` on a vector env
    with ``num_envs`` envs.  ``env_index`` must be an int in
    ``[-num_envs, num_envs)``; numpy integers are accepted.
    """
    if num_envs < 0:
        raise ValueError(f"num_envs must be >= 0, got {num_envs}")
    cdef Py_ssize_t i = _check_index(env_index, num_envs)
    return _fold(vector_infos, info, env_index, i, num_envs)


def batch_infos(list entries not None, Py_ssize_t num_envs):
    """Fold ``(env_index, info)`` pairs, in order, into a new batched info dict.

    Equals applying :func:`add_info` to each pair in turn, starting from ``{}``.
    """
    if num_envs < 0:
        raise ValueError(f"num_envs must be >= 0, got {num_envs}")
    cdef dict out = {}
    cdef Py_ssize_t i
    for entry in entries:
        env_index, info = entry
        i = _check_index(env_index, num_envs)
        _fold(out, info, env_index, i, num_envs)
    return out


def batch_block_infos(list entries not None, Py_ssize_t num_envs, Py_ssize_t first=0):
    """:func:`batch_infos` of a block whose envs' indices start at ``first`` (the batch
    has ``num_envs`` rows from there), and whether every value was stored exactly as
    it came.

    The flag is True when each value had its array's own type (a Python float in a
    float64 array, an array of the row's dtype and shape...): no numpy cast ran and
    no object array was involved, so the arrays hold the values losslessly.
    """
    global _python_stores
    if num_envs < 0:
        raise ValueError(f"num_envs must be >= 0, got {num_envs}")
    _python_stores = 0
    cdef dict out = {}
    cdef Py_ssize_t i
    for entry in entries:
        env_index, info = entry
        i = _check_index(env_index - first, num_envs)
        _fold(out, info, i, i, num_envs)
    return out, _python_stores == 0


class InfosDisagree(Exception):
    """A block's leaf has another dtype or shape, or nesting, than the batch has for it:
    merging the blocks would not equal folding every env's info in order."""


cdef object _leaf_target(dict node, object key, cnp.ndarray view, Py_ssize_t num_envs):
    """The batch array for a block's leaf ``key`` of ``node``, made on first use."""
    cdef cnp.npy_intp dims[_ZEROS_MAX_NDIM + 1]
    cdef int d, nd = cnp.PyArray_NDIM(view)
    known = node.get(key, _MISSING)
    if known is _MISSING:
        if nd > _ZEROS_MAX_NDIM:
            raise InfosDisagree(key)
        dims[0] = num_envs
        for d in range(1, nd):
            dims[d] = cnp.PyArray_DIM(view, d)
        known = _zeros(nd, dims, _descr(view))
        node[key] = known
        return known
    if type(known) is not cnp.ndarray or cnp.PyArray_NDIM(<cnp.ndarray>known) != nd \
            or not cnp.PyArray_EquivTypes(_descr(<cnp.ndarray>known), _descr(view)) \
            or cnp.PyArray_DIM(<cnp.ndarray>known, 0) != num_envs:
        raise InfosDisagree(key)
    for d in range(1, nd):
        if cnp.PyArray_DIM(<cnp.ndarray>known, d) != cnp.PyArray_DIM(view, d):
            raise InfosDisagree(key)
    return known


cdef int _write_rows(cnp.ndarray target, cnp.ndarray view, Py_ssize_t start,
                     Py_ssize_t num_envs) except -1:
    """``target[start:start + len(view)] = view``: one ``memmove`` for plain contiguous bytes."""
    cdef Py_ssize_t size = cnp.PyArray_DIM(view, 0)
    if start < 0 or start + size > num_envs:
        raise IndexError(f"block rows {start}..{start + size} out of [0, {num_envs})")
    if (cnp.PyArray_IS_C_CONTIGUOUS(target) and cnp.PyArray_IS_C_CONTIGUOUS(view)
            and _plain_bytes(cnp.PyArray_TYPE(target))):
        memmove(cnp.PyArray_BYTES(target) + start * cnp.PyArray_STRIDE(target, 0),
                cnp.PyArray_DATA(view), cnp.PyArray_NBYTES(view))
    else:
        target[start:start + size] = view
    return 0


cdef int _merge_block(dict out, tuple paths, list views, Py_ssize_t start,
                      Py_ssize_t num_envs) except -1:
    """Copy a batched block's leaves (rows ``start:start + size``) into ``out``."""
    cdef Py_ssize_t j, k
    cdef cnp.ndarray view
    cdef dict node
    for j in range(len(paths)):
        path = <tuple>paths[j]
        view = <cnp.ndarray>views[j]
        node = out
        for k in range(len(path) - 1):
            sub = node.get(path[k], _MISSING)
            if sub is _MISSING:
                sub = {}
                node[path[k]] = sub
            elif type(sub) is not dict:
                raise InfosDisagree(path[k])
            node = <dict>sub
        _write_rows(<cnp.ndarray>_leaf_target(node, path[len(path) - 1], view, num_envs),
                    view, start, num_envs)
    return 0


cdef int _merge_dict(dict out, dict batched, Py_ssize_t start, Py_ssize_t num_envs) except -1:
    """Copy a batched info dict (rows ``start:start + size``) into ``out``, key by key."""
    cdef cnp.ndarray view
    for key, value in batched.items():
        if type(value) is dict:
            sub = out.get(key, _MISSING)
            if sub is _MISSING:
                sub = {}
                out[key] = sub
            elif type(sub) is not dict:
                raise InfosDisagree(key)
            _merge_dict(<dict>sub, <dict>value, start, num_envs)
            continue
        if type(value) is not cnp.ndarray:
            raise InfosDisagree(key)
        view = <cnp.ndarray>value
        _write_rows(<cnp.ndarray>_leaf_target(out, key, view, num_envs), view, start, num_envs)
    return 0


def merge_entries(list entries not None, Py_ssize_t num_envs, object block_type):
    """Fold ``(row, info)`` entries in order, where an entry whose info is a
    ``block_type`` is a block batched already, merged at rows ``row:row + size``:
    its ``batched`` dict, or when that is None its leaves (``paths``: each leaf's key
    path; ``views``: its arrays, one row per env of the block).

    Equals folding every env's info in row order whenever each block was batched
    exactly (``batch_block_infos``) and agrees with the batch on every leaf's dtype,
    shape and nesting; raises :class:`InfosDisagree` when one does not (the caller
    then batches the raw infos instead).
    """
    if num_envs < 0:
        raise ValueError(f"num_envs must be >= 0, got {num_envs}")
    cdef dict out = {}
    cdef Py_ssize_t i
    for entry in entries:
        row, info = entry
        i = _check_index(row, num_envs)
        if type(info) is block_type:
            batched = info.batched
            if batched is None:
                _merge_block(out, info.paths, info.views, i, num_envs)
            else:
                _merge_dict(out, <dict?>batched, i, num_envs)
        else:
            _fold(out, info, row, i, num_envs)
    return out


cdef int _fill(dict node, list prefix, tuple paths, list views, Py_ssize_t* j) except -1:
    """Copy ``node``'s leaves into ``views`` in order; 0 as soon as one does not match."""
    cdef cnp.ndarray value, view
    cdef Py_ssize_t depth = len(prefix), d
    for key, item in node.items():
        if type(item) is dict:
            prefix.append(key)
            if not _fill(<dict>item, prefix, paths, views, j):
                return 0
            del prefix[depth]
            continue
        if j[0] >= len(paths) or type(item) is not cnp.ndarray:
            return 0
        path = <tuple>paths[j[0]]
        if len(path) != depth + 1 or path[depth] != key:
            return 0
        for d in range(depth):
            if path[d] != prefix[d]:
                return 0
        value = <cnp.ndarray>item
        view = <cnp.ndarray>views[j[0]]
        if not (cnp.PyArray_IS_C_CONTIGUOUS(value) and cnp.PyArray_IS_C_CONTIGUOUS(view)
                and cnp.PyArray_NBYTES(value) == cnp.PyArray_NBYTES(view)
                and cnp.PyArray_NDIM(value) == cnp.PyArray_NDIM(view)
                and cnp.PyArray_EquivTypes(_descr(value), _descr(view))
                and _plain_bytes(cnp.PyArray_TYPE(value))):
            return 0
        for d in range(cnp.PyArray_NDIM(value)):
            if cnp.PyArray_DIM(value, d) != cnp.PyArray_DIM(view, d):
                return 0
        memmove(cnp.PyArray_DATA(view), cnp.PyArray_DATA(value), cnp.PyArray_NBYTES(value))
        j[0] += 1
    return 1


def write_block(dict batched not None, tuple paths not None, list views not None):
    """Copy a batched info dict into ``views`` when its leaves are exactly ``paths``, in
    order, with the views' dtypes and shapes; whether it did (False: nothing to read)."""
    cdef Py_ssize_t j = 0
    if len(paths) != len(views):
        raise ValueError(f"expected one view per path, got {len(views)} for {len(paths)}")
    return bool(_fill(batched, [], paths, views, &j)) and j == len(paths)
