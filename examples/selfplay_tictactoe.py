"""PPO self-play on PettingZoo's tic-tac-toe, driven by a fastvec league: perfect play.

    python examples/selfplay_tictactoe.py --export policy.pt    # the documented run
    python examples/selfplay_tictactoe.py --plot docs/img/selfplay_tictactoe.png
    python examples/selfplay_tictactoe.py --backend plain       # the same loop, plain PettingZoo
    python examples/selfplay_tictactoe.py --help                # every hyperparameter

``--num-games`` games of ``tictactoe_v3`` run as one fastvec vector env, one row
per seat (the trainer steps half of them, one worker process the other half).
A :class:`fastvec.selfplay.League` gives each game's seats to the learner (pure
self-play: both seats make samples) or to the learner and an opponent drawn
from its pool: frozen snapshots (one every ``--snapshot-every`` learner steps,
prioritized fictitious self-play) and a random player.  Each step runs one
batched forward pass per policy over the rows it plays that are to move.

The network sees the board in one of its 8 orientations, the same for all
rotations and reflections of a position (the canonical one: the least base-3
code), so what it learns of a position holds for its mirror images; logits of
illegal moves are masked.  PPO as CleanRL's, with GAE per row over the learner's
own turns (a row's reward is what its agent got since it last moved).

Every ``--eval-every`` agent-steps the greedy learner is checked exactly: every
game it can play from each seat against every legal reply (what a random player
may do) and against every optimal reply (what a perfect player may do), counted
as lines won, drawn and lost.  At the end it plays 1,000 games against each
anchor, the perfect player (minimax) and the random player, half from each
seat, and ``--export PATH`` writes its greedy policy as TorchScript:
``forward(observation float32 [B, 3, 3, 2], action_mask bool [B, 9]) -> logits
[B, 9]`` (illegal moves at -1e9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from search_players import PerfectTicTacToe, tictactoe_values  # beside this file
from selfplay_common import BoardSettings, Checks, greedy_player, make_games, make_league, train
from torch import nn

from fastvec.selfplay import League, RandomPlayer


@dataclass
class Args(BoardSettings):
    """Hyperparameters; each is also a command-line flag (``num_games`` is ``--num-games``)."""

    num_games: int = 256
    total_steps: int = 1_000_000  # agent-steps: moves of every player in every game
    backend: str = "local"  # see selfplay_common.BACKENDS
    seed: int = 1
    num_steps: int = 8  # env steps per rollout
    hidden: int = 128
    explore: float = 0.05  # the learner's move is uniformly random with this probability
    self_play_share: float = 0.6  # games with the learner in both seats
    snapshot_share: float = 0.3  # games against a snapshot (PFSP)
    random_share: float = 0.1  # games against the random player
    snapshot_every: int = 40_000  # learner steps between snapshots
    max_snapshots: int = 20
    opening_plies: int = 5  # each game opens with 0..5 random moves (no samples)
    random_moves: float = 0.0  # later moves are random with this probability (no samples)
    eval_every: int = 100_000  # agent-steps between exact checks
    curve_games: int = 100  # games against each anchor at each check, for the curves
    eval_games: int = 1000  # final games against each anchor, half from each seat
    update_threads: int = 2  # torch threads in the PPO update (the envs are idle then)
    export: str = ""  # write the greedy policy as TorchScript here
    plot: str = ""  # write the ratings and evaluation curves here (PNG)
    save_league: str = ""  # write the league's state here (JSON)


# -- the board in its canonical orientation ------------------------------------------

GRID = np.arange(9).reshape(3, 3)
# PERMS[g][i]: the cell of the board that lands on cell i under symmetry g
PERMS = np.array([np.rot90(GRID, k).ravel() for k in range(4)]
                 + [np.rot90(GRID.T, k).ravel() for k in range(4)])
INVERSE = np.argsort(PERMS, axis=1)


def canonical_table() -> np.ndarray:
    """For each base-3 code of a board (0 empty, 1 mine, 2 theirs), the symmetry that gives
    its least code.
    """
    codes = np.arange(3 ** 9)
    cells = (codes[:, None] // 3 ** np.arange(9)) % 3
    moved = np.stack([(cells[:, perm] * 3 ** np.arange(9)).sum(1) for perm in PERMS], axis=1)
    return moved.argmin(axis=1)


class Agent(nn.Module):
    """Actor and critic MLPs on the canonical board; logits mapped back, illegal masked."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.register_buffer("table", torch.from_numpy(canonical_table()))
        self.register_buffer("perms", torch.from_numpy(PERMS))
        self.register_buffer("inverse", torch.from_numpy(INVERSE))
        self.register_buffer("powers", 3 ** torch.arange(9))

        def mlp(out: int, gain: float) -> nn.Sequential:
            layers = [nn.Linear(18, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                      nn.Linear(hidden, out)]
            for k, layer in enumerate(layers[::2]):
                nn.init.orthogonal_(layer.weight, np.sqrt(2) if k < 2 else gain)
                nn.init.zeros_(layer.bias)
            return nn.Sequential(*layers)

        self.actor, self.critic = mlp(9, 0.01), mlp(1, 1.0)

    def canonical(self, board: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The flat canonical board [B, 18] and the symmetry used, per row."""
        cells = board.reshape(-1, 9, 2)
        code = ((cells[:, :, 0] + 2 * cells[:, :, 1]).long() * self.powers).sum(1)
        sym = self.table[code]
        moved = cells.gather(1, self.perms[sym].unsqueeze(2).expand(-1, 9, 2))
        return moved.reshape(-1, 18), sym

    def forward(self, board: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor,
                                                                         torch.Tensor]:
        """Masked logits [B, 9] (in the board's own cells) and values [B]."""
        flat, sym = self.canonical(board)
        logits = self.actor(flat).gather(1, self.inverse[sym])
        return logits.masked_fill(~mask, -1e9), self.critic(flat).squeeze(1)


# -- the exact check: every line against every legal / optimal reply ---------------

LINES = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8],
                  [0, 4, 8], [2, 4, 6]])


def exact_check(act: Any, seat: int, replies: str) -> dict[str, int]:
    """Lines the greedy player ``act`` wins, draws and loses from ``seat`` when the other
    side plays every legal move (``replies="all"``) or every optimal one (``"optimal"``).

    Boards are [N, 9] of 0 empty, 1 the first player, 2 the second.
    """
    boards = np.zeros((1, 9), dtype=np.int8)
    counts = {"win": 0, "draw": 0, "loss": 0}
    for ply in range(9):
        mover = 1 + ply % 2
        mine = np.where(boards == mover, 1, 0)
        theirs = np.where((boards != 0) & (boards != mover), 1, 0)
        obs = np.stack([mine, theirs], axis=2).reshape(-1, 3, 3, 2).astype(np.int8)
        legal = boards == 0
        if ply % 2 == seat:
            moves = act(obs, legal)
            children, parents = moves, np.arange(len(boards))
        else:
            allowed = legal if replies == "all" else \
                tictactoe_values(obs) == tictactoe_values(obs).max(axis=1, keepdims=True)
            parents, children = np.nonzero(allowed & legal)
        boards = boards[parents].copy()
        boards[np.arange(len(boards)), children] = mover
        won = (boards[:, LINES] == mover).all(axis=2).any(axis=1)
        counts["win" if ply % 2 == seat else "loss"] += int(won.sum())
        boards = boards[~won]
    counts["draw"] += len(boards)
    return counts


# -- training ------------------------------------------------------------------------

class ExactChecks(Checks):
    """The exact check along the way (and sampled games for the curves); at the end,
    ``--eval-games`` games against the perfect and the random player."""

    def __init__(self, args: Args) -> None:
        self.args = args
        self.points: list[dict[str, Any]] = []
        self.final_games = f"the final {args.eval_games:,} games per anchor"

    def setup(self, envs: Any) -> League:
        self.league = make_league(envs, self.args)
        self.league.add_anchor("perfect", PerfectTicTacToe(seed=self.args.seed + 1))
        self.league.add_anchor("random-eval", RandomPlayer(seed=self.args.seed + 2))
        self.envs = make_games("tictactoe_v3", 100, "sync")
        return self.league

    def check(self, agent: nn.Module, agent_steps: int, seconds: float) -> None:
        act = greedy_player(agent)
        point: dict[str, Any] = {"agent_steps": agent_steps, "seconds": seconds}
        for seat in (0, 1):
            for replies in ("all", "optimal"):
                point[f"{replies}_{seat}"] = exact_check(act, seat, replies)
        self.points.append(point)
        if self.args.curve_games:  # sampled games too, for the curves of plot_history
            self.league.evaluate(self.envs, act, self.args.curve_games, seed=self.args.seed + 4)
        losses = [point[k]["loss"] for k in ("all_0", "all_1", "optimal_0", "optimal_1")]
        print(f"step {agent_steps:>9,}  {seconds:6.1f} s  lost lines vs every "
              f"legal reply {losses[0]}/{losses[1]}, vs every optimal reply "
              f"{losses[2]}/{losses[3]} (first/second)  rating {self.league.learner_rating:6.0f}"
              f"  pool {len(self.league.pool_ids)}", flush=True)

    def final(self, agent: nn.Module) -> dict[str, Any]:
        return self.league.evaluate(self.envs, greedy_player(agent), self.args.eval_games,
                                    seed=self.args.seed + 3)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train, check, evaluate, export; returns the final figures."""
    args = Args.parse(argv, __doc__)
    checks = ExactChecks(args)
    out = train(args, "tictactoe_v3", lambda: Agent(args.hidden), checks,
                f"PPO self-play on tic-tac-toe ({args.num_games} games)")
    return {**out, "checks": checks.points}


if __name__ == "__main__":
    main()
