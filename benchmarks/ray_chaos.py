"""Chaos on a Ray cluster faked on one machine: ``RayVecEnv`` with restarts, under faults.

A head node (no CPUs, no envs) and ``--nodes`` worker nodes of one logical CPU each,
all on 127.0.0.1 (``ray.cluster_utils.Cluster``); one ``RayVecEnv`` with two actors
per worker node (``actor_options={"resources": {"envs": 1}}`` keeps them off the
head), ``on_worker_failure="restart"`` and a step ``timeout``.  Faults, in turn:

- ``crash``: a worker node removed at once (``remove_node(allow_graceful=False)``,
  then whatever of its processes is left is killed), and a new node added;
- ``hang``: every process of a worker node stopped with SIGSTOP (a node cut off);
  once the step that restarts its blocks returns, the node is removed and replaced;
- ``env-death``: an env ends its actor's process (``os._exit``) in its next step;
- ``trainer-killed``: a second trainer (a child process with a ``RayVecEnv`` of its
  own on the cluster) is killed with SIGKILL; its actors and processes must go.

Every row carries its own check: an env observes ``[row, t, sum of its actions]``
(autoreset SAME_STEP), so the trainer knows what each row must show after every
step; a row that shows anything else is *mixed up*.  For each fault: the time from
the fault to the step that reports its rows restarted; for a re-added node, the
time until the steps per second are back to 90% of the rate before the fault.  A
step that takes longer than ``--hang-seconds`` counts as a hang.  At the end:
processes left behind (descendants of this script, once everything is closed),
actors still alive, and what is new in /dev/shm.

Run: ``python benchmarks/ray_chaos.py --faults 100`` (about 10 minutes on 2 cores);
``--json PATH`` writes every figure.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

import gymnasium as gym
import numpy as np

import fastvec
from fastvec.pool.ray.reaper import descendants

KINDS = ("crash", "hang", "env-death", "trainer-killed")
ENVS_PER_ACTOR = 2
EPISODE = 50


class RowEnv(gym.Env):
    """Observes ``[row, t, sum of actions]``; ends its process at a step when told to."""

    def __init__(self, row: int, death_dir: str) -> None:
        self.row, self.death_dir = row, death_dir
        self.observation_space = gym.spaces.Box(0, 10**9, (3,), np.int64)
        self.action_space = gym.spaces.Discrete(3)
        self.t = self.total = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.row, self.t, self.total], np.int64)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.t = self.total = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        death = os.path.join(self.death_dir, f"die-{self.row}")
        if os.path.exists(death):
            os.unlink(death)
            os._exit(1)
        self.t += 1
        self.total += int(action)
        return self._obs(), 1.0, self.t >= EPISODE, False, {}


def row_fn(row: int, death_dir: str) -> Any:
    return lambda: RowEnv(row, death_dir)


class Rows:
    """What every row must observe next, given the actions sent."""

    def __init__(self, n: int) -> None:
        self.expected = np.zeros((n, 3), np.int64)
        self.expected[:, 0] = np.arange(n)

    def check(self, obs: np.ndarray, actions: np.ndarray, done: np.ndarray) -> int:
        """Rows that observe what they should not; the expectation moves on."""
        want = self.expected.copy()
        want[:, 1] += 1
        want[:, 2] += actions
        want[done, 1:] = 0  # SAME_STEP: an episode's end shows the next one's first obs
        bad = int((obs != want).any(axis=1).sum())
        self.expected = obs.copy()
        return bad


class RestartTimes(logging.Handler):
    """When each restart was decided (its WARNING on the ``fastvec`` logger)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.times: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("restarting"):
            self.times.append(time.monotonic())

    def first_after(self, t: float) -> float | None:
        return next((x for x in self.times if x >= t), None)


def start_cluster(nodes: int) -> tuple[Any, list[Any]]:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    workers = [add_node(cluster) for _ in range(nodes)]
    cluster.wait_for_nodes()
    return cluster, workers


def add_node(cluster: Any) -> Any:
    return cluster.add_node(num_cpus=1, resources={"envs": 8}, node_ip_address="127.0.0.1")


def node_pids(node: Any) -> list[int]:
    """The node's own processes (raylet...) and their descendants (its workers)."""
    roots = [proc.pid for _, proc in node.live_processes()]
    found = set(roots)
    for root in roots:
        found.update(descendants(root, skip=-1))
    return sorted(found)


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


TRAINER = textwrap.dedent("""
    import os, sys, time, numpy as np, gymnasium as gym, ray, fastvec
    ray.init(address=sys.argv[1], _node_ip_address="127.0.0.1", logging_level="ERROR",
             log_to_driver=False)
    vec = fastvec.RayVecEnv([lambda: gym.make("CartPole-v1")] * 2, num_actors=2,
                            actor_options={"resources": {"envs": 1}})
    vec.reset(seed=0)
    print("pids", *sorted(set(vec.call_each(lambda env: os.getpid()))), flush=True)
    while True:
        vec.step(np.zeros(2, np.int64))
""")


def node_of(env: Any) -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def alive_actors() -> dict[str, int]:
    """The cluster's alive actors: id -> process id."""
    import ray._private.state as state

    return {key: actor["Pid"] for key, actor in state.actors().items()
            if actor.get("State") == "ALIVE"}


def kill_a_trainer(address: str, limit: float) -> dict[str, Any]:
    """Start a second trainer on the cluster, kill it; how long until its actors are gone."""
    errors = tempfile.TemporaryFile("w+")
    child = subprocess.Popen([sys.executable, "-c", TRAINER, address], stdout=subprocess.PIPE,
                             stderr=errors, text=True)
    assert child.stdout is not None
    line = ""
    while not line.startswith("pids"):  # its actors are up and stepping
        line = child.stdout.readline()
        if not line:
            errors.seek(0)
            raise RuntimeError("the second trainer ended before its actors started:\n"
                               + errors.read()[-3000:])
    pids = [int(word) for word in line.split()[1:]]
    assert len(pids) == 2, f"expected the trainer's 2 actors' process ids, got {pids}"
    child.kill()
    child.wait()
    killed = time.monotonic()

    def orphans() -> int:
        return sum(pid in pids for pid in alive_actors().values())

    def left() -> int:
        return sum(os.path.exists(f"/proc/{pid}") for pid in pids)

    while (orphans() or left()) and time.monotonic() - killed < limit:
        time.sleep(0.05)
    return {"seconds": time.monotonic() - killed, "orphan_actors": orphans(),
            "left_processes": left()}


class Chaos:
    """One ``RayVecEnv`` with restarts on a faked cluster, stepped between faults."""

    def __init__(self, args: argparse.Namespace) -> None:
        import ray

        self.args = args
        self.cluster, self.nodes = start_cluster(args.nodes)
        ray.init(address=self.cluster.address, _node_ip_address="127.0.0.1",
                 logging_level="ERROR")
        self.death_dir = tempfile.mkdtemp(prefix="fastvec-chaos-")
        self.n = n = args.nodes * 2 * ENVS_PER_ACTOR
        self.vec = fastvec.RayVecEnv([row_fn(i, self.death_dir) for i in range(n)],
                                     num_actors=n // ENVS_PER_ACTOR,
                                     actor_options={"resources": {"envs": 1}},
                                     on_worker_failure="restart", max_restarts=None,
                                     timeout=args.timeout, autoreset_mode="SameStep")
        self.rng = np.random.default_rng(args.seed)
        self.rows = Rows(n)
        self.vec.reset(seed=0)
        self.stats: dict[str, Any] = {"faults": [], "mixed_rows": 0, "hangs": 0, "steps": 0}
        self.stepped_at: list[float] = []
        self.restart_times = RestartTimes()
        logging.getLogger("fastvec").addHandler(self.restart_times)

    def step(self) -> dict:
        """One step of random actions, checked row by row; its infos."""
        actions = self.rng.integers(0, 3, self.n)
        start = time.monotonic()
        obs, _, term, trunc, infos = self.vec.step(actions)
        now = time.monotonic()
        self.stats["steps"] += 1
        self.stats["hangs"] += now - start > self.args.hang_seconds
        self.stats["mixed_rows"] += self.rows.check(obs, actions, term | trunc)
        self.stepped_at.append(now)
        return infos

    def rate(self, seconds: float) -> float:
        """Steps per second over the last ``seconds``."""
        now = time.monotonic()
        return sum(1 for t in self.stepped_at[-10000:] if now - t <= seconds) / seconds

    def until_restarted(self) -> float | None:
        """Step until a step reports restarted rows; when it returned."""
        start = time.monotonic()
        while time.monotonic() - start < self.args.hang_seconds:
            if self.step().get("_worker_restarted", np.zeros(1, bool)).any():
                return time.monotonic()
        return None

    def recovery(self, baseline: float, limit: float = 10.0) -> float | None:
        """Seconds until a 1-s window steps at 90% of ``baseline``."""
        start = time.monotonic()
        while time.monotonic() - start < limit:
            self.step()
            if time.monotonic() - start >= 1.0 and self.rate(1.0) >= 0.9 * baseline:
                return time.monotonic() - start
        return None

    def fault(self, kind: str) -> dict[str, Any]:
        """Inject one fault of ``kind`` after ``--between`` seconds of steps; its figures."""
        warm = time.monotonic()
        while time.monotonic() - warm < self.args.between:
            self.step()
        baseline = self.rate(self.args.between)
        record: dict[str, Any] = {"kind": kind}
        if kind == "trainer-killed":
            return record | kill_a_trainer(self.cluster.address, self.args.hang_seconds)
        if kind == "env-death":
            row = int(self.rng.integers(self.n))
            open(os.path.join(self.death_dir, f"die-{row}"), "w").close()
        hosts = set(self.vec.call_each(node_of))  # a new node may hold no block yet
        candidates = [node for node in self.nodes if node.node_id in hosts]
        victim = candidates[int(self.rng.integers(len(candidates)))]
        pids = node_pids(victim)
        fault_at = time.monotonic()
        if kind == "crash":
            self.cluster.remove_node(victim, allow_graceful=False)
            kill_all(pids)  # a crashed machine leaves nothing running
        elif kind == "hang":
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
        restarted = self.until_restarted()
        detected = self.restart_times.first_after(fault_at)
        record["to_first_good_step"] = None if restarted is None else restarted - fault_at
        record["detected"] = None if detected is None else detected - fault_at
        if kind in ("crash", "hang"):
            if kind == "hang":  # the stopped node is ended, as a lost one would be
                self.cluster.remove_node(victim, allow_graceful=False)
                kill_all(pids)
            self.nodes.remove(victim)
            self.nodes.append(add_node(self.cluster))
            record["back_to_90_percent"] = self.recovery(baseline)
        return record

    def close(self) -> None:
        import ray

        self.stats["restarts"] = int(self.vec.total_restarts)
        self.vec.close()
        ray.shutdown()
        self.cluster.shutdown()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every fault of ``args``, then what was left behind."""
    shm_before = set(os.listdir("/dev/shm"))
    chaos = Chaos(args)
    began = time.monotonic()
    try:
        for k in range(args.faults):
            if time.monotonic() - began > args.seconds:
                break
            record = chaos.fault(KINDS[k % len(KINDS)])
            chaos.stats["faults"].append(record)
            print(json.dumps(record), flush=True)
    finally:
        chaos.stats["seconds"] = time.monotonic() - began
        chaos.close()
    stats = chaos.stats
    deadline = time.monotonic() + 20
    while descendants(os.getpid(), skip=-1) and time.monotonic() < deadline:
        time.sleep(0.2)
    stats["left_processes"] = len(descendants(os.getpid(), skip=-1))
    stats["new_in_dev_shm"] = sorted(set(os.listdir("/dev/shm")) - shm_before)
    return stats


def spread(faults: list[dict[str, Any]], key: str) -> str:
    """``median / worst`` of a figure over ``faults``, or how many never got there."""
    values = [f[key] for f in faults if key in f]
    if not values:
        return "-"
    if any(v is None for v in values):
        return f"{sum(v is None for v in values)} never"
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


def summary(stats: dict[str, Any]) -> str:
    lines = [f"{len(stats['faults'])} faults in {stats['seconds']:.0f} s, {stats['steps']} steps, "
             f"{stats['restarts']} restarts; hangs {stats['hangs']}, rows mixed up "
             f"{stats['mixed_rows']}, processes left {stats['left_processes']}; new in "
             f"/dev/shm (any process's): {stats['new_in_dev_shm'] or 'nothing'}",
             "| fault | count | detected (s) | to first good step (s) | back to 90% after "
             "re-add (s) | killed trainer's actors gone (s) |",
             "|---|---|---|---|---|---|"]
    for kind in KINDS:
        faults = [f for f in stats["faults"] if f["kind"] == kind]
        lines.append(f"| {kind} | {len(faults)} | {spread(faults, 'detected')} | "
                     f"{spread(faults, 'to_first_good_step')} | "
                     f"{spread(faults, 'back_to_90_percent')} | {spread(faults, 'seconds')} |")
    orphans = sum(f.get("orphan_actors", 0) + f.get("left_processes", 0)
                  for f in stats["faults"])
    lines.append(f"killed trainers' orphan actors and processes: {orphans}; each figure is "
                 "median / worst")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=1500.0, help="stop injecting after")
    parser.add_argument("--nodes", type=int, default=3, help="worker nodes")
    parser.add_argument("--timeout", type=float, default=2.0, help="RayVecEnv's step timeout")
    parser.add_argument("--between", type=float, default=1.5, help="seconds of steps before "
                        "each fault (the baseline rate)")
    parser.add_argument("--hang-seconds", type=float, default=30.0,
                        help="a step longer than this counts as a hang")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    stats = run(args)
    print(summary(stats))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(stats, f, indent=1)
    bad = stats["hangs"] or stats["mixed_rows"] or stats["left_processes"] or any(
        f.get("to_first_good_step", 0) is None or f.get("orphan_actors") or
        f.get("left_processes") for f in stats["faults"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
