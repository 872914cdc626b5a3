"""Which rows each block of a pool holds, and how messages name a block and an env in it.

A pool's blocks are contiguous: block ``b`` holds rows ``bounds[b] = (start, stop)``
of the batch (one per env, one per seat of a game) and env functions
``unit_bounds[b]`` (envs, or games: what control calls and errors count).  The map
is frozen: a pool makes a new one when its blocks start counting rows (games), and
hands it to the kinds of block it drives, which read it and never the pool.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["BlockMap", "Bounds"]

Bounds = list[tuple[int, int]]


@dataclass(frozen=True)
class BlockMap:
    """The blocks of a pool: their rows, their env functions, and their hosts' names.

    ``host_word``: what messages call a block's host (``"worker"``, ``"actor"``);
    blocks before ``first_remote`` step in the trainer's process (a process pool's
    local block) and are named ``the local block``; the others are numbered from 0
    after them.
    """

    bounds: Bounds
    unit_bounds: Bounds
    unit_name: str = "env"  # "game" for multi-agent games
    seats: int = 1  # rows per env function: one, or one per seat of a game
    host_word: str = "block"
    first_remote: int = 0

    @property
    def num_blocks(self) -> int:
        return len(self.bounds)

    @property
    def num_rows(self) -> int:
        return self.bounds[-1][1]

    def counting_rows(self, seats: int, unit_name: str) -> BlockMap:
        """The same blocks once their env functions are known to fill ``seats`` rows each."""
        return replace(self, seats=seats, unit_name=unit_name,
                       bounds=[(a * seats, z * seats) for a, z in self.unit_bounds])

    def host_index(self, b: int) -> int | None:
        """Block ``b``'s worker or actor number (None: the trainer's own block)."""
        return None if b < self.first_remote else b - self.first_remote

    def block_name(self, b: int) -> str:
        """How messages name block ``b``'s host: ``worker 0``, ``actor 2``, ``the local
        block``.
        """
        index = self.host_index(b)
        return "the local block" if index is None else f"{self.host_word} {index}"

    def where(self, b: int, unit_index: int | None = None) -> str:
        """Where a failure happened: ``env 3 (worker 1)``, ``game 2 (actor 0)``, ``env 1
        (local block)``; without an env (game) index, :meth:`block_name`.
        """
        if unit_index is None:
            return self.block_name(b)
        index = self.host_index(b)
        host = "local block" if index is None else f"{self.host_word} {index}"
        return f"{self.unit_name} {unit_index} ({host})"
