"""What a step of some envs costs against a step of all of them: ``step(actions, env_ids)``.

16 CPU-bound envs (``fastvec.bench``'s ``heavy`` workload: ~300 us a step), stepped
whole and by halves: the first 8 (one worker's block: the other worker is not woken),
every other env (4 rows of each block), and a random half each step.  Each backend
runs in a fresh process (this script runs itself with ``--backend``); within it the
four kinds of step are interleaved over ``--rounds`` rounds and the medians kept.

    python benchmarks/subset_step.py                     # sync, subproc, subproc+local
    python benchmarks/subset_step.py --backends subproc --rounds 9 --steps 400
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

NUM_ENVS = 16
KINDS = ("all 16", "first 8", "every other 8", "random 8")
BACKENDS = {"sync": ("sync", {}), "subproc": ("subproc", {"num_workers": 2}),
            "subproc-local": ("subproc", {"num_workers": 1, "local_block": True})}


def ids_for(kind: str, rng: np.random.Generator) -> np.ndarray | None:
    if kind == "all 16":
        return None
    if kind == "first 8":
        return np.arange(8)
    if kind == "every other 8":
        return np.arange(0, NUM_ENVS, 2)
    return np.sort(rng.permutation(NUM_ENVS)[:8])


def measure(backend: str, rounds: int, steps: int) -> dict[str, float]:
    """Median microseconds per step of each kind, on ``backend``."""
    import fastvec
    from fastvec.bench.envs import HeavyEnv

    name, kwargs = BACKENDS[backend]
    envs = fastvec.make(HeavyEnv, NUM_ENVS, backend=name, vector_kwargs=kwargs)
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    try:
        envs.reset(seed=0)
        for kind in KINDS:  # warm-up
            run(envs, kind, rng, steps // 4)
        for r in range(rounds):
            for kind in KINDS[r % 2:] + KINDS[:r % 2]:  # interleaved, order alternating
                times[kind].append(run(envs, kind, rng, steps))
    finally:
        envs.close()
    return {kind: statistics.median(values) for kind, values in times.items()}


def run(envs, kind: str, rng: np.random.Generator, steps: int) -> float:
    """Microseconds per step of ``steps`` steps of ``kind``."""
    plan = [ids_for(kind, rng) for _ in range(steps)]
    start = time.perf_counter()
    for ids in plan:
        if ids is None:
            envs.step(np.zeros(NUM_ENVS, np.int64))
        else:
            envs.step(np.zeros(len(ids), np.int64), env_ids=ids)
    return (time.perf_counter() - start) / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--backend", help=argparse.SUPPRESS)  # one backend, this process
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if args.backend:
        print(json.dumps(measure(args.backend, args.rounds, args.steps)))
        return
    results = {}
    for backend in args.backends.split(","):
        out = subprocess.run([sys.executable, __file__, "--backend", backend, "--rounds",
                              str(args.rounds), "--steps", str(args.steps)],
                             check=True, capture_output=True, text=True).stdout
        results[backend] = json.loads(out.strip().splitlines()[-1])
    print(f"{'backend':<14}" + "".join(f"{kind:>22}" for kind in KINDS))
    for backend, row in results.items():
        full = row["all 16"]
        cells = [f"{row[kind]:>9.0f} us ({row[kind] / full:4.2f}x)" for kind in KINDS]
        print(f"{backend:<14}" + "".join(f"{cell:>22}" for cell in cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
