"""The step loop over a block of envs: step or auto-reset each, write results in place.

An :class:`EnvStepper` holds a block of envs (all envs in ``SyncVecEnv``; a
worker's envs in ``SubprocVecEnv``) and the buffers it writes: one record row
per env (or, for spaces without a flat layout, a list of observation objects),
rewards, terminations, truncations and the pending-reset flags.  ``step`` calls
each env's ``step`` (or ``reset`` when a ``NEXT_STEP`` reset is pending), writes
the results in place and returns the non-empty infos as ``(env_index, info)``
entries for ``fastvec._kernels.infos.batch_infos``.  Semantics are Gymnasium's
``SyncVectorEnv`` for each autoreset mode.  Its base :class:`Stepper` (declared in
``fastvec/_kernels/stepping.pxd``) holds what it shares with ``games.GameStepper``:
the envs, the buffers, their checks and ``set_rows``.
"""

cimport numpy as cnp
from libc.string cimport memcpy, memmove
from collections.abc import Mapping

import numpy as np

from fastvec._kernels.flatten cimport FieldTable
from fastvec._kernels.stacking cimport store_step

cnp.import_array()

OLD_API_HINT = (
    "update the env to Gymnasium's API, or wrap it: shimmy's GymV21CompatibilityV0 "
    "(gym < 0.26 envs; pip install 'shimmy[gym-v21]') or GymV26CompatibilityV0, e.g. "
    "gymnasium.make('GymV21Environment-v0', env=old_env)")


cdef tuple step_result(object result, Py_ssize_t index):
    """A ``step()`` result that is not a plain 5-tuple: a 5-sequence as a tuple, else
    the error saying what Gymnasium's API expects."""
    if isinstance(result, (tuple, list)) and len(result) == 5:
        return tuple(result)
    raise old_api_step(result, index)


def old_api_step(object result, Py_ssize_t index):
    """The error for a ``step()`` result that is not Gymnasium's 5-tuple."""
    if isinstance(result, tuple) and len(result) == 4:
        got = "4 values (obs, reward, done, info): the old Gym API"
    else:
        got = (f"{len(result)} values" if isinstance(result, tuple)
               else f"a {type(result).__name__}")
    return ValueError(f"env {index}'s step() returned {got}; Gymnasium's API returns 5: "
                      f"(obs, reward, terminated, truncated, info); {OLD_API_HINT}")


cdef object checked_reset(object result, Py_ssize_t index):
    """``(obs, info)`` of a ``reset()`` result; ValueError if it is not Gymnasium's."""
    if type(result) is tuple and len(<tuple>result) == 2 and isinstance((<tuple>result)[1], dict):
        return result
    if isinstance(result, (tuple, list)) and len(result) == 2 and isinstance(result[1], Mapping):
        return tuple(result)
    raise ValueError(
        f"env {index}'s reset() returned the observation alone (the old Gym API, before "
        f"0.26), or something else than (obs, info) (a {type(result).__name__}"
        + (f" of {len(result)}" if isinstance(result, tuple) else "")
        + f"); Gymnasium's reset() returns (obs, info) with info a dict; {OLD_API_HINT}")


cdef const cnp.npy_bool[::1] check_mask(object mask, Py_ssize_t n):
    """``mask`` (None, or a bool array of ``n`` rows) as a memoryview, or None."""
    if mask is None:
        return None
    if len(mask) != n:
        raise ValueError(f"expected a step mask of {n} rows, got {len(mask)}")
    return np.ascontiguousarray(mask, dtype=np.bool_)


cdef class Stepper:
    """What the step loops over a block share: its envs (or games), the buffers their
    rows go into, and the row being run.  ``EnvStepper`` and ``games.GameStepper``
    subclass it.
    """

    cdef int _set_buffers(self, list envs, Py_ssize_t n, int mode, FieldTable table,
                          object rows, list obs_objects, double[::1] rewards,
                          cnp.npy_bool[::1] terminations, cnp.npy_bool[::1] truncations,
                          cnp.npy_bool[::1] needs_reset, Py_ssize_t first_index,
                          str counted) except -1:
        """Check and keep the buffers of a block of ``n`` rows (``counted``: how the rows
        are counted, for the length error)."""
        if mode not in (NEXT_STEP, SAME_STEP, DISABLED):
            raise ValueError(f"expected an Autoreset mode, got {mode}")
        if table is None:
            if obs_objects is None or len(obs_objects) != n:
                raise ValueError(f"expected a list of {n} observation slots")
        else:
            if rows is None or rows.shape[0] != n or rows.shape[1] == 0:
                raise ValueError(f"expected {n} non-empty record rows")
            self.rows = rows
        if not (rewards.shape[0] == terminations.shape[0] == truncations.shape[0]
                == needs_reset.shape[0] == n):
            raise ValueError(f"expected reward and flag arrays of length {n}{counted}")
        self.envs = envs
        self.mode = mode
        self.table = table
        self.obs_objects = obs_objects
        self.rewards = rewards
        self.terminations = terminations
        self.truncations = truncations
        self.needs_reset = needs_reset
        self.first_index = first_index
        return 0

    def set_rows(self, unsigned char[:, ::1] rows not None):
        """Write observations into ``rows`` from now on (same shape as before)."""
        if self.table is None or rows.shape[0] != self.rows.shape[0] \
                or rows.shape[1] != self.rows.shape[1]:
            raise ValueError(f"expected rows of shape ({self.rows.shape[0]}, "
                             f"{self.rows.shape[1]}) for a block with a record layout")
        self.rows = rows


cdef class EnvStepper(Stepper):
    """A block of envs and the batch buffers their step results go into."""

    cdef object stack  # a fastvec.spaces.frame_stack.StackPlan, or None
    cdef Py_ssize_t stack_size
    cdef Py_ssize_t[::1] stack_offsets, stack_nbytes
    cdef bint pad_with_reset
    cdef const unsigned char[::1] padding  # older slots' padding, unless pad_with_reset

    def __init__(self, list envs, int mode, FieldTable table, rows, list obs_objects,
                 double[::1] rewards, cnp.npy_bool[::1] terminations,
                 cnp.npy_bool[::1] truncations, cnp.npy_bool[::1] needs_reset,
                 Py_ssize_t first_index=0):
        self._set_buffers(envs, len(envs), mode, table, rows, obs_objects, rewards,
                          terminations, truncations, needs_reset, first_index, "")

    def stack_frames(self, plan):
        """Keep each env's last frames in its record, as ``plan`` (a ``StackPlan``) says:
        a step moves every leaf's frames back by one and writes the new observation into
        the newest slot; a reset writes it and pads the older slots.
        """
        if self.table is None or self.rows.shape[1] != plan.layout.record_size:
            raise ValueError(f"expected a block with records of {plan.layout.record_size} "
                             f"bytes to stack frames in")
        self.table = plan.frame_table
        self.stack_size = plan.stack_size
        self.stack_offsets = plan.offsets
        self.stack_nbytes = plan.nbytes
        self.pad_with_reset = plan.padding is None
        if not self.pad_with_reset:
            self.padding = plan.padding
        self.stack = plan

    cdef inline int _store_obs(self, Py_ssize_t i, object obs, bint reset) except -1:
        cdef char* row
        cdef char* leaf
        cdef Py_ssize_t f, j, nbytes, older
        if self.table is None:
            self.obs_objects[i] = obs
            return 0
        row = <char*>&self.rows[i, 0]
        if self.stack is None:
            self.table.write(obs, row, self.first_index + i)
            return 0
        older = self.stack_size - 1
        if not reset:
            for f in range(self.stack_offsets.shape[0]):
                leaf, nbytes = row + self.stack_offsets[f], self.stack_nbytes[f]
                memmove(leaf, leaf + nbytes, older * nbytes)
        self.table.write(obs, row, self.first_index + i)
        if reset:
            for f in range(self.stack_offsets.shape[0]):
                leaf, nbytes = row + self.stack_offsets[f], self.stack_nbytes[f]
                for j in range(older):
                    if self.pad_with_reset:
                        memcpy(leaf + j * nbytes, leaf + older * nbytes, nbytes)
                    else:
                        memcpy(leaf + j * nbytes,
                               <const char*>&self.padding[self.stack_offsets[f] + j * nbytes],
                               nbytes)
        return 0

    def step(self, list actions, object mask=None):
        """Step every env once with ``actions[i]``; return the non-empty info entries.

        ``needs_reset[i]`` is read (``NEXT_STEP``: reset instead of step) and then
        set to whether env ``i``'s episode ended on this step.  With ``mask`` (bools,
        one per env) only the envs where it is true are stepped; the others, and
        their rows, are left as they are (their actions are not read).
        """
        cdef Py_ssize_t i, n = len(self.envs)
        cdef list entries = []
        cdef object env, obs, reward, terminated, truncated, info, result
        cdef bint reset
        cdef const cnp.npy_bool[::1] some = check_mask(mask, n)
        if len(actions) != n:
            raise ValueError(f"expected {n} actions, got {len(actions)}")
        for i in range(n):
            if some is not None and not some[i]:
                continue
            self.current = i
            env = self.envs[i]
            reset = self.mode == NEXT_STEP and self.needs_reset[i]
            if reset:
                obs, info = checked_reset(env.reset(), self.first_index + i)
                self.rewards[i] = 0.0
                self.terminations[i] = False
                self.truncations[i] = False
            else:
                result = env.step(actions[i])
                if type(result) is not tuple or len(<tuple>result) != 5:
                    result = step_result(result, self.first_index + i)
                obs, reward, terminated, truncated, info = <tuple>result
                store_step(reward, terminated, truncated, &self.rewards[0],
                           &self.terminations[0], &self.truncations[0], i)
                if self.mode == SAME_STEP and (self.terminations[i] or self.truncations[i]):
                    if self.stack is not None:  # the final frame joins the stack first
                        self._store_obs(i, obs, False)
                        obs = self.stack.observation(np.asarray(self.rows[i]))
                    entries.append((self.first_index + i,
                                    {"final_obs": obs, "final_info": info}))
                    obs, info = checked_reset(env.reset(), self.first_index + i)
                    reset = True
            self._store_obs(i, obs, reset)
            if info:
                entries.append((self.first_index + i, info))
            self.needs_reset[i] = self.terminations[i] or self.truncations[i]
        return entries

    def reset(self, list seeds, object options, object mask=None):
        """Reset the envs (those where ``mask`` is true, if given) with per-env seeds.

        Writes observations like :meth:`step`, clears the flags of the envs it
        resets, and returns the non-empty info entries.
        """
        cdef Py_ssize_t i, n = len(self.envs)
        cdef list entries = []
        cdef object obs, info
        if len(seeds) != n or (mask is not None and len(mask) != n):
            raise ValueError(f"expected {n} seeds and mask entries")
        for i in range(n):
            if mask is not None and not mask[i]:
                continue
            self.current = i
            obs, info = checked_reset(self.envs[i].reset(seed=seeds[i], options=options),
                                      self.first_index + i)
            self._store_obs(i, obs, True)
            self.terminations[i] = False
            self.truncations[i] = False
            self.needs_reset[i] = False
            if info:
                entries.append((self.first_index + i, info))
        return entries
