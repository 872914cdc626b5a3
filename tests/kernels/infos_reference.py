"""Gymnasium's own info batching (``VectorEnv._add_info``) as the reference for the
info kernels, and the checks that compare the kernels with it."""

import warnings

import gymnasium
import numpy as np

from fastvec._kernels import infos as kernel

__all__ = ["assert_same", "check_batch", "check_steps", "outcome", "ref_add_info",
           "ref_batch_infos"]


class _Reference:
    """Just enough of a VectorEnv for Gymnasium's unbound ``_add_info`` (it recurses via self)."""

    _add_info = gymnasium.vector.VectorEnv._add_info

    def __init__(self, num_envs):
        self.num_envs = num_envs


def ref_add_info(vector_infos, info, env_index, num_envs):
    return _Reference(num_envs)._add_info(vector_infos, info, env_index)


def ref_batch_infos(entries, num_envs):
    out = {}
    for env_index, info in entries:
        ref_add_info(out, info, env_index, num_envs)
    return out


def outcome(fn, *args):
    """(result or None, (exception type, message) or None, warnings as (category, message))."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, error = fn(*args), None
        except Exception as exc:  # noqa: BLE001 - any exception must match the reference's
            result, error = None, (type(exc), str(exc))
    return result, error, [(w.category, str(w.message)) for w in caught]


def assert_same(ours, ref, path="infos"):
    """Same types, key order, dtypes, shapes and bytes; object elements compared recursively."""
    if ours is ref:
        return
    assert type(ours) is type(ref), f"{path}: {type(ours)} vs {type(ref)}"
    if isinstance(ref, dict):
        assert [(type(k), k) for k in ours] == [(type(k), k) for k in ref], f"{path}: keys"
        for key in ref:
            assert_same(ours[key], ref[key], f"{path}[{key!r}]")
    elif isinstance(ref, np.ndarray):
        assert (ours.dtype, ours.dtype.num) == (ref.dtype, ref.dtype.num), f"{path}: dtype"
        assert ours.shape == ref.shape, f"{path}: shape"
        assert ours.flags.c_contiguous == ref.flags.c_contiguous, f"{path}: layout"
        if ref.dtype.hasobject:
            for idx in np.ndindex(ref.shape):
                assert_same(ours[idx], ref[idx], f"{path}{list(idx)}")
        elif ref.dtype.type in (np.longdouble, np.clongdouble):  # padding bytes are garbage
            assert np.array_equal(ours, ref, equal_nan=True), f"{path}: {ours!r} vs {ref!r}"
        else:
            assert ours.tobytes() == ref.tobytes(), f"{path}: values {ours!r} vs {ref!r}"
    elif isinstance(ref, (float, complex, np.generic)):
        assert np.asarray(ours).tobytes() == np.asarray(ref).tobytes(), f"{path}: {ours!r}"
    else:
        assert ours == ref, f"{path}: {ours!r} vs {ref!r}"


def check_batch(entries, num_envs):
    ours = outcome(kernel.batch_infos, entries, num_envs)
    ref = outcome(ref_batch_infos, entries, num_envs)
    assert ours[1:] == ref[1:]
    if ref[1] is None:
        assert_same(ours[0], ref[0])
    return ours[0]


def check_steps(entries, num_envs, ours_state=None, ref_state=None):
    """``add_info`` one entry at a time; states must agree after each, errors included."""
    ours_state = {} if ours_state is None else ours_state
    ref_state = {} if ref_state is None else ref_state
    for env_index, info in entries:
        ours = outcome(kernel.add_info, ours_state, info, env_index, num_envs)
        ref = outcome(ref_add_info, ref_state, info, env_index, num_envs)
        assert ours[1:] == ref[1:]
        assert_same(ours_state, ref_state)
        if ref[1] is not None:
            return
        assert ours[0] is ours_state
