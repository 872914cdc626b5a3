"""``fastvec.make_multiagent``: a vector env of PettingZoo games, one row per seat.

A game (a ``pettingzoo.ParallelEnv``, or an ``AECEnv`` for turn-based games)
fills ``len(possible_agents)`` consecutive rows of the batch; see
docs/multiagent.md for rows, seats, dead rows, autoreset per game and the
rewards of turn-based games.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from fastvec.make import make

__all__ = ["make_multiagent"]


def make_multiagent(
    game_fn: Callable[..., Any],
    num_games: int,
    backend: str = "sync",
    vector_kwargs: dict[str, Any] | None = None,
    **game_kwargs: Any,
) -> gym.vector.VectorEnv:
    """Run ``num_games`` copies of a multi-agent game as one vector env.

    Args:
        game_fn: A callable returning a PettingZoo game (called with ``game_kwargs``),
            e.g. ``pettingzoo.classic.tictactoe_v3.env``; every agent of the game must
            share one observation space and one action space.
        num_games: How many games; the vector env has ``num_games * len(agents)`` rows.
        backend: ``"sync"``, ``"subproc"`` or ``"ray"``, as for :func:`fastvec.make`.
        vector_kwargs: Keyword arguments for the vector env class.
        **game_kwargs: Keyword arguments for ``game_fn``.

    Returns:
        A vector env whose rows are seats: ``num_games``, ``agents``,
        ``game_of_row`` and ``seat_of_row`` say which; ``infos["alive"]`` and
        ``infos["active"]`` say which rows' agents are in their game and act next.

    Raises:
        ValueError: ``num_games`` is not a positive int, the backend is unknown, or
            the game's agents have different spaces.

    Example:
        >>> import fastvec
        >>> from pettingzoo.classic import rps_v2
        >>> envs = fastvec.make_multiagent(rps_v2.parallel_env, num_games=3)
        >>> envs.num_envs, envs.agents, envs.game_of_row.tolist()
        (6, ('player_0', 'player_1'), [0, 0, 1, 1, 2, 2])
        >>> envs.close()
    """
    if isinstance(num_games, bool) or not isinstance(num_games, int) or num_games < 1:
        raise ValueError(f"expected num_games to be a positive int, got {num_games!r}")
    return make(game_fn, num_envs=num_games, backend=backend, vector_kwargs=vector_kwargs,
                **game_kwargs)
