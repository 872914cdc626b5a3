"""PPO over a league's rows, shared by the self-play trainers: the rollout, the
advantages per row and the update.

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

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from fastvec.selfplay import LEARNER, League


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


def train_ppo(agent: nn.Module, optimizer: torch.optim.Optimizer, roll: Rollout, ppo: PPO,
              progress: float, threads: int = 1) -> int:
    """PPO's clipped update over the rollout's trainable samples; returns their number.
    ``progress`` (0 to 1) decays the learning rate and the entropy bonus if asked;
    torch uses ``threads`` threads meanwhile (the envs' workers are idle), one after.
    """
    torch.set_num_threads(threads)
    try:
        return _train_ppo(agent, optimizer, roll, ppo, progress)
    finally:
        torch.set_num_threads(1)


def _train_ppo(agent: nn.Module, optimizer: torch.optim.Optimizer, roll: Rollout, ppo: PPO,
               progress: float) -> int:
    if ppo.anneal_lr:
        optimizer.param_groups[0]["lr"] = ppo.learning_rate * max(0.0, 1.0 - progress)
    ent_coef = ppo.ent_coef * (max(0.0, 1.0 - progress) if ppo.anneal_ent else 1.0)
    advantages, trainable = row_advantages(roll, ppo.gamma, ppo.gae_lambda)
    returns = advantages + roll.values
    b_obs, b_masks = roll.obs[trainable].float(), roll.masks[trainable]
    b_actions, b_logprobs = roll.actions[trainable], roll.logprobs[trainable]
    b_advantages, b_returns = advantages[trainable], returns[trainable]
    num_samples = len(b_obs)
    minibatch = max(1, num_samples // ppo.num_minibatches)
    for _ in range(ppo.update_epochs):
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
                -adv * ratio, -adv * ratio.clamp(1 - ppo.clip_coef, 1 + ppo.clip_coef)).mean()
            value_loss = 0.5 * (value - b_returns[mb]).pow(2).mean()
            loss = policy_loss - ent_coef * entropy.mean() + ppo.vf_coef * value_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), ppo.max_grad_norm)
            optimizer.step()
    return num_samples
