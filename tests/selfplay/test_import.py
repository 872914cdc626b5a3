"""``fastvec.selfplay`` after ``import fastvec``, as docs/api.md writes it, loaded on use."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (this one has imported fastvec.selfplay already)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_fastvec_selfplay_is_reached_from_import_fastvec_and_loaded_only_on_use() -> None:
    result = run("""
        import sys
        import fastvec

        assert "fastvec.selfplay" not in sys.modules  # import fastvec does not pay for it
        assert "selfplay" in dir(fastvec)
        league = fastvec.selfplay.League([0, 0], [0, 1], seed=0)
        assert league.learner_seat.tolist() == [0]
        assert "fastvec.selfplay" in sys.modules
        assert fastvec.selfplay is sys.modules["fastvec.selfplay"]
        from fastvec import selfplay
        assert selfplay is fastvec.selfplay
        """)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_unknown_attribute_of_fastvec_is_still_an_attribute_error() -> None:
    result = run("""
        import fastvec

        try:
            fastvec.no_such_name
        except AttributeError as exc:
            assert "no_such_name" in str(exc), exc
        else:
            raise AssertionError("fastvec.no_such_name did not raise")
        assert not hasattr(fastvec, "selfplays")
        """)
    assert result.returncode == 0, result.stdout + result.stderr


def test_tools_that_read_every_name_of_fastvec_do_not_need_the_extras() -> None:
    """``dir(fastvec)`` lists no subpackage that needs an extra (openspiel), so
    ``inspect.getmembers`` and ``help(fastvec)`` work without it."""
    result = run("""
        import inspect, pydoc, sys
        import fastvec

        names = dict(inspect.getmembers(fastvec))
        assert names["selfplay"] is sys.modules["fastvec.selfplay"]
        assert "fastvec.openspiel" not in sys.modules
        assert "OpenSpielGame" not in pydoc.render_doc(fastvec)
        """)
    assert result.returncode == 0, result.stdout + result.stderr
