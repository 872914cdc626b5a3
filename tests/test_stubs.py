"""Types: the `.pyi` stubs agree with the built kernels (`mypy.stubtest`), and `mypy` passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy.stubtest")

ROOT = Path(__file__).resolve().parents[1]
# The compiled modules' stubs: the kernels', and the Atari env's own (csrc/atari/).
STUBS = sorted([*(ROOT / "fastvec" / "_kernels").glob("*.pyi"),
                *(ROOT / "fastvec" / "atari").glob("*.pyi")])

# stubtest refuses to compare anything while mypy reports an error in any module it
# follows (the rest of the package); type-checking those is `mypy fastvec`'s job, so
# here fastvec's own modules and numpy (the stubs' types) are followed silently and
# every other package is not followed at all: the package only names them in
# annotations, and reading them (Gymnasium, and where installed Ray, torch and the
# trainers) took ten times as long as the comparison itself.
MYPY_CONFIG = """\
[mypy]
ignore_missing_imports = True
follow_imports = skip

[mypy-fastvec.*]
follow_imports = silent

[mypy-numpy.*]
follow_imports = silent
"""


def test_there_are_stubs():
    assert STUBS, "no fastvec/_kernels/*.pyi found"


def test_stubs_match_the_compiled_modules(tmp_path):
    config = tmp_path / "mypy.ini"
    config.write_text(MYPY_CONFIG)
    modules = [".".join(stub.relative_to(ROOT).with_suffix("").parts) for stub in STUBS]
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(config),
         "--allowlist", str(ROOT / "stubtest-allowlist.txt"), *modules],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory) -> Path:
    """One fresh mypy cache for this module's runs: the second reads what the first
    checked (fastvec/ and what it imports) instead of checking it again."""
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.mark.slow
def test_the_python_layer_type_checks(mypy_cache):
    """``mypy`` with the project's settings (pyproject.toml) finds no error in fastvec/."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(mypy_cache)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_with_keeps_the_vector_env_type(tmp_path, mypy_cache):
    """``with SubprocVecEnv(...) as envs``: a type checker sees a ``SubprocVecEnv``."""
    snippet = tmp_path / "with_block.py"
    snippet.write_text(
        "from typing_extensions import assert_type\n"
        "import fastvec\n"
        "def check(fns: list) -> None:\n"
        "    with fastvec.SubprocVecEnv(fns) as envs:\n"
        "        assert_type(envs, fastvec.SubprocVecEnv)\n"
        "    with fastvec.SyncVecEnv(fns) as sync:\n"
        "        assert_type(sync, fastvec.SyncVecEnv)\n")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(mypy_cache), str(snippet)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
