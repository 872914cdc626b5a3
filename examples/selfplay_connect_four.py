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

import copy
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from connect_four_search import HeuristicConnectFour  # noqa: E402
from search_players import NegamaxConnectFour  # noqa: E402
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

from fastvec.selfplay import evaluate  # noqa: E402

KINDS = ("negamax-d: tactics-only search, negamax to d plies that scores wins and losses and "
         "every other leaf 0 (search_players.py);\nheuristic-d: the same search scoring those "
         "leaves by a window heuristic: centre column, open twos and threes "
         "(connect_four_search.py)")


@dataclass
class Args(PPO):
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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train, evaluate along the way and at the end, export; returns the final figures."""
    args = PPO.parse(Args, argv, __doc__)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(args.seed)
    envs = make_games("connect_four_v3", args.num_games, args.backend)
    eval_envs = make_games("connect_four_v3", min(args.eval_games, 200), "sync")
    # The fixed opponents (the random player and shallow heuristic search) share the
    # league's "fixed" games, drawn by PFSP as the snapshots are.
    depths = [int(d) for d in args.search_depths.split(",") if d.strip()]
    if {3, 5} & set(depths):
        raise ValueError("heuristic search of depth 3 and 5 judges the learner: not an opponent")
    league = make_league(envs, dataclasses.replace(
        args, random_share=args.random_share + args.search_share))
    for d in depths:
        league.add_opponent(f"heuristic-{d}", HeuristicConnectFour(d, seed=args.seed + 20 + d))
    league.add_anchor("negamax-3", NegamaxConnectFour(3, seed=args.seed + 1))
    league.add_anchor("heuristic-3", HeuristicConnectFour(3, seed=args.seed + 2))
    agent = Agent(args.net, args.channels, args.hidden, args.threats)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    snapshots: dict[str, Agent] = {}
    openings = Openings(args.opening_plies, args.num_games, args.seed, 0.0) \
        if args.opening_plies else None
    roll = Rollout.zeros(args.num_steps, envs.num_envs, (6, 7, 2), 7)
    clock = {"env": 0.0, "eval": 0.0}
    agent_steps, next_eval = 0, 0
    obs, infos = envs.reset(seed=args.seed)
    start = time.perf_counter()

    def check() -> None:
        began = time.perf_counter()
        results = league.evaluate(eval_envs, greedy_player(agent), args.eval_games,
                                  anchors=["negamax-3", "heuristic-3"], seed=args.seed + 2)
        clock["eval"] += time.perf_counter() - began
        rates = "  ".join(
            f"vs {name}: win {r.rate('win', 0):6.1%} / {r.rate('win', 1):6.1%}  loss "
            f"{r.rate('loss', 0):6.1%} / {r.rate('loss', 1):6.1%}" for name, r in results.items())
        print(f"step {agent_steps:>10,}  {began - start:7.1f} s  {rates} (first/second)"
              f"  rating {league.learner_rating:6.0f}  pool {len(league.pool_ids)}",
              flush=True)

    print(KINDS, flush=True)
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
        anchors = {**{f"negamax-{d}": NegamaxConnectFour(d, seed=args.seed + d) for d in (3, 5)},
                   **{f"heuristic-{d}": HeuristicConnectFour(d, seed=args.seed + 10 + d)
                      for d in (3, 5)}}
        final = evaluate(eval_envs, greedy_player(agent), anchors, 2 * args.final_games,
                         seed=args.seed + 10)
        final_seconds = time.perf_counter() - began
    finally:
        envs.close()
        eval_envs.close()
    print(f"\n{agent_steps:,} agent-steps in {elapsed:.1f} s of training "
          f"(+{final_seconds:.1f} s for the final games)")
    report_throughput(agent_steps, elapsed, clock, args.backend)
    print(KINDS)
    for result in final.values():
        print(result.summary())
    print(league.table())
    write_outputs(args, agent, league, f"PPO self-play on connect four ({args.num_games} games)")
    return {"agent_steps": agent_steps, "seconds": elapsed, "results": final,
            "clock": clock, "agent": agent, "league": league}


if __name__ == "__main__":
    main()
