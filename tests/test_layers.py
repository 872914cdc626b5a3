"""The layers are enforced, not only drawn: every import points down.

``lint-imports`` checks the contracts of ``pyproject.toml``: ``fastvec.vector``
above ``fastvec.pool`` above ``fastvec.spaces`` above ``fastvec._kernels``; the
process pool and the Ray pool independent; no import cycle between sibling
modules anywhere in the package (``fastvec.bench`` included); ``fastvec.selfplay``
an island that imports none of the layers.  It runs in a
child process: import-linter reconfigures logging, which would silence the
``fastvec`` logger for the tests after it.  docs/architecture.md, which draws the
layers and says which file holds what, names every file and folder of the package.
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


def test_the_architecture_page_names_every_file_and_folder() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    package = ROOT / "fastvec"
    missing = []
    for path in sorted(package.rglob("*.py")):
        named = f"`{path.name}`" in text or path.relative_to(ROOT).as_posix() in text
        if path.name != "__init__.py" and not named:
            missing.append(path.relative_to(ROOT).as_posix())
    for init in sorted(package.rglob("__init__.py")):
        folder = init.parent.relative_to(package).as_posix()
        if folder != "." and f"{folder}/" not in text:
            missing.append(f"fastvec/{folder}/")
    assert not missing, f"docs/architecture.md does not say what these hold: {missing}"
