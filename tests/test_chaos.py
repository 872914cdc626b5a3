"""Chaos: random faults for a fixed time under ``on_worker_failure="restart"``.

A seeded schedule, drawn step by step, SIGKILLs workers from a timer thread at
random moments (mid-step, mid-reset, mid-``call``, right after a restart), makes
envs kill their own process mid-step, makes envs raise in ``step`` and in
``reset``, and resets at random.  The envs are :class:`tests.envs.ChaosEnv`:
every observation is ``[env index, episode, step, last action]``, so after
every step and reset the checker proves, env by env:

- no data crossed: row ``i`` shows env ``i`` and the action sent to env ``i``;
- healthy envs never noticed: same episode, step + 1, reward = its action,
  termination exactly at the episode's length, no truncation;
- restarted envs continue validly: a whole block at once, exactly the blocks
  whose worker died or whose env raised; a fresh episode (an id never seen) at
  step 0, reward 0, ``truncations`` True (False after a reset), ``infos
  ["worker_restarted"]``;
- episodes that ended start a fresh one on the next step (``NEXT_STEP``).

The schedule runs on ``SubprocVecEnv`` (plain, async batches, local block) and on
``RayVecEnv``, whose actors are SIGKILLed the same way (mid-step, mid-reset,
mid-``call``, between steps).

What the restart policy does not cover is checked as documented
(``docs/failures.md``): a worker killed during a ``call`` gives a
``WorkerError`` and leaves the vector env unusable, so the run closes it and
makes a new one (counted as a re-creation); a step that hangs past
``timeout`` gives ``WorkerTimeout`` and leaves the env unusable by design, so
hangs run in their own scenario that closes and recreates the env each time.

CI: 20 s in all; ``--chaos-seconds S`` sets the time, ``--chaos-seed`` the seed.
``FASTVEC_CHAOS_JSON=path`` writes the counts.  ``-s`` prints them.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest

import fastvec
from fastvec.errors import FastVecError, WorkerError, WorkerTimeout
from tests.support import internals
from tests.support.envs import (
    CHAOS_DIE,
    CHAOS_RAISE,
    CHAOS_SLOW,
    ChaosEnv,
    HangingEnv,
    make_fns,
)

pytestmark = [pytest.mark.crash, pytest.mark.chaos]

CI_SECONDS = 20.0
SHARES = {"subproc": 0.3, "subproc-async": 0.25, "subproc-local": 0.2, "ray": 0.25}
FAULT_RATE = 0.01  # of steps that inject a fault (a restart costs a fork and a build)
_REPORT: dict[str, Any] = {}


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])


class Killer:
    """SIGKILLs a worker from a timer thread, ``delay`` seconds from now, if that very
    process (same pid, same start time) still runs then."""

    def __init__(self, counts: collections.Counter) -> None:
        self.counts = counts
        self.lock = threading.Lock()
        self.timers: list[threading.Timer] = []

    def later(self, pid: int, delay: float, what: str) -> None:
        started = _start_time(pid)

        def fire() -> None:
            if started is not None and _start_time(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    return
                with self.lock:
                    self.counts[f"SIGKILL {what}"] += 1

        timer = threading.Timer(delay, fire)
        timer.daemon = True
        timer.start()
        self.timers.append(timer)

    def join(self) -> None:
        for timer in self.timers:
            timer.join()
        self.timers.clear()


class Checker:
    """What every env must show next, and the mix-ups found (must stay empty)."""

    def __init__(self, num_envs: int, counts: collections.Counter) -> None:
        self.episode = [None] * num_envs
        self.t = [0] * num_envs
        self.ended = [False] * num_envs
        self.action = [-1] * num_envs
        self.seen: set[int] = set()
        self.counts = counts
        self.mixups: list[str] = []

    def bad(self, message: str) -> None:
        self.counts["mix-ups"] += 1
        if len(self.mixups) < 20:
            self.mixups.append(message)

    def fresh(self, i: int, row: np.ndarray, what: str) -> None:
        episode = int(row[1])
        if int(row[2]) != 0 or int(row[3]) != -1:
            self.bad(f"env {i} after {what}: {row.tolist()} is not a fresh episode")
        if episode in self.seen:
            self.bad(f"env {i} after {what}: episode {episode} seen before")
        self.seen.add(episode)
        self.episode[i], self.t[i], self.ended[i] = episode, 0, False

    def check(self, ids: Any, obs: np.ndarray, rewards: np.ndarray, terms: np.ndarray,
              truncs: np.ndarray, infos: dict, is_reset: bool) -> set[int]:
        """Check a batch of envs ``ids``; the envs it reports restarted."""
        restarted = set()
        if "worker_restarted" in infos:
            mask = infos["_worker_restarted"] & infos["worker_restarted"].astype(bool)
            restarted = {int(ids[k]) for k in np.flatnonzero(mask)}
        for k, i in enumerate(ids):
            i = int(i)
            row = obs[k]
            self.counts["env-steps checked"] += 1
            if int(row[0]) != i:
                self.bad(f"row of env {i} shows env {int(row[0])}: {row.tolist()}")
                continue
            if i in restarted:
                self.counts["restarted envs checked"] += 1
                self.fresh(i, row, "a restart")
                if rewards is not None and (rewards[k] != 0 or terms[k] or
                                            bool(truncs[k]) != (not is_reset)):
                    self.bad(f"restarted env {i}: reward {rewards[k]}, terminated "
                             f"{terms[k]}, truncated {truncs[k]} (reset: {is_reset})")
            elif is_reset or self.ended[i]:
                self.fresh(i, row, "a reset" if is_reset else "an autoreset")
                if rewards is not None and (rewards[k] != 0 or terms[k] or truncs[k]):
                    self.bad(f"env {i} autoreset: reward {rewards[k]}, flags "
                             f"{terms[k]}, {truncs[k]}")
            else:
                episode, t, last = int(row[1]), int(row[2]), int(row[3])
                if (episode, t, last) != (self.episode[i], self.t[i] + 1, self.action[i]):
                    self.bad(f"env {i}: {row.tolist()}, expected episode {self.episode[i]} "
                             f"step {self.t[i] + 1} action {self.action[i]}")
                    self.episode[i] = episode
                self.t[i] = t
                length = 10 + episode % 31
                if (rewards[k] != last or bool(terms[k]) != (t >= length) or truncs[k]):
                    self.bad(f"env {i} step {t}: reward {rewards[k]} for action {last}, "
                             f"terminated {terms[k]} (length {length}), truncated {truncs[k]}")
                self.ended[i] = bool(terms[k])
        return restarted


class Run:
    """One chaos run on one backend: the env, its schedule, the checks."""

    def __init__(self, backend: str, seed: int, counts: collections.Counter) -> None:
        self.backend = backend
        self.rng = np.random.default_rng(seed)
        self.counts = counts
        self.killer = Killer(counts)
        self.make()

    def make(self) -> None:
        local = self.backend == "subproc-local"
        n = 9 if local else 8
        fns = make_fns(ChaosEnv, n, trainer_pid=os.getpid())
        if self.backend == "ray":  # actors killed mid-step, mid-reset, between steps
            self.envs = fastvec.RayVecEnv(fns, num_actors=2, on_worker_failure="restart")
        else:
            kwargs: dict[str, Any] = {"context": "fork", "on_worker_failure": "restart"}
            if self.backend == "subproc-async":
                kwargs.update(num_workers=4, batch_size=4)
            else:
                kwargs.update(num_workers=2, local_block=local)
            self.envs = fastvec.SubprocVecEnv(fns, **kwargs)
        self.n = n
        self.bounds = internals.block_bounds(self.envs)
        self.local = local  # block 0 is the trainer's
        self.checker = Checker(n, self.counts)
        self.last_restarted: set[int] = set()
        self.reset()

    def close(self) -> None:
        self.killer.join()
        self.envs.close()

    def recreate(self, why: str) -> None:
        self.counts[f"re-created ({why})"] += 1
        self.close()
        self.make()

    # -- which envs, blocks and pids -------------------------------------------------

    def block_of(self, i: int) -> int:
        return next(b for b, (a, z) in enumerate(self.bounds) if a <= i < z)

    def pids(self) -> dict[int, int]:
        """Block -> worker pid (the local block has none)."""
        pids = internals.worker_pids(self.envs)
        first = 1 if self.local else 0
        return {b + first: pid for b, pid in enumerate(pids)}

    def worker_envs(self) -> list[int]:
        return [i for i in range(self.n) if not (self.local and self.block_of(i) == 0)]

    def consistent(self, before: dict[int, int], restarted: set[int], faulted: set[int],
                   received: set[int]) -> None:
        """Restarted envs are whole blocks: those whose worker was replaced, or (local
        block) whose env was made to fail."""
        after = self.pids()
        blocks = {self.block_of(i) for i in restarted}
        for b in blocks:
            a, z = self.bounds[b]
            if not set(range(a, z)) <= restarted:
                self.checker.bad(f"block {b} partly restarted: {sorted(restarted)}")
        replaced = {b for b in after if after[b] != before[b]}
        for b in replaced:
            self.counts["restarts"] += 1
            if b not in blocks and set(range(*self.bounds[b])) & received:
                self.checker.bad(f"worker of block {b} was replaced, its envs not told")
        for b in blocks - replaced:
            if not (self.local and b == 0 and faulted & set(range(*self.bounds[0]))):
                self.checker.bad(f"block {b} reported restarted, its worker not replaced")
            else:
                self.counts["restarts"] += 1

    # -- one step of the schedule ----------------------------------------------------

    def fault_actions(self, ids: list[int], actions: np.ndarray) -> set[int]:
        """Maybe turn one action into a fault; the envs made to fail."""
        if self.last_restarted and self.rng.random() < 0.3:
            return self.inject("kill after a restart", ids, actions)
        roll = self.rng.random()
        if roll > FAULT_RATE:
            return set()
        kind = self.rng.choice(["kill mid-step", "env raises", "env kills its worker",
                                "kill mid-reset", "env raises in reset", "kill mid-call",
                                "kill after a restart", "reset"])
        return self.inject(str(kind), ids, actions)

    def inject(self, kind: str, ids: list[int], actions: np.ndarray) -> set[int]:
        pids = self.pids()
        workers = [b for b in pids if set(range(*self.bounds[b])) & set(ids)] or list(pids)
        if kind == "kill mid-step":
            actions[:] = CHAOS_SLOW  # ~8 ms of stepping per worker: the kill lands inside
            b = int(self.rng.choice(workers))
            self.killer.later(pids[b], float(self.rng.uniform(0, 0.01)), "mid-step")
        elif kind == "env raises":
            k = int(self.rng.integers(len(ids)))
            actions[k] = CHAOS_RAISE
            self.counts["env raised in step"] += 1
            return {ids[k]}
        elif kind == "env kills its worker":
            k = int(self.rng.integers(len(ids)))
            actions[k] = CHAOS_DIE
            self.counts["env killed its process mid-step" if self.block_of(ids[k]) in pids
                        else "env raised in step"] += 1
            return {ids[k]}
        elif kind == "kill after a restart" and self.last_restarted:
            b = self.block_of(min(self.last_restarted))
            if b in pids:
                self.killer.later(pids[b], 0.0, "right after a restart")
        else:
            self.pending_special = kind
        return set()

    def special(self) -> None:
        """Resets and calls the schedule asked for (between steps)."""
        kind, self.pending_special = self.pending_special, None
        pids = self.pids()
        if kind == "kill mid-call":
            b = int(self.rng.choice(list(pids)))
            self.killer.later(pids[b], float(self.rng.uniform(0, 0.02)), "mid-call")
            try:
                got = self.envs.call("ping", 0.005)
            except WorkerError as exc:  # a death, as documented
                assert exc.exitcode is not None or "died" in str(exc), exc
                with pytest.raises(FastVecError, match="unusable"):
                    self.envs.call("ping")
                self.recreate("worker killed during call(), as documented")
                return
            assert list(got) == list(range(self.n)), got
            self.counts["call() checked"] += 1
            return
        options = None
        if kind == "kill mid-reset":
            b = int(self.rng.choice(list(pids)))
            self.killer.later(pids[b], float(self.rng.uniform(0, 0.005)), "mid-reset")
        elif kind == "env raises in reset":
            i = int(self.rng.choice(self.worker_envs() if not self.local else range(self.n)))
            options = {"raise_in_reset": [i]}
            self.counts["env raised in reset"] += 1
        self.reset(options, faulted=set() if options is None else set(options["raise_in_reset"]))

    pending_special: str | None = None

    def reset(self, options: dict | None = None, faulted: set[int] = frozenset()) -> None:
        before = self.pids()
        if self.backend == "subproc-async":
            self.envs.async_reset(options=options)
            restarted, got, self.held = set(), 0, []
            while got < self.n:
                obs, rew, term, trunc, infos, ids = self.envs.recv()
                restarted |= self.checker.check(ids, obs, None, None, None, infos, True)
                self.held.append(ids.copy())
                got += len(ids)
        else:
            obs, infos = self.envs.reset(options=options)
            restarted = self.checker.check(range(self.n), obs, None, None, None, infos, True)
        self.counts["resets"] += 1
        self.consistent(before, restarted, set(faulted), set(range(self.n)))
        self.last_restarted = restarted

    def step(self) -> None:
        if self.pending_special:
            self.special()
            return
        if self.backend == "subproc-async":
            return self.step_batches()
        ids = list(range(self.n))
        actions = self.rng.integers(0, 990, size=self.n)
        faulted = self.fault_actions(ids, actions)
        before = self.pids()
        obs, rew, term, trunc, infos = self.envs.step(actions)
        for i in ids:
            self.checker.action[i] = int(actions[i])
        restarted = self.checker.check(ids, obs, rew, term, trunc, infos, False)
        self.consistent(before, restarted, faulted, set(ids))
        self.last_restarted = restarted
        self.counts["steps"] += 1

    def step_batches(self) -> None:
        """Async batches: send every held batch its actions, recv the next batch, check it."""
        for ids in self.held:
            ids_list = [int(i) for i in ids]
            actions = self.rng.integers(0, 990, size=len(ids))
            self.fault_actions(ids_list, actions)
            self.envs.send(actions, ids)
            for k, i in enumerate(ids_list):
                self.checker.action[i] = int(actions[k])
        self.held = []
        before = self.pids()
        obs, rew, term, trunc, infos, ids = self.envs.recv()
        restarted = self.checker.check(ids, obs, rew, term, trunc, infos, False)
        self.consistent(before, restarted, set(), {int(i) for i in ids})
        self.last_restarted = restarted
        self.held = [ids.copy()]
        self.counts["steps"] += 1
        if self.pending_special == "kill mid-call":  # calls need nothing in flight
            self.pending_special = "kill mid-reset"


def chaos_seconds(config: pytest.Config, backend: str) -> float:
    total = config.getoption("--chaos-seconds") or CI_SECONDS
    return total * SHARES[backend]


@pytest.mark.parametrize("backend", [
    pytest.param(b, marks=pytest.mark.ray if b == "ray" else pytest.mark.subprocess)
    for b in SHARES])
def test_chaos_under_restart_no_data_crosses(backend, pytestconfig, request):
    if backend == "ray":
        request.getfixturevalue("ray_session")  # the one Ray of the test run
    seed = pytestconfig.getoption("--chaos-seed")
    seed = 1234 + list(SHARES).index(backend) if seed is None else seed
    counts: collections.Counter = collections.Counter()
    seconds = chaos_seconds(pytestconfig, backend)
    run = Run(backend, seed, counts)
    start = time.monotonic()
    try:
        # the time given, longer (up to 3x) on a slow machine until 3 restarts happened:
        # the faults are drawn per step, so a slow machine injects fewer in the time
        while (time.monotonic() - start < seconds
               or (counts["restarts"] < 3 and time.monotonic() - start < 3 * seconds)):
            run.step()
        run.killer.join()
        # whatever the last kills did is reported by the next step
        for _ in range(3):
            run.pending_special = None
            run.step()
    finally:
        run.close()
    wall = time.monotonic() - start
    mixups = run.checker.mixups
    report = {"backend": backend, "seed": seed, "wall_seconds": round(wall, 1),
              "faults injected": sum(v for k, v in counts.items()
                                     if k.startswith(("SIGKILL", "env "))),
              **dict(sorted(counts.items()))}
    _REPORT[backend] = report
    path = os.environ.get("FASTVEC_CHAOS_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(_REPORT, f, indent=1)
    print(f"\nchaos {backend}: " + ", ".join(f"{k}: {v}" for k, v in report.items()))
    assert not mixups, "mix-ups:\n" + "\n".join(mixups)
    assert counts["restarts"] >= 3 or seconds < 2, report


HANGS = 3
HANG_TIMEOUT = 0.3


@pytest.mark.subprocess
def test_hang_past_timeout_under_restart_restarts_the_worker_and_goes_on(make_subproc):
    """A hang past ``timeout`` under restart is a failure like a death
    (``docs/failures.md``): the hung worker is killed and its block rebuilt, the step
    returns soon after ``timeout`` with that block's envs truncated, and the env goes on;
    past the budget (``max_restarts=0``) it is the ``WorkerTimeout``, the env unusable,
    ``close()`` prompt."""
    for k in range(HANGS):
        hang = [j == k % 4 for j in range(4)]
        block = [j // 2 == (k % 4) // 2 for j in range(4)]
        envs = make_subproc(make_fns(HangingEnv, 4, per_env={"faulty": hang}, hang_at=2),
                            num_workers=2, context="fork", timeout=HANG_TIMEOUT,
                            on_worker_failure="restart")
        envs.reset(seed=k)
        obs, *_ = envs.step(np.ones(4, np.int64))
        np.testing.assert_array_equal(obs, [1, 1, 1, 1])
        start = time.monotonic()
        obs, _, _, truncations, infos = envs.step(np.ones(4, np.int64))
        assert time.monotonic() - start < HANG_TIMEOUT + 3.0
        assert truncations.tolist() == block and infos["_worker_restarted"].tolist() == block
        np.testing.assert_array_equal(obs, [0 if b else 2 for b in block])
        envs.step(np.ones(4, np.int64))  # and on it goes (the new env hangs at its step 2)
        assert envs.total_restarts == 1
        start = time.monotonic()
        envs.close()
        assert time.monotonic() - start < 3.0
    envs = make_subproc(make_fns(HangingEnv, 4, per_env={"faulty": [True] + [False] * 3},
                                 hang_at=2), num_workers=2, context="fork",
                        timeout=HANG_TIMEOUT, on_worker_failure="restart", max_restarts=0)
    envs.reset(seed=0)
    envs.step(np.ones(4, np.int64))
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=f"timeout={HANG_TIMEOUT}"):
        envs.step(np.ones(4, np.int64))
    assert time.monotonic() - start < HANG_TIMEOUT + 0.5
    with pytest.raises(FastVecError, match="unusable"):
        envs.step(np.ones(4, np.int64))
    start = time.monotonic()
    envs.close()
    assert time.monotonic() - start < 3.0


# ---------------------------------------------------------------------------
# found by the chaos run: a worker killed between two calls, then reset()


def kill_and_wait(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while _start_time(pid) is not None and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                return
        time.sleep(0.01)


@pytest.mark.subprocess
@pytest.mark.parametrize("call", ["reset", "async_reset"])
def test_worker_killed_between_calls_is_restarted_by_the_next_reset(make_subproc, call):
    """It used to escape as ``WorkerError ... during a send`` from ``reset()``."""
    batch = {"batch_size": 4} if call == "async_reset" else {}
    envs = make_subproc(make_fns(ChaosEnv, 8), num_workers=2, context="fork",
                        on_worker_failure="restart", **batch)
    if call == "reset":
        envs.reset()
        envs.step(np.zeros(8, np.int64))
    pids = internals.worker_pids(envs)
    kill_and_wait(pids[1])
    if call == "reset":
        obs, infos = envs.reset()
        ids = np.arange(8)
    else:
        envs.async_reset()
        parts = [envs.recv(), envs.recv()]
        obs = np.concatenate([p[0] for p in parts])
        ids = np.concatenate([p[5] for p in parts])
        infos = {"worker_restarted": np.concatenate([p[4].get("worker_restarted",
                                                                np.zeros(4, bool))
                                                     for p in parts])}
    restarted = {int(i) for i, r in zip(ids, infos["worker_restarted"], strict=True) if r}
    assert restarted == {4, 5, 6, 7}
    np.testing.assert_array_equal(obs[np.argsort(ids)][:, 0], np.arange(8))
    new = internals.worker_pids(envs)
    assert new[0] == pids[0] and new[1] != pids[1]


@pytest.mark.subprocess
def test_worker_killed_between_calls_then_reset_without_restart_names_the_reset(make_subproc):
    envs = make_subproc(make_fns(ChaosEnv, 4), num_workers=2, context="fork")
    envs.reset()
    kill_and_wait(internals.worker_pids(envs)[0])
    with pytest.raises(WorkerError, match="worker 0 was killed by SIGKILL during a reset"):
        envs.reset()
    with pytest.raises(FastVecError, match="unusable"):
        envs.step(np.zeros(4, np.int64))
