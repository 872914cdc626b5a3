"""Frames per second of TorchRL's own collection loop, on TorchRL's batched envs and on fastvec.

    python benchmarks/trainers/torchrl_speed.py                      # cartpole and atari
    python benchmarks/trainers/torchrl_speed.py --repeats 5 --json torchrl.json
    python benchmarks/trainers/torchrl_speed.py --systems torchrl-parallel-per-env,fastvec-native

What is timed: TorchRL's collector (``Collector``; ``SyncDataCollector`` before torchrl
0.14) with a random policy (``RandomPolicy`` of the env's action spec) and a fixed
``--frames-per-batch``, iterated for ``--batches`` batches after ``--warmup-batches``:
the env steps, TorchRL's resets of ended envs and the tensordicts it builds.
``--num-envs`` envs (16) of a ``fastvec.bench`` workload (``cartpole``: Gymnasium's
CartPole-v1; ``atari``: ``AtariLikeEnv``, 84x84x4 uint8 frames), on these systems:

- ``torchrl-parallel``: ``ParallelEnv(--num-workers, SerialEnv(num_envs / workers,
  GymWrapper(env)))``: TorchRL's own worker processes, each stepping its envs in turn
  (the same shape as fastvec's: 16 envs in 2 processes).
- ``torchrl-parallel-per-env`` (by name only): ``ParallelEnv(num_envs, GymWrapper(env))``,
  a process per env.
- ``torchrl-gymenv``: ``GymEnv(id, num_envs=16)``: Gymnasium's ``AsyncVectorEnv``
  inside (a process per env).
- ``fastvec-native``: ``fastvec.integrations.torchrl.FastVecEnv``, the subproc backend
  with ``--num-workers`` workers.
- ``fastvec-gymwrapper``: ``GymWrapper`` over the same fastvec env, made with
  ``autoreset_mode="disabled"`` (TorchRL's preferred mode; resets by ``reset_mask``).

Each measurement is a fresh process (``--child``); the systems take turns within each
repeat, in an order that rotates, and the table shows the median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

SYSTEMS = ("torchrl-parallel", "torchrl-gymenv", "fastvec-native", "fastvec-gymwrapper")
BY_NAME_ONLY = ("torchrl-parallel-per-env",)
WORKLOADS = ("cartpole", "atari")


def gym_id(workload: str) -> str:
    """The id under which ``workload`` is registered with Gymnasium (for ``GymEnv``)."""
    return f"FastvecBench/{workload}-v0"


def register_workloads() -> None:
    """Register the workloads as Gymnasium ids.  Run at import as well: the worker
    processes of ``GymEnv``'s ``AsyncVectorEnv`` start by spawning, so they know an id
    only when re-running this module registers it."""
    import gymnasium as gym

    from fastvec.bench.workloads import WORKLOADS as ALL

    for workload in WORKLOADS:
        if gym_id(workload) not in gym.registry:
            gym.register(gym_id(workload), entry_point=ALL[workload].make_env,
                         order_enforce=False, disable_env_checker=True)


register_workloads()


def single_env(workload: str) -> Any:
    """One env of ``workload`` in TorchRL's ``GymWrapper`` (made in a TorchRL worker)."""
    from torchrl.envs import GymWrapper

    from fastvec.bench.workloads import WORKLOADS as ALL

    return GymWrapper(ALL[workload].make_env())


def build(system: str, workload: str, num_envs: int, num_workers: int) -> Any:
    """The TorchRL env of ``system`` running ``num_envs`` envs of ``workload``."""
    from torchrl.envs import GymEnv, GymWrapper, ParallelEnv, SerialEnv

    import fastvec
    from fastvec.bench.workloads import WORKLOADS as ALL
    from fastvec.integrations.torchrl import FastVecEnv

    make_env = ALL[workload].make_env
    options = {"num_workers": num_workers}
    if system == "fastvec-native":
        return FastVecEnv(make_env, num_envs, backend="subproc", vector_kwargs=options)
    if system == "fastvec-gymwrapper":
        return GymWrapper(fastvec.make(make_env, num_envs, backend="subproc",
                                       vector_kwargs={**options, "autoreset_mode": "disabled"}))
    if system == "torchrl-gymenv":
        return GymEnv(gym_id(workload), num_envs=num_envs)
    one = functools.partial(single_env, workload)
    if system == "torchrl-parallel":
        if num_envs % num_workers:
            raise ValueError(f"torchrl-parallel splits {num_envs} envs evenly over "
                             f"{num_workers} workers: give a multiple")
        return ParallelEnv(num_workers, functools.partial(SerialEnv, num_envs // num_workers, one))
    if system == "torchrl-parallel-per-env":
        return ParallelEnv(num_envs, one)
    raise ValueError(f"expected a system of {SYSTEMS + BY_NAME_ONLY}, got {system!r}")


def child(args: argparse.Namespace) -> None:
    """In a fresh process: build, warm up, time ``args.batches`` batches; print JSON."""
    import torch
    from torchrl import collectors

    torch.set_num_threads(1)
    collector_cls = getattr(collectors, "Collector", None) or collectors.SyncDataCollector
    env = build(args.system, args.workload, args.num_envs, args.num_workers)
    collector = collector_cls(env, None, frames_per_batch=args.frames_per_batch,
                              total_frames=-1)
    try:
        batches = iter(collector)
        for _ in range(args.warmup_batches):
            next(batches)
        frames, start = 0, time.perf_counter()
        for _ in range(args.batches):
            frames += next(batches).numel()
        seconds = time.perf_counter() - start
    finally:
        collector.shutdown()
        if not env.is_closed:
            env.close()
    print(json.dumps({"fps": frames / seconds, "frames": frames, "seconds": seconds}))


def measure(args: argparse.Namespace, system: str, workload: str) -> float:
    """Frames per second of one system on one workload, measured in a fresh process."""
    command = [sys.executable, __file__, "--child", "--system", system, "--workload", workload,
               "--num-envs", str(args.num_envs), "--num-workers", str(args.num_workers),
               "--frames-per-batch", str(args.frames_per_batch), "--batches", str(args.batches),
               "--warmup-batches", str(args.warmup_batches)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{system} on {workload} failed:\n{out.stderr[-3000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["fps"])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``--child`` runs one measurement)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help=f"comma-separated, of {', '.join(SYSTEMS + BY_NAME_ONLY)}")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--frames-per-batch", type=int, default=1024)
    p.add_argument("--batches", type=int, default=20, help="batches timed")
    p.add_argument("--warmup-batches", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement")
    p.add_argument("--json", metavar="PATH", help="also write the results here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--system", help=argparse.SUPPRESS)
    p.add_argument("--workload", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in args.systems.split(","):
        if name not in SYSTEMS + BY_NAME_ONLY:
            p.error(f"unknown system {name!r}; expected some of {SYSTEMS + BY_NAME_ONLY}")
    for name in args.workloads.split(","):
        if name not in WORKLOADS:
            p.error(f"unknown workload {name!r}; expected some of {WORKLOADS}")
    return args


def main(argv: list[str] | None = None) -> None:
    """Measure every system on every workload, ``--repeats`` times; print the medians."""
    args = parse_args(argv)
    if args.child:
        child(args)
        return
    systems, workloads = args.systems.split(","), args.workloads.split(",")
    rates: dict[tuple[str, str], list[float]] = {(s, w): [] for s in systems for w in workloads}
    print(f"{os.cpu_count()} cores, load average before: {os.getloadavg()}", flush=True)
    for repeat in range(args.repeats):
        order = systems[repeat % len(systems):] + systems[:repeat % len(systems)]
        for workload in workloads:
            for system in order:
                rates[system, workload].append(measure(args, system, workload))
    print(f"TorchRL collector frames/s, {args.num_envs} envs, {args.num_workers} workers, "
          f"frames_per_batch {args.frames_per_batch}, median of {args.repeats}")
    print(f"{'system':<26}" + "".join(f"{w:>16}" for w in workloads))
    for system in systems:
        print(f"{system:<26}" + "".join(
            f"{statistics.median(rates[system, w]):>16,.0f}" for w in workloads))
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        result = {"settings": {k: getattr(args, k) for k in (
                      "num_envs", "num_workers", "frames_per_batch", "batches",
                      "warmup_batches", "repeats")},
                  "fps": {f"{s}/{w}": rates[s, w] for s, w in rates}}
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
