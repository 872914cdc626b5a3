"""The README's "Switching to fastvec" table, row by row.

Each row names a line a user has today and the fastvec line that replaces it.
The table must be exactly :data:`ROWS`; each row's fastvec line runs here, and
gives what the line it replaces gives on the same seeds and actions wherever that
library is installed (EnvPool and PufferLib are not dependencies: their rows check
fastvec's side against single envs stepped by hand).
"""

from __future__ import annotations

import functools
import re
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import fastvec

README = Path(__file__).resolve().parents[1] / "README.md"

# (library, what you use, what you switch to): the README's table, cell by cell.
ROWS = [
    ("Gymnasium", "gym.vector.SyncVectorEnv(env_fns)", "fastvec.SyncVecEnv(env_fns)"),
    ("Gymnasium", 'gym.vector.AsyncVectorEnv(env_fns, shared_memory=True, context="spawn")',
     'fastvec.SubprocVecEnv(env_fns, shared_memory=True, context="spawn")'),
    ("Gymnasium", 'gym.make_vec("CartPole-v1", 8, vectorization_mode="async")',
     'fastvec.make("CartPole-v1", 8, vectorization_mode="async")'),
    ("Stable-Baselines3", 'make_vec_env("CartPole-v1", 8, seed=0, vec_env_cls=SubprocVecEnv)',
     'make_sb3_env("CartPole-v1", 8, seed=0, vec_env_cls=SubprocVecEnv)'),
    ("Stable-Baselines3", "SubprocVecEnv(env_fns)",
     'to_sb3(fastvec.SubprocVecEnv(env_fns, autoreset_mode="same_step"))'),
    ("SuperSuit", 'concat_vec_envs_v1(pettingzoo_env_to_vec_env_v1(game_fn()), 8, '
     'base_class="gymnasium")',
     'fastvec.make_multiagent(game_fn, 8, vector_kwargs={"autoreset_mode": "same_step"})'),
    ("EnvPool", 'envpool.make("CartPole-v1", "gymnasium", num_envs=8, batch_size=4); '
     "send(actions, env_ids); recv()",
     'fastvec.make("CartPole-v1", 8, "subproc", '
     'vector_kwargs={"num_workers": 4, "batch_size": 4}); send(actions, env_ids); recv()'),
    ("PufferLib", "pufferlib.vector.make(env_fn, num_envs=8, num_workers=4, batch_size=4, "
     "backend=Multiprocessing)",
     "fastvec.SubprocVecEnv([env_fn] * 8, num_workers=4, batch_size=4)"),
]


def readme_rows() -> list[tuple[str, str, str]]:
    text = README.read_text()
    section = text[text.index("## Switching to fastvec"):]
    section = section[:section.index("\n## ", 1)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") \
            else []
        if len(cells) == 3 and cells[1].startswith("`"):
            rows.append((cells[0], *(re.sub(r"`", "", c) for c in cells[1:])))
    return rows


def test_the_readme_table_is_these_rows():
    assert readme_rows() == ROWS


def cartpole_fns(n: int) -> list:
    return [functools.partial(gym.make, "CartPole-v1")] * n


def run(envs, steps: int = 60, seed: int = 3) -> list:
    """Observations, rewards and flags over ``steps`` seeded random steps (then closed)."""
    try:
        out = [envs.reset(seed=seed)[0]]
        rng = np.random.default_rng(seed)
        for _ in range(steps):
            obs, rewards, terms, truncs, _ = envs.step(rng.integers(0, 2, envs.num_envs))
            out += [obs, rewards, terms, truncs]
        return out
    finally:
        envs.close()


def assert_same_runs(ours: list, theirs: list) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_gymnasium_sync_vector_env():
    assert_same_runs(run(fastvec.SyncVecEnv(cartpole_fns(4))),
                     run(gym.vector.SyncVectorEnv(cartpole_fns(4))))


@pytest.mark.subprocess
def test_gymnasium_async_vector_env_keywords_carry_over():
    kwargs = dict(shared_memory=True, context="spawn", daemon=True, copy=True)
    assert_same_runs(run(fastvec.SubprocVecEnv(cartpole_fns(4), **kwargs)),
                     run(gym.vector.AsyncVectorEnv(cartpole_fns(4), **kwargs)))


@pytest.mark.subprocess
def test_gymnasium_make_vec():
    ours = fastvec.make("CartPole-v1", 4, vectorization_mode="async")
    assert isinstance(ours, fastvec.SubprocVecEnv)
    assert_same_runs(run(ours), run(gym.make_vec("CartPole-v1", 4, vectorization_mode="async")))


def test_stable_baselines3_make_vec_env():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    from fastvec.integrations.sb3 import make_sb3_env

    # DummyVecEnv here: the same envs in this process (SubprocVecEnv: tests/integrations)
    ours = make_sb3_env("CartPole-v1", 4, seed=0, vec_env_cls=DummyVecEnv)
    theirs = make_vec_env("CartPole-v1", 4, seed=0, vec_env_cls=DummyVecEnv)
    try:
        assert np.array_equal(ours.reset(), theirs.reset())
        for step in range(40):
            actions = np.full(4, step % 2)
            for a, b in zip(ours.step(actions)[:3], theirs.step(actions)[:3], strict=True):
                assert np.array_equal(a, b)
    finally:
        ours.close()
        theirs.close()


@pytest.mark.subprocess
def test_stable_baselines3_subproc_vec_env():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import SubprocVecEnv

    from fastvec.integrations.sb3 import to_sb3

    ours = to_sb3(fastvec.SubprocVecEnv(cartpole_fns(4), autoreset_mode="same_step"))
    theirs = SubprocVecEnv(cartpole_fns(4))
    try:
        ours.seed(5)
        theirs.seed(5)
        assert np.array_equal(ours.reset(), theirs.reset())
        for step in range(40):
            actions = np.full(4, step % 2)
            got, want = ours.step(actions), theirs.step(actions)
            for a, b in zip(got[:3], want[:3], strict=True):
                assert np.array_equal(a, b)
            for a, b in zip(got[3], want[3], strict=True):
                if "terminal_observation" in b:
                    assert np.array_equal(a["terminal_observation"], b["terminal_observation"])
    finally:
        ours.close()
        theirs.close()


def test_supersuit():
    ss = pytest.importorskip("supersuit")
    from tests.support.games import RelayGame

    game_fn = functools.partial(RelayGame, num_agents=2, horizon=4, early_exits=False)
    theirs = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(game_fn()), 3,
                                   base_class="gymnasium")
    ours = fastvec.make_multiagent(game_fn, 3, vector_kwargs={"autoreset_mode": "same_step"})
    try:
        assert np.array_equal(ours.reset(seed=1)[0], theirs.reset(seed=1)[0])
        rng = np.random.default_rng(0)
        for _ in range(11):
            actions = rng.integers(0, 3, 6)
            got, want = ours.step(actions), theirs.step(actions)
            assert np.array_equal(got[0], want[0])
            assert np.array_equal(got[1].astype(np.float32), want[1])
    finally:
        ours.close()
        theirs.close()


def single_env_runs(num_envs: int, seed: int, steps: int) -> list[list]:
    """Each env alone, reset with ``seed + i``, action ``t % 2`` at its step ``t``,
    resetting the step after an episode ends (Gymnasium's next-step autoreset)."""
    runs = []
    for i in range(num_envs):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=seed + i)
        out, done = [obs], False
        for t in range(steps):
            if done:
                obs, _ = env.reset()
                done = False
            else:
                obs, _, term, trunc, _ = env.step(t % 2)
                done = term or trunc
            out.append(obs)
        runs.append(out)
        env.close()
    return runs


@pytest.mark.subprocess
@pytest.mark.parametrize("row", ["envpool", "pufferlib"])
def test_async_batches_as_envpool_and_pufferlib_use_them(row):
    """``async_reset`` / ``recv`` / ``send(actions, env_ids)``: each env's own trajectory
    is the one it has alone, whichever batches the envs came back in."""
    if row == "envpool":
        envs = fastvec.make("CartPole-v1", 8, "subproc",
                            vector_kwargs={"num_workers": 4, "batch_size": 4})
    else:
        envs = fastvec.SubprocVecEnv(cartpole_fns(8), num_workers=4, batch_size=4)
    steps = 30
    seen: list[list] = [[] for _ in range(8)]
    try:
        envs.async_reset(seed=7)
        while min(len(s) for s in seen) <= steps:
            obs, _, _, _, _, env_ids = envs.recv()
            for row_obs, i in zip(obs, env_ids, strict=True):
                seen[i].append(row_obs.copy())
            envs.send(np.array([(len(seen[i]) - 1) % 2 for i in env_ids]), env_ids)
    finally:
        envs.close()
    for got, want in zip(seen, single_env_runs(8, 7, steps), strict=True):
        assert np.array_equal(np.array(got[:steps + 1]), np.array(want))


@pytest.mark.subprocess
def test_async_vector_env_options_that_cannot_apply_say_so():
    with pytest.warns(UserWarning, match="shared_memory=False changes nothing"):
        fastvec.SubprocVecEnv(cartpole_fns(2), shared_memory=False).close()
    with pytest.warns(UserWarning, match="worker function is ignored"):
        fastvec.SubprocVecEnv(cartpole_fns(2), worker=lambda *a: None).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fastvec.SubprocVecEnv(cartpole_fns(2), shared_memory=True, daemon=True).close()


@pytest.mark.subprocess
def test_max_concurrency_caps_the_workers():
    envs = fastvec.SubprocVecEnv(cartpole_fns(6), max_concurrency=2)
    assert envs.num_workers == 2
    envs.close()
    envs = fastvec.SubprocVecEnv(cartpole_fns(6), num_workers=3, max_concurrency=5)
    assert envs.num_workers == 3
    envs.close()
    with pytest.raises(ValueError, match="max_concurrency"):
        fastvec.SubprocVecEnv(cartpole_fns(2), max_concurrency=0)


class ParentEnv(gym.Env):
    """An env that starts a process of its own, as some simulators do."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        import multiprocessing

        self.child = multiprocessing.get_context("spawn").Process(target=abs, args=(1,))
        self.child.start()
        self.child.join()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {"child_exit": self.child.exitcode}

    def step(self, action):
        return 0, 0.0, False, False, {}


@pytest.mark.subprocess
def test_daemon_false_lets_an_env_start_processes():
    envs = fastvec.SubprocVecEnv([ParentEnv] * 2, daemon=False)
    try:
        _, infos = envs.reset()
        assert infos["child_exit"].tolist() == [0, 0]
    finally:
        envs.close()
    with pytest.raises(fastvec.errors.WorkerError, match="daemonic"):
        fastvec.SubprocVecEnv([ParentEnv] * 2, daemon=True)


@pytest.mark.subprocess
def test_default_num_workers_counts_the_cpus_this_process_may_use():
    """taskset, cgroups and Slurm limit a process's CPUs with its affinity, not
    ``os.cpu_count()``: a process pinned to one CPU gets one worker."""
    import os
    import subprocess
    import sys

    script = (
        "import os, gymnasium as gym, fastvec\n"
        "os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
        "envs = fastvec.SubprocVecEnv([lambda: gym.make('CartPole-v1')] * 4)\n"
        "print(envs.num_workers, os.cpu_count())\n"
        "envs.close()\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    workers, cpus = map(int, out.stdout.split())
    assert workers == 1, f"{workers} workers on a process pinned to 1 of {cpus} CPUs"
