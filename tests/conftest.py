"""Loads the suite's fixtures and hooks (``tests/support/suite.py``) where this Python
can import fastvec.  Where it cannot (fastvec or gymnasium not installed in it, or its
kernels not built), every test file is collected as one skipped test that says so and
which Python to use, rather than an error in each file's imports.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    import fastvec  # noqa: F401  (and with it gymnasium, numpy and the compiled kernels)
except ImportError as exc:
    CANNOT_RUN: str | None = (
        f"this Python cannot import fastvec ({exc}); run the tests with the Python of the "
        'venv where `pip install -e ".[test]"` ran')
else:
    CANNOT_RUN = None
    pytest_plugins = ["tests.support.suite"]


class _SkippedFile(pytest.File):
    """A test file that cannot be imported here: one skipped test saying why."""

    def collect(self) -> Iterator[pytest.Item]:
        yield _Skipped.from_parent(self, name=self.path.name)


class _Skipped(pytest.Item):
    def runtest(self) -> None:
        pytest.skip(CANNOT_RUN)

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, self.name


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> pytest.File | None:
    if CANNOT_RUN is None:
        return None  # pytest's own collector
    return _SkippedFile.from_parent(parent, path=module_path)
