"""Run Gymnasium's own ``tests/vector`` test files against fastvec.

Gymnasium's vector tests are written for ``gymnasium.vector.SyncVectorEnv`` and
``AsyncVectorEnv``. This script runs them with pytest while those two names
stand for fastvec's classes (``fastvec.SyncVecEnv`` and ``fastvec.SubprocVecEnv``),
so every test there checks fastvec instead. Gymnasium's test files are not part
of fastvec: give the script a Gymnasium source tree (a checkout, or a bare git
directory with ``--rev``)::

    git clone https://github.com/Farama-Foundation/Gymnasium /tmp/Gymnasium
    git -C /tmp/Gymnasium checkout 95a790e1   # "Update to v1.4.0"
    python benchmarks/gymnasium_vector_tests.py --gymnasium-src /tmp/Gymnasium

    # or from a bare repository, without a work tree:
    python benchmarks/gymnasium_vector_tests.py --gymnasium-src Gymnasium.git --rev 95a790e1

Anything after ``--`` goes to pytest (``-- -k seed -x``). The script copies the
source tree's ``tests/`` into a temporary directory and runs pytest there, so
the *installed* Gymnasium is the one imported (not the checkout's sources).
``tests/vector/utils`` (Gymnasium's batching helpers, which fastvec uses as they
are) is left out unless ``--with-utils`` is given.

Each test that fails because of a departure fastvec chooses (see
``DEPARTURES`` and docs/api.md, "Compatibility with Gymnasium's vector envs") is
reported as an expected failure (``xfail``, strict: it must fail) with the
departure as its reason; every other failure is a fastvec bug. The summary at
the end counts the tests run, passed and attributed to each departure. With
``--no-xfail`` every test runs plainly.

As a pytest plugin (``-p gymnasium_vector_tests``, with this directory on
``sys.path``) the module does the substitution itself, for a pytest run of your
own in a Gymnasium source tree.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import gymnasium.vector
import pytest

import fastvec

GYMNASIUM_VECTOR_TESTS_REV = "95a790e199c1ea7befa2fca03ac9fc42001c908d"  # "Update to v1.4.0"

# The Gymnasium tests fastvec fails on purpose or knowingly, each with the tests it
# accounts for (node ids relative to tests/vector; a trailing "[" matches every
# parameter).  "departure": a choice of fastvec's (docs/api.md, "Compatibility with
# Gymnasium's vector envs"); "gap": not supported yet.
DEPARTURES: dict[str, tuple[str, str, list[str]]] = {
    "action-range": ("departure", "an out-of-range Discrete action is a ValueError before "
                     "any env steps (Gymnasium passes it to the env)",
                     ["test_vector_env.py::test_final_obs_info["]),
    "scalar-action": ("departure", "a scalar where a batch of actions is expected is a "
                      "ValueError (Gymnasium: TypeError)",
                      ["test_vector_env.py::test_action_count_compatibility["]),
    "action-dtype": ("departure", "actions reach the envs in the action space's dtype (a "
                     "float64 batch for a float32 Box arrives as np.float32, which the "
                     "test env's time.sleep(action) refuses; Gymnasium passes np.float64)",
                     ["test_async_vector_env.py::test_step_timeout_async_vector_env["]),
    "worker-error": ("departure", "an env's exception in a worker arrives as WorkerError "
                     "(remote traceback as __cause__), not re-raised as its own type "
                     "with Gymnasium's logged warnings",
                     ["test_async_vector_env.py::test_async_vector_subenv_error"]),
    "shared-memory": ("departure", "shared_memory= is ignored: every space works (flat "
                      "records in shared memory, other spaces pickled), so "
                      "shared_memory=True with a custom space is no ValueError",
                      ["test_async_vector_env.py::"
                       "test_custom_space_async_vector_env_shared_memory"]),
    "wording": ("departure", "error messages are fastvec's own (same exception types)",
                ["test_async_vector_env.py::test_reset_out_of_order_async_vector_env[",
                 "test_async_vector_env.py::test_step_out_of_order_async_vector_env[",
                 "test_sync_vector_env.py::test_check_spaces_sync_vector_env",
                 "test_vector_env.py::test_partial_reset_failure[",
                 "test_observation_mode.py::TestVectorEnvObservationModes::"
                 "test_obs_mode_same_different_spaces["]),
}


class SyncVectorEnv(fastvec.SyncVecEnv):
    """``gymnasium.vector.SyncVectorEnv``'s signature over ``fastvec.SyncVecEnv``."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gymnasium.Env]],
        copy: bool = True,
        observation_mode: Any = "same",
        autoreset_mode: Any = gymnasium.vector.AutoresetMode.NEXT_STEP,
    ) -> None:
        super().__init__(env_fns, autoreset_mode=autoreset_mode, copy=copy,
                         observation_mode=observation_mode)


class AsyncVectorEnv(fastvec.SubprocVecEnv):
    """``gymnasium.vector.AsyncVectorEnv``'s signature over ``fastvec.SubprocVecEnv``.

    ``shared_memory`` is ignored (fastvec always uses shared memory for the spaces
    that fit it); ``daemon`` is the workers' flag, as in Gymnasium. Every env gets
    its own worker, as in Gymnasium.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gymnasium.Env]],
        shared_memory: bool = True,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        worker: Any = None,
        observation_mode: Any = "same",
        autoreset_mode: Any = gymnasium.vector.AutoresetMode.NEXT_STEP,
    ) -> None:
        if worker is not None:
            raise ValueError("fastvec has no custom worker functions (worker=...)")
        super().__init__(env_fns, num_workers=len(env_fns), context=context,
                         autoreset_mode=autoreset_mode, copy=copy, daemon=daemon,
                         observation_mode=observation_mode)


def substitute() -> None:
    """Make ``gymnasium.vector``'s two classes stand for fastvec's."""
    import gymnasium.vector.async_vector_env as async_module
    import gymnasium.vector.sync_vector_env as sync_module

    for module in (gymnasium.vector, sync_module):
        module.SyncVectorEnv = SyncVectorEnv  # type: ignore[misc,assignment]
    for module in (gymnasium.vector, async_module):
        module.AsyncVectorEnv = AsyncVectorEnv  # type: ignore[misc,assignment]


# --- the pytest plugin -------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    substitute()  # before the test modules are imported (collection)
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:gymnasium.*:")
    config.addinivalue_line("markers", "departure: a departure fastvec chooses")


def _departure_of(nodeid: str) -> str | None:
    rel = nodeid.split("tests/vector/", 1)[-1]
    for key, (_, _, patterns) in DEPARTURES.items():
        for pattern in patterns:
            if rel == pattern or (pattern.endswith("[") and rel.startswith(pattern)):
                return key
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("FASTVEC_GYM_NO_XFAIL"):
        return
    for item in items:
        key = _departure_of(item.nodeid)
        if key is not None:
            item.add_marker(pytest.mark.xfail(reason=f"{DEPARTURES[key][0]}: {key}",
                                              strict=True))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """A test that needs an env whose dependency is not installed (Box2D, MuJoCo) is
    skipped, not failed: it says nothing about fastvec."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(
            gymnasium.error.DependencyNotInstalled) and not hasattr(report, "wasxfail"):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"not installed: {call.excinfo.value}")


_OUTCOMES: collections.Counter[str] = collections.Counter()
_BY_KEY: collections.Counter[str] = collections.Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if hasattr(report, "wasxfail") and report.skipped:
            kind, key = report.wasxfail.split(": ", 1)
            _OUTCOMES[kind] += 1
            _BY_KEY[key] += 1
        else:
            _OUTCOMES[report.outcome] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    write = terminalreporter.write_line
    write("")
    write(f"fastvec {fastvec.__version__}, gymnasium {gymnasium.__version__}: "
          f"{sum(_OUTCOMES.values())} Gymnasium vector tests run, {_OUTCOMES['passed']} "
          f"passed, {_OUTCOMES['departure']} departures, {_OUTCOMES['gap']} known gaps, "
          f"{_OUTCOMES['failed']} failed, {_OUTCOMES['skipped']} skipped")
    for key, count in sorted(_BY_KEY.items(), key=lambda kv: -kv[1]):
        kind, what, _ = DEPARTURES[key]
        write(f"  {count:3d}  {kind} {key}: {what}")


# --- the command line ----------------------------------------------------------------


def _tests_tree(source: Path, rev: str | None, into: Path) -> None:
    if rev is not None or (source / "HEAD").is_file() and not (source / "tests").is_dir():
        git_dir = source / ".git" if (source / ".git").exists() else source
        archive = subprocess.run(
            ["git", f"--git-dir={git_dir}", "archive", rev or "HEAD", "tests"],
            check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    else:
        shutil.copytree(source / "tests", into / "tests")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gymnasium-src", required=True, type=Path,
                        help="a Gymnasium checkout, or a bare git directory")
    parser.add_argument("--rev", default=None,
                        help="the commit to take tests/ from (git archive); default: the "
                             "checkout's files as they are, or HEAD of a bare directory")
    parser.add_argument("--with-utils", action="store_true",
                        help="also run tests/vector/utils (Gymnasium's batching helpers)")
    parser.add_argument("--no-xfail", action="store_true",
                        help="run the departures' tests plainly (they fail)")
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gymnasium-vector-tests-") as tmp:
        root = Path(tmp)
        _tests_tree(args.gymnasium_src.resolve(), args.rev, root)
        (root / "pytest.ini").write_text("[pytest]\n")  # the rootdir; no outside config
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        if args.no_xfail:
            env["FASTVEC_GYM_NO_XFAIL"] = "1"
        command = [sys.executable, "-m", "pytest", "-p", "gymnasium_vector_tests",
                   "-p", "no:cacheprovider", "tests/vector", "-q", "-rfEX"]
        if not args.with_utils:
            command.append("--ignore=tests/vector/utils")
        return subprocess.run(command + list(args.pytest_args), cwd=root, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
