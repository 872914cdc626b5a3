"""``fastvec.atari._resize``: ``AreaResize`` against OpenCV's own ``INTER_AREA``, byte for byte.

The reference is the installed ``cv2.resize(src, (w, h), interpolation=cv2.INTER_AREA)``
(and ``np.maximum`` before it for ``pool_resize``): random images of random sizes and
channel counts (hypothesis), OpenCV's integer-factor paths, the Atari sizes, and real
Atari frames when ale_py is installed.  ``AreaResize`` refuses exactly the resizes
OpenCV does not do by area (an axis enlarged) and the ones it does not reproduce.
"""

from __future__ import annotations

import pickle
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

cv2 = pytest.importorskip("cv2")

from fastvec.atari._resize import SIMD, AreaResize  # noqa: E402

DBL_EPSILON = sys.float_info.epsilon


def opencv(src: np.ndarray, h: int, w: int) -> np.ndarray:
    out = cv2.resize(src, (w, h), interpolation=cv2.INTER_AREA)
    return out.reshape((h, w, *src.shape[2:]))  # OpenCV drops a trailing 1-channel axis


def opencv_path(H: int, W: int, h: int, w: int, channels: int) -> str | None:
    """The path ``cv::hal::resize`` takes for INTER_AREA; None where it is bilinear."""
    scale_x, scale_y = 1.0 / (w / W), 1.0 / (h / H)
    if scale_x < 1 or scale_y < 1:
        return None
    ix, iy = round(scale_x), round(scale_y)  # saturate_cast<int>: half to even, as round()
    if abs(scale_x - ix) < DBL_EPSILON and abs(scale_y - iy) < DBL_EPSILON:
        return "2x2" if (ix, iy) == (2, 2) and channels != 2 else "integer"
    return "area"


def image(rng: np.random.Generator, H: int, W: int, channels: int, kind: str) -> np.ndarray:
    shape = (H, W) if channels == 1 else (H, W, channels)
    if kind == "noise":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if kind == "levels":  # few values, large flat areas: sums that land on .5, saturation
        return rng.choice(np.array([0, 1, 2, 127, 128, 254, 255], np.uint8), shape)
    return np.full(shape, 255 if kind == "white" else 0, np.uint8)


def assert_like_opencv(H, W, h, w, channels, seed, kind="noise"):
    rng = np.random.default_rng(seed)
    a, b = (image(rng, H, W, channels, kind) for _ in range(2))
    resizer = AreaResize(H, W, h, w, channels)
    assert resizer.path == opencv_path(H, W, h, w, channels)
    dst = np.full(resizer.dst_shape, 7, np.uint8)
    resizer.resize(a, dst)
    np.testing.assert_array_equal(dst, opencv(a, h, w), err_msg=f"{H}x{W} -> {h}x{w}")
    resizer.pool_resize(a, b, dst)
    np.testing.assert_array_equal(dst, opencv(np.maximum(a, b), h, w), err_msg="pooled")


@st.composite
def downscales(draw, channels=(1, 3)):
    """A source of 2..300 pixels a side, a destination no larger in either axis."""
    H, W = draw(st.integers(2, 300)), draw(st.integers(2, 300))
    h, w = draw(st.integers(1, H)), draw(st.integers(1, W))
    return H, W, h, w, draw(st.sampled_from(channels))


@settings(max_examples=400, deadline=None)
@given(downscales(), st.integers(0, 2**32 - 1), st.sampled_from(["noise", "noise", "levels"]))
def test_random_downscales_are_opencvs_bytes(size, seed, kind):
    assert_like_opencv(*size, seed, kind)


@settings(max_examples=60, deadline=None)
@given(downscales(channels=(2, 4)), st.integers(0, 2**32 - 1))
def test_two_and_four_channels_too(size, seed):
    assert_like_opencv(*size, seed)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 6), st.integers(1, 6),
       st.sampled_from([1, 2, 3, 4]), st.integers(0, 2**32 - 1),
       st.sampled_from(["noise", "levels"]))
def test_integer_factors_take_opencvs_integer_paths(h, w, ky, kx, channels, seed, kind):
    """``resizeAreaFast``: (sum + 2) >> 2 for 2x2 (not with 2 channels), else the sum
    times 1.f / area rounded half to even; 1x1 is a copy."""
    assert_like_opencv(h * ky, w * kx, h, w, channels, seed, kind)


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("w", [*range(1, 18), 31, 32, 33, 80])
def test_2x2_across_the_vector_loops_and_their_tails(w, channels):
    for h in (1, 2, 5):
        assert_like_opencv(2 * h, 2 * w, h, w, channels, seed=w * 10 + h)


@pytest.mark.parametrize("size", [(300, 7, 1, 7), (280, 4, 1, 2), (300, 300, 1, 1)])
def test_cells_taller_than_16_bit_column_sums(size):
    assert_like_opencv(*size, channels=3, seed=1, kind="white")
    assert_like_opencv(*size, channels=1, seed=2)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("size", [
    (210, 160, 84, 84),  # the Atari preprocessing default
    (210, 160, 48, 64),
    (250, 160, 84, 84),
    (210, 160, 105, 80),  # 2x2
    (210, 160, 70, 80),  # 3x2
    (210, 160, 84, 160),  # area in y only
    (210, 160, 210, 84),  # area in x only
    (210, 160, 210, 160),  # the same size: a copy
    (210, 160, 1, 1),
])
def test_atari_sizes(size, channels):
    for seed, kind in enumerate(["noise", "levels", "white", "black"]):
        assert_like_opencv(*size, channels, seed, kind)


@pytest.fixture(scope="module")
def atari_frames():
    """Consecutive 210x160 screens (grayscale and RGB) of Pong and Breakout under
    random actions, as the frame-skip loop reads them."""
    pytest.importorskip("ale_py")
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    frames = {"gray": [], "rgb": []}
    rng = np.random.default_rng(0)
    for game in ("Pong", "Breakout"):
        env = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0)
        ale = env.unwrapped.ale
        env.reset(seed=0)
        for _ in range(400):
            _, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            gray = np.empty((210, 160), np.uint8)
            ale.getScreenGrayscale(gray)
            frames["gray"].append(gray)
            frames["rgb"].append(ale.getScreenRGB())
            if terminated or truncated:
                env.reset()
        env.close()
    return frames


@pytest.mark.parametrize("colour", ["gray", "rgb"])
@pytest.mark.parametrize("size", [(84, 84), (48, 64), (105, 80)])
def test_real_atari_frames_and_their_pooled_pairs(atari_frames, colour, size):
    frames = atari_frames[colour]
    channels = 1 if colour == "gray" else 3
    resizer = AreaResize(210, 160, *size, channels)
    stack = np.zeros((4, *resizer.dst_shape), np.uint8)  # dst: the newest slot of a stack
    for i, frame in enumerate(frames):
        resizer.resize(frame, stack[-1])
        np.testing.assert_array_equal(stack[-1], opencv(frame, *size), err_msg=f"frame {i}")
        if i:
            resizer.pool_resize(frames[i - 1], frame, stack[-1])
            want = opencv(np.maximum(frames[i - 1], frame), *size)
            np.testing.assert_array_equal(stack[-1], want, err_msg=f"frames {i - 1}, {i}")
    assert not stack[:-1].any()  # nothing written outside the slot


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 60), st.integers(1, 60), st.integers(1, 120), st.integers(1, 120),
       st.integers(-1, 6))
def test_refused_exactly_where_opencv_does_not_resize_by_area(H, W, h, w, channels):
    """Enlarging an axis (OpenCV's INTER_AREA is bilinear there) and channel counts
    outside 1..4 are refused; everything else is built and matches OpenCV."""
    assert (opencv_path(H, W, h, w, 1) is None) == (h > H or w > W)
    if h > H or w > W or not 1 <= channels <= 4:
        with pytest.raises(ValueError, match="enlarges an axis|channels"):
            AreaResize(H, W, h, w, channels)
    else:
        assert_like_opencv(H, W, h, w, channels, seed=H * W + h * w)


def test_bad_sizes_and_cells_that_overflow_opencvs_int_sum_are_refused():
    for args in [(0, 5, 1, 1), (5, 5, 0, 1), (5, -1, 1, 1), (5, 5, 1, 1, 0), (5, 5, 1, 1, 5)]:
        with pytest.raises(ValueError, match="expected"):
            AreaResize(*args)
    with pytest.raises(ValueError, match="OpenCV's int sum overflows"):
        AreaResize(3000, 3000, 1, 1)  # 9e6 pixels * 255 > 2**31
    with pytest.raises(ValueError, match="under 2\\*\\*28 bytes"):
        AreaResize(2**14, 2**14, 10, 10)


def test_shapes_dtypes_layouts_and_overlap_are_checked_before_anything_is_written():
    resizer = AreaResize(21, 16, 8, 8)
    src, dst = np.zeros((21, 16), np.uint8), np.full((8, 8), 9, np.uint8)
    read_only = np.zeros((8, 8), np.uint8)
    read_only.flags.writeable = False
    for args in [
        (src.astype(np.int16), dst),  # not bytes
        (src[:, :15], dst),  # wrong shape, and not C-contiguous
        (np.zeros((21, 16, 3), np.uint8), dst),  # channels
        (np.zeros((16, 21), np.uint8).T, dst),  # not C-contiguous
        (src, dst[:, ::2].copy()),  # dst's shape
        (src, np.zeros((8, 16), np.uint8)[:, ::2]),  # dst not C-contiguous
        (src, read_only),
    ]:
        with pytest.raises(ValueError, match="expected (src|dst) to be a"):
            resizer.resize(*args)
    with pytest.raises(TypeError, match="numpy array"):
        resizer.resize(src.tolist(), dst)
    with pytest.raises(ValueError, match="expected b to be a"):
        resizer.pool_resize(src, src[:20], dst)
    buffer = np.zeros(21 * 16 + 64, np.uint8)  # dst inside the source's memory
    with pytest.raises(ValueError, match="overlap"):
        resizer.resize(buffer[:21 * 16].reshape(21, 16), buffer[21 * 16 - 8:][:64].reshape(8, 8))
    assert (dst == 9).all()


def test_one_channel_takes_a_trailing_axis_of_one_on_either_side():
    rng = np.random.default_rng(3)
    src = rng.integers(0, 256, (210, 160), dtype=np.uint8)
    resizer = AreaResize(210, 160, 84, 84)
    want = opencv(src, 84, 84)
    for s, d in [(src[..., None], np.empty((84, 84), np.uint8)),
                 (src, np.empty((84, 84, 1), np.uint8))]:
        resizer.resize(s, d)
        np.testing.assert_array_equal(d.reshape(84, 84), want)


@pytest.mark.parametrize("size", [(210, 160, 84, 84), (210, 160, 105, 80), (210, 160, 70, 80)])
def test_threads_share_one_resizer(size):
    """The GIL is released; a call that finds the scratch in use allocates its own."""
    resizer = AreaResize(*size)
    rng = np.random.default_rng(4)
    images = [rng.integers(0, 256, size[:2], dtype=np.uint8) for _ in range(4)]
    wants = [opencv(a, *size[2:]) for a in images]
    failures = []

    def work(k):
        dst = np.empty(size[2:], np.uint8)
        for _ in range(300):
            resizer.pool_resize(images[k], images[k], dst)
            if not np.array_equal(dst, wants[k]):
                failures.append(k)
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_attributes_and_pickling():
    resizer = AreaResize(210, 160, 84, 84, 3)
    assert (resizer.src_shape, resizer.dst_shape, resizer.path) == (
        (210, 160, 3), (84, 84, 3), "area")
    again = pickle.loads(pickle.dumps(resizer))
    assert (again.src_shape, again.dst_shape, again.path) == (
        resizer.src_shape, resizer.dst_shape, resizer.path)
    assert SIMD in ("sse2", "vector", "scalar")
