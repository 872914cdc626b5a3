"""Wherever a trainer runs, SubprocVecEnv runs: python -, python -c, scripts, notebooks.

Workers never re-import the trainer's main module, so a script piped to
``python -`` and a script without an ``if __name__ == "__main__":`` guard work in
every start method, as do env classes and lambdas defined in a notebook.  A worker
that dies while starting says why.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fastvec import SubprocVecEnv
from fastvec.errors import WorkerError
from tests.support.envs import CountingEnv

pytestmark = [pytest.mark.subprocess, pytest.mark.fastvec_only]

ROOT = Path(__file__).resolve().parents[1]
CONTEXTS = ["fork", "spawn", "forkserver"]

# An env class and lambdas defined in the script itself, no __main__ guard.
SCRIPT = textwrap.dedent("""
    import gymnasium as gym
    import numpy as np
    import fastvec

    class Local(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)
        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.full(2, 0.5, np.float32), {}
        def step(self, action):
            return np.full(2, float(action) / 2, np.float32), 1.0, False, False, {}

    fns = [lambda: gym.make("CartPole-v1")] * 2 + [Local] * 2
    envs = fastvec.SubprocVecEnv(fns[:2], num_workers=2, context=CONTEXT)
    obs, _ = envs.reset(seed=0)
    envs.close()
    envs = fastvec.SubprocVecEnv(fns[2:], num_workers=2, context=CONTEXT)
    envs.reset(seed=0)
    obs, rewards, *_ = envs.step(np.array([1, 0]))
    envs.close()
    print("RESULT", obs.tolist(), rewards.tolist())
""")
EXPECTED = "RESULT [[0.5, 0.5], [0.0, 0.0]] [1.0, 1.0]"


def run_python(args: list[str], stdin: str | None = None, cwd: Path = ROOT) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, *args], input=stdin, capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def script(context: str) -> str:
    return f"CONTEXT = {context!r}\n" + SCRIPT


@pytest.mark.parametrize("context", CONTEXTS)
def test_script_piped_to_python_stdin(context):
    assert EXPECTED in run_python(["-"], stdin=script(context))


@pytest.mark.parametrize("context", ["forkserver"])
def test_python_dash_c(context):
    assert EXPECTED in run_python(["-c", script(context)])


@pytest.mark.parametrize("context", ["spawn", "forkserver"])  # fork never re-imports main
def test_script_file_without_main_guard(context, tmp_path):
    path = tmp_path / "train.py"
    path.write_text(script(context))
    assert EXPECTED in run_python([str(path)], cwd=tmp_path)


def test_readme_usage_example_runs_from_stdin():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("### A Gymnasium loop")
    code = readme[readme.index("```python", start) + len("```python"):]
    code = code[:code.index("```")]
    run_python(["-"], stdin=code)


def test_notebook_cells(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    cells = [
        "import gymnasium as gym, numpy as np, fastvec",
        textwrap.dedent("""
            class Local(gym.Env):
                observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
                action_space = gym.spaces.Discrete(2)
                def reset(self, *, seed=None, options=None):
                    return np.full(2, 0.5, np.float32), {}
                def step(self, action):
                    return np.full(2, float(action) / 2, np.float32), 1.0, False, False, {}
        """),
        textwrap.dedent("""
            results = []
            for context in ["fork", "spawn", "forkserver"]:
                envs = fastvec.SubprocVecEnv([Local, lambda: Local()], num_workers=2,
                                             context=context)
                envs.reset(seed=0)
                obs, rewards, *_ = envs.step(np.array([1, 0]))
                envs.close()
                results.append((obs.tolist(), rewards.tolist()))
            print(results)
        """),
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT)  # the kernel imports this checkout's fastvec
    try:
        client.execute()
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    printed = notebook.cells[2].outputs[0]["text"]
    assert printed.strip() == str([([[0.5, 0.5], [0.0, 0.0]], [1.0, 1.0])] * 3)


class SegfaultOnBuild(CountingEnv):
    """Crashes (a real segfault) while being built, in any process but ``parent_pid``."""

    def __init__(self, parent_pid: int):
        if os.getpid() != parent_pid:
            ctypes.string_at(0)
        super().__init__()


class ExitOnBuild(CountingEnv):
    def __init__(self, parent_pid: int):
        if os.getpid() != parent_pid:
            os._exit(1)
        super().__init__()


@pytest.mark.crash
@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_native_crash_while_building_carries_the_traceback(make_subproc, context):
    fns = [CountingEnv, functools.partial(SegfaultOnBuild, os.getpid())]
    start = time.monotonic()
    with pytest.raises(WorkerError) as caught:
        make_subproc(fns, num_workers=2, context=context)
    assert time.monotonic() - start < 30
    error = caught.value
    assert error.worker_index == 1 and error.exitcode == -11
    assert "SIGSEGV during start-up" in str(error)
    cause = str(error.__cause__)
    assert "Segmentation fault" in cause  # where it crashed: the env's constructor
    assert "test_where_trainers_run.py" in cause and "in __init__" in cause


@pytest.mark.crash
def test_silent_exit_while_building_says_it_did_not_report(make_subproc):
    with pytest.raises(WorkerError, match="exited with code 1 during start-up without "
                                          "reporting an error"):
        make_subproc([functools.partial(ExitOnBuild, os.getpid())], num_workers=1)


def test_env_error_while_building_carries_type_message_and_traceback(make_subproc):
    with pytest.raises(WorkerError, match=r"env 1 \(worker 1\) raised ZeroDivisionError "
                                          "during building its envs") as caught:
        make_subproc([CountingEnv, functools.partial(divmod, 1, 0)], num_workers=2)
    assert "ZeroDivisionError" in str(caught.value.__cause__)


def test_env_fns_reach_workers_by_value_not_by_main():
    # The workers' view of __main__ is a bare module: nothing of the trainer's runs there.
    with SubprocVecEnv([CountingEnv], num_workers=1, context="spawn") as envs:
        names = envs.call_each(lambda env: sorted(vars(sys.modules["__main__"]))[:3])
    assert "SCRIPT" not in str(names)
