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
from pathlib import Path

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


CLUSTER = """
    import os, signal, time
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import numpy as np, gymnasium as gym, ray
    from ray.cluster_utils import Cluster
    import fastvec
    from fastvec.errors import WorkerError, WorkerTimeout
    from fastvec.pool.ray.reaper import descendants

    # A head without CPUs or envs, three worker nodes; actors ask for an "envs" unit,
    # so that they go to the worker nodes only, one block per node.
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    add = lambda: cluster.add_node(num_cpus=1, resources={"envs": 4},
                                   node_ip_address="127.0.0.1")
    nodes = [add() for _ in range(3)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, _node_ip_address="127.0.0.1", logging_level="ERROR")
    node_of = lambda env: ray.get_runtime_context().get_node_id()
    fns = [lambda: gym.make("CartPole-v1")] * 6
    options = {"resources": {"envs": 1}}

    def pids_of(node):
        roots = [proc.pid for _, proc in node.live_processes()]
        return sorted(set(roots).union(*(descendants(root, skip=-1) for root in roots)))
"""


def test_blocks_spread_over_nodes_and_come_back_when_a_node_is_removed():
    """A node crash: in ``raise`` mode a ``WorkerError``; in ``restart`` mode its block is
    back on another node, and every other row is bit-identical to ``SyncVecEnv``'s."""
    out = run_child(CLUSTER + """
    vec = fastvec.RayVecEnv(fns, actor_options=options, on_worker_failure="restart",
                            timeout=5)
    other = fastvec.RayVecEnv(fns, actor_options=options)  # the same, without restarts
    ref = fastvec.SyncVecEnv(fns)
    assert vec.num_actors == other.num_actors == 3
    for envs in (vec, other, ref):
        envs.reset(seed=0)
    placed = vec.call_each(node_of)
    assert len(set(placed)) == 3 and cluster.head_node.node_id not in placed, placed
    assert other.call_each(node_of) == placed
    victim = next(node for node in nodes if node.node_id == placed[0])
    lost = np.array([node == victim.node_id for node in placed])
    assert lost.tolist() == [True, True, False, False, False, False], placed
    pids = pids_of(victim)
    cluster.remove_node(victim, allow_graceful=False)
    for pid in pids:  # a crashed machine leaves nothing running
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    start = time.monotonic()
    rng = np.random.default_rng(0)
    while time.monotonic() - start < 20:  # its actor may step until it notices
        actions = rng.integers(0, 2, 6)
        obs, rewards, terminations, truncations, infos = vec.step(actions)
        r_obs, r_rewards, r_terminations, r_truncations, _ = ref.step(actions)
        for mine, theirs in ((obs, r_obs), (rewards, r_rewards),
                             (terminations, r_terminations)):
            assert (mine[~lost] == theirs[~lost]).all()  # the other rows: as without faults
        if truncations.any():
            break
    took = time.monotonic() - start
    assert truncations.tolist() == lost.tolist(), (truncations, lost, infos)
    assert infos["_worker_restarted"].tolist() == lost.tolist(), (infos, lost)
    assert (rewards[lost] == 0).all() and not terminations[lost].any()
    moved = vec.call_each(node_of)
    assert victim.node_id not in moved and moved[2:] == placed[2:], moved
    for _ in range(20):  # and on it goes, the other rows still as without faults
        actions = rng.integers(0, 2, 6)
        obs, *_ = vec.step(actions)
        assert (obs[~lost] == ref.step(actions)[0][~lost]).all()
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
    """)
    assert out.splitlines()[-1].startswith("ok"), out[-2000:]


def test_a_hung_node_is_a_timeout_then_its_block_restarts_elsewhere():
    """A node whose processes are stopped (SIGSTOP): ``WorkerTimeout`` after ``timeout``
    in ``raise`` mode; in ``restart`` mode its block is rebuilt on another node, never the
    hung one, and the other rows go on as without faults; nothing is left behind."""
    out = run_child(CLUSTER + """
    vec = fastvec.RayVecEnv(fns, actor_options=options, on_worker_failure="restart",
                            timeout=2)
    other = fastvec.RayVecEnv(fns, actor_options=options, timeout=2)
    ref = fastvec.SyncVecEnv(fns)
    for envs in (vec, other, ref):
        envs.reset(seed=0)
    placed = vec.call_each(node_of)
    victim = next(node for node in nodes if node.node_id == placed[2])
    hung = np.array([node == victim.node_id for node in placed])
    assert hung.tolist() == [False, False, True, True, False, False], placed
    pids = pids_of(victim)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    start = time.monotonic()
    try:
        other.step(np.zeros(6, np.int64))
        raise AssertionError("no WorkerTimeout")
    except WorkerTimeout as exc:
        assert "actors [1]" in str(exc) and "timeout=2" in str(exc), exc
    raised = time.monotonic() - start
    other.close(terminate=True)
    start = time.monotonic()
    actions = np.ones(6, np.int64)
    obs, rewards, terminations, truncations, infos = vec.step(actions)
    took = time.monotonic() - start
    r_obs, *_ = ref.step(actions)
    assert truncations.tolist() == hung.tolist(), truncations
    assert infos["_worker_restarted"].tolist() == hung.tolist(), infos
    assert (obs[~hung] == r_obs[~hung]).all()
    moved = vec.call_each(node_of)
    assert victim.node_id not in moved and moved[:2] == placed[:2], moved
    for _ in range(10):
        obs, *_ = vec.step(actions)
        assert (obs[~hung] == ref.step(actions)[0][~hung]).all()
    assert vec.total_restarts == 1
    vec.close()
    for pid in pids:  # the stopped node is ended as a crashed one would be
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    cluster.remove_node(victim, allow_graceful=False)
    ray.shutdown()
    cluster.shutdown()
    deadline = time.monotonic() + 20
    while descendants(os.getpid(), skip=-1) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not descendants(os.getpid(), skip=-1), "processes left behind"
    print("ok", round(raised, 2), round(took, 2))
    assert 2 <= raised < 6 and 2 <= took < 15, (raised, took)
    """)
    assert out.splitlines()[-1].startswith("ok"), out[-2000:]


def test_chaos_script_on_a_few_faults_of_each_kind():
    """``benchmarks/ray_chaos.py`` (a crash, a hang, an env that ends its actor, a killed
    trainer), short: it exits 0 only with no hang, no row mixed up, nothing left behind."""
    script = Path(__file__).resolve().parents[3] / "benchmarks" / "ray_chaos.py"
    result = subprocess.run([sys.executable, str(script), "--faults", "4", "--between", "0.5"],
                            capture_output=True, text=True, timeout=CHILD_SECONDS * 2)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert "4 faults" in result.stdout and "rows mixed up 0" in result.stdout, result.stdout


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


def test_ppo_trains_on_through_node_kills_script_runs_short():
    """``benchmarks/ray_ppo_node_loss.py`` for a few updates: the PPO example on the faked
    cluster, once without faults and once while nodes die; both runs finish, and the
    second saw nodes killed and its blocks restarted (learning is the benchmark's to
    judge, not this test's)."""
    pytest.importorskip("torch")
    script = Path(__file__).resolve().parents[3] / "benchmarks" / "ray_ppo_node_loss.py"
    result = subprocess.run([sys.executable, str(script), "--total-timesteps", "6144",
                             "--kill-every", "2"],
                            capture_output=True, text=True, timeout=CHILD_SECONDS * 2)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
            for line in result.stdout.splitlines() if line.startswith("| ")}
    assert int(rows["without faults"][3]) == 0 == int(rows["without faults"][4]), rows
    assert int(rows["nodes dying"][3]) >= 1 and int(rows["nodes dying"][4]) >= 1, rows
