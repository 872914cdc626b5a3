"""The layers are enforced, not only drawn: every import points down.

``lint-imports`` checks the contracts of ``pyproject.toml``: ``fastvec.vector``
above ``fastvec.pool`` above ``fastvec.spaces`` above ``fastvec._kernels``; the
process pool and the Ray pool independent; no import cycle between sibling
modules anywhere in the package (``fastvec.bench`` included).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    cli = pytest.importorskip("importlinter.cli")
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        status = cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"))
    finally:
        os.chdir(here)
    assert status == 0, capsys.readouterr().out
