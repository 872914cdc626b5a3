"""Soak: long runs of ``SubprocVecEnv`` in which nothing may grow.

Each case steps one ``SubprocVecEnv`` for many env-steps and samples, for the
trainer and for every worker, the resident set size (``VmRSS`` from
``/proc/<pid>/status``), the number of open file descriptors
(``/proc/<pid>/fd``) and of threads (``/proc/<pid>/task``) every ``interval``
env-steps (10^5, or a tenth of a short case).  After a warm-up (the first
:data:`WARMUP_SAMPLES` samples) descriptors and threads must stay exactly where
they were, and no process's RSS may rise more than :data:`RSS_TOLERANCE_MB`
above its value at the end of the warm-up.

Cases: cheap envs (full batches, async batches, a local block), a multi-agent
game, image observations, Dict observations with a per-step info, rich infos
(nested, strings, keys that come and go), and the pickled-object path (a Text
space). The CI tier runs about 2.4 million env-steps in all; ``--soak N``
spreads N env-steps over the same cases in the same proportions (``--soak
100000000`` for the long run). ``--soak-json PATH`` (or ``FASTVEC_SOAK_JSON``)
writes every series to a JSON file; ``-s`` prints a summary per case.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from tests.support import internals
from tests.support.envs import CountingEnv, DictCountingEnv, ObjectSpaceEnv, SyntheticEnv, make_fns

pytestmark = [pytest.mark.subprocess, pytest.mark.soak]

SAMPLE_EVERY = 100_000  # env-steps between samples in long runs
MIN_SAMPLES = 10  # short runs sample more often
WARMUP_SAMPLES = 3  # the first samples (pools, caches, allocator arenas filling up)
RSS_TOLERANCE_MB = 4.0  # per process, above its value at the end of the warm-up


def relay_games(num_games: int, **kwargs: Any) -> list:
    """Factories of ``tests.games.RelayGame`` (skips without PettingZoo)."""
    pytest.importorskip("pettingzoo")
    from tests.support.games import RelayGame, game_fns
    return game_fns(RelayGame, num_games, **kwargs)


@dataclass
class Case:
    """One soak run: ``make()`` gives (env_fns, SubprocVecEnv kwargs)."""

    name: str
    make: Callable[[], tuple[list, dict]]
    ci_steps: int
    batches: bool = False  # drive with async_reset / recv / send


CASES = [
    Case("cheap", lambda: (make_fns(CountingEnv, 128, episode_len=50),
                           {"num_workers": 2}), 1_000_000),
    Case("cheap-async-batches", lambda: (make_fns(CountingEnv, 128, episode_len=50),
                                         {"num_workers": 2, "batch_size": 64}), 400_000,
         batches=True),
    Case("cheap-local-block", lambda: (make_fns(CountingEnv, 96, episode_len=50),
                                       {"num_workers": 2, "local_block": True}), 400_000),
    Case("multiagent-relay", lambda: (relay_games(32, num_agents=3, horizon=20),
                                      {"num_workers": 2}), 400_000),
    Case("image", lambda: (make_fns(SyntheticEnv, 32, layout="image", info_kind="none"),
                           {"num_workers": 2}), 60_000),
    Case("dict-with-infos", lambda: (make_fns(DictCountingEnv, 64, episode_len=30),
                                     {"num_workers": 2}), 100_000),
    Case("rich-infos", lambda: (make_fns(SyntheticEnv, 16, layout="dict", info_kind="rich"),
                                {"num_workers": 2}), 16_000),
    Case("object-path-text", lambda: (make_fns(ObjectSpaceEnv, 32, kind="text"),
                                      {"num_workers": 2}), 40_000),
]
CI_TOTAL = sum(case.ci_steps for case in CASES)
_SERIES: dict[str, Any] = {}  # what --soak-json writes


# ---------------------------------------------------------------------------
# sampling /proc


def proc_sample(pid: int) -> dict[str, float]:
    """RSS (MiB), open descriptors and threads of process ``pid``."""
    rss_kb = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
                break
    return {"rss_mb": rss_kb / 1024, "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": len(os.listdir(f"/proc/{pid}/task"))}


@dataclass
class Series:
    """Samples of every process of one run: role -> list of samples."""

    steps: list[int] = field(default_factory=list)
    procs: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    thread_slack: int = 0  # threads a process may start late, once (Ray's lazy pools)

    def sample(self, step: int, pids: dict[str, int]) -> None:
        self.steps.append(step)
        for role, pid in pids.items():
            self.procs.setdefault(role, []).append(proc_sample(pid))

    def problems(self) -> list[str]:
        """Growth after the warm-up, described; empty when there is none."""
        found = []
        for role, samples in self.procs.items():
            base, after = samples[WARMUP_SAMPLES - 1], samples[WARMUP_SAMPLES:]
            for key, slack in (("fds", 0), ("threads", self.thread_slack)):
                values = [s[key] for s in after]
                # only growth counts: a count that falls (a descriptor or thread that
                # an earlier test left is closed by the garbage collector) is no leak
                if any(v > base[key] + slack for v in values):
                    found.append(f"{role}: {key} went from {base[key]} to {values}")
            peak = max(s["rss_mb"] for s in after)
            if peak - base["rss_mb"] > RSS_TOLERANCE_MB:
                found.append(f"{role}: RSS rose {peak - base['rss_mb']:.1f} MiB after the "
                             f"warm-up (tolerance {RSS_TOLERANCE_MB} MiB): "
                             f"{[round(s['rss_mb'], 1) for s in samples]}")
        return found

    def summary(self) -> str:
        lines = []
        for role, samples in self.procs.items():
            rss = [s["rss_mb"] for s in samples]
            lines.append(f"  {role}: RSS {rss[0]:.1f} -> {rss[WARMUP_SAMPLES - 1]:.1f} "
                         f"(warm) -> {rss[-1]:.1f} MiB (max {max(rss[WARMUP_SAMPLES:]):.1f}); "
                         f"fds {samples[-1]['fds']}, threads {samples[-1]['threads']}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# driving the envs


def run_full(envs: Any, steps: int, interval: int, series: Series, pids: dict) -> int:
    n = envs.num_envs
    actions = [envs.action_space.sample() for _ in range(8)]
    envs.reset(seed=0)
    done = 0
    next_sample = 0
    k = 0
    while done < steps:
        envs.step(actions[k % 8])
        k += 1
        done += n
        if done >= next_sample:
            series.sample(done, pids)
            next_sample += interval
    return done


def run_batches(envs: Any, steps: int, interval: int, series: Series, pids: dict) -> int:
    space = envs.single_action_space
    envs.async_reset(seed=0)
    done = 0
    next_sample = 0
    while done < steps:
        *_, ids = envs.recv()
        envs.send(np.array([space.sample() for _ in range(len(ids))]), ids)
        done += len(ids)
        if done >= next_sample:
            series.sample(done, pids)
            next_sample += interval
    envs.recv()  # what is still in flight
    return done


def write_json(config: pytest.Config) -> None:
    path = config.getoption("--soak-json") or os.environ.get("FASTVEC_SOAK_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(_SERIES, f, indent=1)


@pytest.mark.filterwarnings("ignore::fastvec.errors.ObjectSpaceWarning")
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_soak_nothing_grows(case: Case, make_subproc, pytestconfig):
    total = pytestconfig.getoption("--soak") or CI_TOTAL
    steps = max(int(case.ci_steps * total / CI_TOTAL), 1000)
    interval = min(SAMPLE_EVERY, steps // MIN_SAMPLES)
    fns, kwargs = case.make()
    envs = make_subproc(fns, context="fork", **kwargs)
    pids = {"trainer": os.getpid()}
    pids.update({f"worker {w}": pid for w, pid in enumerate(internals.worker_pids(envs))})
    series = Series()
    start = time.perf_counter()
    run = run_batches if case.batches else run_full
    done = run(envs, steps, interval, series, pids)
    seconds = time.perf_counter() - start
    series.sample(done, pids)
    assert internals.worker_pids(envs) == list(pids.values())[1:], "a worker was replaced"
    _SERIES[case.name] = {
        "env_steps": done, "seconds": round(seconds, 2), "num_envs": envs.num_envs,
        "steps_per_second": round(done / seconds), "warmup_samples": WARMUP_SAMPLES,
        "rss_tolerance_mb": RSS_TOLERANCE_MB, "sampled_at": series.steps,
        "processes": series.procs,
    }
    write_json(pytestconfig)
    print(f"\nsoak {case.name}: {done:,} env-steps in {seconds:.1f} s "
          f"({done / seconds:,.0f}/s), {len(series.steps)} samples\n{series.summary()}")
    problems = series.problems()
    assert not problems, f"soak {case.name} after {done:,} env-steps:\n" + "\n".join(problems)


def _own_pid(env: Any) -> int:
    return os.getpid()


@pytest.mark.ray
def test_soak_ray_actors_nothing_grows(ray_session, vec_envs, pytestconfig):
    """RayVecEnv (2 actors): the trainer's and the actors' RSS, descriptors, threads."""
    import fastvec

    total = pytestconfig.getoption("--soak") or CI_TOTAL
    steps = max(int(200_000 * total / CI_TOTAL), 1000)
    interval = min(SAMPLE_EVERY, steps // MIN_SAMPLES)
    envs = vec_envs.track(fastvec.RayVecEnv(make_fns(CountingEnv, 64, episode_len=50),
                                            num_actors=2))
    pids = {"trainer": os.getpid()}
    actors = sorted(set(envs.call_each(_own_pid)))
    pids.update({f"actor {a}": pid for a, pid in enumerate(actors)})
    # Ray starts a thread or two in each process lazily, at times of its own (a one-time
    # rise, not growth): a longer warm-up than the process pool's, and up to 2 threads
    # more than at its end; a leak would keep rising past that.
    run_full(envs, steps // 2, steps, Series(), pids)
    series = Series(thread_slack=2)
    start = time.perf_counter()
    done = run_full(envs, steps, interval, series, pids)
    seconds = time.perf_counter() - start
    series.sample(done, pids)
    _SERIES["ray-actors"] = {"env_steps": done, "seconds": round(seconds, 2),
                             "num_envs": envs.num_envs, "sampled_at": series.steps,
                             "processes": series.procs}
    write_json(pytestconfig)
    print(f"\nsoak ray-actors: {done:,} env-steps in {seconds:.1f} s "
          f"({done / seconds:,.0f}/s), {len(series.steps)} samples\n{series.summary()}")
    problems = series.problems()
    assert not problems, f"soak ray-actors after {done:,} env-steps:\n" + "\n".join(problems)
