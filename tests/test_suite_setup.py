"""Run by a Python that cannot import fastvec, the suite skips each file saying which
Python to use, instead of failing to collect it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ``import fastvec`` raises ImportError in this child, as in a venv without it.
WITHOUT_FASTVEC = ("import sys; sys.modules['fastvec'] = None; import pytest; "
                   "sys.exit(pytest.main(['-q', '-rs', '-p', 'no:cacheprovider', *sys.argv[1:]]))")


def test_files_are_skipped_with_the_reason_where_fastvec_does_not_import():
    files = ["tests/vector/test_close.py", "tests/pool/process/test_driven.py"]
    done = subprocess.run([sys.executable, "-c", WITHOUT_FASTVEC, *files], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 skipped" in done.stdout
    assert "cannot import fastvec" in done.stdout
    assert 'pip install -e ".[test]"' in done.stdout
