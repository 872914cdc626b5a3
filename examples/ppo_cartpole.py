"""PPO on CartPole-v1 over fastvec's vector envs: one file, one training loop.

    python examples/ppo_cartpole.py                      # subprocess workers (default)
    python examples/ppo_cartpole.py --backend sync       # everything in this process
    python examples/ppo_cartpole.py --help               # every hyperparameter

The envs use fastvec's default autoreset mode, ``NEXT_STEP`` (as in Gymnasium 1.x):
the step after an episode ends returns the first observation of the next
episode with reward 0 and ignores its action.  That step is not a transition of
any episode, so the loop marks it invalid and leaves it out of the advantages
and of the loss.  A side benefit: the step that ends an episode returns that
episode's real last observation, so a time-limit truncation is bootstrapped from
its value.

Every ``--log-every`` updates one line of the learning curve is printed (global
step, steps per second, mean return of the last ``--return-window`` episodes);
at the end, a plot of return against steps and the final average return.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical
from tqdm import tqdm

import fastvec


@dataclass
class Args:
    """Hyperparameters; each is also a command-line flag (``num_envs`` is ``--num-envs``)."""

    env_id: str = "CartPole-v1"
    total_timesteps: int = 200_000
    num_envs: int = 8
    backend: str = "subproc"  # "sync": in this process; "subproc": worker processes
    num_workers: int = 2  # worker processes of the subproc backend
    seed: int = 1
    num_steps: int = 128  # steps per env per rollout
    learning_rate: float = 2.5e-3
    anneal_lr: bool = True  # decay the learning rate linearly to 0
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    log_every: int = 10  # updates between two lines of the learning curve
    return_window: int = 20  # episodes averaged for "mean return"
    target_return: float = 450.0  # report when the mean return first exceeds this


def parse_args() -> Args:
    """Build a flag for every field of :class:`Args` and parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        flag = "--" + field.name.replace("_", "-")
        if field.type == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                default=field.default, help=f"default: {field.default}")
        elif field.name == "backend":
            parser.add_argument(flag, choices=("sync", "subproc"), default=field.default,
                                help=f"default: {field.default}")
        else:
            kind = {"int": int, "float": float, "str": str}[field.type]
            parser.add_argument(flag, type=kind, default=field.default,
                                help=f"default: {field.default}")
    return Args(**vars(parser.parse_args()))


def layer(in_size: int, out_size: int, gain: float = np.sqrt(2)) -> nn.Linear:
    """A linear layer with orthogonal weights and zero bias."""
    linear = nn.Linear(in_size, out_size)
    nn.init.orthogonal_(linear.weight, gain)
    nn.init.zeros_(linear.bias)
    return linear


class Agent(nn.Module):
    """Separate actor and critic MLPs (two hidden layers of 64, tanh)."""

    def __init__(self, obs_size: int, num_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer(obs_size, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, gain=1.0))
        self.actor = nn.Sequential(
            layer(obs_size, 64), nn.Tanh(), layer(64, 64), nn.Tanh(),
            layer(64, num_actions, gain=0.01))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs), shape ``(batch,)``."""
        return self.critic(obs).squeeze(-1)

    def act(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """Sample an action (or score ``action``): action, log-prob, entropy, value."""
        dist = Categorical(logits=self.actor(obs))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


def ascii_plot(points: list[tuple[int, float]], width: int = 60, height: int = 11) -> str:
    """Return against global step as a text plot (one ``*`` per column)."""
    if not points:
        return "(no finished episodes to plot)"
    steps = np.array([p[0] for p in points], dtype=float)
    values = np.array([p[1] for p in points], dtype=float)
    top = max(values.max(), 1.0)
    columns = np.minimum((steps / steps.max() * (width - 1)).astype(int), width - 1)
    rows = np.round(values / top * (height - 1)).astype(int)
    grid = [[" "] * width for _ in range(height)]
    for col, row in zip(columns, rows, strict=True):
        grid[height - 1 - row][col] = "*"
    lines = []
    for i, cells in enumerate(grid):
        label = f"{top * (height - 1 - i) / (height - 1):7.1f}" if i % 2 == 0 else " " * 7
        lines.append(f"{label} |{''.join(cells)}")
    lines.append(" " * 8 + "+" + "-" * width)
    lines.append(" " * 9 + "0" + f"{int(steps.max()):>{width - 1},}" + "  global step")
    return "\n".join(lines)


def main() -> None:
    """Parse the flags, train, print the learning curve and the final average return."""
    args = parse_args()
    batch_size = args.num_envs * args.num_steps
    num_updates = max(1, args.total_timesteps // batch_size)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)

    vector_kwargs: dict = {"episode_statistics": True}  # infos["episode"], infos["_episode"]
    if args.backend == "subproc":
        vector_kwargs["num_workers"] = min(args.num_workers, args.num_envs)
    envs = fastvec.make(args.env_id, num_envs=args.num_envs, backend=args.backend,
                        vector_kwargs=vector_kwargs)
    try:
        obs_size = int(np.prod(envs.single_observation_space.shape))
        agent = Agent(obs_size, int(envs.single_action_space.n))
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

        # Rollout storage, (num_steps, num_envs).  valid[t] is False where step t was an
        # autoreset step: its obs is the previous episode's last one, its action ignored.
        shape = (args.num_steps, args.num_envs)
        obs = torch.zeros(shape + (obs_size,))
        actions = torch.zeros(shape, dtype=torch.long)
        logprobs = torch.zeros(shape)
        rewards = torch.zeros(shape)
        terminated = torch.zeros(shape)
        done = torch.zeros(shape)  # terminated or truncated
        values = torch.zeros(shape)
        valid = torch.zeros(shape, dtype=torch.bool)

        recent = collections.deque(maxlen=args.return_window)
        curve: list[tuple[int, float]] = []
        reached: tuple[int, float] | None = None  # (step, seconds) first above target
        held: tuple[int, float] | None = None  # ... and above it ever since
        global_step = 0
        start = time.perf_counter()
        next_obs = torch.as_tensor(envs.reset(seed=args.seed)[0], dtype=torch.float32)
        autoreset = np.zeros(args.num_envs, dtype=np.bool_)
        progress = tqdm(total=num_updates * batch_size, unit="step", disable=None,
                        dynamic_ncols=True)

        for update in range(1, num_updates + 1):
            if args.anneal_lr:
                optimizer.param_groups[0]["lr"] = \
                    args.learning_rate * (1.0 - (update - 1) / num_updates)

            for t in range(args.num_steps):
                obs[t] = next_obs
                valid[t] = torch.from_numpy(~autoreset)
                with torch.no_grad():
                    action, logprob, _, value = agent.act(next_obs)
                actions[t], logprobs[t], values[t] = action, logprob, value
                next_obs_np, reward, term, trunc, infos = envs.step(action.numpy())
                rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
                terminated[t] = torch.from_numpy(term)
                autoreset = term | trunc  # the next step of these envs is a reset
                done[t] = torch.from_numpy(autoreset)
                next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32)
                global_step += args.num_envs
                if "_episode" in infos:
                    recent.extend(infos["episode"]["r"][infos["_episode"]].tolist())

            # GAE.  next_values[t] = V(obs[t + 1]); after a terminal or truncated step that
            # obs is the episode's real last one, so a truncation is bootstrapped from it.
            # (1 - done[t]) stops the recursion at an episode's end, so nothing from the
            # autoreset step that follows flows back into the episode.
            with torch.no_grad():
                next_values = torch.cat([values[1:], agent.value(next_obs)[None]])
            advantages = torch.zeros(shape)
            last_gae = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                delta = rewards[t] + args.gamma * next_values[t] * (1.0 - terminated[t]) \
                    - values[t]
                last_gae = delta + args.gamma * args.gae_lambda * (1.0 - done[t]) * last_gae
                advantages[t] = last_gae
            returns = advantages + values

            # Minibatch epochs over the valid transitions only.
            keep = valid.reshape(-1)
            b_obs, b_actions = obs.reshape(-1, obs_size)[keep], actions.reshape(-1)[keep]
            b_logprobs, b_advantages = logprobs.reshape(-1)[keep], advantages.reshape(-1)[keep]
            b_returns = returns.reshape(-1)[keep]
            num_valid = len(b_obs)
            minibatch_size = max(1, num_valid // args.num_minibatches)
            loss = torch.tensor(float("nan"))  # stays nan if every step was an autoreset
            for _ in range(args.update_epochs):
                order = torch.from_numpy(rng.permutation(num_valid))
                for begin in range(0, num_valid, minibatch_size):
                    mb = order[begin:begin + minibatch_size]
                    _, new_logprob, entropy, new_value = agent.act(b_obs[mb], b_actions[mb])
                    ratio = (new_logprob - b_logprobs[mb]).exp()
                    adv = b_advantages[mb]
                    adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
                    policy_loss = torch.max(
                        -adv * ratio,
                        -adv * ratio.clamp(1.0 - args.clip_coef, 1.0 + args.clip_coef),
                    ).mean()
                    value_loss = 0.5 * (new_value - b_returns[mb]).pow(2).mean()
                    loss = policy_loss - args.ent_coef * entropy.mean() \
                        + args.vf_coef * value_loss
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()

            elapsed = time.perf_counter() - start
            mean_return = float(np.mean(recent)) if recent else float("nan")
            progress.update(batch_size)
            progress.set_postfix(ret=f"{mean_return:.1f}")
            if recent:
                curve.append((global_step, mean_return))
            if len(recent) == recent.maxlen and mean_return > args.target_return:
                held = held or (global_step, elapsed)
                reached = reached or held
            else:
                held = None
            if update % args.log_every == 0 or update == num_updates:
                progress.write(
                    f"step {global_step:>8,}  sps {global_step / elapsed:>6,.0f}  "
                    f"mean_return {mean_return:6.1f}  (last {len(recent)} episodes)  "
                    f"loss {loss.item():.3f}")
        progress.close()
    finally:
        envs.close()

    elapsed = time.perf_counter() - start
    print(f"\nmean return of the last {len(recent)} episodes vs global step "
          f"({args.num_envs} envs, backend {args.backend}, seed {args.seed}):")
    print(ascii_plot(curve))
    if reached is None:
        print(f"mean return never exceeded {args.target_return:g}")
    else:
        print(f"mean return first exceeded {args.target_return:g} at step {reached[0]:,} "
              f"after {reached[1]:.1f} s")
    if held is not None:
        print(f"mean return stayed above {args.target_return:g} from step {held[0]:,} "
              f"({held[1]:.1f} s) to the end")
    print(f"{global_step:,} steps in {elapsed:.1f} s ({global_step / elapsed:,.0f} steps/s)")
    print(f"final average return: {np.mean(recent) if recent else float('nan'):.1f}")


if __name__ == "__main__":  # worker processes start by forkserver (or spawn)
    main()
