"""One round trip through the step barrier vs through multiprocessing pipes.

A round trip: the parent tells 2 worker processes (fork) to go, each answers at
once, and the parent has both answers.  With the barrier that is ``post`` +
``wait`` over shared memory (what ``SubprocVecEnv`` does per step, minus the
envs); with pipes it is ``send`` to each worker + ``recv`` from each (what a
pipe-based vector env does per step).  No env, no data: the cost of the
synchronisation alone.

Warm-up first, then ``--repeats`` interleaved rounds (barrier then pipes, the
order alternating) of ``--rounds`` round trips each; each repeat gives a mean
round-trip time, and the figures printed are the medians over the repeats.

    PYTHONPATH=. python benchmarks/barrier_roundtrip.py [--rounds N] [--repeats R]
"""

from __future__ import annotations

import argparse
import mmap
import multiprocessing as mp
import os
import statistics
import time

from fastvec._kernels.barrier import Barrier, barrier_nbytes

N_WORKERS = 2
GO, CLOSE = 1, 2
SLICE = 0.02  # seconds per wait, as SubprocVecEnv waits (then checks liveness)


def barrier_worker(mem: mmap.mmap, w: int) -> None:
    barrier = Barrier(mem, N_WORKERS)
    barrier.start_worker(w)
    while True:
        command = barrier.wait_command(w, 0.1)
        if command is None:
            continue
        barrier.finish(w, 0)
        if command == CLOSE:
            return


def pipe_worker(conn) -> None:
    while True:
        message = conn.recv()
        conn.send(0)
        if message is None:
            return


def barrier_rounds(barrier: Barrier, rounds: int) -> float:
    workers = range(N_WORKERS)
    start = time.perf_counter()
    for _ in range(rounds):
        barrier.post(workers, GO)
        while barrier.wait(workers, -1, SLICE) < N_WORKERS:
            pass
    return (time.perf_counter() - start) / rounds


def pipe_rounds(conns: list, rounds: int) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        for conn in conns:
            conn.send(1)
        for conn in conns:
            conn.recv()
    return (time.perf_counter() - start) / rounds


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5000, help="round trips per repeat")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved repeats")
    parser.add_argument("--warmup", type=int, default=2000, help="untimed round trips")
    args = parser.parse_args()

    ctx = mp.get_context("fork")
    mem = mmap.mmap(-1, barrier_nbytes(N_WORKERS))
    barrier = Barrier(mem, N_WORKERS)
    procs = [ctx.Process(target=barrier_worker, args=(mem, w), daemon=True)
             for w in range(N_WORKERS)]
    conns = []
    for _ in range(N_WORKERS):
        parent_end, child_end = ctx.Pipe()
        procs.append(ctx.Process(target=pipe_worker, args=(child_end,), daemon=True))
        conns.append(parent_end)
    for proc in procs:
        proc.start()
    print(f"{os.cpu_count()} cores, load average before: {load()}")
    try:
        barrier_rounds(barrier, args.warmup)
        pipe_rounds(conns, args.warmup)
        results: dict[str, list[float]] = {"barrier": [], "pipe": []}
        for r in range(args.repeats):
            order = ["barrier", "pipe"] if r % 2 == 0 else ["pipe", "barrier"]
            for kind in order:
                if kind == "barrier":
                    results[kind].append(barrier_rounds(barrier, args.rounds))
                else:
                    results[kind].append(pipe_rounds(conns, args.rounds))
    finally:
        barrier.post(range(N_WORKERS), CLOSE)
        for conn in conns:
            conn.send(None)
        for proc in procs:
            proc.join(5)
            if proc.exitcode is None:
                proc.kill()
    print(f"load average after: {load()}")
    print(f"{args.repeats} interleaved repeats of {args.rounds} round trips, "
          f"parent -> {N_WORKERS} worker processes (fork) -> parent")
    medians = {}
    for kind, label in (("barrier", "barrier (post + wait)"),
                        ("pipe", "multiprocessing.Pipe (send + recv)")):
        times = [t * 1e6 for t in results[kind]]
        medians[kind] = statistics.median(times)
        print(f"{label:36s} median {medians[kind]:7.2f} us   "
              f"(repeats: {min(times):.2f} - {max(times):.2f} us)")
    print(f"ratio pipe / barrier: {medians['pipe'] / medians['barrier']:.1f}x")


if __name__ == "__main__":
    main()
