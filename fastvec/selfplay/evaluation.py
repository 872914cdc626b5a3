"""Evaluation: a policy against anchors from every seat, and round-robin tournaments.

Both play a list of *matches* (one player per seat) on a vector env of games:
each game of the env plays the next match of the list when its previous game
ends, until every match is over (games left without a match play their first
legal move meanwhile, unjudged).  A match is judged like a league game, by the
seat's score (:func:`fastvec.selfplay.seats.score`: the share of the other seats
whose return is below its own, ties half; above one half a win, below a loss).
Envs with async batches (``batch_size < num_envs``) are driven with
``send`` / ``recv``; others with ``step``.  The envs are reset (seeded with
``seed``) at the start; they must auto-reset (``NEXT_STEP`` or ``SAME_STEP``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from fastvec.selfplay.opponents import LEARNER
from fastvec.selfplay.players import Act, call_player, first_legal
from fastvec.selfplay.ratings import fit_elo, ranked
from fastvec.selfplay.seats import RESULTS, Seats, judge

__all__ = ["Evaluation", "Tournament", "evaluate", "play_matches", "tournament", "wilson"]


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% for ``z = 1.96``).

    >>> [round(x, 4) for x in wilson(0, 500)]  # no loss in 500 games: at most 0.77%
    [0.0, 0.0076]
    """
    if trials == 0:
        return 0.0, 1.0
    p, z2 = successes / trials, z * z
    center = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z / (1 + z2 / trials) * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    return max(0.0, center - half), min(1.0, center + half)


@dataclass
class Evaluation:
    """A policy's results against one opponent: ``counts[seat]`` = (wins, draws, losses)."""

    opponent: str
    counts: np.ndarray

    def games(self, seat: int | None = None) -> int:
        """Games played, from ``seat`` or from all seats."""
        return int(self._row(seat).sum())

    def count(self, result: str, seat: int | None = None) -> int:
        """How many games ended with ``result`` ("win", "draw", "loss")."""
        return int(self._row(seat)[RESULTS.index(result)])

    def rate(self, result: str, seat: int | None = None) -> float:
        """The share of games that ended with ``result``."""
        return self.count(result, seat) / max(1, self.games(seat))

    def interval(self, result: str, seat: int | None = None,
                 z: float = 1.96) -> tuple[float, float]:
        """The Wilson confidence interval of :meth:`rate` (95% by default)."""
        return wilson(self.count(result, seat), self.games(seat), z)

    def summary(self) -> str:
        """One line per seat and one in all: win/draw/loss with the loss interval."""
        lines = []
        for seat in (*range(len(self.counts)), None):
            low, high = self.interval("loss", seat)
            where = "all seats" if seat is None else f"seat {seat}"
            lines.append(f"vs {self.opponent} ({where}, {self.games(seat)} games): "
                         f"win {self.rate('win', seat):.1%} draw {self.rate('draw', seat):.1%} "
                         f"loss {self.rate('loss', seat):.1%} (95% CI {low:.1%}-{high:.1%})")
        return "\n".join(lines)

    def _row(self, seat: int | None) -> np.ndarray:
        return self.counts.sum(axis=0) if seat is None else self.counts[seat]


def evaluate(envs: Any, policy: Act, anchors: Mapping[str, Act], games: int, *,
             seats: str | int = "both", seed: int | None = None) -> dict[str, Evaluation]:
    """Play ``policy`` against each anchor ``games`` times; results per anchor and seat.

    Args:
        envs: A vector env of games (``fastvec.make_multiagent``).
        policy: ``act(observation, action_mask) -> actions`` (e.g. the greedy learner).
        anchors: The opponents by id.
        games: Games against each anchor.
        seats: ``"both"`` (every seat in turn: game k from seat ``k % num_seats``) or one
            seat for all games.
        seed: Seed of the envs' reset.
    """
    num_seats = Seats(envs.game_of_row, envs.seat_of_row).num_seats
    if isinstance(games, bool) or not isinstance(games, int) or games < 1:
        raise ValueError(f"expected games to be a positive int, got {games!r}")
    if seats not in ("both", *range(num_seats)):
        raise ValueError(f"expected seats to be 'both' or a seat in 0..{num_seats - 1}, "
                         f"got {seats!r}")
    matches, keys = [], []
    for anchor in anchors:
        for k in range(games):
            seat = k % num_seats if seats == "both" else int(seats)
            matches.append(tuple(LEARNER if s == seat else anchor for s in range(num_seats)))
            keys.append((anchor, seat))
    returns = play_matches(envs, {LEARNER: policy, **anchors}, matches, seed=seed)
    results = {a: Evaluation(a, np.zeros((num_seats, 3), dtype=np.int64)) for a in anchors}
    for (anchor, seat), got in zip(keys, returns, strict=True):
        results[anchor].counts[seat, judge(got, seat).index] += 1
    return results


@dataclass
class Tournament:
    """A round robin's results: ``scores[i, j]`` points i took from j in ``games[i, j]``."""

    names: list[str]
    scores: np.ndarray
    games: np.ndarray
    ratings: np.ndarray

    def table(self) -> str:
        """Players by Elo, best first, with their score over all their games."""
        lines = [f"{'player':<20} {'Elo':>7} {'score':>7} {'games':>6}"]
        for name, rating in ranked(self.names, self.ratings):
            i = self.names.index(name)
            played = self.games[i].sum()
            lines.append(f"{name:<20} {rating:7.0f} {self.scores[i].sum() / max(1, played):7.1%}"
                         f" {int(played):6d}")
        return "\n".join(lines)


def tournament(envs: Any, players: Mapping[str, Act], games_per_pair: int, *,
               center: str | None = None, value: float = 1000.0,
               seed: int | None = None) -> Tournament:
    """Every pair of ``players`` plays ``games_per_pair`` games (seats alternating); the
    Elo table that fits the results (:func:`fastvec.selfplay.ratings.fit_elo`), with
    ``center`` (or the mean) at ``value``.
    """
    names = list(players)
    if len(names) < 2:
        raise ValueError(f"expected at least two players, got {names}")
    if center is not None and center not in players:
        raise ValueError(f"expected center to be one of the players {names}, got {center!r}")
    num_seats = Seats(envs.game_of_row, envs.seat_of_row).num_seats
    matches, pairs = [], []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for k in range(games_per_pair):
                seat = k % num_seats
                matches.append(tuple(a if s == seat else b for s in range(num_seats)))
                pairs.append((names.index(a), names.index(b), seat))
    scores = np.zeros((len(names), len(names)))
    games = np.zeros((len(names), len(names)))
    for (i, j, seat), got in zip(pairs, play_matches(envs, players, matches, seed=seed),
                                 strict=True):
        points = judge(got, seat).score
        scores[i, j] += points
        scores[j, i] += 1.0 - points
        games[i, j] += 1
        games[j, i] += 1
    index = None if center is None else names.index(center)
    return Tournament(names, scores, games, fit_elo(scores, games, center=index, value=value))


def play_matches(envs: Any, players: Mapping[str, Act], matches: Sequence[Sequence[str]], *,
                 seed: int | None = None) -> np.ndarray:
    """Play every match (a player id per seat); each match's returns per seat, in order."""
    seats = Seats(envs.game_of_row, envs.seat_of_row)
    if envs.metadata.get("autoreset_mode") == AutoresetMode.DISABLED:
        raise ValueError("expected a vector env that auto-resets (NEXT_STEP or SAME_STEP) to "
                         "play matches on, got autoreset_mode DISABLED")
    codes = {name: code for code, name in enumerate(players, start=1)}
    names = {code: name for name, code in codes.items()}
    for match in matches:
        if len(match) != seats.num_seats or any(p not in codes for p in match):
            raise ValueError(f"expected a match to name one of the players {list(players)} "
                             f"for each of the {seats.num_seats} seats, got {match!r}")
    returns = np.zeros((len(matches), seats.num_seats))
    playing = np.full(seats.num_games, -1, dtype=np.int64)  # the match of each game
    queue = iter(range(len(matches)))

    def next_match(game: int) -> list[int]:
        """The codes of the seats of the next match, which ``game`` plays (0s: none left)."""
        match = next(queue, -1)
        playing[game] = match
        return [codes[p] for p in matches[match]] if match >= 0 else [0] * seats.num_seats

    seats.assign(np.arange(seats.num_games), [next_match(g) for g in range(seats.num_games)])
    driver = _Driver(envs, seed)
    remaining = len(matches)
    while remaining:
        obs, rewards, terminations, truncations, infos, env_ids = driver.batch
        ended = seats.ended(rewards, terminations, truncations, infos, env_ids)
        for game in ended.tolist():
            got = seats.take_returns(game)
            if playing[game] >= 0:
                returns[playing[game]] = got
                remaining -= 1
        if ended.size:
            seats.assign(ended, [next_match(game) for game in ended.tolist()])
        if not remaining:
            break
        actions = np.zeros((len(rewards), *envs.single_action_space.shape),
                           dtype=envs.single_action_space.dtype)
        for code, positions in seats.groups(infos.get("active"), env_ids).items():
            actions[positions] = first_legal(obs, positions) if code == 0 else \
                call_player(names[code], players[names[code]], obs, positions)
        driver.advance(actions)
    driver.finish()
    return returns


class _Driver:
    """Steps the envs with ``step``, or with ``send`` / ``recv`` for async batches."""

    def __init__(self, envs: Any, seed: int | None) -> None:
        self.envs = envs
        self.asynchronous = getattr(envs, "batch_size", envs.num_envs) < envs.num_envs
        if self.asynchronous:
            envs.async_reset(seed=seed)
            self.batch = envs.recv()
        else:
            obs, infos = envs.reset(seed=seed)
            none = np.zeros(envs.num_envs, dtype=bool)
            self.batch = (obs, np.zeros(envs.num_envs), none, none, infos, None)

    def advance(self, actions: np.ndarray) -> None:
        if self.asynchronous:
            self.envs.send(actions, self.batch[5])
            self.batch = self.envs.recv()
        else:
            self.batch = (*self.envs.step(actions), None)

    def finish(self) -> None:
        """Take in the batches still in flight, so the envs are idle again."""
        if self.asynchronous:
            for _ in range(self.envs.num_envs // self.envs.batch_size - 1):
                self.envs.recv()
