"""Blocks stepped in this process: a :class:`LocalBlock`, and :class:`LocalPool` of one.

A block's envs (or games) are stepped by a compiled stepper
(:func:`make_stepper`: ``EnvStepper``, or ``GameStepper`` for games) that writes
observations, rewards and flags into the block's rows of the batch buffers.
The same stepper runs in a worker process (``fastvec.pool.process.worker``), in
``SyncVecEnv``'s one block, and in the trainer's own block of a process pool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fastvec._kernels.games import GameStepper
from fastvec._kernels.infos import batch_infos
from fastvec._kernels.stepping import EnvStepper
from fastvec.pool.base import Entries, Pool, block_mask
from fastvec.pool.block_map import BlockMap
from fastvec.pool.buffers import ENV_RESULTS, Buffers, rows_of
from fastvec.pool.games import adapt, is_game, unit_spaces, zero_observation
from fastvec.spaces.actions import ActionChecker
from fastvec.spaces.frame_stack import FrameStack, stack_plan

__all__ = ["LocalBlock", "LocalPool", "make_stepper"]


def make_stepper(envs: list, start: int, buffers: Buffers, mode: int,
                 frame_stack: FrameStack | None = None
                 ) -> tuple[EnvStepper | GameStepper, list | None]:
    """The compiled stepper of ``envs`` (games: a ``GameStepper``), writing from row ``start``,
    keeping ``frame_stack`` frames in each record if given.

    Also returns the block's observation-object list (None with records).
    """
    stop = start + rows_of(envs)
    table, rows, objects = buffers.obs.target(start, stop)
    if envs and is_game(envs[0]):
        obs_space, _, agents = unit_spaces(envs[0])
        stepper: EnvStepper | GameStepper = GameStepper(
            envs, [adapt(game) for game in envs], agents, mode, table, rows, objects,
            zero_observation(obs_space), **buffers.results(start, stop), first_index=start)
    else:
        stepper = EnvStepper(envs, mode, table, rows, objects,
                             **buffers.results(start, stop, ENV_RESULTS), first_index=start)
        if frame_stack is not None:
            stepper.stack_frames(stack_plan(unit_spaces(envs[0])[0], frame_stack))
    return stepper, objects


class LocalBlock:
    """A block of envs stepped in this process, when its pool collects it."""

    def __init__(self, envs: list, start: int, buffers: Buffers, mode: int,
                 frame_stack: FrameStack | None = None) -> None:
        self.envs = envs
        self.start = start
        self.buffers = buffers
        self.stepper, self.objects = make_stepper(envs, start, buffers, mode, frame_stack)
        self.stop = start + rows_of(envs)
        self.fresh_rows = getattr(buffers.obs, "fresh_rows", False)
        self.pending: tuple | None = None  # (actions, mask) or (seeds, options, mask)
        self.control_index: int | None = None  # the env a control call ran on last

    @property
    def current(self) -> int:
        """The env (game) of the block that was running, counted from the block's first."""
        return self.stepper.current // getattr(self.stepper, "seats", 1)

    def post_step(self, actions: list, mask: np.ndarray | None = None) -> None:
        """Step the block's envs (those in ``mask``: one bool per row) with one action
        per row (rows outside ``mask`` may hold anything).
        """
        self.pending = (actions, mask)

    def post_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        self.pending = (seeds, options, mask)

    def run(self) -> Entries:
        """Run the posted command; its info entries."""
        pending, self.pending = self.pending, None
        if pending is None:
            return []
        stepping = len(pending) == 2
        if self.fresh_rows:  # new rows; a masked step or reset keeps the other envs' records
            rows = self.buffers.obs.before_write(keep=pending[-1] is not None)
            assert rows is not None
            if self.start or len(rows) != self.stop:
                rows = rows[self.start:self.stop]
            self.stepper.set_rows(rows)
        entries = self.stepper.step(*pending) if stepping else self.stepper.reset(*pending)
        if self.objects is not None:
            self.buffers.obs.receive(self.start, self.objects)
        return entries

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None
                ) -> list:
        """``fn(env, *args)`` for the block's envs ``targets`` (counted from its first);
        ``control_index`` is then the one that ran last (that raised, if one did).
        """
        results = []
        for k, i in enumerate(targets):
            self.control_index = i
            results.append(fn(self.envs[i], *(() if args_per_env is None else args_per_env[k])))
        return results

    def close(self, terminate: bool = False) -> None:
        """Close the envs (unless ``terminate``); nothing is pending afterwards."""
        self.pending = None
        envs, self.envs = self.envs, []
        if not terminate:
            for env in envs:
                env.close()


class LocalPool(Pool):
    """One block of every env, stepped in this process; env errors pass through as raised.

    ``observation_spaces``: ``(single, batched or None)``, as ``observation_mode``
    made them (see ``fastvec.pool.build``).
    """

    observation_spaces: tuple[Any, Any]

    def __init__(self, envs: list, buffers: Buffers, mode: int,
                 frame_stack: FrameStack | None = None) -> None:
        self.envs = envs
        self.buffers = buffers
        self.block = LocalBlock(envs, 0, buffers, mode, frame_stack)
        self.block_map = BlockMap([(0, self.block.stop)], [(0, len(envs))])

    def post_step(self, blocks: Sequence[int], actions: Any, checker: ActionChecker,
                  env_ids: np.ndarray | None = None) -> None:
        per_env = checker.split(actions)
        if env_ids is None:
            self.block.post_step(per_env)
            return
        rows: list = [None] * self.block.stop
        for i, action in zip(env_ids.tolist(), per_env, strict=True):
            rows[i] = action
        self.block.post_step(rows, block_mask(env_ids, 0, self.block.stop))

    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        self.block.post_reset(seeds, options, mask)

    def _wait(self, blocks: list[int], what: str, want: int) -> dict[int, Any]:
        return {0: self.block.run()}

    # The one block's results, without the failure policy: an env's error is raised as
    # it comes (nothing restarts here).  Equal to Pool's, one call instead of four.

    def collect_entries(self, blocks: Sequence[int], what: str, want: int | None = None,
                        restart_truncates: bool = True) -> tuple[list[int], Entries]:
        entries = self.block.run()
        return [0], list(entries) if entries else []

    def collect(self, blocks: Sequence[int], what: str, want: int | None = None,
                restart_truncates: bool = True, compact: bool = False
                ) -> tuple[list[int], dict]:
        entries = self.block.run()
        return [0], batch_infos(entries, self.block.stop) if entries else {}

    def _receive(self, b: int, reply: Any) -> Entries:
        return reply

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        return self.block.control(fn, targets, args_per_env)

    def close(self, timeout: float | None = None, terminate: bool = False,
              pending: Sequence[int] = ()) -> None:
        self.block.close(terminate)
        self.envs = []
