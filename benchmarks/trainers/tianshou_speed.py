"""Frames per second of Tianshou's own Collector: Tianshou's vector envs against fastvec.

    PYTHONPATH=. python benchmarks/trainers/tianshou_speed.py --repeats 5 --json ts.json
    PYTHONPATH=. python benchmarks/trainers/tianshou_speed.py --seconds 1 --repeats 1 \\
        --warmup-steps 64          # a smoke run

What is timed is ``Collector.collect(n_step=...)`` of Tianshou's ``Collector`` with a
fixed policy (every env gets action ``t % 2`` at the collector's ``t``-th step), 16
envs, on the ``cartpole`` and ``atari`` workloads of ``fastvec.bench.workloads``
(``atari``: ``AtariLikeEnv``, uint8 (84, 84, 4) frames).  The frames per second
count env steps, the collector's own work (policy, buffer, resets of ended envs)
included, as a Tianshou user sees them.  Systems:

- ``tianshou-subproc``: Tianshou's ``SubprocVectorEnv``: one process per env, so 16
  processes (Tianshou has no option to put several envs in one worker).
- ``tianshou-shmem``: Tianshou's ``ShmemVectorEnv``: the same 16 processes,
  observations through shared memory.
- ``fastvec``: ``fastvec.integrations.tianshou.TianshouVecEnv`` over a
  ``fastvec.SubprocVecEnv`` with 2 worker processes (8 envs each).

Each measurement runs in a fresh process (this script with ``--system``): it builds
the envs and the collector, collects ``--warmup-steps`` untimed, then collects for
``--seconds``.  Systems take turns within each of ``--repeats`` rounds, and the
table shows each system's median.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

SYSTEMS = ("tianshou-subproc", "tianshou-shmem", "fastvec")
WORKLOADS = ("cartpole", "atari")
NUM_ENVS = 16
NUM_WORKERS = 2  # fastvec's worker processes
CHUNK = NUM_ENVS * 32  # env steps per collect() call


def make_envs(system: str, workload: str):
    """The 16 envs of ``workload`` as ``system`` runs them, for Tianshou's Collector."""
    from fastvec.bench.workloads import WORKLOADS as ALL

    make_env = ALL[workload].make_env
    if system == "fastvec":
        from fastvec.integrations.tianshou import TianshouVecEnv

        return TianshouVecEnv([make_env] * NUM_ENVS, backend="subproc",
                              vector_kwargs={"num_workers": NUM_WORKERS})
    from tianshou.env import ShmemVectorEnv, SubprocVectorEnv

    cls = {"tianshou-subproc": SubprocVectorEnv, "tianshou-shmem": ShmemVectorEnv}[system]
    return cls([make_env] * NUM_ENVS)


def measure(system: str, workload: str, seconds: float, warmup_steps: int) -> dict:
    """Collect for ``seconds`` after a warm-up; env steps per second and the counts."""
    import numpy as np
    from tianshou.algorithm.algorithm_base import Policy
    from tianshou.data import Batch, Collector, VectorReplayBuffer

    class CyclePolicy(Policy):
        """Action ``t % 2`` for every env at the ``t``-th call: fixed, and no network."""

        calls = 0

        def forward(self, batch, state=None, **kwargs):
            CyclePolicy.calls += 1
            return Batch(act=np.full(len(batch.obs), CyclePolicy.calls % 2, np.int64),
                         state=state)

    envs = make_envs(system, workload)
    space = envs.get_env_attr("action_space", 0)[0]
    collector = Collector(CyclePolicy(action_space=space), envs,
                          VectorReplayBuffer(NUM_ENVS * 64, NUM_ENVS))
    collector.reset()
    if warmup_steps:
        collector.collect(n_step=warmup_steps)
    steps, episodes = 0, 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        stats = collector.collect(n_step=CHUNK)
        steps += stats.n_collected_steps
        episodes += stats.n_collected_episodes
    elapsed = time.perf_counter() - start
    envs.close()
    return {"fps": steps / elapsed, "steps": steps, "episodes": int(episodes),
            "seconds": elapsed}


def run_child(system: str, workload: str, args: argparse.Namespace) -> dict:
    """One measurement in a fresh process."""
    command = [sys.executable, __file__, "--system", system, "--workload", workload,
               "--seconds", str(args.seconds), "--warmup-steps", str(args.warmup_steps)]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{system} on {workload} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("tianshou", "fastvec", "gymnasium", "numpy", "torch"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--seconds", type=float, default=5.0, help="timed window")
    parser.add_argument("--warmup-steps", type=int, default=NUM_ENVS * 64)
    parser.add_argument("--json", metavar="PATH", help="write every figure here")
    parser.add_argument("--system", help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.system:  # a child: one measurement
        print(json.dumps(measure(args.system, args.workload, args.seconds, args.warmup_steps)))
        return
    systems, workloads = args.systems.split(","), args.workloads.split(",")
    for name in systems:
        if name not in SYSTEMS:
            parser.error(f"unknown system {name!r}; expected some of {', '.join(SYSTEMS)}")
    load_before = os.getloadavg()
    print(f"{os.cpu_count()} cores, load average before: {load_before}; {versions()}")
    runs: dict[str, dict[str, list[dict]]] = {w: {s: [] for s in systems} for w in workloads}
    for _ in range(args.repeats):
        for workload in workloads:
            for system in systems:  # interleaved: a drift of the machine hits every system
                runs[workload][system].append(run_child(system, workload, args))
    medians = {w: {s: statistics.median(r["fps"] for r in runs[w][s]) for s in systems}
               for w in workloads}
    print(f"\n{'workload':<10} {'system':<18} {'frames/s (median)':>18} {'min':>9} {'max':>9}"
          f" {'vs fastvec':>11}")
    for workload in workloads:
        for system in systems:
            fps = [r["fps"] for r in runs[workload][system]]
            ratio = (f"{medians[workload][system] / medians[workload]['fastvec']:.2f}x"
                     if "fastvec" in systems else "")
            print(f"{workload:<10} {system:<18} {medians[workload][system]:>18,.0f} "
                  f"{min(fps):>9,.0f} {max(fps):>9,.0f} {ratio:>11}")
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "date": datetime.date.today().isoformat(), "machine": platform.platform(),
            "cores": os.cpu_count(), "python": platform.python_version(),
            "versions": versions(), "num_envs": NUM_ENVS, "fastvec_workers": NUM_WORKERS,
            "seconds": args.seconds, "warmup_steps": args.warmup_steps,
            "repeats": args.repeats, "load_before": load_before,
            "load_after": os.getloadavg(), "runs": runs, "medians": medians}, indent=2))


if __name__ == "__main__":
    main()
