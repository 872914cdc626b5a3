"""``python -m fastvec.bench``: env-steps per second of vector envs, side by side.

Usage::

    python -m fastvec.bench                  # quick: 4 workloads x 6 systems, about 1 min
    python -m fastvec.bench --full           # every workload and system but named-only ones
    python -m fastvec.bench --list           # what each workload and system is
    python -m fastvec.bench --repeats 5 --seconds 1 --json bench.json --plot bench.png
    python -m fastvec.bench --workloads heavy --policy-us 2000   # a policy in the loop
    python -m fastvec.bench --workloads pong --systems plain,fastvec-local,envpool

Prints, per workload and system, the median env-steps per second, the spread of
the repeats, the p50/p99 duration of one batched step, and ratios to ``plain``
(the Python loop a trainer would write without a vector env: it steps each env,
resets the finished ones and stacks the batch) and ``gymnasium-sync``.  Systems whose
package is absent (SB3, PufferLib, EnvPool) are listed as unavailable, and so are
the Atari workloads (``pong``, ``breakout`` and their ``-direct`` forms) without their
extra (``pip install -e ".[atari]"``).
``--policy-us N`` burns N µs of CPU in the trainer per batch of all ``num_envs``
actions, as a policy forward pass would, between receiving a batch and sending
its actions (see :mod:`fastvec.bench.drivers`).  ``--help`` lists
every option; ``benchmarks/README.md`` in the source tree has the method and
dated results.

Each (system, workload) measurement runs in a fresh Python process: build the
envs, reset with a fixed seed, warm up, then count batched steps over a fixed
wall-clock window, cycling through seeded actions drawn in advance (the same for
every system).  The parent interleaves the repeats (every system on a workload,
then again, order rotated) and reports medians, with ratios to ``plain`` and
``gymnasium-sync`` from the same run.  A new system is one loader in ``SYSTEMS``;
a loader that raises (its package is absent, say) marks the system unavailable.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector.utils import batch_space

from fastvec.bench.arguments import parse_args
from fastvec.bench.envs import SPIN_RATE_VAR, spin_rate
from fastvec.bench.games import game_action_space, is_game
from fastvec.bench.report import (
    Cell,
    Cells,
    Progress,
    format_table,
    loadavg,
    machine_info,
    write_json,
    write_plot,
)
from fastvec.bench.systems import SYSTEMS, Driver
from fastvec.bench.workloads import WORKLOADS, Workload, stacked_env

__all__ = ["main", "measure", "parse_args", "run", "unavailable_reason",
           "workload_unavailable_reason"]

RESULT_MARK = "fastvec-bench-result:"  # prefix of the child's one line of output
ACTION_BATCHES = 256  # pre-generated action batches, cycled through


# ---------------------------------------------------------------- child side


def _step_for(
    driver: Driver, actions: Sequence[np.ndarray], seconds: float
) -> tuple[int, list[float], float]:
    """Step until ``seconds`` of wall-clock time pass.

    Returns (env-steps, the duration of each driver step in seconds, elapsed).
    One clock read per step serves both the deadline and the step's duration.
    """
    steps, n = 0, len(actions)
    durations: list[float] = []
    start = last = time.perf_counter()
    deadline = start + seconds
    while last < deadline:
        steps += driver.step(actions[len(durations) % n])
        now = time.perf_counter()
        durations.append(now - last)
        last = now
    return steps, durations, last - start


def build_driver(system: str, spec: Workload) -> Driver:
    """``system``'s driver over ``spec``'s envs.

    A workload's frames are stacked by fastvec's ``frame_stack`` where the system has
    it, else by ``FrameStackObservation``.
    """
    env_fn, options = spec.make_env, {}
    if spec.frame_stack and SYSTEMS[system].frame_stack:
        options = {"frame_stack": spec.frame_stack}
    elif spec.frame_stack:
        env_fn = functools.partial(stacked_env, spec.make_env, spec.frame_stack)
    return SYSTEMS[system].load()([env_fn] * spec.num_envs, **options)


def measure(
    system: str, workload: str, seconds: float, warmup: float, seed: int, policy_us: float = 0.0
) -> dict[str, float]:
    """Build one system on one workload and time it (the child process's whole job).

    ``policy_us``: CPU burnt by the trainer per batch of all ``num_envs`` actions
    (a batch of ``k`` envs burns ``policy_us * k / num_envs``), counted in the step.
    ``cpu_seconds`` is this process's CPU time in the window (worker processes'
    time is not in it): well under ``seconds`` for an in-process system means other
    processes took the CPU away.  ``p50_us`` and ``p99_us`` are percentiles of the
    duration of one driver step: a batched ``step``, or a ``recv`` + ``send``.
    """
    spec = WORKLOADS[workload]
    if not SYSTEMS[system].runs_on(workload):
        raise ValueError(f"{system} runs only on {', '.join(SYSTEMS[system].workloads or ())}")
    probe: Any = spec.make_env()
    if is_game(probe):  # a row (and an env-step) per agent
        single, rows = game_action_space(probe), spec.num_envs * len(probe.possible_agents)
    else:
        single, rows = probe.action_space, spec.num_envs
    action_space = batch_space(single, rows)
    probe.close()
    action_space.seed(seed)
    actions = [action_space.sample() for _ in range(ACTION_BATCHES)]

    driver = build_driver(system, spec)
    driver.policy_us = policy_us
    try:
        driver.reset(seed)
        _step_for(driver, actions, warmup)
        gc.collect()
        cpu_start = time.process_time()
        steps, durations, elapsed = _step_for(driver, actions, seconds)
        cpu = time.process_time() - cpu_start
    finally:
        driver.close()
    p50, p99 = np.percentile(durations, [50, 99]) * 1e6
    return {
        "env_steps": steps,
        "batches": len(durations),
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "rate": steps / elapsed,
        "p50_us": float(p50),
        "p99_us": float(p99),
        "policy_us": policy_us,
    }


def _run_child(system: str, workload: str, args: argparse.Namespace) -> dict[str, float]:
    """Measure in a fresh interpreter; return its record or raise RuntimeError."""
    flags = [f"--seconds={args.seconds}", f"--warmup={args.warmup}", f"--seed={args.seed}"]
    flags.append(f"--policy-us={args.policy_us}")
    cmd = [sys.executable, "-m", "fastvec.bench", "--child", system, workload, *flags]
    limit = args.seconds + args.warmup + 120  # generous: start-up, building envs, close
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {limit:g} s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return dict(json.loads(line[len(RESULT_MARK) :]))
    lines = proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}, no output"]
    raise RuntimeError(lines[-1])


def unavailable_reason(name: str) -> str | None:
    """Why system ``name`` cannot run here (its loader raised), or None if it can."""
    try:
        SYSTEMS[name].load()
    except Exception as exc:  # any failure to load means "not on this machine"
        return f"unavailable: {type(exc).__name__}: {exc}"
    return None


def workload_unavailable_reason(name: str) -> str | None:
    """Why workload ``name`` cannot run here (a module it needs is absent), or None."""
    spec = WORKLOADS[name]
    for module in spec.requires:
        try:
            importlib.import_module(module)
        except Exception as exc:  # absent, or broken: either way not on this machine
            hint = f" ({spec.install})" if spec.install else ""
            return f"unavailable: {type(exc).__name__}: {exc}{hint}"
    return None


def run(args: argparse.Namespace) -> Cells:
    """Measure every workload x system, interleaving the repeats.

    A system restricted to some workloads (``envpool``: the Atari ones) gets no cell on
    the others; an unavailable workload or system gets cells with the reason.
    """
    reasons = {s: unavailable_reason(s) for s in args.systems}
    for s, why in reasons.items():
        if why:
            print(f"note: skipping {s}: {why}")
    workload_reasons = {w: workload_unavailable_reason(w) for w in args.workloads}
    for w, why in workload_reasons.items():
        if why:
            print(f"note: skipping workload {w}: {why}")
    for s in args.systems:
        only = SYSTEMS[s].workloads
        if only is not None and not set(only) & set(args.workloads):
            print(f"note: {s} runs only on {', '.join(only)}, which is not selected")
    cells = {
        (w, s): Cell(w, s, error=workload_reasons[w] or reasons[s])
        for w in args.workloads
        for s in args.systems
        if SYSTEMS[s].runs_on(w)
    }
    runnable = [s for s in args.systems if not reasons[s]]
    total = sum(1 for (w, s), c in cells.items() if not c.error) * args.repeats
    progress = Progress(total)
    try:
        for workload in args.workloads:
            if workload_reasons[workload]:
                continue
            systems = [s for s in runnable if SYSTEMS[s].runs_on(workload)]
            for r in range(args.repeats):
                shift = r % max(len(systems), 1)
                for name in systems[shift:] + systems[:shift]:
                    cell, label = cells[workload, name], f"{workload} {name} #{r + 1}"
                    progress.start(label)
                    if cell.error:  # failed in an earlier repeat
                        progress.finish(label, "skipped")
                        continue
                    try:
                        cell.records.append(_run_child(name, workload, args))
                    except RuntimeError as exc:
                        cell.error = f"failed: {exc}"
                    progress.finish(label, cell.error or _outcome(cell.records[-1]))
    finally:
        progress.close()
    return cells


def _outcome(record: dict[str, float]) -> str:
    return f"{record['rate']:,.0f} env-steps/s, p99 {record.get('p99_us', 0.0):,.0f} us"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with ``--child``, one measurement) and print the table."""
    args = parse_args(argv)
    if args.child:
        system, workload = args.child
        record = measure(system, workload, args.seconds, args.warmup, args.seed, args.policy_us)
        print(RESULT_MARK + json.dumps(record), flush=True)
        return 0
    if args.list:
        for w in WORKLOADS.values():
            why = workload_unavailable_reason(w.name)
            note = f" [{why}]" if why else ""
            print(f"workload {w.name:<20} {w.tier:<6} {w.num_envs} envs; {w.about}{note}")
        for s in SYSTEMS.values():
            print(f"system   {s.name:<20} {s.tier:<6} {s.about}")
        return 0

    # One calibration of the CPU-burning workloads for every child and their workers,
    # so that every system burns the same work.
    os.environ[SPIN_RATE_VAR] = repr(spin_rate())
    m, load_before = machine_info(), loadavg()
    m["spin_iterations_per_us"] = spin_rate()
    print(f"{m['date']}  {m['cpu_count']} CPUs ({m['cpu_model']})  python {m['python']}")
    print(f"numpy {m['numpy']}  gymnasium {m['gymnasium']}  {m['platform']}")
    print(f"load average before (1, 5, 15 min): {load_before}")
    cells = run(args)
    load_after = loadavg()
    print(f"\nmedian of {args.repeats} x {args.seconds:g} s, a fresh process per measurement")
    if args.policy_us:
        print(f"policy in the loop: {args.policy_us:g} us of CPU per batch of all envs "
              "(pro rata for smaller batches), included in env-steps/s and p50/p99")
    print(format_table(cells))
    print(f"\nload average after (1, 5, 15 min): {load_after}")
    if args.json:
        extra = {"machine": m, "load_before": load_before, "load_after": load_after}
        write_json(args.json, args, cells, extra)
        print(f"wrote {args.json}")
    if args.plot:
        title = f"fastvec.bench, {m['date']}, {m['cpu_count']} CPUs, median of {args.repeats}"
        write_plot(args.plot, cells, args.workloads, title)
        print(f"wrote {args.plot}")
    return 0

