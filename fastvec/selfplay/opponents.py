"""The league's opponent pool: frozen snapshots, fixed opponents and anchors, each with
its record.

Every :class:`PoolEntry` has an id (a string), a kind and a record of the learner's
games against it (wins, draws, losses from the learner's point of view, a running
win rate, an Elo rating).  Snapshots are ids that the trainer maps to weights; fixed
opponents and anchors carry a callable ``act(observation, action_mask) ->
actions``.  An entry taken out of the pool (by :meth:`OpponentPool.remove` or by
eviction) is drawn for no new game, plays the games it is in to their end, and is
then *retired*: the trainer may free its weights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fastvec.selfplay.seats import Result

__all__ = ["EVICTION_RULES", "KINDS", "LEARNER", "OpponentPool", "PoolEntry"]

LEARNER = "learner"
"""The policy id of the learner."""
KINDS = ("snapshot", "fixed", "anchor")
"""Kinds of pool entries: frozen snapshots of the learner, fixed training opponents,
evaluation anchors."""
EVICTION_RULES = ("oldest", "weakest")
"""Which snapshot leaves a full pool: the oldest, or the one with the lowest rating."""


@dataclass
class PoolEntry:
    """One policy of the pool and the learner's record against it."""

    id: str
    code: int  # the number Seats uses for it (the learner is 0)
    kind: str  # one of KINDS
    act: Callable[..., Any] | None = field(default=None, repr=False)
    weight: float = 1.0  # a factor on its chance to be drawn
    rating: float = 1000.0
    created: int = 0  # learner steps when it joined
    train: bool = True  # drawn for training games (anchors only when asked)
    in_pool: bool = True  # False once removed: no new games
    playing: int = 0  # games it plays now
    wins: int = 0  # the learner's results against it
    draws: int = 0
    losses: int = 0
    win_rate: float = 0.5  # running score of the learner against it (draws count half)

    @property
    def games(self) -> int:
        """Games the learner finished against it."""
        return self.wins + self.draws + self.losses

    def record(self, result: Result, window: int) -> None:
        """Count one finished game with the learner's ``result``: its word as a win, a
        draw or a loss, its score into the running win rate.

        The running win rate is the mean score over the games so far with a prior of
        one drawn game, then an exponential average with weight ``1 / window``.
        """
        word = result.word
        self.wins += word == "win"
        self.draws += word == "draw"
        self.losses += word == "loss"
        self.win_rate += (result.score - self.win_rate) / min(self.games + 1, window)

    def state(self) -> dict[str, Any]:
        """The entry as plain data (its callable left out)."""
        return {name: getattr(self, name) for name in ENTRY_FIELDS}


ENTRY_FIELDS = ("id", "code", "kind", "weight", "rating", "created", "train", "in_pool",
                "playing", "wins", "draws", "losses", "win_rate")


class OpponentPool:
    """The pool's entries by id and by code, in the order they joined; removal and
    retirement.
    """

    def __init__(self) -> None:
        self._by_id: dict[str, PoolEntry] = {}
        self._by_code: dict[int, PoolEntry] = {}
        self._retired: list[str] = []
        self.next_code = 1

    def __iter__(self):
        return iter(self._by_id.values())

    def __contains__(self, policy: object) -> bool:
        return policy in self._by_id

    def add(self, policy: str, kind: str, **fields: Any) -> PoolEntry:
        """A new entry; ``policy`` must be a new string id."""
        if not isinstance(policy, str) or not policy:
            raise ValueError(f"expected a policy id that is a non-empty string, got {policy!r}")
        if policy == LEARNER:
            raise ValueError(f"the learner ({LEARNER!r}) cannot be one of its own opponents")
        if policy in self._by_id:
            raise ValueError(f"a policy with id {policy!r} is already in the league "
                             f"(a {self._by_id[policy].kind})")
        entry = PoolEntry(policy, self.next_code, kind, **fields)
        self.next_code += 1
        self._by_id[policy] = entry
        self._by_code[entry.code] = entry
        return entry

    def get(self, policy: str) -> PoolEntry:
        """The entry of ``policy``; a clear error if the league has none."""
        try:
            return self._by_id[policy]
        except (KeyError, TypeError):
            known = ", ".join(repr(p) for p in self._by_id) or "none yet"
            raise ValueError(f"unknown policy id {policy!r}: the league knows {LEARNER!r} and "
                             f"{known}") from None

    def by_code(self, code: int) -> PoolEntry:
        """The entry with this code."""
        return self._by_code[code]

    def drawable(self, kinds: Iterable[str]) -> list[PoolEntry]:
        """Entries that new training games may draw, of these kinds, in joining order."""
        kinds = tuple(kinds)
        return [e for e in self._by_id.values()
                if e.in_pool and e.train and e.kind in kinds]

    def remove(self, policy: str) -> None:
        """Draw ``policy`` for no new game; it retires once the games it plays end."""
        entry = self.get(policy)
        if not entry.in_pool:
            raise ValueError(f"{policy!r} was already removed from the pool")
        entry.in_pool = False
        self._retire_if_idle(entry)

    def game_over(self, code: int) -> None:
        """One game of the entry with ``code`` ended."""
        entry = self._by_code[code]
        entry.playing -= 1
        self._retire_if_idle(entry)

    def pop_retired(self) -> list[str]:
        """Entries removed whose games are all over, since the last call; forgotten here
        (they stay in the ratings and the history).
        """
        retired, self._retired = self._retired, []
        return retired

    def _retire_if_idle(self, entry: PoolEntry) -> None:
        if not entry.in_pool and entry.playing == 0 and entry.id not in self._retired:
            self._retired.append(entry.id)
            entry.act = None

    def evict(self, max_snapshots: int | None, rule: str, keep: str) -> list[str]:
        """Remove snapshots beyond ``max_snapshots`` by ``rule``, never ``keep``."""
        removed = []
        while max_snapshots is not None:
            snapshots = self.drawable(["snapshot"])
            if len(snapshots) <= max_snapshots:
                break
            candidates = [e for e in snapshots if e.id != keep]
            if rule == "weakest":
                victim = min(candidates, key=lambda e: (e.rating, e.code))
            else:
                victim = min(candidates, key=lambda e: e.code)
            self.remove(victim.id)
            removed.append(victim.id)
        return removed

    def totals(self) -> dict[str, dict[str, int]]:
        """The learner's wins, draws and losses against each entry that it played."""
        return {e.id: {"win": e.wins, "draw": e.draws, "loss": e.losses}
                for e in self if e.games}

    def table(self, learner_rating: float) -> str:
        """The entries as a text table, best rated first, after the learner's line."""
        lines = [f"{'policy':<16} {'kind':<8} {'rating':>7} {'games':>7} {'win':>6} "
                 f"{'draw':>6} {'loss':>6} {'win rate':>8}  status",
                 f"{LEARNER:<16} {'learner':<8} {learner_rating:7.0f}"]
        for e in sorted(self, key=lambda e: -e.rating):
            status = "retired" if not e.in_pool else "in pool" if e.train else "eval only"
            lines.append(f"{e.id:<16} {e.kind:<8} {e.rating:7.0f} {e.games:7d} {e.wins:6d} "
                         f"{e.draws:6d} {e.losses:6d} {e.win_rate:8.2f}  {status}")
        return "\n".join(lines)

    @classmethod
    def from_state(cls, state: dict[str, Any], acts: dict[str, Any]) -> OpponentPool:
        """The pool that :meth:`state` wrote down; ``acts``: callables by id."""
        pool = cls()
        for fields in state["entries"]:
            entry = PoolEntry(**{name: fields[name] for name in ENTRY_FIELDS})
            entry.act = acts.get(entry.id)
            pool._by_id[entry.id] = pool._by_code[entry.code] = entry
        pool._retired = list(state["retired"])
        pool.next_code = state["next_code"]
        return pool

    def state(self) -> dict[str, Any]:
        """The pool as plain data."""
        return {"entries": [e.state() for e in self._by_id.values()],
                "retired": list(self._retired), "next_code": self.next_code}
