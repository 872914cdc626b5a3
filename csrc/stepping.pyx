"""The step loop over a block of envs: step or auto-reset each, write results in place.

One call steps every env of a block (all envs in ``SyncVecEnv``; a worker's
envs in ``SubprocVecEnv``).  Per env it calls ``step`` (or ``reset`` when a
``NEXT_STEP`` reset is pending), writes the observation into the env's record
row (or, for spaces without a flat layout, into ``obs_objects``), stores reward
and flags, and collects non-empty infos as ``(env_index, info)`` entries for
``fastvec._kernels.infos.batch_infos``.  Semantics are Gymnasium's
``SyncVectorEnv`` for each autoreset mode.
"""

cimport numpy as cnp

from fastvec._kernels.flatten cimport FieldTable
from fastvec._kernels.stacking cimport store_step

cnp.import_array()


cpdef enum Autoreset:
    NEXT_STEP = 0
    SAME_STEP = 1
    DISABLED = 2


cdef inline int _store_obs(FieldTable table, unsigned char[:, ::1] rows, list obs_objects,
                           Py_ssize_t i, object obs, Py_ssize_t env_index) except -1:
    if table is None:
        obs_objects[i] = obs
    elif rows.shape[1] > 0:
        table.write(obs, <char*>&rows[i, 0], env_index)
    else:
        table.write(obs, NULL, env_index)
    return 0


def step_envs(list envs, list actions, int mode, FieldTable table,
              unsigned char[:, ::1] rows, list obs_objects,
              double[::1] rewards, cnp.npy_bool[::1] terminations,
              cnp.npy_bool[::1] truncations, cnp.npy_bool[::1] needs_reset,
              Py_ssize_t first_index=0):
    """Step every env once; return the non-empty infos as ``(env_index, info)`` entries.

    ``needs_reset[i]`` is read (``NEXT_STEP``: reset instead of step) and then
    set to whether env ``i``'s episode ended on this step.  Env indices in errors
    and entries are offset by ``first_index``.
    """
    cdef Py_ssize_t i, n = len(envs)
    cdef list entries = []
    cdef object env, obs, reward, terminated, truncated, info
    _check_lengths(n, actions, table, rows, obs_objects, rewards, terminations,
                   truncations, needs_reset)
    for i in range(n):
        env = envs[i]
        if mode == NEXT_STEP and needs_reset[i]:
            obs, info = env.reset()
            rewards[i] = 0.0
            terminations[i] = False
            truncations[i] = False
        else:
            obs, reward, terminated, truncated, info = env.step(actions[i])
            store_step(reward, terminated, truncated, &rewards[0], &terminations[0],
                       &truncations[0], i)
            if mode == SAME_STEP and (terminations[i] or truncations[i]):
                entries.append((first_index + i, {"final_obs": obs, "final_info": info}))
                obs, info = env.reset()
        _store_obs(table, rows, obs_objects, i, obs, first_index + i)
        if info:
            entries.append((first_index + i, info))
        needs_reset[i] = terminations[i] or truncations[i]
    return entries


def reset_envs(list envs, list seeds, object options, FieldTable table,
               unsigned char[:, ::1] rows, list obs_objects, object mask=None,
               Py_ssize_t first_index=0):
    """Reset the envs (those where ``mask`` is true, if given) with per-env seeds.

    Writes observations like :func:`step_envs` and returns the non-empty infos
    as ``(env_index, info)`` entries.
    """
    cdef Py_ssize_t i, n = len(envs)
    cdef list entries = []
    cdef object obs, info
    if len(seeds) != n or (mask is not None and len(mask) != n):
        raise ValueError(f"expected {n} seeds and mask entries, got {len(seeds)}")
    _check_lengths(n, None, table, rows, obs_objects, None, None, None, None)
    for i in range(n):
        if mask is not None and not mask[i]:
            continue
        obs, info = envs[i].reset(seed=seeds[i], options=options)
        _store_obs(table, rows, obs_objects, i, obs, first_index + i)
        if info:
            entries.append((first_index + i, info))
    return entries


cdef _check_lengths(Py_ssize_t n, list actions, FieldTable table, rows, list obs_objects,
                    rewards, terminations, truncations, needs_reset):
    if actions is not None and len(actions) != n:
        raise ValueError(f"expected {n} actions, got {len(actions)}")
    if table is None:
        if obs_objects is None or len(obs_objects) != n:
            raise ValueError(f"expected a list of {n} observation slots")
    elif rows is None or rows.shape[0] != n:
        raise ValueError(f"expected {n} record rows")
    for arr in (rewards, terminations, truncations, needs_reset):
        if arr is not None and arr.shape[0] != n:
            raise ValueError(f"expected per-env arrays of length {n}, got {arr.shape[0]}")
