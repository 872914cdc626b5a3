"""Self-play: a league of rated opponents over the rows of a vector env of games.

A vector env of games (``fastvec.make_multiagent``) has one row per seat of each
game.  :class:`League` decides which policy plays each row: the learner in every
seat (pure self-play) or in one seat against an opponent drawn from its pool
(frozen snapshots of the learner, fixed opponents such as :class:`RandomPlayer`),
judges and rates every finished game, takes snapshots on its triggers and
evicts old ones.  :func:`evaluate` plays a policy against evaluation anchors from
every seat; :func:`tournament` rates players in a round robin.  See
docs/selfplay.md.
"""

from fastvec.selfplay.evaluation import Evaluation, Tournament, evaluate, play_matches, tournament
from fastvec.selfplay.league import League, Outcome
from fastvec.selfplay.opponents import LEARNER, PoolEntry
from fastvec.selfplay.players import RandomPlayer
from fastvec.selfplay.plots import plot_history
from fastvec.selfplay.ratings import elo_expected, elo_update, fit_elo
from fastvec.selfplay.sampling import PFSP, Recency, Uniform
from fastvec.selfplay.seats import RESULTS
from fastvec.selfplay.settings import SHARES

__all__ = [
    "LEARNER", "PFSP", "RESULTS", "SHARES", "Evaluation", "League", "Outcome", "PoolEntry",
    "RandomPlayer", "Recency", "Tournament", "Uniform", "elo_expected", "elo_update",
    "evaluate", "fit_elo", "play_matches", "plot_history", "tournament",
]
