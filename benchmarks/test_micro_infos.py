"""Micro-benchmark: one step's infos of 16 envs, kernel vs folding Gymnasium's ``_add_info``.

Run: python -m pytest benchmarks/test_micro_infos.py --benchmark-only --benchmark-group-by=group
"""

import gymnasium
import numpy as np
import pytest

from fastvec._kernels import infos as kernel

NUM_ENVS = 16


class _Reference:
    _add_info = gymnasium.vector.VectorEnv._add_info
    num_envs = NUM_ENVS


def gymnasium_batch(entries):
    out, ref = {}, _Reference()
    for env_index, info in entries:
        ref._add_info(out, info, env_index)
    return out


def step_entries():
    """What 16 envs report on one step: an int, a float, a bool and a small float32 array."""
    return [
        (
            i,
            {
                "steps": i,
                "return": 0.5 * i,
                "success": i % 2 == 0,
                "pos": np.full(3, i, dtype=np.float32),
            },
        )
        for i in range(NUM_ENVS)
    ]


@pytest.mark.benchmark(group="infos-16x4")
def test_kernel_batch_infos(benchmark):
    entries = step_entries()
    out = benchmark(kernel.batch_infos, entries, NUM_ENVS)
    assert out["pos"].shape == (NUM_ENVS, 3) and out["_steps"].all()


@pytest.mark.benchmark(group="infos-16x4")
def test_gymnasium_add_info(benchmark):
    entries = step_entries()
    out = benchmark(gymnasium_batch, entries)
    assert out["pos"].shape == (NUM_ENVS, 3) and out["_steps"].all()
