"""Tiling many env frames into one image."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["tile_images"]


def tile_images(frames: Sequence[np.ndarray]) -> np.ndarray:
    """Arrange equal-shape ``(H, W, C)`` frames in a near-square grid, row by row.

    The grid has ``ceil(sqrt(n))`` columns and as many rows as needed; cells left
    over in the last row are black (zeros).

    Args:
        frames: ``n >= 1`` arrays of one shape ``(H, W, C)``, e.g. the tuple that
            ``envs.render()`` returns with ``render_mode="rgb_array"``.

    Returns:
        One array of shape ``(rows * H, cols * W, C)`` and the frames' dtype.

    Raises:
        ValueError: No frames, frames that are not 3-D, or frames of different
            shapes (the message lists the shapes).

    Example:
        >>> tile_images([np.ones((2, 2, 3), np.uint8)] * 3).shape
        (4, 4, 3)
        >>> tile_images([np.full((1, 1, 1), v) for v in (1, 2, 3)])[..., 0]
        array([[1, 2],
               [3, 0]])
    """
    images = [np.asarray(frame) for frame in frames]
    if not images:
        raise ValueError("expected at least one frame, got none")
    shape, dtype = images[0].shape, images[0].dtype
    if len(shape) != 3 or any(image.shape != shape for image in images):
        raise ValueError(f"expected frames of one shape (H, W, C), got shapes "
                         f"{sorted({image.shape for image in images})}")
    n = len(images)
    cols = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / cols))
    height, width, channels = shape
    grid = np.zeros((rows, cols, height, width, channels), dtype=dtype)
    grid.reshape(rows * cols, height, width, channels)[:n] = images
    return grid.transpose(0, 2, 1, 3, 4).reshape(rows * height, cols * width, channels)
