"""``tile_images``: frames row-major in a roughly square grid, zeros elsewhere.

Frames from ``render()`` on every backend: ``test_contract_api.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.compare import check_tiling

pytestmark = pytest.mark.fastvec_only


def random_frames(n: int, shape: tuple[int, int, int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    # 1..255 so that no frame can be mistaken for a zero pad cell
    return [rng.integers(1, 256, size=shape, dtype=np.uint8) for _ in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 16, 17])
@pytest.mark.parametrize("shape", [(4, 6, 3), (5, 3, 1), (2, 2, 4)])
def test_tile_images(n, shape, impl):
    frames = random_frames(n, shape, seed=n)
    check_tiling(frames, impl.tile_images(frames))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 30),
    h=st.integers(1, 5),
    w=st.integers(1, 5),
    c=st.sampled_from([1, 3, 4]),
    seed=st.integers(0, 2**16),
)
def test_tile_images_property(impl, n, h, w, c, seed):
    frames = random_frames(n, (h, w, c), seed)
    check_tiling(frames, impl.tile_images(frames))
