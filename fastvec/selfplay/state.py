"""A league's state as plain data, and back: what a resumed run needs.

The state holds the settings, the pool (every entry's kind, rating, record, running
win rate), the learner's rating and counters, the seats of the games in progress
with their running returns, the history, the evaluations and the state of the
random generator, so a league saved and loaded draws what the original would
have drawn.  Callables (fixed opponents, anchors) are not data: the loader takes
them again by id, and refuses a state that names one it was not given.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from fastvec.selfplay.opponents import OpponentPool
from fastvec.selfplay.players import Act
from fastvec.selfplay.sampling import sampling_from_state, sampling_state
from fastvec.selfplay.settings import LeagueSettings

__all__ = ["league_state", "load_league_state"]

COUNTERS = ("learner_rating", "learner_steps", "games", "snapshots_taken", "since_snapshot")
VERSION = 1


def league_state(league: Any) -> dict[str, Any]:
    """Everything ``league`` knows, as JSON-able data (callables left out)."""
    seats = league.seats
    return {
        "version": VERSION,
        "game_of_row": seats.game_of_row.tolist(), "seat_of_row": seats.seat_of_row.tolist(),
        "settings": dataclasses.asdict(league.settings),
        "sampling": sampling_state(league.sampling),
        "counters": {name: copy.deepcopy(getattr(league, name)) for name in COUNTERS},
        "pool": league.pool.state(),
        "seats": {"code": seats.code.tolist(), "returns": seats.returns.tolist(),
                  "learner_seat": league.learner_seat.tolist()},
        "history": copy.deepcopy(league.history),
        "evaluations": copy.deepcopy(league.evaluations),
        "rng": league.rng.bit_generator.state,
    }


def load_league_state(league: Any, state: Mapping[str, Any], players: Mapping[str, Act]) -> None:
    """Put ``state`` (from :func:`league_state`) into ``league``, whose rows must be the
    same games; ``players`` gives the callables of fixed opponents and anchors by id.
    """
    if state.get("version") != VERSION:
        raise ValueError(f"expected a league state of version {VERSION}, got "
                         f"{state.get('version')!r}")
    seats = league.seats
    if state["game_of_row"] != seats.game_of_row.tolist() \
            or state["seat_of_row"] != seats.seat_of_row.tolist():
        raise ValueError("expected a league state of the same games and seats as this league "
                         f"({seats.num_games} games of {seats.num_seats} seats)")
    needed = [e["id"] for e in state["pool"]["entries"]
              if e["kind"] != "snapshot" and (e["in_pool"] or e["playing"] > 0)]
    missing = [policy for policy in needed if policy not in players]
    if missing:
        raise ValueError(f"the saved league has fixed opponents or anchors {missing}; pass "
                         "their callables by id: players={...}")
    settings = LeagueSettings(**copy.deepcopy(state["settings"]))  # checked before any change
    acts = {p: act for p, act in players.items() if p in needed}
    league.settings = settings
    league.pool = OpponentPool.from_state(state["pool"], acts)
    league.sampling = sampling_from_state(state["sampling"])
    for name, value in state["counters"].items():
        setattr(league, name, copy.deepcopy(value))
    seats.assign(np.arange(seats.num_games), np.asarray(state["seats"]["code"], dtype=np.int64))
    seats.returns[:] = np.asarray(state["seats"]["returns"], dtype=np.float64)
    league.learner_seat[:] = np.asarray(state["seats"]["learner_seat"], dtype=np.int64)
    league.history = copy.deepcopy(list(state["history"]))
    league.evaluations = copy.deepcopy(list(state["evaluations"]))
    league.rng.bit_generator.state = state["rng"]
