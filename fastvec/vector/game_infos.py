"""What the batch says about multi-agent games: ``infos["alive"]`` / ``["active"]``, masks.

For games every step and reset reports, per row, whether the row's agent is in
the game (``alive``) and whether it acts next (``active``), with all-True
``_alive`` / ``_active`` masks as Gymnasium batches infos.  A reset mask must
select whole games.
"""

from __future__ import annotations

import numpy as np

from fastvec.pool.buffers import Buffers

__all__ = ["add_game_infos", "check_whole_games"]


def add_game_infos(infos: dict, buffers: Buffers, rows: slice | np.ndarray) -> None:
    """Put the ``rows``' alive and active flags (fresh arrays) into ``infos``."""
    for key in ("alive", "active"):
        if key in infos:
            raise ValueError(f"an agent's info has the key {key!r}, which fastvec reports "
                             "for every row of a game; rename that key")
    alive = buffers.alive[rows].copy()
    infos["alive"] = alive
    infos["_alive"] = np.ones(len(alive), np.bool_)
    infos["active"] = buffers.active[rows].copy()
    infos["_active"] = np.ones(len(alive), np.bool_)


def check_whole_games(mask: np.ndarray, seats: int) -> None:
    """Raise ValueError unless ``mask`` selects every row of a game or none of them."""
    per_game = mask.reshape(-1, seats)
    split = np.flatnonzero(per_game.any(axis=1) != per_game.all(axis=1))
    if split.size:
        raise ValueError(f"expected options['reset_mask'] to select whole games ({seats} rows "
                         f"each); games {split.tolist()} are selected in part")
