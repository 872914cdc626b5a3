"""The layers are enforced, not only drawn: every import points down.

``lint-imports`` checks the contracts of ``pyproject.toml``: ``fastvec.vector``
above ``fastvec.pool`` above ``fastvec.spaces`` above ``fastvec._kernels``; the
process pool and the Ray pool independent; no import cycle between sibling
modules anywhere in the package (``fastvec.bench`` included).  It runs in a
child process: import-linter reconfigures logging, which would silence the
``fastvec`` logger for the tests after it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    pytest.importorskip("importlinter")
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml'))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
