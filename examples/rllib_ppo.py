"""RLlib's PPO (new API stack) on CartPole-v1, with fastvec stepping the envs.

    python examples/rllib_ppo.py                     # until the mean return reaches 450
    python examples/rllib_ppo.py --backend subproc   # each env runner's envs in 2 processes
    python examples/rllib_ppo.py --quick             # two small iterations (the tests run this)

RLlib does everything but step the envs: its env runners (``--num-env-runners`` Ray
actors, or ``0`` for one in this process) each build ``--num-envs`` envs with
``gym.make_vec("fastvec:fastvec/CartPole-v1", ..., vectorization_mode=
"vector_entry_point")``, which gives a fastvec vector env (``--backend sync`` steps
them in the runner, ``subproc`` in ``--num-workers`` worker processes of it).  The
``fastvec:`` prefix makes Gymnasium import fastvec in each remote runner, which
registers the ``fastvec/<id>`` ids there.  After every training iteration one line
shows the agent steps so far, the env-steps/s of the whole loop (sampling and
learning) and RLlib's mean return of the recent episodes.  Needs RLlib and torch:
``pip install -e ".[rllib]"`` (see
docs/trainers.md, RLlib).  Ray starts on 127.0.0.1 only, unless ``RAY_ADDRESS``
names a running one.
"""

from __future__ import annotations

import argparse
import os
import time

import ray
import torch
from ray.rllib.algorithms.ppo import PPOConfig

ENV_ID = "fastvec:fastvec/CartPole-v1"


def parse_args() -> argparse.Namespace:
    """The command line: the setup, a few hyperparameters, ``--quick`` for a smoke run."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-env-runners", type=int, default=1, help="Ray actors that sample")
    p.add_argument("--num-envs", type=int, default=16, help="envs per env runner")
    p.add_argument("--backend", choices=("sync", "subproc"), default="sync")
    p.add_argument("--num-workers", type=int, default=2, help="processes per runner (subproc)")
    p.add_argument("--train-batch", type=int, default=4000, help="env steps per iteration")
    p.add_argument("--minibatch", type=int, default=128)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--target-return", type=float, default=450.0)
    p.add_argument("--max-env-steps", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of the Ray this starts")
    p.add_argument("--torch-threads", type=int, default=1, help="of the learner, here")
    p.add_argument("--quick", action="store_true", help="2 small iterations, for the tests")
    args = p.parse_args()
    if args.quick:
        args.num_envs, args.train_batch, args.minibatch, args.epochs = 4, 256, 128, 1
        args.max_env_steps = 2 * args.train_batch
    if args.num_envs < 1 or args.train_batch < args.num_envs:
        p.error("expected 1 <= --num-envs <= --train-batch")
    return args


def build_config(args: argparse.Namespace) -> PPOConfig:
    """PPO on fastvec's CartPole-v1.

    The lines that matter are the env id, ``gym_env_vectorize_mode`` and
    ``env_config`` (the fastvec backend and its options).
    """
    backend = {"backend": args.backend}
    if args.backend == "subproc":
        backend["backend_kwargs"] = {"num_workers": args.num_workers}
    fragment = max(1, args.train_batch // (args.num_envs * max(args.num_env_runners, 1)))
    return (PPOConfig()
            .environment(ENV_ID, env_config=backend)
            .env_runners(num_env_runners=args.num_env_runners,
                         num_envs_per_env_runner=args.num_envs,
                         gym_env_vectorize_mode="vector_entry_point",
                         rollout_fragment_length=fragment)
            .training(train_batch_size_per_learner=args.train_batch,
                      minibatch_size=args.minibatch, num_epochs=args.epochs, lr=args.lr,
                      vf_loss_coeff=0.01)
            .debugging(seed=args.seed))


def train(args: argparse.Namespace) -> tuple[float, int, float]:
    """Train until the target return or the step budget.

    Returns (mean return, env steps, seconds of training: the iterations, not the
    algorithm's start and stop).
    """
    algo = build_config(args).build_algo()
    start, steps, mean, elapsed = time.perf_counter(), 0, float("nan"), 0.0
    try:
        while steps < args.max_env_steps:
            runners = algo.train()["env_runners"]
            steps = int(runners["num_env_steps_sampled_lifetime"])
            mean = float(runners.get("episode_return_mean", float("nan")))
            elapsed = time.perf_counter() - start
            print(f"agent steps {steps:>9,}  env-steps/s {steps / elapsed:>7,.0f}  "
                  f"mean return {mean:6.1f}", flush=True)
            if mean >= args.target_return:
                break
    finally:
        algo.stop()
    return mean, steps, elapsed


def main() -> None:
    """Start (or join) Ray, train, report."""
    args = parse_args()
    torch.set_num_threads(args.torch_threads)
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=False)
    else:
        ray.init(num_cpus=args.num_cpus, _node_ip_address="127.0.0.1",
                 include_dashboard=False, log_to_driver=False)
    try:
        mean, steps, seconds = train(args)
    finally:
        ray.shutdown()
    reached = "reached" if mean >= args.target_return else "stopped at"
    print(f"{reached} mean return {mean:.1f} (target {args.target_return:g}) after "
          f"{steps:,} env steps in {seconds:.0f} s ({steps / seconds:,.0f} env-steps/s)")


if __name__ == "__main__":
    main()
