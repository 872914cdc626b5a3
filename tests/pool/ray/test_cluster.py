"""RayVecEnv on a Ray of its own and on a simulated multi-node cluster, in child processes.

The rest of the test run shares one Ray (``ray_session``); a process can be attached
to only one, so these run in a fresh Python each:

- without Ray running, ``RayVecEnv`` starts one bound to 127.0.0.1 (every socket of
  every Ray process, checked with ``ss``), and ``close()`` shuts it down again,
  leaving no process behind;
- a trainer killed with SIGKILL after starting its own Ray leaves no Ray process
  (Ray's agents would outlive it; fastvec's reaper ends them);
- on ``ray.cluster_utils.Cluster`` (a head and two worker nodes, all on 127.0.0.1),
  the blocks spread over the nodes; removing a node with a block on it is a
  ``WorkerError``, or with ``on_worker_failure="restart"`` the block comes back on a
  live node (as soon as its actor is gone: an actor whose raylet was killed may
  step a little longer, its calls do not go through the raylet);
- without Ray installed, ``import fastvec`` works and ``RayVecEnv`` says what to install.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.fastvec_only, pytest.mark.slow]

pytest.importorskip("ray")

CHILD_SECONDS = 120


def run_child(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=CHILD_SECONDS)
    assert result.returncode == 0, f"child failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    return result.stdout


def test_a_ray_it_starts_listens_on_loopback_only_and_is_gone_after_close():
    out = run_child("""
        import os, subprocess, time
        import gymnasium as gym, numpy as np, ray, fastvec

        os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # RayVecEnv sees to it
        vec = fastvec.RayVecEnv([lambda: gym.make("CartPole-v1")] * 4, num_actors=2)
        vec.reset(seed=0)
        vec.step(np.zeros(4, np.int64))
        assert ray.is_initialized()
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(os.getpid())],
                                  capture_output=True, text=True).stdout.split()
        sockets = subprocess.run(["ss", "-tanp"], capture_output=True, text=True).stdout
        ours = [line for line in sockets.splitlines()
                if any(f"pid={pid}," in line for pid in children + [str(os.getpid())])]
        assert ours, sockets
        bad = [line for line in ours if "127.0.0.1" not in line.split()[3]
               or ("ESTAB" in line and "127.0.0.1" not in line.split()[4])]
        assert not bad, "not on loopback: " + "\\n".join(bad)
        vec.close()
        assert not ray.is_initialized()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = subprocess.run(["ps", "-o", "pid=,stat=,comm=", "--ppid", str(os.getpid())],
                                  capture_output=True, text=True).stdout.split("\\n")
            left = [line for line in left if line.strip() and "Z" not in line.split()[1]
                    and line.split()[2] != "ps"]
            if not left:
                break
            time.sleep(0.2)
        assert not left, left
        print("ok", len(ours))
    """)
    assert out.splitlines()[-1].startswith("ok"), out[-2000:]


def test_sigkill_of_a_trainer_that_started_ray_leaves_no_ray_process():
    from fastvec.pool.ray.reaper import descendants

    code = textwrap.dedent("""
        import gymnasium as gym, numpy as np, fastvec
        vec = fastvec.RayVecEnv([lambda: gym.make("CartPole-v1")] * 4, num_actors=2)
        vec.reset(seed=0)
        print("ready", flush=True)
        while True:
            vec.step(np.zeros(4, np.int64))
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # the reaper notes Ray's processes every half second
        started = descendants(child.pid, skip=-1)
        assert len(started) >= 3, started  # raylet, GCS, actors, agents, the reaper...
    finally:
        child.kill()
        child.wait()
    deadline = time.monotonic() + 20
    while True:
        left = {pid: t for pid, t in descendants(1, skip=-1).items()
                if started.get(pid) == t}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    names = [open(f"/proc/{pid}/cmdline", "rb").read()[:80] for pid in left]
    assert not left, f"left after SIGKILL of the trainer: {names}"


def test_blocks_spread_over_nodes_and_come_back_when_a_node_is_removed():
    out = run_child("""
        import os, time
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        import numpy as np, gymnasium as gym, ray
        from ray.cluster_utils import Cluster
        import fastvec
        from fastvec.errors import WorkerError

        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False})
        nodes = [cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1") for _ in range(2)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1")
        node_of = lambda env: ray.get_runtime_context().get_node_id()
        fns = [lambda: gym.make("CartPole-v1")] * 6

        vec = fastvec.RayVecEnv(fns, on_worker_failure="restart")  # one actor per node
        other = fastvec.RayVecEnv(fns)  # the same, without restarts
        assert vec.num_actors == other.num_actors == 3
        vec.reset(seed=0)
        other.reset(seed=0)
        placed = vec.call_each(node_of)
        assert len(set(placed)) == 3, placed  # a block on every node
        assert other.call_each(node_of) == placed
        victim = nodes[0]  # a worker node (the head cannot go)
        lost = [node == victim.node_id for node in placed]
        assert sum(lost) == 2, placed
        cluster.remove_node(victim, allow_graceful=False)
        start = time.monotonic()
        while time.monotonic() - start < 20:  # its actors may step until they notice
            obs, rewards, terminations, truncations, infos = vec.step(np.zeros(6, np.int64))
            if truncations.any():
                break
        took = time.monotonic() - start
        assert truncations.tolist() == lost, (truncations, lost, infos)
        assert infos["_worker_restarted"].tolist() == lost, (infos, lost)
        moved = vec.call_each(node_of)
        assert victim.node_id not in moved, moved
        vec.step(np.zeros(6, np.int64))
        vec.close()
        try:  # without restart: a WorkerError (its actor there is dead by now)
            other.step(np.zeros(6, np.int64))
            raise AssertionError("no WorkerError")
        except WorkerError as exc:
            assert "died" in str(exc), exc
        other.close()
        ray.shutdown()
        cluster.shutdown()
        print("ok", round(took, 2))
        assert took < 20
    """)
    assert out.splitlines()[-1].startswith("ok"), out[-2000:]


def test_import_fastvec_without_ray():
    out = run_child("""
        import sys
        sys.modules["ray"] = None  # as if it were not installed
        import gymnasium as gym
        import fastvec
        assert "RayVecEnv" in fastvec.__all__
        try:
            fastvec.RayVecEnv([lambda: gym.make("CartPole-v1")])
        except ImportError as exc:
            print("ok", exc)
    """)
    assert out.splitlines()[-1].startswith("ok"), out[-2000:]
