"""PPO on CartPole-v1 with TorchRL's own parts, over fastvec's native TorchRL env.

    python examples/torchrl_ppo.py            # until the mean return reaches 450
    python examples/torchrl_ppo.py --quick    # a few updates (the tests run this)

TorchRL does everything but step the envs: its collector gathers batches from a
:class:`fastvec.integrations.torchrl.FastVecEnv` (``--num-envs`` CartPoles in
``--num-workers`` fastvec worker processes), ``GAE`` computes the advantages and
``ClipPPOLoss`` the loss.  TorchRL resets ended envs itself (the fastvec env runs
with ``autoreset_mode="disabled"``), so the last observation of every episode is
real and a time-limit truncation is bootstrapped from its value.  A ``RewardSum``
transform keeps each episode's return; every ``--log-every`` batches one line
shows the agent steps so far, the env-steps/s of the whole loop and the mean
return of the last ``--return-window`` episodes.  Needs ``pip install -e
".[torchrl]"`` (torch, torchrl, tensordict).
"""

from __future__ import annotations

import argparse
import collections
import inspect
import time

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl import collectors
from torchrl.envs import RewardSum, TransformedEnv
from torchrl.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from fastvec.integrations.torchrl import FastVecEnv

# torchrl 0.14 renamed SyncDataCollector to Collector
Collector = getattr(collectors, "Collector", None) or collectors.SyncDataCollector
# torchrl 0.14 warns that it will add transforms for recurrent policies from 0.15 on
# (this policy has none): keep the env as it is, where the collector has that option
KEEP_ENV = ({"auto_register_policy_transforms": False}
            if "auto_register_policy_transforms" in inspect.signature(Collector).parameters
            else {})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: the hyperparameters, and ``--quick`` for a smoke run."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-workers", type=int, default=2, help="fastvec worker processes")
    p.add_argument("--num-steps", type=int, default=128, help="steps per env per batch")
    p.add_argument("--max-steps", type=int, default=500_000, help="agent steps at most")
    p.add_argument("--target-return", type=float, default=450.0)
    p.add_argument("--return-window", type=int, default=20, help="episodes averaged")
    p.add_argument("--learning-rate", type=float, default=2.5e-3)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--entropy-coef", type=float, default=0.01)
    p.add_argument("--value-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-every", type=int, default=5, help="batches between two lines")
    p.add_argument("--quick", action="store_true", help="3 small batches, for the tests")
    args = p.parse_args(argv)
    if args.quick:
        args.num_envs, args.num_steps, args.log_every = 4, 32, 1
        args.max_steps = 3 * args.num_envs * args.num_steps
    return args


def mlp(inputs: int, outputs: int, out_std: float) -> nn.Sequential:
    """Two hidden layers of 64 tanh units, orthogonal init (as CleanRL's PPO)."""
    layers = [nn.Linear(inputs, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
              nn.Linear(64, outputs)]
    for layer, std in zip(layers[::2], (2**0.5, 2**0.5, out_std), strict=True):
        nn.init.orthogonal_(layer.weight, std)
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


def make_modules(env: TransformedEnv) -> tuple[ProbabilisticActor, ValueOperator]:
    """The policy (one-hot actions, as the env's spec) and the value network."""
    n_obs = env.observation_spec["observation"].shape[-1]
    n_actions = env.action_spec.shape[-1]
    logits = TensorDictModule(mlp(n_obs, n_actions, 0.01), in_keys=["observation"],
                              out_keys=["logits"])
    actor = ProbabilisticActor(logits, in_keys=["logits"], spec=env.action_spec,
                               distribution_class=OneHotCategorical, return_log_prob=True)
    critic = ValueOperator(mlp(n_obs, 1, 1.0), in_keys=["observation"])
    return actor, critic


def train(args: argparse.Namespace) -> tuple[int, float, float, float]:
    """Train until the mean return reaches the target (or ``--max-steps``).

    Returns:
        (agent steps, mean return of the last episodes, seconds, of them collecting).
    """
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    env = TransformedEnv(
        FastVecEnv("CartPole-v1", args.num_envs, backend="subproc",
                   vector_kwargs={"num_workers": args.num_workers}),
        RewardSum())
    env.set_seed(args.seed)
    actor, critic = make_modules(env)
    advantage = GAE(gamma=args.gamma, lmbda=args.gae_lambda, value_network=critic,
                    average_gae=True)
    loss_fn = ClipPPOLoss(actor, critic, clip_epsilon=args.clip, entropy_coeff=args.entropy_coef,
                          critic_coeff=args.value_coef, loss_critic_type="l2")
    optim = torch.optim.Adam(loss_fn.parameters(), lr=args.learning_rate, eps=1e-5)
    batch_size = args.num_envs * args.num_steps
    updates = -(-args.max_steps // batch_size)
    collector = Collector(env, actor, frames_per_batch=batch_size,
                          total_frames=updates * batch_size, **KEEP_ENV)
    returns: collections.deque[float] = collections.deque(maxlen=args.return_window)
    steps, mean, start = 0, float("nan"), time.perf_counter()
    collecting, since = 0.0, start  # the collector's share: from one update's end to a batch
    try:
        for update, batch in enumerate(collector, start=1):
            collecting += time.perf_counter() - since
            steps += batch.numel()
            ended = batch["next", "done"].squeeze(-1)
            returns.extend(batch["next", "episode_reward"][ended].flatten().tolist())
            for group in optim.param_groups:  # the learning rate decays linearly to 0
                group["lr"] = args.learning_rate * (1.0 - (update - 1) / updates)
            loss = ppo_update(args, batch, advantage, loss_fn, optim)
            mean = sum(returns) / len(returns) if returns else float("nan")
            elapsed = time.perf_counter() - start
            if update % args.log_every == 0 or update == updates:
                print(f"agent steps {steps:>9,}  env-steps/s {steps / elapsed:>7,.0f}  "
                      f"mean_return {mean:6.1f}  (last {len(returns)} episodes)  "
                      f"loss {loss:.3f}", flush=True)
            if len(returns) == args.return_window and mean >= args.target_return:
                break
            since = time.perf_counter()
    finally:
        collector.shutdown()
        env.close()
    return steps, mean, time.perf_counter() - start, collecting


def ppo_update(args: argparse.Namespace, batch, advantage: GAE, loss_fn: ClipPPOLoss,
               optim: torch.optim.Optimizer) -> float:
    """``--epochs`` passes of ``--minibatches`` clipped-PPO steps over one batch."""
    with torch.no_grad():
        advantage(batch)
    flat = batch.reshape(-1)
    size = flat.numel() // args.minibatches
    total = 0.0
    for _ in range(args.epochs):
        for idx in torch.randperm(flat.numel()).split(size):
            parts = loss_fn(flat[idx])
            loss = parts["loss_objective"] + parts["loss_critic"] + parts["loss_entropy"]
            optim.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(loss_fn.parameters(), args.max_grad_norm)
            optim.step()
            total = float(loss.detach())
    return total


def main(argv: list[str] | None = None) -> None:
    """Train, then print what was reached, in how many agent steps and how long."""
    args = parse_args(argv)
    steps, mean, seconds, collecting = train(args)
    reached = "reached" if mean >= args.target_return else "did not reach"
    print(f"{reached} mean return {mean:.1f} (target {args.target_return:g}) after "
          f"{steps:,} agent steps in {seconds:.1f} s ({steps / seconds:,.0f} env-steps/s)")
    print(f"collecting: {collecting:.1f} s ({100 * collecting / seconds:.0f}% of the loop; "
          f"{steps / collecting:,.0f} env-steps/s while collecting)")


if __name__ == "__main__":
    main()
