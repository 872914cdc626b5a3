"""SyncVecEnv's own: the sub-envs it holds (``envs``), and the warning for
spaces on the object path, issued once per process.

What every backend does is in the contract suite (``test_contract_*.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.envs import CountingEnv, RenderEnv, SyntheticEnv, gym_fns, make_fns

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "fns",
    [
        pytest.param(lambda: make_fns(CountingEnv, 3), id="counting"),
        pytest.param(lambda: make_fns(SyntheticEnv, 2, layout="dict"), id="synthetic_dict"),
        pytest.param(lambda: make_fns(RenderEnv, 2), id="render"),
        pytest.param(lambda: gym_fns("Blackjack-v1", 2), id="blackjack"),
    ],
)
def test_envs_are_gymnasiums_sub_envs(fns, make_vec, make_ref):
    vec, ref = make_vec(fns()), make_ref(fns())
    assert len(vec.envs) == vec.num_envs
    assert all(type(e) is type(r) for e, r in zip(vec.envs, ref.envs, strict=True))


def test_envs_are_the_sub_envs_in_order(make_vec):
    vec = make_vec(make_fns(CountingEnv, 4))
    assert [env.env_id for env in vec.envs] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "values, expected",
    [
        ("same", ("same", "same", "same")),
        (["a", "b", "c"], ("a", "b", "c")),
        (("x", "y", "z"), ("x", "y", "z")),
    ],
    ids=["one_value", "list", "tuple"],
)
def test_set_attr_sets_the_sub_envs_attribute(values, expected, make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    vec.set_attr("label", values)
    assert tuple(env.label for env in vec.envs) == expected


def test_close_closes_each_sub_env_once(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    envs = list(vec.envs)
    vec.reset(seed=0)
    vec.close()
    vec.close()
    assert [env.close_count for env in envs] == [1, 1, 1]


# ---------------------------------------------------------------------------
# the object path warning, once per process


WARNING_SCRIPT = """
import json, warnings
import numpy as np
import {impl} as fv
from tests.support.envs import CountingEnv, DictCountingEnv, ObjectSpaceEnv, make_fns

counts = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for cls, kind in [(CountingEnv, None), (DictCountingEnv, None), (ObjectSpaceEnv, "text"),
                      (ObjectSpaceEnv, "graph"), (ObjectSpaceEnv, "text")]:
        fns = make_fns(cls, 2) if kind is None else make_fns(cls, 2, kind=kind)
        env = fv.SyncVecEnv(fns)
        try:
            env.reset(seed=0)
            for _ in range(3):
                env.step(np.zeros(2, dtype=np.int64))
        finally:
            env.close()
        counts.append(sum(issubclass(w.category, fv.errors.ObjectSpaceWarning) for w in caught))
print(json.dumps(counts))
"""


@pytest.mark.fastvec_only
def test_object_space_warning_is_issued_once_per_process(impl):
    script = WARNING_SCRIPT.format(impl=impl.__name__)
    path = os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    # no warning for Box / Dict spaces; one at the first Text space; no more after it
    assert counts == [0, 0, 1, 1, 1], f"ObjectSpaceWarnings seen after each env: {counts}"
