"""What the two self-play trainers share: PPO over a league's rows, and the vector envs.

``selfplay_tictactoe.py`` and ``selfplay_connect_four.py`` differ in their
networks, their evaluation and their defaults; the loop that fills a rollout
from a vector env of turn-based games driven by a :class:`fastvec.selfplay.League`,
the advantages per row and the PPO update are the same, and live here.

Samples and advantages.  One ``step`` plays one move per game, so a row's agent
acts every other step.  Only the learner's rows that are to move make samples
(both rows of a self-play game, one row of a game against an opponent).  A row's
reward is what its agent got since it last moved, paid when it is to move again
or when its game ends, so a sample's reward is the sum of its row's rewards until
the row's next sample or the end of its game.  GAE runs per row over the row's
own samples; a row's last sample of a rollout whose game goes on has no reward
yet: it is left out of the loss and its value bootstraps the samples before it.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from fastvec.multiagent import make_multiagent
from fastvec.selfplay import LEARNER, PFSP, League, RandomPlayer, plot_history

BACKENDS = ("local", "subproc", "sync", "plain")
"""``local``: the trainer steps half the games and one worker process the other half;
``subproc``: two worker processes; ``sync``: all in the trainer; ``plain``: PettingZoo's
games stepped one by one in a Python loop, without fastvec (for comparison)."""


@dataclass
class PPO:
    """PPO's hyperparameters (CleanRL's names); trainers extend it with their own."""

    learning_rate: float = 3e-3
    anneal_lr: bool = True  # decay the learning rate linearly to 0
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    anneal_ent: bool = True  # decay the entropy bonus linearly to 0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    @staticmethod
    def parse(cls: type, argv: list[str] | None, doc: str | None) -> Any:
        """A flag for every field of the dataclass ``cls``; parse the command line."""
        parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
        for arg in dataclasses.fields(cls):
            flag = "--" + arg.name.replace("_", "-")
            if arg.type == "bool":
                parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                    default=arg.default, help=f"default: {arg.default}")
                continue
            kind = {"int": int, "float": float, "str": str}[arg.type]
            parser.add_argument(flag, type=kind, default=arg.default,
                                choices=BACKENDS if arg.name == "backend" else None,
                                help=f"default: {arg.default!r}")
        return cls(**vars(parser.parse_args(argv)))


# -- the vector envs -----------------------------------------------------------------

def game_fn(name: str) -> Any:
    """PettingZoo's ``env`` constructor of a classic game (turn-based)."""
    return importlib.import_module(f"pettingzoo.classic.{name}").env


def make_games(name: str, num_games: int, backend: str) -> Any:
    """``num_games`` games of ``name`` as one vector env of rows (or a plain loop)."""
    if backend == "plain":
        return PlainGames(game_fn(name), num_games)
    kwargs = {"local": {"num_workers": 1, "local_block": True},
              "subproc": {"num_workers": 2}, "sync": {}}[backend]
    return make_multiagent(game_fn(name), num_games, backend="sync" if backend == "sync"
                           else "subproc", vector_kwargs=kwargs)


class PlainGames:
    """PettingZoo games stepped one by one, with the rows a fastvec vector env of games
    gives (``NEXT_STEP`` autoreset) for games that pay rewards only at their end.
    """

    def __init__(self, fn: Any, num_games: int) -> None:
        self.games = [fn() for _ in range(num_games)]
        self.agents = tuple(self.games[0].possible_agents)
        seats = len(self.agents)
        self.num_games, self.num_envs = num_games, num_games * seats
        self.game_of_row = np.repeat(np.arange(num_games), seats)
        self.seat_of_row = np.tile(np.arange(seats), num_games)
        self.over = np.zeros(num_games, dtype=bool)

    def reset(self, seed: int | None = None) -> tuple[dict, dict]:
        for g, game in enumerate(self.games):
            game.reset(seed=None if seed is None else seed + g)
        self.over[:] = False
        return self._observe()

    def step(self, actions: np.ndarray) -> tuple:
        rewards = np.zeros(self.num_envs)
        ended = np.zeros(self.num_envs, dtype=bool)
        seats = len(self.agents)
        for g, game in enumerate(self.games):
            if self.over[g]:
                game.reset()
                self.over[g] = False
                continue
            mover = self.agents.index(game.agent_selection)
            game.step(int(actions[g * seats + mover]))
            if all(game.terminations.values()) or all(game.truncations.values()):
                self.over[g] = True
                ended[g * seats:(g + 1) * seats] = True
                rewards[g * seats:(g + 1) * seats] = [game.rewards[a] for a in self.agents]
        obs, infos = self._observe(ended)
        return obs, rewards, ended, np.zeros_like(ended), infos

    def _observe(self, ended: np.ndarray | None = None) -> tuple[dict, dict]:
        seen = [game.observe(agent) for game in self.games for agent in self.agents]
        obs = {key: np.stack([o[key] for o in seen]) for key in seen[0]}
        active = np.array([not self.over[g] and game.agent_selection == agent
                           for g, game in enumerate(self.games) for agent in self.agents])
        alive = ~np.repeat(self.over, len(self.agents))
        if ended is not None:
            alive |= ended
        return obs, {"alive": alive, "active": active}

    def close(self) -> None:
        for game in self.games:
            game.close()


def make_league(envs: Any, args: Any) -> League:
    """The trainers' league: self-play, snapshots drawn by PFSP and a random player, in
    the shares ``args`` gives, a snapshot every ``args.snapshot_every`` learner steps."""
    return League.from_env(
        envs, opponents={"random": RandomPlayer(seed=args.seed)},
        shares={"self_play": args.self_play_share, "snapshots": args.snapshot_share,
                "fixed": args.random_share},
        sampling=PFSP("hard", power=2.0, floor=0.05), snapshot_every=args.snapshot_every,
        max_snapshots=args.max_snapshots, seed=args.seed)


class Greedy(nn.Module):
    """What ``--export`` writes: the learner's masked logits, no value head."""

    def __init__(self, agent: nn.Module) -> None:
        super().__init__()
        self.agent = copy.deepcopy(agent).eval()

    def forward(self, observation: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
        """Logits [B, A] of boards [B, H, W, 2] (float32) with masks [B, A] (bool)."""
        return self.agent(observation.float(), action_mask.to(torch.bool))[0]


def greedy_player(agent: nn.Module) -> Any:
    """The greedy learner as a player ``act(observation, action_mask) -> actions``."""
    def act(observation: np.ndarray, action_mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = agent(torch.as_tensor(observation, dtype=torch.float32),
                              torch.as_tensor(action_mask, dtype=torch.bool))
        return logits.argmax(1).numpy()
    return act


def write_outputs(args: Any, agent: nn.Module, league: League, title: str) -> None:
    """``--export`` (TorchScript), ``--plot`` (``plot_history``), ``--save-league``."""
    if args.export:
        torch.jit.save(torch.jit.script(Greedy(agent)), args.export)
        print(f"greedy policy written to {args.export} (TorchScript)")
    if args.plot:
        plot_history(league, args.plot, title)
        print(f"ratings and evaluations plotted to {args.plot}")
    if args.save_league:
        league.save(args.save_league)


# -- rollouts --------------------------------------------------------------------------

@dataclass
class Rollout:
    """``(num_steps, num_rows)`` tensors; ``sample[t, r]``: row r was the learner's, to move."""

    obs: torch.Tensor  # int8 boards (or the observations' own dtype)
    masks: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor  # the row's rewards from sample t to its next sample or game end
    done: torch.Tensor  # the game (for this row) ended before the row's next sample
    sample: torch.Tensor

    @classmethod
    def zeros(cls, num_steps: int, num_rows: int, board: tuple[int, ...],
              num_actions: int, dtype: torch.dtype = torch.int8) -> Rollout:
        shape = (num_steps, num_rows)
        return cls(torch.zeros(shape + board, dtype=dtype),
                   torch.zeros(shape + (num_actions,), dtype=torch.bool),
                   torch.zeros(shape, dtype=torch.long), torch.zeros(shape), torch.zeros(shape),
                   torch.zeros(shape), torch.zeros(shape), torch.zeros(shape, dtype=torch.bool))


def sample_moves(logits: torch.Tensor, generator: torch.Generator,
                 explore: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """A move per row from masked logits and its log-probability.

    With ``explore`` > 0 the move comes from the mixture ``(1 - explore) * policy +
    explore * uniform over legal moves``, and the log-probability is the mixture's: PPO's
    ratio then weighs it as an off-policy sample (an exploratory move that turns out
    well is reinforced; one that turns out badly is clipped away).
    """
    probs = torch.softmax(logits, 1)
    if explore > 0:
        legal = (logits > -1e8).float()
        probs = (1 - explore) * probs + explore * legal / legal.sum(1, keepdim=True)
    actions = torch.multinomial(probs, 1, generator=generator).squeeze(1)
    logprobs = probs.gather(1, actions.unsqueeze(1)).squeeze(1).clamp_min(1e-30).log()
    return actions, logprobs


class Openings:
    """Random openings: each game starts with ``k`` uniformly random moves (no samples),
    ``k`` drawn from 0..``max_plies`` when the game starts, so that the learner meets
    (and learns to punish) positions its own play would not reach.
    """

    def __init__(self, max_plies: int, num_games: int, seed: int,
                 random_moves: float = 0.0) -> None:
        self.max_plies, self.random_moves = max_plies, random_moves
        self.rng = np.random.default_rng(seed)
        self.plies = self.rng.integers(0, max_plies + 1, size=num_games)

    def rows(self, obs: dict, active: np.ndarray, game_of_row: np.ndarray) -> np.ndarray:
        """A bool per row: active and still in its game's random opening."""
        rows = np.flatnonzero(active)
        ply = obs["observation"][rows].reshape(len(rows), -1).sum(1)
        games = game_of_row[rows]
        fresh = games[ply == 0]
        self.plies[fresh] = self.rng.integers(0, self.max_plies + 1, size=fresh.size)
        opening = np.zeros(len(active), dtype=bool)
        opening[rows[ply < self.plies[games]]] = True
        if self.random_moves:
            opening[rows[self.rng.random(rows.size) < self.random_moves]] = True
        return opening


def collect(envs: Any, league: League, agent: nn.Module, snapshots: dict[str, nn.Module],
            roll: Rollout, obs: dict, infos: dict, generator: torch.Generator,
            clock: dict[str, float], openings: Openings | None = None,
            explore: float = 0.0) -> tuple[dict, dict, int]:
    """Fill ``roll`` with ``num_steps`` steps of every game; the last obs and infos and the
    number of moves played (agent-steps).  ``clock["env"]`` adds the time in ``step``.

    ``pending[r]`` is the step of row ``r``'s last sample while it still collects
    rewards: until the row's next sample or the end of its game.
    """
    roll.sample[:] = False
    roll.rewards[:] = 0.0
    roll.done[:] = 0.0
    pending = torch.full((envs.num_envs,), -1, dtype=torch.long)
    actions = np.zeros(envs.num_envs, dtype=np.int64)
    moves = 0
    for t in range(roll.sample.shape[0]):
        active = infos["active"]
        moves += int(active.sum())
        board = torch.from_numpy(obs["observation"])
        mask = torch.from_numpy(obs["action_mask"]).bool()
        if openings is not None:
            opening = openings.rows(obs, active, envs.game_of_row)
            active = active & ~opening
            rows = torch.from_numpy(np.flatnonzero(opening))
            actions[rows.numpy()] = torch.multinomial(mask[rows].float(), 1,
                                                      generator=generator).squeeze(1).numpy()
        rest = league.act_fixed(obs, league.policy_rows(active), actions)
        with torch.no_grad():
            for policy, rows in rest.items():
                index = torch.from_numpy(rows)
                net = agent if policy == LEARNER else snapshots[policy]
                logits, values = net(board[index].float(), mask[index])
                moved, logprobs = sample_moves(logits, generator,
                                               explore if policy == LEARNER else 0.0)
                actions[rows] = moved.numpy()
                if policy == LEARNER:
                    roll.obs[t, index], roll.masks[t, index] = board[index], mask[index]
                    roll.actions[t, index], roll.logprobs[t, index] = moved, logprobs
                    roll.values[t, index], roll.sample[t, index] = values, True
                    pending[index] = t
        began = time.perf_counter()
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        clock["env"] += time.perf_counter() - began
        league.update(rewards, terminations, truncations, infos)
        waiting = torch.nonzero(pending >= 0).squeeze(1)
        steps = pending[waiting]
        roll.rewards[steps, waiting] += torch.as_tensor(rewards, dtype=torch.float32)[waiting]
        ended = torch.from_numpy(terminations | truncations)[waiting]
        roll.done[steps[ended], waiting[ended]] = 1.0
        pending[waiting[ended]] = -1
    return obs, infos, moves


def row_advantages(roll: Rollout, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE per row over that row's samples; returns (advantages, trainable).

    Going back in time, each row carries the value and advantage of its next
    sample.  A sample whose game ended (``done``) bootstraps from nothing; one with
    no next sample in this rollout and no end is not trainable (its reward is not
    in yet) and its value bootstraps the samples before it.
    """
    num_steps, num_rows = roll.sample.shape
    advantages = torch.zeros(num_steps, num_rows)
    trainable = torch.zeros(num_steps, num_rows, dtype=torch.bool)
    next_value, next_advantage = torch.zeros(num_rows), torch.zeros(num_rows)
    has_next = torch.zeros(num_rows, dtype=torch.bool)
    for t in reversed(range(num_steps)):
        here, goes_on = roll.sample[t], 1.0 - roll.done[t]
        delta = roll.rewards[t] + gamma * next_value * goes_on - roll.values[t]
        known = roll.done[t].bool() | has_next
        advantage = torch.where(known, delta + gamma * lam * goes_on * next_advantage, 0.0)
        advantages[t] = torch.where(here, advantage, 0.0)
        trainable[t] = here & known
        next_value = torch.where(here, roll.values[t], next_value)
        next_advantage = torch.where(here, advantage, next_advantage)
        has_next |= here
    return advantages, trainable


def train_ppo(agent: nn.Module, optimizer: torch.optim.Optimizer, roll: Rollout, args: Any,
              progress: float, threads: int = 1) -> int:
    """PPO's clipped update over the rollout's trainable samples; returns their number.
    ``progress`` (0 to 1) decays the learning rate and the entropy bonus if asked;
    torch uses ``threads`` threads meanwhile (the envs' workers are idle), one after.
    """
    torch.set_num_threads(threads)
    try:
        return _train_ppo(agent, optimizer, roll, args, progress)
    finally:
        torch.set_num_threads(1)


def _train_ppo(agent: nn.Module, optimizer: torch.optim.Optimizer, roll: Rollout, args: Any,
               progress: float) -> int:
    if args.anneal_lr:
        optimizer.param_groups[0]["lr"] = args.learning_rate * max(0.0, 1.0 - progress)
    ent_coef = args.ent_coef * (max(0.0, 1.0 - progress) if args.anneal_ent else 1.0)
    advantages, trainable = row_advantages(roll, args.gamma, args.gae_lambda)
    returns = advantages + roll.values
    b_obs, b_masks = roll.obs[trainable].float(), roll.masks[trainable]
    b_actions, b_logprobs = roll.actions[trainable], roll.logprobs[trainable]
    b_advantages, b_returns = advantages[trainable], returns[trainable]
    num_samples = len(b_obs)
    minibatch = max(1, num_samples // args.num_minibatches)
    for _ in range(args.update_epochs):
        order = torch.randperm(num_samples)
        for begin in range(0, num_samples, minibatch):
            mb = order[begin:begin + minibatch]
            logits, value = agent(b_obs[mb], b_masks[mb])
            logp_all = torch.log_softmax(logits, 1)
            logprob = logp_all.gather(1, b_actions[mb].unsqueeze(1)).squeeze(1)
            entropy = -(logp_all.exp() * logp_all).sum(1)
            ratio = (logprob - b_logprobs[mb]).exp()
            adv = b_advantages[mb]
            adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
            policy_loss = torch.max(
                -adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
            value_loss = 0.5 * (value - b_returns[mb]).pow(2).mean()
            loss = policy_loss - ent_coef * entropy.mean() + args.vf_coef * value_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()
    return num_samples


def report_throughput(agent_steps: int, seconds: float, clock: dict[str, float],
                      backend: str) -> None:
    """Print the loop's agent-steps/s and the share of it spent in the vector env."""
    print(f"throughput: {agent_steps / seconds:,.0f} agent-steps/s over the whole training loop "
          f"(backend {backend}); vector env {clock['env']:.1f} s "
          f"({clock['env'] / seconds:.0%}), evaluation {clock['eval']:.1f} s "
          f"({clock['eval'] / seconds:.0%})")
