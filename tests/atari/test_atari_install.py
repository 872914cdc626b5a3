"""Without the atari extra, ``fastvec.atari.make`` says which extra to install, in the
trainer's process, before any worker starts (these tests run without ale-py too)."""

from __future__ import annotations

import importlib.util

import pytest

import fastvec.atari


@pytest.mark.parametrize("absent", ["ale_py", "cv2"])
def test_make_without_the_atari_extra_names_it(monkeypatch: pytest.MonkeyPatch,
                                              absent: str) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == absent else find_spec(name, *args))
    with pytest.raises(ImportError, match=r'pip install -e "\.\[atari\]"'):
        fastvec.atari.make("ALE/Pong-v5", 2, backend="subproc")
