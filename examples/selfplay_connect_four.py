"""PPO self-play on PettingZoo's connect four, driven by a fastvec league: beat search.

    python examples/selfplay_connect_four.py --export policy.pt    # the documented run
    python examples/selfplay_connect_four.py --plot docs/img/selfplay_connect_four.png
    python examples/selfplay_connect_four.py --backend plain       # the same loop, plain PettingZoo
    python examples/selfplay_connect_four.py --help                # every hyperparameter

``--num-games`` games of ``connect_four_v3`` run as one fastvec vector env, one
row per seat (the trainer steps half of them, one worker process the other half).
A :class:`fastvec.selfplay.League` gives each game's seats to the learner (pure
self-play: both seats make samples) or to the learner and an opponent drawn from
its pool: frozen snapshots (one every ``--snapshot-every`` learner steps,
prioritized fictitious self-play), a random player and shallow heuristic search
(``--search-depths``, 1 and 2 plies; ``connect_four_search.py``), the last two
drawn by PFSP among themselves.  Each step runs one batched forward pass per
policy over the rows it plays that are to move.

The network sees the board and its mirror image as one position (the canonical
one of the two: the lesser, cell by cell), so what it learns of a position holds
for its mirror; logits of illegal moves are masked.  PPO as CleanRL's, with GAE
per row over the learner's own turns; games open with a few random moves, and
the learner's own moves are uniformly random with probability ``--explore``
(kept as off-policy samples: PPO's ratio weighs them).

Every ``--eval-every`` agent-steps the greedy learner plays ``--eval-games``
games, half from each seat, against each of two search players of depth 3 that it
never trains against: ``negamax-3``, tactics only (``search_players.py``: wins and
losses within 3 plies, every other leaf 0), and ``heuristic-3``, the same search
scoring those leaves by a window heuristic (``connect_four_search.py``); at the
end, ``--final-games`` games a seat against both kinds at depth 3 and depth 5.
``--export PATH`` writes its greedy policy as TorchScript: ``forward(observation
float32 [B, 6, 7, 2], action_mask bool [B, 7]) -> logits [B, 7]`` (illegal moves
at -1e9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from connect_four_search import HeuristicConnectFour  # beside this file
from search_players import NegamaxConnectFour
from selfplay_common import BoardSettings, Checks, greedy_player, make_games, make_league, train
from torch import nn

from fastvec.selfplay import League, evaluate

KINDS = ("negamax-d: tactics-only search, negamax to d plies that scores wins and losses and "
         "every other leaf 0 (search_players.py);\nheuristic-d: the same search scoring those "
         "leaves by a window heuristic: centre column, open twos and threes "
         "(connect_four_search.py)")


@dataclass
class Args(BoardSettings):
    """Hyperparameters; each is also a command-line flag (``num_games`` is ``--num-games``)."""

    num_games: int = 256
    total_steps: int = 7_000_000  # agent-steps: moves of every player in every game
    backend: str = "local"  # see selfplay_common.BACKENDS
    seed: int = 1
    num_steps: int = 16  # env steps per rollout
    net: str = "cnn"  # "cnn" or "mlp"
    channels: int = 32  # cnn: channels of its convolutions
    hidden: int = 128
    threats: bool = True  # input planes of the cells that would complete four (fixed convs)
    self_play_share: float = 0.5  # games with the learner in both seats
    snapshot_share: float = 0.3  # games against a snapshot (PFSP)
    random_share: float = 0.05  # games against the random player
    search_share: float = 0.15  # games against heuristic search of search_depths
    search_depths: str = "1,2"  # heuristic search trained against (not 3 or 5: the evaluation's)
    snapshot_every: int = 200_000  # learner steps between snapshots
    max_snapshots: int = 20
    opening_plies: int = 4  # each game opens with 0..4 random moves (no samples)
    random_moves: float = 0.0  # later moves are random with this probability (no samples)
    explore: float = 0.03  # the learner's move is uniformly random with this probability
    update_threads: int = 2  # torch threads in the PPO update (the envs are idle then)
    eval_every: int = 1_000_000  # agent-steps between evaluations against depth 3
    eval_games: int = 200  # games per evaluation, half from each seat
    final_games: int = 200  # final games per seat against depth 3 and depth 5
    export: str = ""  # write the greedy policy as TorchScript here
    plot: str = ""  # write the ratings and evaluation curves here (PNG)
    save_league: str = ""  # write the league's state here (JSON)


class Agent(nn.Module):
    """A small CNN (or an MLP) shared by the policy and value heads, on the canonical board;
    logits mirrored back, illegal moves masked.
    """

    def __init__(self, net: str, channels: int, hidden: int, threats: bool = True) -> None:
        super().__init__()
        self.threats = threats
        planes = 5 if threats else 2
        if net == "cnn":
            self.trunk = nn.Sequential(
                nn.Conv2d(planes, channels, 3, padding=1), nn.ReLU(),
                nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(),
                nn.Flatten(), nn.Linear(channels * 42, hidden), nn.ReLU())
        else:
            self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(planes * 42, hidden), nn.Tanh(),
                                       nn.Linear(hidden, hidden), nn.Tanh())
        self.actor, self.critic = nn.Linear(hidden, 7), nn.Linear(hidden, 1)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                nn.init.orthogonal_(module.weight, np.sqrt(2))
                nn.init.zeros_(module.bias)
        nn.init.orthogonal_(self.actor.weight, 0.01)
        nn.init.orthogonal_(self.critic.weight, 1.0)

    @staticmethod
    def canonical(board: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each board [B, 2, 6, 7] or its mirror, whichever is less cell by cell (the first
        cell where they differ decides), and whether it was mirrored.
        """
        mirror = board.flip(3)
        diff = (board - mirror).flatten(1)
        first = (diff != 0).to(torch.int32).argmax(1, keepdim=True)
        flip = diff.gather(1, first).squeeze(1) > 0
        return torch.where(flip[:, None, None, None], mirror, board), flip

    def completing(self, pieces: torch.Tensor, empty: torch.Tensor) -> torch.Tensor:
        """The empty cells that would complete a line of four of ``pieces`` [B, C, 6, 7]:
        every line of four holding three pieces and one empty cell marks that cell."""
        found = torch.zeros_like(pieces)
        # (row step, column step, rows and columns of window starts, first column)
        for dr, dc, rows, cols, c0 in ((0, 1, 6, 4, 0), (1, 0, 3, 7, 0), (1, 1, 3, 4, 0),
                                       (1, -1, 3, 4, 3)):
            count = torch.zeros_like(pieces[:, :, :rows, :cols])
            room = torch.zeros_like(count)
            for k in range(4):
                r, c = k * dr, c0 + k * dc
                count += pieces[:, :, r:r + rows, c:c + cols]
                room += empty[:, :, r:r + rows, c:c + cols]
            three = ((count == 3) & (room == 1)).to(pieces.dtype)
            for k in range(4):
                r, c = k * dr, c0 + k * dc
                found[:, :, r:r + rows, c:c + cols] += three
        return ((found > 0) & (empty > 0)).to(pieces.dtype)

    def planes(self, board: torch.Tensor) -> torch.Tensor:
        """The network's input: the two boards, and (``threats``) the cells a piece would
        land on now, and the cells that would complete four for each side."""
        if not self.threats:
            return board
        empty = 1.0 - board.sum(1, keepdim=True)
        below = torch.cat([1.0 - empty[:, :, 1:], torch.ones_like(empty[:, :, :1])], 2)
        return torch.cat([board, empty * below, self.completing(board, empty.expand_as(board))],
                         1)

    def forward(self, observation: torch.Tensor,
                action_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked logits [B, 7] and values [B] of boards [B, 6, 7, 2]."""
        board, flip = self.canonical(observation.permute(0, 3, 1, 2))
        features = self.trunk(self.planes(board))
        logits = self.actor(features)
        logits = torch.where(flip[:, None], logits.flip(1), logits)
        return logits.masked_fill(~action_mask, -1e9), self.critic(features).squeeze(1)


class SearchChecks(Checks):
    """Games against search of depth 3 along the way; of depth 3 and 5 at the end."""

    legend = KINDS

    def __init__(self, args: Args) -> None:
        self.args = args
        self.depths = [int(d) for d in args.search_depths.split(",") if d.strip()]
        if {3, 5} & set(self.depths):
            raise ValueError("heuristic search of depth 3 and 5 judges the learner: "
                             "not an opponent")

    def setup(self, envs: Any) -> League:
        # The fixed opponents (the random player and shallow heuristic search) share the
        # league's "fixed" games, drawn by PFSP as the snapshots are.
        args = self.args
        self.envs = make_games("connect_four_v3", min(args.eval_games, 200), "sync")
        self.league = make_league(envs, args, args.random_share + args.search_share)
        for d in self.depths:
            self.league.add_opponent(f"heuristic-{d}",
                                     HeuristicConnectFour(d, seed=args.seed + 20 + d))
        self.league.add_anchor("negamax-3", NegamaxConnectFour(3, seed=args.seed + 1))
        self.league.add_anchor("heuristic-3", HeuristicConnectFour(3, seed=args.seed + 2))
        return self.league

    def check(self, agent: nn.Module, agent_steps: int, seconds: float) -> None:
        results = self.league.evaluate(self.envs, greedy_player(agent), self.args.eval_games,
                                       anchors=["negamax-3", "heuristic-3"],
                                       seed=self.args.seed + 2)
        rates = "  ".join(
            f"vs {name}: win {r.rate('win', 0):6.1%} / {r.rate('win', 1):6.1%}  loss "
            f"{r.rate('loss', 0):6.1%} / {r.rate('loss', 1):6.1%}" for name, r in results.items())
        print(f"step {agent_steps:>10,}  {seconds:7.1f} s  {rates} (first/second)"
              f"  rating {self.league.learner_rating:6.0f}  pool {len(self.league.pool_ids)}",
              flush=True)

    def final(self, agent: nn.Module) -> dict[str, Any]:
        seed = self.args.seed
        anchors = {**{f"negamax-{d}": NegamaxConnectFour(d, seed=seed + d) for d in (3, 5)},
                   **{f"heuristic-{d}": HeuristicConnectFour(d, seed=seed + 10 + d)
                      for d in (3, 5)}}
        return evaluate(self.envs, greedy_player(agent), anchors, 2 * self.args.final_games,
                        seed=seed + 10)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train, evaluate along the way and at the end, export; returns the final figures."""
    args = Args.parse(argv, __doc__)
    return train(args, "connect_four_v3",
                 lambda: Agent(args.net, args.channels, args.hidden, args.threats),
                 SearchChecks(args), f"PPO self-play on connect four ({args.num_games} games)")


if __name__ == "__main__":
    main()
