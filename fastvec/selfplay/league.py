"""The league: who plays each game of a vector env of games, and what it learns from them.

Each game is either pure self-play (the learner in every seat: every seat makes
training samples) or the learner in one seat against an opponent drawn from the
pool in the others.  When a game ends it is judged (from the rewards its rows
got over the game), ratings and running win rates move, and the game gets a new
assignment: the learner's seat moves on by one, and the kind of game and the
opponent are drawn again.  The trainer drives it with a few calls::

    league = League.from_env(envs, opponents={"random": RandomPlayer(seed=0)}, seed=0)
    obs, infos = envs.reset(seed=0)
    while training:
        groups = league.policy_rows(infos["active"])       # policy id -> rows
        rest = league.act_fixed(obs, groups, actions)      # fixed opponents move
        for policy, rows in rest.items():                  # the learner, snapshots
            actions[rows] = forward(weights[policy], obs, rows)
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        league.update(rewards, terminations, truncations, infos)
        if league.snapshot_due:
            weights[league.add_snapshot()] = copy_of_the_learner()
        for policy in league.pop_retired():
            del weights[policy]
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sized
from typing import Any, NamedTuple

import numpy as np

from fastvec.selfplay.evaluation import evaluate
from fastvec.selfplay.opponents import LEARNER, OpponentPool, PoolEntry
from fastvec.selfplay.players import Act, call_player
from fastvec.selfplay.ratings import elo_update
from fastvec.selfplay.sampling import Sampling, parse_sampling, sampling_from_state
from fastvec.selfplay.seats import RESULTS, Seats, judge
from fastvec.selfplay.settings import (
    DEFAULT_SHARES,
    DRAWN_FROM,
    SHARES,
    LeagueSettings,
    check_player,
    check_player_dicts,
    check_seed,
)
from fastvec.selfplay.state import league_state, load_league_state

__all__ = ["RESULTS", "League", "Outcome"]


def fresh_since_snapshot() -> dict[str, Any]:
    """The trigger counters right after a snapshot: learner steps, games, their scores."""
    return {"steps": 0, "games": 0, "score": 0.0}


class Outcome(NamedTuple):
    """A finished game, from the learner's point of view (self-play: from seat 0's)."""

    game: int
    opponent: str  # LEARNER for a self-play game
    learner_seat: int
    result: str  # one of RESULTS
    learner_return: float


class League:
    """Seats of every game for the learner and its opponents, a rated pool, triggers.

    Args:
        game_of_row: The game of each row (``League.from_env(envs)`` takes it, and
            ``seat_of_row``, from a vector env of games).
        seat_of_row: The seat of each row in its game.
        opponents: Fixed training opponents, ``{id: act}`` (``act(observation,
            action_mask) -> actions``), registered before the first games are drawn.
        anchors: Evaluation-only opponents, ``{id: act}`` (see :meth:`add_anchor`).
        shares: The share of new games of each kind, ``"self_play"``, ``"snapshots"``,
            ``"fixed"``; they must add up to 1.  A kind with nobody to draw (no
            snapshot yet) gives its games to self-play.
        sampling: How an opponent is drawn within its kind: ``"pfsp"``, ``"uniform"``,
            ``"recency"``, or a :class:`PFSP`, :class:`Uniform`, :class:`Recency`.
        snapshot_every: Learner steps (moves of the learner) between snapshots; None: off.
        snapshot_win_rate: Snapshot when the learner's score against its opponents since
            the last snapshot (its mean score per game) reaches this ...; None (the
            default): this score trigger is off.
        snapshot_min_games: ... over at least this many games, a positive int (None is
            accepted only while the score trigger is off).
        max_snapshots: Snapshots kept in the pool; beyond, one is evicted by ``eviction``.
        eviction: ``"oldest"`` or ``"weakest"`` (lowest rating); never the newest.
        elo_k: The Elo K factor of every rated game.
        initial_rating: The rating of the learner and of new fixed opponents and anchors;
            a snapshot starts with the learner's rating.
        win_rate_window: Games over which running win rates average (PFSP).
        seed: Seed of the draws (None or a non-negative int); the same seed gives the
            same draws.

    The settings (all but the players, ``sampling`` and ``seed``) are kept, checked, in
    :attr:`settings`, a frozen :class:`~fastvec.selfplay.settings.LeagueSettings`.

    Raises:
        ValueError: an argument out of its range (each message says what was expected).
    """

    def __init__(self, game_of_row: Any, seat_of_row: Any, *,
                 opponents: Mapping[str, Act] | None = None,
                 anchors: Mapping[str, Act] | None = None,
                 shares: Mapping[str, float] | None = None,
                 sampling: Sampling | str = "pfsp",
                 snapshot_every: int | None = 50_000,
                 snapshot_win_rate: float | None = None,
                 snapshot_min_games: int | None = 200,
                 max_snapshots: int | None = 20,
                 eviction: str = "oldest",
                 elo_k: float = 16.0,
                 initial_rating: float = 1000.0,
                 win_rate_window: int = 100,
                 seed: int | None = None) -> None:
        self.seats = Seats(game_of_row, seat_of_row)
        self.settings = LeagueSettings(
            shares=DEFAULT_SHARES if shares is None else shares, snapshot_every=snapshot_every,
            snapshot_win_rate=snapshot_win_rate, snapshot_min_games=snapshot_min_games,
            max_snapshots=max_snapshots, eviction=eviction, elo_k=elo_k,
            initial_rating=initial_rating, win_rate_window=win_rate_window)
        self.sampling = parse_sampling(sampling)
        check_seed(seed)
        check_player_dicts(opponents=opponents, anchors=anchors)
        self.rng = np.random.default_rng(seed)
        self.pool = OpponentPool()
        self.learner_rating = self.settings.initial_rating
        self.learner_steps = self.games = self.snapshots_taken = 0
        self.since_snapshot = fresh_since_snapshot()
        self.history: list[dict[str, Any]] = []
        self.evaluations: list[dict[str, Any]] = []
        for policy, act in (opponents or {}).items():
            self.add_opponent(policy, act)
        for policy, act in (anchors or {}).items():
            self.add_anchor(policy, act)
        self.learner_seat = np.arange(self.seats.num_games, dtype=np.int64) % self.seats.num_seats
        self._assign(np.arange(self.seats.num_games))

    @classmethod
    def from_env(cls, envs: Any, **kwargs: Any) -> League:
        """A league over the games of a vector env (its ``game_of_row``, ``seat_of_row``)."""
        return cls(envs.game_of_row, envs.seat_of_row, **kwargs)

    # -- the pool ------------------------------------------------------------------

    def add_opponent(self, policy: str, act: Act, *, weight: float = 1.0,
                     rating: float | None = None) -> None:
        """Register a fixed training opponent, drawn for the ``"fixed"`` share of games."""
        self._add_player(policy, "fixed", act, weight, rating, train=True)

    def add_anchor(self, policy: str, act: Act, *, train: bool = False,
                   rating: float | None = None) -> None:
        """Register an evaluation anchor: played by :meth:`evaluate`; drawn for training
        games (with the fixed opponents) only if ``train``.
        """
        self._add_player(policy, "anchor", act, 1.0, rating, train=train)

    def add_snapshot(self, policy: str | None = None) -> str:
        """Add a frozen snapshot of the learner to the pool; returns its id.

        It starts with the learner's rating and a running win rate of one half; the
        trigger counters start again; a snapshot beyond ``max_snapshots`` is evicted
        (it retires when its games end: :meth:`pop_retired`).
        """
        policy = f"snapshot-{self.snapshots_taken + 1}" if policy is None else policy
        self.pool.add(policy, "snapshot", rating=self.learner_rating, created=self.learner_steps)
        self.snapshots_taken += 1
        self.since_snapshot = fresh_since_snapshot()
        self.pool.evict(self.settings.max_snapshots, self.settings.eviction, keep=policy)
        self.record()
        return policy

    def remove(self, policy: str) -> None:
        """Take an entry out of the pool: no new game draws it; the games it plays go
        on to their end, then it retires (:meth:`pop_retired`).
        """
        self.pool.remove(policy)

    def pop_retired(self) -> list[str]:
        """Entries removed or evicted whose last game is over, since the last call: the
        trainer can drop their weights.
        """
        return self.pool.pop_retired()

    def entry(self, policy: str) -> PoolEntry:
        """The pool entry of ``policy`` (its kind, rating, record); unknown ids raise."""
        return self.pool.get(policy)

    @property
    def pool_ids(self) -> tuple[str, ...]:
        """The ids that new training games may draw, in the order they joined."""
        return tuple(e.id for e in self.pool.drawable(("snapshot", "fixed", "anchor")))

    @property
    def anchors(self) -> dict[str, Act]:
        """The evaluation anchors by id."""
        return {e.id: e.act for e in self.pool if e.kind == "anchor" and e.act is not None}

    # -- who plays which rows ------------------------------------------------------

    def policy_rows(self, where: Any = None, env_ids: Any = None) -> dict[str, np.ndarray]:
        """Each policy that acts now (the learner first) with its rows' positions, and
        the learner's positions counted as learner steps: call it once per step.

        Positions index the batch: they are rows unless ``env_ids`` (an async batch's)
        is given.  Only rows where ``where`` (e.g. ``infos["active"]``) is True count.
        """
        groups = self.seats.groups(where, env_ids)
        named = {self._name(code): positions for code, positions in groups.items()}
        self._count_learner_steps(named.get(LEARNER, ()))
        return named

    def rows_of(self, policy: str, where: Any = None, env_ids: Any = None) -> np.ndarray:
        """The positions of the rows ``policy`` plays now (see :meth:`policy_rows`)."""
        code = 0 if policy == LEARNER else self.pool.get(policy).code
        return self.seats.groups(where, env_ids).get(code, np.empty(0, dtype=np.int64))

    def act_fixed(self, obs: Any, groups: Mapping[str, np.ndarray],
                  actions: np.ndarray) -> dict[str, np.ndarray]:
        """Write the moves of fixed opponents and anchors in ``groups`` into ``actions``;
        return the other groups (the learner's and the snapshots'), for the trainer.
        """
        rest = {}
        for policy, positions in groups.items():
            act = None if policy == LEARNER else self.pool.get(policy).act
            if act is None:
                rest[policy] = positions
            else:
                actions[positions] = call_player(policy, act, obs, positions)
        return rest

    @property
    def opponents(self) -> tuple[str, ...]:
        """The opponent of each game now (:data:`LEARNER` for self-play games)."""
        return tuple(self._name(int(self._opponent_code(g))) for g in range(self.seats.num_games))

    # -- the end of games ----------------------------------------------------------

    def update(self, rewards: Any, terminations: Any, truncations: Any,
               infos: Mapping[str, Any], env_ids: Any = None) -> list[Outcome]:
        """Take in one step's results (of an async batch: with its ``env_ids``); judge,
        rate and reassign the games that ended in it.  Returns them, in game order.
        """
        ended = self.seats.ended(rewards, terminations, truncations, infos, env_ids)
        if not ended.size:
            return []
        outcomes = [self._finish(int(game)) for game in ended]
        self._assign(ended)
        return outcomes

    def reset(self) -> None:
        """Forget the rewards of the games in progress (call it with ``envs.reset()``:
        those games are not judged); the assignments stay.
        """
        self.seats.returns[:] = 0.0

    @property
    def snapshot_due(self) -> bool:
        """A snapshot trigger fired: ``snapshot_every`` learner steps since the last one,
        or the score threshold reached over ``snapshot_min_games`` games.
        """
        since, settings = self.since_snapshot, self.settings
        every, rate, min_games = (settings.snapshot_every, settings.snapshot_win_rate,
                                  settings.snapshot_min_games)
        by_steps = every is not None and since["steps"] >= every
        by_score = (rate is not None and min_games is not None and since["games"] >= min_games
                    and since["score"] >= rate * since["games"])
        return by_steps or by_score

    # -- ratings -------------------------------------------------------------------

    def ratings(self) -> dict[str, float]:
        """The learner's rating and every entry's (retired ones included)."""
        return {LEARNER: self.learner_rating, **{e.id: e.rating for e in self.pool}}

    def record(self) -> None:
        """Add a point to :attr:`history` (done at every snapshot): learner steps, games,
        ratings.
        """
        self.history.append({"learner_steps": self.learner_steps, "games": self.games,
                             "ratings": self.ratings()})

    def totals(self) -> dict[str, dict[str, int]]:
        """The learner's wins, draws and losses against each entry that it played."""
        return self.pool.totals()

    def table(self) -> str:
        """The ratings as a text table: the learner's line first, then every entry
        (retired ones included), best rated first, with the learner's record against it.
        """
        return self.pool.table(self.learner_rating)

    # -- evaluation ----------------------------------------------------------------

    def evaluate(self, envs: Any, policy: Act, games: int, *, anchors: Any = None,
                 seats: str | int = "both", seed: int | None = None) -> dict[str, Any]:
        """Play ``policy`` against anchors (all registered ones, or those ids) on
        ``envs``; the results go into :attr:`evaluations` and are returned, by anchor id.
        See :func:`fastvec.selfplay.evaluate`.
        """
        chosen = self.anchors if anchors is None else {p: self._player(p) for p in anchors}
        results = evaluate(envs, policy, chosen, games, seats=seats, seed=seed)
        self.evaluations.append({"learner_steps": self.learner_steps,
                                 "results": {p: r.counts.tolist() for p, r in results.items()}})
        return results

    # -- state ---------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Everything the league knows, as plain data (JSON-able); callables left out."""
        return league_state(self)

    def load_state_dict(self, state: Mapping[str, Any],
                        players: Mapping[str, Act] | None = None) -> None:
        """Take back a :meth:`state_dict`; ``players`` gives the callables of its fixed
        opponents and anchors, by id.
        """
        load_league_state(self, state, players or {})

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`state_dict` to a JSON file."""
        with open(path, "w") as file:
            json.dump(self.state_dict(), file)

    @classmethod
    def load(cls, path: str | os.PathLike[str],
             players: Mapping[str, Act] | None = None) -> League:
        """A league as :meth:`save` wrote it; ``players``: callables by id."""
        with open(path) as file:
            state = json.load(file)
        league = cls(state["game_of_row"], state["seat_of_row"],
                     sampling=sampling_from_state(state["sampling"]))
        league.load_state_dict(state, players)
        return league

    # -- internals -----------------------------------------------------------------

    def _add_player(self, policy: str, kind: str, act: Act, weight: float,
                    rating: float | None, train: bool) -> None:
        check_player(policy, act, weight, rating)
        self.pool.add(policy, kind, act=act, weight=float(weight), train=train,
                      rating=self.settings.initial_rating if rating is None else float(rating),
                      created=self.learner_steps)

    def _player(self, policy: str) -> Act:
        act = self.pool.get(policy).act
        if act is None:
            raise ValueError(f"{policy!r} is a snapshot or retired: it has no callable to play")
        return act

    def _count_learner_steps(self, positions: Sized) -> None:
        """The learner chose the moves of ``positions``: so many learner steps."""
        self.learner_steps += len(positions)
        self.since_snapshot["steps"] += len(positions)

    def _name(self, code: int) -> str:
        return LEARNER if code == 0 else self.pool.by_code(code).id

    def _opponent_code(self, game: int) -> int:
        return int(self.seats.code[game].max())  # 0 (the learner) in every seat of self-play

    def _assign(self, games: np.ndarray) -> None:
        """Draw the kind of the games that start in ``games`` (in order), and opponents."""
        p = np.array([self.settings.shares[k] for k in SHARES])
        kinds = self.rng.choice(len(SHARES), size=len(games), p=p / p.sum())
        codes = np.zeros((len(games), self.seats.num_seats), dtype=np.int64)  # self-play
        for k, kind in enumerate(SHARES):
            chosen = np.flatnonzero(kinds == k)  # positions in games
            entries = self.pool.drawable(DRAWN_FROM[kind]) \
                if chosen.size and DRAWN_FROM[kind] else []
            if not entries:
                continue  # self-play, or nobody of this kind yet: self-play
            weights = self.sampling.weights(entries)
            picks = self.rng.choice(len(entries), size=chosen.size, p=weights / weights.sum())
            for at, pick in zip(chosen.tolist(), picks.tolist(), strict=True):
                codes[at] = entries[pick].code
                codes[at, self.learner_seat[games[at]]] = 0
                entries[pick].playing += 1
        self.seats.assign(games, codes)

    def _finish(self, game: int) -> Outcome:
        returns = self.seats.take_returns(game)
        opponent = self._opponent_code(game)
        seat = int(self.learner_seat[game]) if opponent else 0
        result = judge(returns, seat)
        if opponent:
            entry = self.pool.by_code(opponent)
            entry.record(result, self.settings.win_rate_window)
            self.learner_rating, entry.rating = elo_update(
                self.learner_rating, entry.rating, result.score, self.settings.elo_k)
            self.since_snapshot["games"] += 1
            self.since_snapshot["score"] += result.score
            self.pool.game_over(opponent)
        self.games += 1
        self.learner_seat[game] = (self.learner_seat[game] + 1) % self.seats.num_seats
        return Outcome(game, self._name(opponent), seat, result.word, float(returns[seat]))
