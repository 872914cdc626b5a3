"""Env-steps per second of RLlib's own sampling loop, on Gymnasium's vector envs and on fastvec.

    python benchmarks/trainers/rllib_speed.py                       # cartpole and atari
    python benchmarks/trainers/rllib_speed.py --repeats 5 --json rllib.json
    python benchmarks/trainers/rllib_speed.py --policy module       # PPO's module acts

What is timed: ``SingleAgentEnvRunner.sample(num_timesteps=--steps)`` of one env runner
(RLlib's new API stack) with ``--num-envs`` envs, built in this machine's process as
RLlib builds it in an actor: its episodes, its env-to-module connectors, the env steps
(and, with ``--policy module``, PPO's default module choosing the actions on one torch
thread; by default the actions are random, so the figures are RLlib's collection loop
and the envs; PPO's default CNN takes float observations, so ``atari``, whose frames
are uint8, fails with ``--policy module``).  The systems are RLlib's own
``gym_env_vectorize_mode`` ``"sync"`` (its default: Gymnasium's ``SyncVectorEnv``) and
``"async"`` (``AsyncVectorEnv``, a process per env), and ``"vector_entry_point"`` on
a ``fastvec/<id>`` id with fastvec's ``sync`` backend and its ``subproc`` backend
(``--num-workers`` processes).  The
workloads are ``fastvec.bench``'s (``cartpole``, ``atari``: 84x84x4 uint8 frames),
registered as Gymnasium ids.

Each measurement runs in a fresh process (``--child``): it builds the runner, samples
``--warmup`` steps, then times ``--steps``; the systems take turns within each repeat,
in an order that rotates, and the table shows the median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

SYSTEMS = ("rllib-sync", "rllib-async", "fastvec-sync", "fastvec-subproc")
WORKLOADS = ("cartpole", "atari")


def register(workload: str) -> tuple[str, str]:
    """Register the workload as a Gymnasium id and as its fastvec copy; (id, fastvec id)."""
    import gymnasium as gym

    import fastvec
    from fastvec.bench.workloads import WORKLOADS as ALL

    env_id = f"FastvecBench/{workload}-v0"
    gym.register(env_id, entry_point=ALL[workload].make_env, order_enforce=False,
                 disable_env_checker=True)
    return env_id, fastvec.register(env_id)


def runner_config(system: str, workload: str, num_envs: int, num_workers: int) -> Any:
    """The ``PPOConfig`` whose env runner samples ``workload`` on ``system``."""
    from ray.rllib.algorithms.ppo import PPOConfig

    env_id, fastvec_id = register(workload)
    if system.startswith("rllib-"):
        env, mode, env_config = env_id, system.removeprefix("rllib-"), {}
    else:
        env, mode = fastvec_id, "vector_entry_point"
        env_config = {"backend": system.removeprefix("fastvec-")}
        if system == "fastvec-subproc":
            env_config["backend_kwargs"] = {"num_workers": num_workers}
    return (PPOConfig().environment(env, env_config=env_config)
            .env_runners(num_envs_per_env_runner=num_envs, gym_env_vectorize_mode=mode)
            .debugging(seed=0))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """In a child: build the runner, warm up, time ``args.steps``; the rate and the env."""
    import torch
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    torch.set_num_threads(1)
    runner = SingleAgentEnvRunner(config=runner_config(
        args.system, args.workload, args.num_envs, args.num_workers))
    random_actions = args.policy == "random"
    try:
        runner.sample(num_timesteps=args.warmup, random_actions=random_actions)
        start = time.perf_counter()
        episodes = runner.sample(num_timesteps=args.steps, random_actions=random_actions)
        seconds = time.perf_counter() - start
        env = runner.env.unwrapped
        about = f"{type(env).__name__}({env.num_envs})"
    finally:
        runner.stop()
    steps = sum(len(e) for e in episodes)
    return {"rate": steps / seconds, "steps": steps, "seconds": seconds, "env": about}


def run_child(args: argparse.Namespace, system: str, workload: str) -> dict[str, Any]:
    """One measurement in a fresh Python; its result, or the error it printed."""
    cmd = [sys.executable, __file__, "--child", "--system", system, "--workload", workload,
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--num-envs",
           str(args.num_envs), "--num-workers", str(args.num_workers), "--policy", args.policy]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def run_all(args: argparse.Namespace) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every (workload, system) ``--repeats`` times, the systems' order rotating."""
    records: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for repeat in range(args.repeats):
        for workload in args.workloads:
            shift = repeat % len(args.systems)
            for system in args.systems[shift:] + args.systems[:shift]:
                record = run_child(args, system, workload)
                records.setdefault((workload, system), []).append(record)
                shown = f"{record['rate']:,.0f} env-steps/s" if "rate" in record \
                    else f"error: {record['error']}"
                print(f"repeat {repeat + 1}/{args.repeats}  {workload:<9} {system:<16} "
                      f"{shown}", file=sys.stderr, flush=True)
    return records


def table(records: dict[tuple[str, str], list[dict[str, Any]]]) -> tuple[str, list[dict]]:
    """The medians as a text table, with the ratio to ``rllib-sync``; and as rows."""
    rows = []
    for (workload, system), runs in records.items():
        rates = [r["rate"] for r in runs if "rate" in r]
        median = statistics.median(rates) if rates else None
        rows.append({"workload": workload, "system": system, "median": median,
                     "min": min(rates, default=None), "max": max(rates, default=None),
                     "env": next((r["env"] for r in runs if "env" in r), "-"),
                     "errors": [r["error"] for r in runs if "error" in r]})
    base = {r["workload"]: r["median"] for r in rows if r["system"] == "rllib-sync"}
    lines = [f"{'workload':<9} {'system':<16} {'env':<20} {'env-steps/s':>11} "
             f"{'min-max':>17} {'x sync':>7}"]
    for r in rows:
        if r["median"] is None:
            lines.append(f"{r['workload']:<9} {r['system']:<16} failed: {r['errors'][0]}")
            continue
        ratio = r["median"] / base[r["workload"]] if base.get(r["workload"]) else None
        r["ratio_to_rllib_sync"] = ratio
        lines.append(f"{r['workload']:<9} {r['system']:<16} {r['env']:<20} "
                     f"{r['median']:>11,.0f} {r['min']:>8,.0f}-{r['max']:<8,.0f} "
                     f"{'-' if ratio is None else f'{ratio:.2f}':>7}")
    return "\n".join(lines), rows


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma-separated, of fastvec.bench's (default: {','.join(WORKLOADS)})")
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"of {', '.join(SYSTEMS)}")
    p.add_argument("--num-envs", type=int, default=16, help="envs of the env runner")
    p.add_argument("--num-workers", type=int, default=2, help="processes of fastvec-subproc")
    p.add_argument("--steps", type=int, default=20_000, help="env steps timed")
    p.add_argument("--warmup", type=int, default=2_000, help="env steps before timing")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--policy", choices=("random", "module"), default="random")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement")
    p.add_argument("--json", metavar="PATH", help="write settings, machine, runs, medians")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--system", help=argparse.SUPPRESS)
    p.add_argument("--workload", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.systems = [s for s in args.systems.split(",") if s]
    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown:
        p.error(f"unknown systems {unknown}: expected some of {', '.join(SYSTEMS)}")
    if args.steps < args.num_envs or args.repeats < 1:
        p.error("expected --steps >= --num-envs and --repeats >= 1")
    return args


def main() -> None:
    args = parse_args()
    if args.child:
        print(json.dumps(measure(args)), flush=True)
        return
    from fastvec.bench.report import loadavg, machine_info
    from fastvec.bench.workloads import WORKLOADS as ALL

    unknown = [w for w in args.workloads if w not in ALL]
    if unknown:
        raise SystemExit(f"unknown workloads {unknown}: expected some of {', '.join(ALL)}")
    load_before = loadavg()
    records = run_all(args)
    text, rows = table(records)
    print(text)
    if args.json:
        import ray

        settings = {k: v for k, v in vars(args).items()
                    if k not in ("child", "system", "workload", "json")}
        out = {"settings": settings, "ray": ray.__version__,
               "machine": machine_info(), "loadavg_before": load_before,
               "loadavg_after": loadavg(), "medians": rows,
               "runs": [{"workload": w, "system": s, "runs": runs}
                        for (w, s), runs in records.items()]}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
