"""Start-up time of vector envs: from the constructor call to the first ``reset()`` returning.

Each measurement runs in a fresh Python process (this script runs itself with
``--child``), so every system pays for its own worker processes, forkserver or
Ray actors, never for a warm one left by another.  Imports are done before the
clock starts; ``close()`` is timed apart.  For the Ray systems the child starts
Ray first (``ray.init``, timed apart: Ray's own start) and times ``RayVecEnv`` on
top of it.  Repeats are interleaved (round by round, the order of the cases
rotating); the table shows the median and the min-max of each case.  A child
that runs past ``--cap`` seconds is killed and reported as "over N s".

Envs: ``cheap`` (``CartPole-v1``), ``sleep`` (its ``__init__`` sleeps
``--ctor-seconds``: waiting on I/O, which overlaps in any number of processes)
and ``cpu`` (its ``__init__`` burns ``--ctor-seconds`` of CPU: only as many at
once as there are cores).

    python benchmarks/startup.py                                   # every default case
    python benchmarks/startup.py --envs cheap --sizes 64 --repeats 7
    python benchmarks/startup.py --envs sleep --systems fastvec-subproc,fastvec-subproc-w8
    python benchmarks/startup.py --skip gymnasium-async:cpu:256 --cap 60 --json startup.json
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

SYSTEMS = {
    "fastvec-subproc": "fastvec.SubprocVecEnv, default num_workers (min(num_envs, CPUs))",
    "fastvec-subproc-w2": "fastvec.SubprocVecEnv, num_workers=2",
    "fastvec-sync": "fastvec.SyncVecEnv (every env in this process)",
    "gymnasium-async": "gymnasium AsyncVectorEnv (a process per env, default context)",
    "gymnasium-sync": "gymnasium SyncVectorEnv",
    "fastvec-ray": "fastvec.RayVecEnv, default num_actors (one per node), on a Ray started first",
    # only when named:
    "fastvec-subproc-w8": "fastvec.SubprocVecEnv, num_workers=min(8, num_envs)",
    "fastvec-subproc-fork": "fastvec.SubprocVecEnv, context='fork' (workers import nothing)",
    "fastvec-subproc-preload": "fastvec.SubprocVecEnv, the forkserver preloading fastvec's "
                               "worker module (imported once, not in every worker)",
    "fastvec-subproc-w8-preload": "fastvec.SubprocVecEnv, num_workers=min(8, num_envs), "
                                  "the forkserver preloading",
    "fastvec-ray-a2": "fastvec.RayVecEnv, num_actors=2, on a Ray started first",
    "gymnasium-async-forkserver": "gymnasium AsyncVectorEnv, context='forkserver'",
}
DEFAULT_SYSTEMS = list(SYSTEMS)[:6]
ENVS = {"cheap": "CartPole-v1", "sleep": "__init__ sleeps", "cpu": "__init__ burns CPU"}
RAY_INIT = "ray.init"  # the row of Ray's own start


class SlowInitEnv(gym.Env):
    """A CartPole-shaped env whose constructor takes ``seconds``: asleep, or burning CPU."""

    def __init__(self, seconds: float = 0.1, burn: bool = False) -> None:
        if burn:  # CPU time of this thread, whatever else runs on the core
            until = time.thread_time() + seconds
            while time.thread_time() < until:
                pass
        else:
            time.sleep(seconds)
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(4, np.float32), 0.0, False, False, {}


def env_fns(env: str, num_envs: int, seconds: float) -> list[Callable[[], gym.Env]]:
    """``num_envs`` functions that make the ``env`` kind of env."""
    if env == "cheap":
        return [functools.partial(gym.make, "CartPole-v1")] * num_envs
    return [functools.partial(SlowInitEnv, seconds, env == "cpu")] * num_envs


def build(system: str, fns: list[Callable[[], gym.Env]]) -> Any:
    """The vector env of ``system`` over ``fns`` (Ray, where needed, is up already)."""
    import fastvec

    n = len(fns)
    if system == "fastvec-subproc":
        return fastvec.SubprocVecEnv(fns)
    if system == "fastvec-subproc-w2":
        return fastvec.SubprocVecEnv(fns, num_workers=min(2, n))
    if system == "fastvec-subproc-w8":
        return fastvec.SubprocVecEnv(fns, num_workers=min(8, n))
    if system == "fastvec-subproc-fork":
        return fastvec.SubprocVecEnv(fns, context="fork")
    if system.endswith("-preload"):
        # before the first worker starts the forkserver (its import counts: on the clock)
        multiprocessing.set_forkserver_preload(["fastvec.pool.process.worker"])
        workers = min(8, n) if "-w8" in system else None
        return fastvec.SubprocVecEnv(fns, num_workers=workers)
    if system == "fastvec-sync":
        return fastvec.SyncVecEnv(fns)
    if system == "gymnasium-async":
        return gym.vector.AsyncVectorEnv(fns)
    if system == "gymnasium-async-forkserver":
        return gym.vector.AsyncVectorEnv(fns, context="forkserver")
    if system == "gymnasium-sync":
        return gym.vector.SyncVectorEnv(fns)
    if system == "fastvec-ray":
        return fastvec.RayVecEnv(fns)
    if system == "fastvec-ray-a2":
        return fastvec.RayVecEnv(fns, num_actors=min(2, n))
    raise ValueError(f"unknown system {system!r}; expected one of {', '.join(SYSTEMS)}")


def measure(system: str, env: str, num_envs: int, seconds: float) -> dict[str, float]:
    """One start-up in this process: seconds to construct, to the first reset's return
    (``start``), to close; for Ray, ``ray.init`` and ``ray.shutdown`` apart.
    """
    import fastvec  # noqa: F401  (imported before the clock starts)

    record: dict[str, float] = {}
    ray: Any = None
    if system.startswith("fastvec-ray"):
        import ray

        t = time.perf_counter()
        ray.init(address="local", num_cpus=2, _node_ip_address="127.0.0.1",
                 include_dashboard=False, log_to_driver=False)
        record["ray_init"] = time.perf_counter() - t
    fns = env_fns(env, num_envs, seconds)
    t = time.perf_counter()
    envs = build(system, fns)
    record["construct"] = time.perf_counter() - t
    envs.reset(seed=0)
    record["start"] = time.perf_counter() - t
    t = time.perf_counter()
    envs.close()
    record["close"] = time.perf_counter() - t
    if ray is not None:
        t = time.perf_counter()
        ray.shutdown()
        record["ray_shutdown"] = time.perf_counter() - t
    return record


# -- the parent: cases, rounds, the table ------------------------------------------------

Case = tuple[str, str, int]  # (system, env, num_envs)


def skipped(case: Case, patterns: list[str]) -> bool:
    """Whether a ``--skip`` pattern names ``case``: every ``:``-separated part of the
    pattern is its system, its env or its size (``gymnasium-async:256``).
    """
    tokens = {case[0], case[1], str(case[2])}
    return any(all(part in tokens for part in p.split(":")) for p in patterns if p)


def run_child(case: Case, seconds: float, cap: float) -> dict[str, Any]:
    """Measure ``case`` in a fresh process: its record, ``{"over": cap}`` when it ran
    past ``cap`` seconds (killed with everything it started), or ``{"error": ...}``.
    """
    system, env, n = case
    command = [sys.executable, os.path.abspath(__file__), "--child", f"{system}:{env}:{n}",
               "--ctor-seconds", repr(seconds)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        out, err = child.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:  # pragma: no cover - gone meanwhile
            pass
        child.communicate()
        return {"over": cap}
    lines = out.strip().splitlines()
    if child.returncode != 0 or not lines:
        last = (err.strip().splitlines() or [f"exit code {child.returncode}"])[-1]
        return {"error": last[:200]}
    return json.loads(lines[-1])


def run_rounds(cases: list[Case], repeats: int, slow_repeats: int, seconds: float,
               cap: float, log: Callable[[str], None] = print) -> dict[Case, list[dict]]:
    """Every case ``repeats`` times (cases of slow envs ``slow_repeats`` times),
    interleaved: round ``r`` runs each case once, the order rotated by ``r``; a case
    over the cap or failed is not run again.
    """
    results: dict[Case, list[dict]] = {case: [] for case in cases}
    for r in range(max(repeats, slow_repeats)):
        order = cases[r % len(cases):] + cases[:r % len(cases)] if cases else []
        for case in order:
            want = repeats if case[1] == "cheap" else slow_repeats
            done = results[case]
            if len(done) >= want or any("over" in x or "error" in x for x in done):
                continue
            record = run_child(case, seconds, cap)
            done.append(record)
            log(f"round {r + 1}: {case[0]} {case[1]} {case[2]}: {describe_record(record)}")
    return results


def describe_record(record: dict[str, Any]) -> str:
    if "over" in record:
        return f"over {record['over']:g} s"
    if "error" in record:
        return f"error: {record['error']}"
    return ", ".join(f"{key} {value:.3f} s" for key, value in record.items())


def cell(records: list[dict], key: str) -> str:
    """``median (min-max)`` of ``key`` over ``records``, or why there is none."""
    for record in records:
        if "over" in record:
            return f"over {record['over']:g} s"
        if "error" in record:
            return "error"
    values = [record[key] for record in records if key in record]
    if not values:
        return ""
    median = statistics.median(values)
    if len(values) == 1:
        return f"{seconds(median)} s"
    return f"{seconds(median)} s ({seconds(min(values))}-{seconds(max(values))})"


def seconds(value: float) -> str:
    """Three significant figures or so: ``0.004``, ``0.75``, ``12.8``."""
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def tables(results: dict[Case, list[dict]], systems: list[str], envs: list[str],
           sizes: list[int]) -> str:
    """Markdown: per env, start-up to the first reset's return, then close, per system
    and size (for Ray systems, on a Ray started first: its start is a row of its own).
    """
    header = "| system | " + " | ".join(f"{n} envs" for n in sizes) + " |"
    rule = "|---|" + "---:|" * len(sizes)
    out = []
    for env in envs:
        for key, title in (("start", "start-up (constructor to first reset returned)"),
                           ("close", "close()")):
            rows = []
            for system in systems:
                cells = [cell(results.get((system, env, n), []), key) for n in sizes]
                if any(cells):
                    rows.append(f"| `{system}` | " + " | ".join(cells) + " |")
            ray_cases = [(s, env, n) for s in systems if s.startswith("fastvec-ray")
                         for n in sizes]
            if key == "start" and any(results.get(c) for c in ray_cases):
                ray_cells = [cell([x for s in systems if s.startswith("fastvec-ray")
                                   for x in results.get((s, env, n), []) if "ray_init" in x],
                                  "ray_init") for n in sizes]
                rows.append(f"| {RAY_INIT} (before the Ray systems, apart) | "
                            + " | ".join(ray_cells) + " |")
            if rows:
                out += [f"**{env}** ({ENVS[env]}): {title}", "", header, rule, *rows, ""]
    return "\n".join(out)


def parse_list(text: str, known: dict | None = None, what: str = "") -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in items if known is not None and item not in known]
    if unknown:
        raise SystemExit(f"unknown {what} {unknown}; expected some of {', '.join(known or {})}")
    return items


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "gymnasium": gym.__version__, "numpy": np.__version__,
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                        help=f"some of {', '.join(SYSTEMS)}")
    parser.add_argument("--envs", default=",".join(ENVS), help=f"some of {', '.join(ENVS)}")
    parser.add_argument("--sizes", default="16,64,256", help="numbers of envs")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the cheap env")
    parser.add_argument("--slow-repeats", type=int, default=1,
                        help="rounds of the sleep and cpu envs")
    parser.add_argument("--ctor-seconds", type=float, default=0.1,
                        help="what one constructor of the sleep and cpu envs takes")
    parser.add_argument("--cap", type=float, default=60.0,
                        help="seconds a measurement's process may run before it is killed")
    parser.add_argument("--skip", default="", help="cases not to run: system:env:size "
                        "patterns, any part left out, e.g. gymnasium-async:256")
    parser.add_argument("--json", help="write the raw records here")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # system:env:size, this process
    args = parser.parse_args(argv)
    if args.child:
        system, env, n = args.child.split(":")
        print(json.dumps(measure(system, env, int(n), args.ctor_seconds)))
        return
    systems = parse_list(args.systems, SYSTEMS, "systems")
    envs = parse_list(args.envs, ENVS, "envs")
    sizes = [int(n) for n in parse_list(args.sizes)]
    patterns = parse_list(args.skip)
    cases = [(s, e, n) for e in envs for n in sizes for s in systems
             if not skipped((s, e, n), patterns)]
    before = machine()
    began = time.perf_counter()
    results = run_rounds(cases, args.repeats, args.slow_repeats, args.ctor_seconds, args.cap,
                         log=lambda line: print(line, file=sys.stderr, flush=True))
    after = machine()["loadavg"]
    print(tables(results, systems, envs, sizes))
    print(f"Python {before['python']}, {before['cpus']} CPUs, Gymnasium {before['gymnasium']}; "
          f"load average before {before['loadavg']}, after {after}; "
          f"{time.perf_counter() - began:.0f} s in all")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": vars(args), "machine": before, "loadavg_after": after,
                       "results": [{"system": s, "env": e, "num_envs": n, "records": r}
                                   for (s, e, n), r in results.items()]}, f, indent=1)


if __name__ == "__main__":
    main()
