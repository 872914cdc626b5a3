"""PPO on CartPole over a Ray cluster faked on one machine, while its nodes die.

The project's own trainer (``examples/ppo_cartpole.py --vector fastvec-ray``) on a
head node (no CPUs, no envs) and ``--nodes`` worker nodes, each actor asking for an
``envs`` resource that only the worker nodes have.  The same seed is trained
twice, each in a cluster of its own: without faults, then with a worker node
that holds blocks removed at once every ``--kill-every`` seconds (its leftover
processes killed, as on a crashed machine) and a fresh node added a second later.
The vector env restarts the lost blocks elsewhere (``on_worker_failure="restart"``).

Reported for both: the step at which the mean return of the last 20 episodes first
exceeded the target (450) and stayed above it, the final mean return, steps per
second; and the faults injected and the restarts they caused.  The goal: with
faults, the target is reached within the fault-free run's steps plus 10%.

Run: ``python benchmarks/ray_ppo_node_loss.py`` (about 5 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


TRAINER = """
import importlib.util, json, sys
import ray
ray.init(address=sys.argv[1], _node_ip_address="127.0.0.1", logging_level="ERROR",
         log_to_driver=False)
spec = importlib.util.spec_from_file_location("ppo_cartpole", sys.argv[2])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module  # its dataclasses look their module up
spec.loader.exec_module(module)
figures = module.main(sys.argv[3:])
print("FIGURES", json.dumps(figures), flush=True)
"""


def kill_node(cluster: Any, nodes: list[Any], k: int) -> bool:
    """Remove at once a worker node that holds actors (the ``k``-th such, round robin) and
    kill what is left of its processes, as on a crashed machine; whether one was found.
    """
    import ray._private.state as state

    from fastvec.pool.ray.reaper import descendants

    hosts = {actor["Address"]["NodeID"] for actor in state.actors().values()
             if actor.get("State") == "ALIVE"}
    victims = [node for node in nodes if node.node_id in hosts]
    if not victims:
        return False
    victim = victims[k % len(victims)]
    roots = [proc.pid for _, proc in victim.live_processes()]
    pids = set(roots).union(*(descendants(root, skip=-1) for root in roots))
    cluster.remove_node(victim, allow_graceful=False)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    nodes.remove(victim)
    return True


def train(args: argparse.Namespace, faults: bool) -> dict[str, Any]:
    """One training run (a child process joined to a fresh faked cluster); its figures.

    With ``faults``, this process removes a node every ``--kill-every`` seconds while the
    trainer runs, and adds a fresh one a second later.
    """
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "node_ip_address": "127.0.0.1", "include_dashboard": False})

    def add() -> Any:
        return cluster.add_node(num_cpus=1, resources={"envs": 8}, node_ip_address="127.0.0.1")

    nodes = [add() for _ in range(args.nodes)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, _node_ip_address="127.0.0.1", logging_level="ERROR",
             log_to_driver=False)
    command = [sys.executable, "-c", TRAINER, cluster.address,
               str(ROOT / "examples" / "ppo_cartpole.py"),
               "--vector", "fastvec-ray", "--num-workers", str(args.nodes),
               "--actor-resources", "envs=1", "--on-worker-failure", "restart",
               "--timeout", "10", "--seed", str(args.seed),
               "--total-timesteps", str(args.total_timesteps)]
    kills = 0
    with tempfile.TemporaryFile("w+") as log, tempfile.TemporaryFile("w+") as output:
        child = subprocess.Popen(command, stdout=output, stderr=log, text=True)
        try:
            next_kill = time.monotonic() + args.kill_every
            while child.poll() is None:
                time.sleep(0.1)
                if faults and time.monotonic() >= next_kill:
                    if kill_node(cluster, nodes, kills):
                        kills += 1
                        time.sleep(1.0)
                        nodes.append(add())
                    next_kill = time.monotonic() + args.kill_every
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
            ray.shutdown()
            cluster.shutdown()
        log.seek(0)
        errors = log.read()
        output.seek(0)
        out = output.read()
    lines = [line for line in out.splitlines() if line.startswith("FIGURES ")]
    if child.returncode != 0 or not lines:
        raise RuntimeError(f"the trainer failed ({child.returncode}):\n{errors[-3000:]}")
    figures = json.loads(lines[-1][len("FIGURES "):])
    figures["node_kills"] = kills
    figures["restarts"] = errors.count("restarting ")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--kill-every", type=float, default=8.0, help="seconds between kills")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--total-timesteps", type=int, default=200_000)
    args = parser.parse_args()
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    results = {"without faults": train(args, faults=False), "nodes dying": train(args, True)}
    print("\n| run | target held from step | final mean return | steps/s | node kills | "
          "restarts |\n|---|---|---|---|---|---|")
    for name, r in results.items():
        held = f"{r['held'][0]:,}" if r["held"] else "never"
        print(f"| {name} | {held} | {r['final_return']:.1f} | {r['steps'] / r['seconds']:,.0f} "
              f"| {r['node_kills']} | {r['restarts']} |")
    clean, faulty = results["without faults"]["held"], results["nodes dying"]["held"]
    if clean and faulty:
        print(f"with faults: {faulty[0] / clean[0]:.2f}x the fault-free run's steps "
              "to the target")


if __name__ == "__main__":
    main()
