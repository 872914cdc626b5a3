"""PPO on Atari (Pong by default) over fastvec.atari, or EnvPool with one flag.

    python examples/ppo_atari.py                      # fastvec.atari, trainer + 1 worker
    python examples/ppo_atari.py --vector subproc     # 2 worker processes
    python examples/ppo_atari.py --envpool            # the same loop on EnvPool's C++ Pong
    python examples/ppo_atari.py --help               # every hyperparameter

CleanRL's ``ppo_atari_envpool.py`` recipe in one file: 8 envs, rollouts of 128
steps, the Nature CNN, clipped rewards in the loss (``sign(reward)``, as
``ClipRewardEnv``), GAE, 4 epochs of 4 minibatches, clip 0.1.  The envs are the
same on both sides: ``ALE/Pong-v5`` settings (sticky actions 0.25, up to 108,000
frames), up to 30 no-ops at reset, frame skip 4 with the last two frames
max-pooled, 84x84 grayscale, 4 frames stacked, no end of episode on a lost life;
``fastvec.atari.make`` gives exactly Gymnasium's ``AtariPreprocessing`` +
``FrameStackObservation`` for them, EnvPool its own C++ version of the same.
Both reset an env on the step after its episode ended (``NEXT_STEP``); that
step is left out of the loss.

It prints a line every ``--log-every`` updates (steps, steps/s, mean return of
the last 20 episodes) and at the end the steps per second of the whole training
loop and the share spent in the vector env's ``step``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import fastvec.atari

VECTORS = ("local", "subproc", "sync")


@dataclass
class Args:
    """Hyperparameters; each is also a command-line flag (``num_envs`` is ``--num-envs``)."""

    env_id: str = "ALE/Pong-v5"  # EnvPool's id drops the "ALE/" prefix
    envpool: bool = False  # step EnvPool's C++ envs instead of fastvec.atari
    vector: str = "local"  # fastvec: the trainer steps half the envs (local), or workers
    num_workers: int = 1  # fastvec's worker processes (local: besides the trainer)
    total_timesteps: int = 50_000
    num_envs: int = 8
    num_steps: int = 128
    seed: int = 1
    learning_rate: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.1
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    log_every: int = 1


def parse_args(argv: list[str] | None = None) -> Args:
    """A flag for every field of :class:`Args`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for arg in dataclasses.fields(Args):
        flag = "--" + arg.name.replace("_", "-")
        if arg.type == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=arg.default)
        elif arg.name == "vector":
            parser.add_argument(flag, choices=VECTORS, default=arg.default)
        else:
            kind = {"int": int, "float": float, "str": str}[arg.type]
            parser.add_argument(flag, type=kind, default=arg.default,
                                help=f"default: {arg.default}")
    return Args(**vars(parser.parse_args(argv)))


def make_envs(args: Args) -> Any:
    """``args.num_envs`` preprocessed Atari envs: fastvec.atari, or EnvPool's."""
    if args.envpool:
        import envpool

        return envpool.make_gymnasium(
            args.env_id.removeprefix("ALE/"), num_envs=args.num_envs, seed=args.seed,
            num_threads=args.num_workers + (args.vector == "local"),
            repeat_action_probability=0.25, noop_max=30, frame_skip=4, img_height=84,
            img_width=84, stack_num=4, gray_scale=True, episodic_life=False,
            reward_clip=False, max_episode_steps=27_000)
    vector_kwargs: dict[str, Any] = {"num_workers": args.num_workers}
    if args.vector == "local":
        vector_kwargs["local_block"] = True
    backend = "sync" if args.vector == "sync" else "subproc"
    return fastvec.atari.make(args.env_id, args.num_envs, backend=backend,
                              vector_kwargs=None if backend == "sync" else vector_kwargs)


def layer(module: nn.Module, gain: float = np.sqrt(2)) -> nn.Module:
    """Orthogonal weights, zero bias (CleanRL's ``layer_init``)."""
    nn.init.orthogonal_(module.weight, gain)
    nn.init.zeros_(module.bias)
    return module


class Agent(nn.Module):
    """The Nature CNN with a policy head and a value head."""

    def __init__(self, num_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(
            layer(nn.Conv2d(4, 32, 8, stride=4)), nn.ReLU(),
            layer(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(), nn.Flatten(),
            layer(nn.Linear(64 * 7 * 7, 512)), nn.ReLU())
        self.actor = layer(nn.Linear(512, num_actions), gain=0.01)
        self.critic = layer(nn.Linear(512, 1), gain=1.0)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs), shape ``(batch,)``; ``obs`` uint8 frames."""
        return self.critic(self.network(obs.float() / 255.0)).squeeze(-1)

    def act(self, obs: torch.Tensor, action: torch.Tensor | None = None) -> tuple:
        """Sample an action (or score ``action``): action, log-prob, entropy, value."""
        hidden = self.network(obs.float() / 255.0)
        dist = Categorical(logits=self.actor(hidden))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(hidden).squeeze(-1)


def train(args: Args) -> dict[str, float]:
    """Run PPO; print the curve; return the speed and the last mean return."""
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    n, steps = args.num_envs, args.num_steps
    envs = make_envs(args)
    try:
        agent = Agent(int(envs.single_action_space.n))
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
        frames = tuple(envs.single_observation_space.shape)
        obs_buf = torch.zeros((steps, n, *frames), dtype=torch.uint8)
        actions, logprobs, values, rewards, terms, dones = (
            torch.zeros((steps, n)) for _ in range(6))
        valid = torch.zeros((steps, n), dtype=torch.bool)
        recent: collections.deque = collections.deque(maxlen=20)
        episode_return = np.zeros(n)
        autoreset = np.zeros(n, dtype=bool)
        obs = torch.from_numpy(envs.reset(seed=args.seed)[0])
        global_step, env_seconds, start = 0, 0.0, time.perf_counter()
        for update in range(1, max(1, args.total_timesteps // (n * steps)) + 1):
            for t in range(steps):
                obs_buf[t], valid[t] = obs, torch.from_numpy(~autoreset)
                with torch.no_grad():
                    action, logprobs[t], _, values[t] = agent.act(obs)
                actions[t] = action
                began = time.perf_counter()
                next_obs, reward, term, trunc, _ = envs.step(action.numpy())
                env_seconds += time.perf_counter() - began
                episode_return += reward
                autoreset = term | trunc  # the next step of these envs is a reset
                recent.extend(episode_return[autoreset].tolist())
                episode_return[autoreset] = 0.0
                rewards[t] = torch.from_numpy(np.sign(reward)).float()
                terms[t], dones[t] = torch.from_numpy(term).float(), torch.from_numpy(
                    autoreset).float()
                obs = torch.from_numpy(next_obs)
            global_step += n * steps
            with torch.no_grad():
                next_values = torch.cat([values[1:], agent.value(obs)[None]])
            advantages, last = torch.zeros((steps, n)), torch.zeros(n)
            for t in reversed(range(steps)):
                delta = rewards[t] + args.gamma * next_values[t] * (1 - terms[t]) - values[t]
                last = delta + args.gamma * args.gae_lambda * (1 - dones[t]) * last
                advantages[t] = last
            keep = valid.reshape(-1)
            b_obs = obs_buf.reshape(-1, *frames)[keep]
            b_actions, b_logprobs = actions.reshape(-1)[keep], logprobs.reshape(-1)[keep]
            b_adv = advantages.reshape(-1)[keep]
            b_returns = (advantages + values).reshape(-1)[keep]
            size = max(1, len(b_obs) // args.num_minibatches)
            for _ in range(args.update_epochs):
                order = torch.from_numpy(rng.permutation(len(b_obs)))
                for begin in range(0, len(b_obs), size):
                    mb = order[begin:begin + size]
                    _, logprob, entropy, value = agent.act(b_obs[mb], b_actions[mb].long())
                    ratio = (logprob - b_logprobs[mb]).exp()
                    adv = b_adv[mb]
                    adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
                    clipped = ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                    loss = (torch.max(-adv * ratio, -adv * clipped).mean()
                            - args.ent_coef * entropy.mean()
                            + args.vf_coef * 0.5 * (value - b_returns[mb]).pow(2).mean())
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()
            if update % args.log_every == 0:
                mean = np.mean(recent) if recent else float("nan")
                sps = global_step / (time.perf_counter() - start)
                print(f"step {global_step:>9,}  sps {sps:>6,.0f}  mean_return {mean:6.1f}  "
                      f"(last {len(recent)} episodes)", flush=True)
        elapsed = time.perf_counter() - start
    finally:
        envs.close()
    where = "EnvPool" if args.envpool else f"fastvec.atari ({args.vector})"
    print(f"{global_step:,} steps in {elapsed:.1f} s ({global_step / elapsed:,.0f} steps/s of "
          f"the whole loop, {where})")
    print(f"time in the vector env's step: {env_seconds:.1f} s ({env_seconds / elapsed:.0%})")
    return {"steps_per_second": global_step / elapsed, "env_share": env_seconds / elapsed,
            "mean_return": float(np.mean(recent)) if recent else float("nan")}


if __name__ == "__main__":
    train(parse_args())
