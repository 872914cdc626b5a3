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

import copy
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_players import PerfectTicTacToe, tictactoe_values  # noqa: E402
from selfplay_common import (  # noqa: E402  (the examples' own helpers, beside this file)
    PPO,
    Openings,
    Rollout,
    collect,
    greedy_player,
    make_games,
    make_league,
    report_throughput,
    train_ppo,
    write_outputs,
)

from fastvec.selfplay import RandomPlayer  # noqa: E402


@dataclass
class Args(PPO):
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

def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train, check, evaluate, export; returns the final figures."""
    args = PPO.parse(Args, argv, __doc__)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(args.seed)
    envs = make_games("tictactoe_v3", args.num_games, args.backend)
    league = make_league(envs, args)
    league.add_anchor("perfect", PerfectTicTacToe(seed=args.seed + 1))
    league.add_anchor("random-eval", RandomPlayer(seed=args.seed + 2))
    agent = Agent(args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    snapshots: dict[str, Agent] = {}
    openings = Openings(args.opening_plies, args.num_games, args.seed, args.random_moves) \
        if args.opening_plies or args.random_moves else None
    roll = Rollout.zeros(args.num_steps, envs.num_envs, (3, 3, 2), 9)
    checks: list[dict[str, Any]] = []
    clock = {"env": 0.0, "eval": 0.0}
    agent_steps, next_eval = 0, 0
    eval_envs = make_games("tictactoe_v3", 100, "sync")
    obs, infos = envs.reset(seed=args.seed)
    start = time.perf_counter()

    def check() -> None:
        began = time.perf_counter()
        act = greedy_player(agent)
        point = {"agent_steps": agent_steps, "seconds": began - start}
        for seat in (0, 1):
            for replies in ("all", "optimal"):
                point[f"{replies}_{seat}"] = exact_check(act, seat, replies)
        checks.append(point)
        if args.curve_games:  # sampled games too, for the curves of plot_history
            league.evaluate(eval_envs, act, args.curve_games, seed=args.seed + 4)
        losses = [point[k]["loss"] for k in ("all_0", "all_1", "optimal_0", "optimal_1")]
        print(f"step {agent_steps:>9,}  {point['seconds']:6.1f} s  lost lines vs every "
              f"legal reply {losses[0]}/{losses[1]}, vs every optimal reply "
              f"{losses[2]}/{losses[3]} (first/second)  rating {league.learner_rating:6.0f}"
              f"  pool {len(league.pool_ids)}", flush=True)
        clock["eval"] += time.perf_counter() - began

    try:
        while True:
            if agent_steps >= next_eval:
                check()
                next_eval += args.eval_every
            if agent_steps >= args.total_steps:
                break
            progress = agent_steps / args.total_steps
            obs, infos, moves = collect(envs, league, agent, snapshots, roll, obs, infos,
                                        generator, clock, openings, args.explore)
            agent_steps += moves
            train_ppo(agent, optimizer, roll, args, progress, threads=args.update_threads)
            if league.snapshot_due:
                snapshots[league.add_snapshot()] = copy.deepcopy(agent).requires_grad_(False)
            for policy in league.pop_retired():
                del snapshots[policy]
        elapsed = time.perf_counter() - start
        began = time.perf_counter()
        results = league.evaluate(eval_envs, greedy_player(agent), args.eval_games,
                                  seed=args.seed + 3)
        final_seconds = time.perf_counter() - began
    finally:
        envs.close()
        eval_envs.close()
    print(f"\n{agent_steps:,} agent-steps in {elapsed:.1f} s of training "
          f"(+{final_seconds:.1f} s for the final {args.eval_games:,} games per anchor)")
    report_throughput(agent_steps, elapsed, clock, args.backend)
    for result in results.values():
        print(result.summary())
    print(league.table())
    write_outputs(args, agent, league, f"PPO self-play on tic-tac-toe ({args.num_games} games)")
    return {"agent_steps": agent_steps, "seconds": elapsed, "checks": checks,
            "results": results, "clock": clock, "agent": agent, "league": league}


if __name__ == "__main__":
    main()
