"""PPO on CartPole-v1 with Tianshou's own parts, over fastvec's Tianshou vector env.

    python examples/tianshou_ppo.py            # until the mean test return reaches 450
    python examples/tianshou_ppo.py --quick    # a few updates (the tests run this)

Tianshou does everything but step the envs: its ``Collector`` gathers
``--collect-steps`` transitions per update from a
:class:`fastvec.integrations.tianshou.TianshouVecEnv` (``--num-envs`` CartPoles in
``--num-workers`` fastvec worker processes), and its ``PPO`` learns from them
(``--repeat`` passes over the batch in minibatches of ``--batch-size``).  Tianshou
resets each env whose episode ended itself (the fastvec env runs with
``autoreset_mode="disabled"`` and steps the subsets Tianshou names).  Every
``--test-every`` updates a second collector plays ``--test-episodes`` episodes with
the deterministic policy on ``--num-test-envs`` envs stepped in this process, and one
line shows the agent steps so far, the env-steps/s of the whole training loop, the
mean return of the training episodes since the last line and the mean test return.
The run stops when the mean test return reaches ``--target-return``.  The network and
PPO settings are those of Tianshou's own CartPole PPO test (which stops at 195).
Needs ``pip install -e ".[tianshou]"`` (tianshou, torch).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from tianshou.algorithm import PPO
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, CollectStats, VectorReplayBuffer
from tianshou.utils.net.common import ActorCritic, Net
from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic
from tianshou.utils.torch_utils import policy_within_training_step

from fastvec.integrations.tianshou import TianshouVecEnv


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: the hyperparameters, and ``--quick`` for a smoke run."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-envs", type=int, default=20)
    p.add_argument("--num-workers", type=int, default=2, help="fastvec worker processes")
    p.add_argument("--backend", default="subproc", choices=["subproc", "sync"])
    p.add_argument("--collect-steps", type=int, default=2000, help="agent steps per update")
    p.add_argument("--max-steps", type=int, default=500_000, help="agent steps at most")
    p.add_argument("--target-return", type=float, default=450.0)
    p.add_argument("--num-test-envs", type=int, default=10)
    p.add_argument("--test-episodes", type=int, default=20)
    p.add_argument("--test-every", type=int, default=2, help="updates between two tests")
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--repeat", type=int, default=10, help="passes over each batch")
    p.add_argument("--batch-size", type=int, default=64, help="minibatch size")
    p.add_argument("--hidden", type=int, nargs="*", default=[64, 64])
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true",
                   help="4 envs, 3 updates of 256 steps, 2 test episodes")
    args = p.parse_args(argv)
    if args.quick:
        args.num_envs, args.collect_steps, args.max_steps = 4, 256, 768
        args.num_test_envs, args.test_episodes, args.test_every = 2, 2, 1
        args.target_return = float("inf")
    return args


def build_algorithm(args: argparse.Namespace, env: gym.Env) -> PPO:
    """Tianshou's discrete PPO: actor and critic on one shared MLP, as in its CartPole test."""
    net = Net(state_shape=env.observation_space.shape, hidden_sizes=args.hidden)
    actor = DiscreteActor(preprocess_net=net, action_shape=env.action_space.n)
    critic = DiscreteCritic(preprocess_net=net)
    for module in ActorCritic(actor, critic).modules():  # orthogonal initialization
        if isinstance(module, torch.nn.Linear):
            torch.nn.init.orthogonal_(module.weight)
            torch.nn.init.zeros_(module.bias)
    policy = DiscreteActorPolicy(actor=actor, dist_fn=torch.distributions.Categorical,
                                 action_space=env.action_space, deterministic_eval=True)
    return PPO(policy=policy, critic=critic, optim=AdamOptimizerFactory(lr=args.learning_rate),
               gamma=args.gamma, gae_lambda=args.gae_lambda, eps_clip=args.clip,
               max_grad_norm=0.5, vf_coef=0.5, ent_coef=0.0)


def test_return(collector: Collector, episodes: int) -> float:
    """The mean return of ``episodes`` episodes of the deterministic policy."""
    collector.reset()
    return float(collector.collect(n_episode=episodes).returns.mean())


def main(argv: list[str] | None = None) -> float:
    """Train until the mean test return reaches the target; return the last one."""
    args = parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    workers = {"num_workers": args.num_workers} if args.backend == "subproc" else None
    train_envs = TianshouVecEnv("CartPole-v1", args.num_envs, backend=args.backend,
                                vector_kwargs=workers)
    test_envs = TianshouVecEnv("CartPole-v1", args.num_test_envs, backend="sync")
    train_envs.seed(args.seed)
    test_envs.seed(args.seed + 10_000)
    algorithm = build_algorithm(args, gym.make("CartPole-v1"))
    train = Collector[CollectStats](
        algorithm, train_envs, VectorReplayBuffer(args.collect_steps, len(train_envs)))
    test = Collector[CollectStats](algorithm, test_envs)
    train.reset()
    steps, test_mean, returns = 0, float("nan"), []
    start = time.perf_counter()
    updates = 0
    while steps < args.max_steps:
        with policy_within_training_step(algorithm.policy):
            stats = train.collect(n_step=args.collect_steps)
            algorithm.update(buffer=train.buffer, batch_size=args.batch_size,
                             repeat=args.repeat)
        train.reset_buffer(keep_statistics=True)  # on-policy: a fresh batch each update
        steps += stats.n_collected_steps
        returns.extend(stats.returns.tolist())
        updates += 1
        if updates % args.test_every == 0 or steps >= args.max_steps:
            test_mean = test_return(test, args.test_episodes)
            sps = steps / (time.perf_counter() - start)
            train_mean = float(np.mean(returns)) if returns else float("nan")
            print(f"step {steps:>8,}  env-steps/s {sps:>6,.0f}  train return {train_mean:6.1f}"
                  f"  mean test return {test_mean:6.1f}", flush=True)
            returns = []
            if test_mean >= args.target_return:
                break
    elapsed = time.perf_counter() - start
    print(f"{steps:,} agent steps in {elapsed:.1f} s ({steps / elapsed:,.0f} env-steps/s, "
          f"training and tests); mean test return {test_mean:.1f}")
    train.close()
    test.close()
    return test_mean


if __name__ == "__main__":
    main()
