"""PPO self-play on PettingZoo's tic-tac-toe (or connect four): one file, one training loop.

    python examples/selfplay_tictactoe.py                          # 1M agent-steps, plot off
    python examples/selfplay_tictactoe.py --plot /tmp/winrate.png  # the win-rate curve
    python examples/selfplay_tictactoe.py --env connect_four_v3 --backend subproc
    python examples/selfplay_tictactoe.py --help                   # every hyperparameter

``--num-games`` games run as one fastvec vector env, one row per seat
(``fastvec.multiagent.make_multiagent``).  :class:`fastvec.selfplay.SelfPlay` gives
one seat of every game to the learner and the other to an opponent drawn from a
pool: the random player and frozen snapshots of the learner (one every
``--snapshot-every`` updates, the last ``--pool-size`` of them kept in the pool;
``--random-share`` of the games, once there are snapshots, against the random
player, the rest spread evenly over the snapshots).
The learner's seat changes after each game, so it learns both sides.  Each step
runs one batched forward pass per policy, over the rows it plays whose agent is to
move (``infos["active"]``); logits of illegal moves are masked out
(``obs["action_mask"]``).

Samples and advantages.  A game is turn-based: one ``step`` plays one move per
game, so a row's agent acts every other step.  Only the learner's active rows
make training samples.  fastvec pays a row the reward its agent got since it last
moved when it is to move again or when its game ends, so the reward of a sample
is the sum of its row's rewards until the row's next sample or the end of its
game.  GAE then runs per row over that row's own samples: the value after sample
*t* is the value of the row's next sample, unless the game ended (terminal) in
between.  A row's last sample of a rollout whose game goes on has no reward yet;
it is left out of the loss and its value bootstraps the samples before it.
Truncated games (none in these two) would be treated as lost values, not
bootstrapped.  ``NEXT_STEP`` autoreset: the step after a game ends resets it; no
row is active in it, so it makes no sample.

``--total-steps`` counts agent-steps: moves played in all games, by the learner
and its opponents.  Every ``--eval-every`` agent-steps (and at the end) the greedy
learner plays ``--eval-games`` games against the random player, half of them from
each seat; win/draw/loss are printed, kept as the learning curve, and plotted
with ``--plot PATH`` (needs matplotlib).
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
from torch.distributions import Categorical
from tqdm import tqdm

from fastvec.multiagent import make_multiagent
from fastvec.selfplay import LEARNER, RANDOM, SelfPlay

ENVS = ("tictactoe_v3", "connect_four_v3")


@dataclass
class Args:
    """Hyperparameters; each is also a command-line flag (``num_games`` is ``--num-games``)."""

    env: str = "tictactoe_v3"  # a PettingZoo classic game: one of ENVS
    num_games: int = 64
    total_steps: int = 1_000_000  # agent-steps (moves of every agent in every game)
    backend: str = "sync"  # "sync" or "subproc"
    seed: int = 1
    num_steps: int = 128  # env steps per rollout
    learning_rate: float = 1e-3
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 8
    update_epochs: int = 8
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 128
    snapshot_every: int = 5  # updates between two snapshots added to the pool
    pool_size: int = 10  # snapshots kept in the pool (the random player is always in it)
    random_share: float = 0.5  # share of new games drawn against the random player
    eval_games: int = 1000  # games against the random player per evaluation, both seats
    eval_every: int = 100_000  # agent-steps between evaluations
    plot: str = ""  # write the win-rate curve to this PNG file


def parse_args(argv: list[str] | None = None) -> Args:
    """Build a flag for every field of :class:`Args` and parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for arg in dataclasses.fields(Args):
        flag = "--" + arg.name.replace("_", "-")
        if arg.type == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                default=arg.default, help=f"default: {arg.default}")
            continue
        choices = {"env": ENVS, "backend": ("sync", "subproc")}.get(arg.name)
        kind = {"int": int, "float": float, "str": str}[arg.type]
        parser.add_argument(flag, type=kind, choices=choices, default=arg.default,
                            help=f"default: {arg.default!r}")
    return Args(**vars(parser.parse_args(argv)))


def game_fn(name: str) -> Any:
    """PettingZoo's ``env`` constructor of a classic game (AEC, turn-based)."""
    return importlib.import_module(f"pettingzoo.classic.{name}").env


def layer(in_size: int, out_size: int, gain: float = np.sqrt(2)) -> nn.Linear:
    """A linear layer with orthogonal weights and zero bias."""
    linear = nn.Linear(in_size, out_size)
    nn.init.orthogonal_(linear.weight, gain)
    nn.init.zeros_(linear.bias)
    return linear


class Agent(nn.Module):
    """Separate actor and critic MLPs (two hidden layers, tanh); illegal moves masked."""

    def __init__(self, obs_size: int, num_actions: int, hidden: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(layer(obs_size, hidden), nn.Tanh(),
                                    layer(hidden, hidden), nn.Tanh(), layer(hidden, 1, 1.0))
        self.actor = nn.Sequential(layer(obs_size, hidden), nn.Tanh(),
                                   layer(hidden, hidden), nn.Tanh(),
                                   layer(hidden, num_actions, 0.01))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def dist(self, obs: torch.Tensor, mask: torch.Tensor) -> Categorical:
        """The policy over legal moves only (``mask``: bool, one per action)."""
        logits = self.actor(obs).masked_fill(~mask, -1e9)
        return Categorical(logits=logits)

    def act(self, obs: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None):
        """Sample an action (or score ``action``): action, log-prob, entropy, value."""
        dist = self.dist(obs, mask)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


def as_tensors(obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of PettingZoo observations as (flat float board, bool action mask)."""
    board = torch.as_tensor(obs["observation"], dtype=torch.float32).flatten(1)
    return board, torch.as_tensor(obs["action_mask"]).bool()


def random_moves(mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A uniformly random legal move per row."""
    return torch.multinomial(mask.float(), 1, generator=generator).squeeze(1)


@dataclass
class Rollout:
    """``(num_steps, num_rows)`` tensors; ``sample[t, r]``: row r was the learner's, to move."""

    obs: torch.Tensor
    masks: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor  # the row's rewards from sample t to its next sample or game end
    done: torch.Tensor  # the game (for this row) ended before the row's next sample
    sample: torch.Tensor

    @classmethod
    def zeros(cls, num_steps: int, num_rows: int, obs_size: int, num_actions: int) -> Rollout:
        shape = (num_steps, num_rows)
        return cls(torch.zeros(shape + (obs_size,)),
                   torch.zeros(shape + (num_actions,), dtype=torch.bool),
                   torch.zeros(shape, dtype=torch.long), torch.zeros(shape), torch.zeros(shape),
                   torch.zeros(shape), torch.zeros(shape), torch.zeros(shape, dtype=torch.bool))


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


def choose_actions(selfplay: SelfPlay, obs: dict, active: np.ndarray, agent: Agent,
                   snapshots: dict[str, Agent], generator: torch.Generator,
                   greedy: bool = False) -> tuple[np.ndarray, dict[str, torch.Tensor]]:
    """Every active row's move: one forward pass per policy over the rows it plays.

    Returns the actions (0 for inactive rows: ignored) and, for the learner's rows,
    ``rows``, ``obs``, ``masks``, ``actions``, ``logprobs``, ``values``.
    """
    board, mask = as_tensors(obs)
    actions = torch.zeros(len(active), dtype=torch.long)
    learner: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for policy, rows in selfplay.policy_rows(active).items():
            index = torch.from_numpy(rows)
            if policy == RANDOM:
                actions[index] = random_moves(mask[index], generator)
            elif policy == LEARNER and not greedy:
                action, logprob, _, value = agent.act(board[index], mask[index])
                actions[index] = action
                learner = dict(rows=index, obs=board[index], masks=mask[index], actions=action,
                               logprobs=logprob, values=value)
            elif policy == LEARNER:
                actions[index] = agent.dist(board[index], mask[index]).probs.argmax(1)
            else:
                actions[index] = snapshots[policy].dist(board[index], mask[index]).sample()
    return actions.numpy(), learner


def collect(envs: Any, selfplay: SelfPlay, agent: Agent, snapshots: dict[str, Agent],
            roll: Rollout, obs: dict, infos: dict,
            generator: torch.Generator) -> tuple[dict, dict, int]:
    """Fill ``roll`` with ``num_steps`` steps of every game; return the last obs and infos
    and the number of moves played (agent-steps).

    ``pending[r]`` is the step of row ``r``'s last sample while it still collects
    rewards: until the row's next sample or the end of its game (``done``).
    """
    roll.sample[:] = False
    roll.rewards[:] = 0.0
    roll.done[:] = 0.0
    pending = torch.full((envs.num_envs,), -1, dtype=torch.long)
    moves = 0
    for t in range(roll.sample.shape[0]):
        active = infos["active"]
        moves += int(active.sum())
        actions, mine = choose_actions(selfplay, obs, active, agent, snapshots, generator)
        if mine:
            rows = mine["rows"]
            roll.obs[t, rows], roll.masks[t, rows] = mine["obs"], mine["masks"]
            roll.actions[t, rows], roll.logprobs[t, rows] = mine["actions"], mine["logprobs"]
            roll.values[t, rows], roll.sample[t, rows] = mine["values"], True
            pending[rows] = t
        obs, rewards, terms, truncs, infos = envs.step(actions)
        selfplay.update(rewards, terms, truncs, infos)
        waiting = torch.nonzero(pending >= 0).squeeze(1)
        steps = pending[waiting]
        roll.rewards[steps, waiting] += torch.as_tensor(rewards, dtype=torch.float32)[waiting]
        ended = torch.from_numpy(terms | truncs)[waiting]
        roll.done[steps[ended], waiting[ended]] = 1.0
        pending[waiting[ended]] = -1
    return obs, infos, moves


def evaluate(envs: Any, agent: Agent, seed: int) -> dict[str, float]:
    """Each game of ``envs`` once, greedy learner against the random player, seats alternating
    between games; returns the shares of wins, draws and losses, in all and from each seat
    (``"win"``, ..., ``"win_0"``, ..., ``"loss_1"``).
    """
    selfplay = SelfPlay.from_env(envs, pool=[RANDOM], seed=seed)
    generator = torch.Generator().manual_seed(seed)
    obs, infos = envs.reset(seed=seed)
    first: dict[int, tuple[int, str]] = {}  # game -> (learner seat, result) of its first game
    while len(first) < envs.num_games:
        actions, _ = choose_actions(selfplay, obs, infos["active"], agent, {}, generator, True)
        obs, rewards, terms, truncs, infos = envs.step(actions)
        for outcome in selfplay.update(rewards, terms, truncs, infos):
            first.setdefault(outcome.game, (outcome.learner_seat, outcome.result))
    shares = {}
    for seat in (None, *range(envs.num_envs // envs.num_games)):
        results = [r for s, r in first.values() if seat is None or s == seat]
        suffix = "" if seat is None else f"_{seat}"
        shares.update({r + suffix: results.count(r) / max(1, len(results))
                       for r in ("win", "draw", "loss")})
    return shares


def plot_curve(curve: list[dict], path: str, title: str) -> None:
    """Win/draw/loss rate against the random player over agent-steps, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [point["step"] for point in curve]
    for result, style in (("win", "-o"), ("draw", "--s"), ("loss", ":^")):
        ax.plot(steps, [point[result] for point in curve], style, label=result)
    ax.set(xlabel="agent-steps", ylabel="share of games vs the random player",
           ylim=(0, 1), title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, train by self-play, evaluate along the way, print and plot the curve."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    generator = torch.Generator().manual_seed(args.seed)

    game = game_fn(args.env)
    envs = make_multiagent(game, args.num_games, backend=args.backend)
    eval_envs = make_multiagent(game, args.eval_games)
    try:
        obs_size = int(np.prod(envs.single_observation_space["observation"].shape))
        num_actions = int(envs.single_action_space.n)
        agent = Agent(obs_size, num_actions, args.hidden)
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
        selfplay = SelfPlay.from_env(envs, pool=[RANDOM], seed=args.seed)
        snapshots: dict[str, Agent] = {}
        num_rows = envs.num_envs
        roll = Rollout.zeros(args.num_steps, num_rows, obs_size, num_actions)

        curve: list[dict] = []
        reached: tuple[int, float] | None = None  # first eval at >= 80% wins, <= 5% losses
        agent_steps, update, next_eval = 0, 0, 0
        eval_seconds = 0.0
        obs, infos = envs.reset(seed=args.seed)
        start = time.perf_counter()
        progress = tqdm(total=args.total_steps, unit="step", disable=None, dynamic_ncols=True)

        def run_eval() -> None:
            nonlocal reached, eval_seconds
            began = time.perf_counter()
            point = {"step": agent_steps, **evaluate(eval_envs, agent, args.seed + 1)}
            eval_seconds += time.perf_counter() - began
            point["seconds"] = time.perf_counter() - start
            curve.append(point)
            if reached is None and point["win"] >= 0.8 and point["loss"] <= 0.05:
                reached = (agent_steps, point["seconds"])
            totals = selfplay.totals()
            games = sum(sum(c.values()) for c in totals.values())
            progress.write(f"step {agent_steps:>9,}  vs random: win {point['win']:6.1%}  "
                           f"draw {point['draw']:6.1%}  loss {point['loss']:6.1%}  "
                           f"(losses first/second {point['loss_0']:.1%}/{point['loss_1']:.1%})"
                           f"  training games {games:,}  pool {len(selfplay.pool)}  "
                           f"{point['seconds']:6.1f} s")

        while True:
            if agent_steps >= next_eval:
                run_eval()
                next_eval += args.eval_every
            if agent_steps >= args.total_steps:
                break
            update += 1
            if args.anneal_lr:
                optimizer.param_groups[0]["lr"] = \
                    args.learning_rate * max(0.0, 1.0 - agent_steps / args.total_steps)

            obs, infos, moves = collect(envs, selfplay, agent, snapshots, roll, obs, infos,
                                        generator)
            agent_steps += moves
            progress.update(min(agent_steps, args.total_steps) - progress.n)

            # Advantages per row over the learner's own turns, then PPO's minibatch epochs.
            advantages, trainable = row_advantages(roll, args.gamma, args.gae_lambda)
            returns = advantages + roll.values
            b_obs, b_masks = roll.obs[trainable], roll.masks[trainable]
            b_actions, b_logprobs = roll.actions[trainable], roll.logprobs[trainable]
            b_advantages, b_returns = advantages[trainable], returns[trainable]
            num_samples = len(b_obs)
            minibatch = max(1, num_samples // args.num_minibatches)
            for _ in range(args.update_epochs):
                order = torch.from_numpy(rng.permutation(num_samples))
                for begin in range(0, num_samples, minibatch):
                    mb = order[begin:begin + minibatch]
                    _, logprob, entropy, value = agent.act(b_obs[mb], b_masks[mb], b_actions[mb])
                    ratio = (logprob - b_logprobs[mb]).exp()
                    adv = b_advantages[mb]
                    adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
                    policy_loss = torch.max(
                        -adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                    ).mean()
                    value_loss = 0.5 * (value - b_returns[mb]).pow(2).mean()
                    loss = policy_loss - args.ent_coef * entropy.mean() + args.vf_coef * value_loss
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()

            # A frozen copy of the learner joins the pool; the oldest beyond pool_size leaves
            # it (games that drew it play it to their end: its weights stay in snapshots).
            if update % args.snapshot_every == 0:
                name = f"update-{update}"
                snapshots[name] = copy.deepcopy(agent).requires_grad_(False)
                selfplay.add(name)
                past = [p for p in selfplay.pool if p != RANDOM]
                if len(past) > args.pool_size:
                    selfplay.remove(past.pop(0))
                # snapshots weigh 1 each; the random player what makes its share random_share
                share = min(max(args.random_share, 0.01), 0.99)
                selfplay.add(RANDOM, weight=len(past) * share / (1 - share))
            progress.set_postfix(samples=num_samples, pool=len(selfplay.pool))
        elapsed = time.perf_counter() - start
        progress.close()
    finally:
        envs.close()
        eval_envs.close()

    print(f"\nvs the random player ({args.eval_games} games, greedy learner, both seats), "
          f"{args.env}, {args.num_games} games, backend {args.backend}, seed {args.seed}:")
    print("  agent-steps    win   draw   loss   seconds   (first: win/loss, second: win/loss)")
    for point in curve:
        print(f"  {point['step']:>11,} {point['win']:6.1%} {point['draw']:6.1%} "
              f"{point['loss']:6.1%} {point['seconds']:9.1f}   ({point['win_0']:.1%}/"
              f"{point['loss_0']:.1%}, {point['win_1']:.1%}/{point['loss_1']:.1%})")
    print("training games by opponent (win/draw/loss of the learner):")
    for policy, counts in selfplay.totals().items():
        print(f"  {policy:>12}: {counts['win']:>7,} {counts['draw']:>7,} {counts['loss']:>7,}")
    if reached is None:
        print("never reached >= 80% wins and <= 5% losses against the random player")
    else:
        print(f"first >= 80% wins and <= 5% losses against the random player at "
              f"{reached[0]:,} agent-steps, {reached[1]:.1f} s")
    print(f"{agent_steps:,} agent-steps in {elapsed:.1f} s ({agent_steps / elapsed:,.0f} "
          f"agent-steps/s; {eval_seconds:.1f} s of it evaluating)")
    if args.plot:
        plot_curve(curve, args.plot, f"PPO self-play on {args.env} ({args.num_games} games)")
        print(f"win-rate plot written to {args.plot}")


if __name__ == "__main__":
    main()
