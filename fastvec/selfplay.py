"""Self-play: which rows of a vector env of games the learner plays, and which opponents.

A vector env of games (``fastvec.make_multiagent``) has one row per seat of each
game.  :class:`SelfPlay` gives one seat of every game to the learner and the
other seats to one opponent drawn from a pool (frozen snapshots the trainer
adds, and :data:`RANDOM`, a uniformly random player the trainer implements).
When a game ends, the learner moves to the game's next seat and a new opponent
is drawn, so over the games the learner plays every seat against every
opponent.  Each step the trainer asks for the rows of each policy and runs one
batched forward pass per policy::

    selfplay = SelfPlay.from_env(envs, pool=[RANDOM], seed=0)
    obs, infos = envs.reset(seed=0)
    while training:
        actions = np.zeros(envs.num_envs, dtype=np.int64)
        for policy, rows in selfplay.policy_rows(infos["active"]).items():
            actions[rows] = act(policy, obs, rows)        # one forward pass
        learner = selfplay.rows_of(LEARNER)                # before update()
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        for outcome in selfplay.update(rewards, terminations, truncations, infos):
            print(outcome.opponent, outcome.result)
        selfplay.add(snapshot_id)                          # now and then

A game is over on the step in which its last agents leave: every row of the
game either ends there (``terminations | truncations``) or is no longer alive
(``infos["alive"]`` False), and at least one ends.  That step is judged and the
game's seats are reassigned at once; with ``NEXT_STEP`` autoreset the next step
is the game's reset step (its actions are ignored and its rows report no flags),
so the new assignment plays the new game from its first move.  The learner wins
when the rewards its row received over the game add up to more than every other
seat's, loses when some seat got more, and draws otherwise.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

__all__ = ["LEARNER", "RANDOM", "RESULTS", "Outcome", "SelfPlay"]

LEARNER = "learner"
"""The policy id of the learner."""
RANDOM = "random"
"""The policy id of the built-in opponent that plays a uniformly random legal move."""
RESULTS = ("win", "draw", "loss")
"""The results of a game, from the learner's point of view."""


class Outcome(NamedTuple):
    """A finished game, from the learner's point of view."""

    game: int
    opponent: Hashable
    learner_seat: int
    result: str  # one of RESULTS
    learner_return: float


class SelfPlay:
    """Seats of every game given to the learner and to opponents drawn from a pool.

    Args:
        game_of_row: The game of each row (``envs.game_of_row``).
        seat_of_row: The seat of each row in its game (``envs.seat_of_row``); every
            game must have the same seats ``0 .. num_seats - 1``, at least two.
        pool: The opponents' policy ids to draw from (any hashable but
            :data:`LEARNER`), all with weight 1; more can be added with :meth:`add`.
        seed: Seed (or generator) of the draws; the same seed gives the same draws.

    Game *g* starts with the learner in seat ``g % num_seats``; each game's
    learner seat then moves on by one every time that game ends.

    Raises:
        ValueError: the rows do not describe whole games of two or more seats, or
            the pool is empty or holds :data:`LEARNER`.
    """

    def __init__(self, game_of_row: Any, seat_of_row: Any, *,
                 pool: Iterable[Hashable] = (RANDOM,),
                 seed: int | np.random.Generator | None = None) -> None:
        games = np.asarray(game_of_row, dtype=np.int64)
        seats = np.asarray(seat_of_row, dtype=np.int64)
        if games.ndim != 1 or games.shape != seats.shape or games.size == 0:
            raise ValueError("expected game_of_row and seat_of_row of the same length (one per "
                             f"row), got shapes {games.shape} and {seats.shape}")
        num_games, num_seats = int(games.max()) + 1, int(seats.max()) + 1
        grid = np.full((num_games, num_seats), -1, dtype=np.int64)
        if games.min() >= 0 and seats.min() >= 0:
            grid[games, seats] = np.arange(games.size)
        if num_seats < 2 or games.size != num_games * num_seats or (grid < 0).any():
            raise ValueError("expected every game to have the seats 0 .. num_seats - 1 (two or "
                             f"more) once each, got game_of_row={games.tolist()} "
                             f"seat_of_row={seats.tolist()}")
        self.num_games, self.num_seats = num_games, num_seats
        self.game_of_row, self.seat_of_row = games, seats
        self._row_of = grid  # [game, seat] -> row
        self._rng = np.random.default_rng(seed)
        self._pool: list[Hashable] = []
        self._weights: list[float] = []
        self._ids: list[Hashable] = []  # every opponent ever added, by code
        self._code: dict[Hashable, int] = {}
        for policy in pool:
            self.add(policy)
        if not self._pool:
            raise ValueError("expected at least one opponent in the pool")
        self._learner_seat = np.arange(num_games, dtype=np.int64) % num_seats
        self._opponent_code = np.array([self._draw() for _ in range(num_games)], dtype=np.int64)
        self._returns = np.zeros(games.size, dtype=np.float64)
        self._totals: dict[Hashable, dict[str, int]] = {}
        self._rows: dict[Hashable, np.ndarray] = {}
        self._regroup()

    @classmethod
    def from_env(cls, envs: Any, **kwargs: Any) -> SelfPlay:
        """A :class:`SelfPlay` for the games of a vector env (its ``game_of_row`` and
        ``seat_of_row``); ``kwargs`` as for the constructor.
        """
        return cls(envs.game_of_row, envs.seat_of_row, **kwargs)

    # -- the pool ------------------------------------------------------------

    @property
    def pool(self) -> tuple[Hashable, ...]:
        """The opponents new games draw from, in the order they were added."""
        return tuple(self._pool)

    def add(self, policy: Hashable, weight: float = 1.0) -> None:
        """Add an opponent to the pool, or set its weight if it is there; games that
        end from now on draw it with probability ``weight / sum of the weights``.
        """
        if policy == LEARNER:
            raise ValueError(f"the learner ({LEARNER!r}) cannot be one of its own opponents")
        if not weight > 0:
            raise ValueError(f"expected a positive weight, got {weight!r}")
        if policy in self._pool:
            self._weights[self._pool.index(policy)] = float(weight)
        else:
            self._pool.append(policy)
            self._weights.append(float(weight))
        if policy not in self._code:
            self._code[policy] = len(self._ids)
            self._ids.append(policy)

    def remove(self, policy: Hashable) -> None:
        """Take an opponent out of the pool.  Games that drew it play it to their end:
        keep its weights while :meth:`policy_rows` still lists it.
        """
        if self._pool == [policy]:
            raise ValueError("expected at least one opponent to stay in the pool")
        del self._weights[self._pool.index(policy)]
        self._pool.remove(policy)

    # -- who plays which rows ------------------------------------------------

    @property
    def learner_seat(self) -> np.ndarray:
        """The learner's seat in each game (a copy)."""
        return self._learner_seat.copy()

    @property
    def opponents(self) -> tuple[Hashable, ...]:
        """The opponent of each game."""
        return tuple(self._ids[code] for code in self._opponent_code)

    def rows_of(self, policy: Hashable, where: Any = None) -> np.ndarray:
        """The rows (int64, ascending) ``policy`` plays now, only those where ``where``
        (a bool per row, e.g. ``infos["active"]``) is True if given.
        """
        rows = self._rows.get(policy, np.empty(0, dtype=np.int64))
        return rows.copy() if where is None else rows[np.asarray(where, dtype=bool)[rows]]

    def policy_rows(self, where: Any = None) -> dict[Hashable, np.ndarray]:
        """Each policy (the learner first) with the rows it plays now, as
        :meth:`rows_of`; policies left with no row are left out.
        """
        groups = {policy: self.rows_of(policy, where) for policy in self._rows}
        return {policy: rows for policy, rows in groups.items() if rows.size}

    # -- the end of games ----------------------------------------------------

    def update(self, rewards: Any, terminations: Any, truncations: Any,
               infos: Mapping[str, Any]) -> list[Outcome]:
        """Take in one step's results; judge and reassign the games that ended in it.

        Call it after every ``step`` (and read the learner's rows of that step
        before: the rows of games that ended are reassigned here, for the next
        step's actions).  ``infos["alive"]`` tells which rows' agents are in their
        game (all rows if absent).

        Returns:
            The games that ended in this step, in game order.
        """
        rewards = np.asarray(rewards, dtype=np.float64)
        ended = np.asarray(terminations, dtype=bool) | np.asarray(truncations, dtype=bool)
        alive = np.asarray(infos.get("alive", np.ones_like(ended)), dtype=bool)
        if not rewards.shape == ended.shape == alive.shape == self._returns.shape:
            raise ValueError(f"expected one reward, flag and alive per row "
                             f"({self._returns.size}), got shapes {rewards.shape}, "
                             f"{ended.shape} and {alive.shape}")
        self._returns += rewards
        staying = np.bincount(self.game_of_row, weights=~ended & alive, minlength=self.num_games)
        leaving = np.bincount(self.game_of_row, weights=ended, minlength=self.num_games)
        outcomes = [self._finish(int(game))
                    for game in np.flatnonzero((staying == 0) & (leaving > 0))]
        if outcomes:
            self._regroup()
        return outcomes

    def reset(self) -> None:
        """Forget the rewards of the games in progress (call it with ``envs.reset()``:
        those games are not judged); the assignments stay.
        """
        self._returns[:] = 0.0

    def totals(self) -> dict[Hashable, dict[str, int]]:
        """Wins, draws and losses of the learner against each opponent so far."""
        return {policy: dict(counts) for policy, counts in self._totals.items()}

    # -- internals -------------------------------------------------------------

    def _draw(self) -> int:
        """A draw from the pool by weight, as the opponent's code."""
        weights = np.array(self._weights)
        pick = int(self._rng.choice(len(self._pool), p=weights / weights.sum()))
        return self._code[self._pool[pick]]

    def _finish(self, game: int) -> Outcome:
        rows = self._row_of[game]
        seat = int(self._learner_seat[game])
        mine = float(self._returns[rows[seat]])
        best_other = float(np.delete(self._returns[rows], seat).max())
        result = "win" if mine > best_other else "loss" if mine < best_other else "draw"
        opponent = self._ids[self._opponent_code[game]]
        counts = self._totals.setdefault(opponent, dict.fromkeys(RESULTS, 0))
        counts[result] += 1
        self._returns[rows] = 0.0
        self._learner_seat[game] = (seat + 1) % self.num_seats
        self._opponent_code[game] = self._draw()
        return Outcome(game, opponent, seat, result, mine)

    def _regroup(self) -> None:
        learner = self.seat_of_row == self._learner_seat[self.game_of_row]
        codes = np.where(learner, -1, self._opponent_code[self.game_of_row])
        self._rows = {LEARNER if code < 0 else self._ids[code]: np.flatnonzero(codes == code)
                      for code in np.unique(codes)}
