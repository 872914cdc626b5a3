"""``fastvec._kernels.rows``: gathering and scattering whole record rows, against
numpy fancy indexing (``out = src[index]``, ``out[index] = src``).

Rows are bytes, so arrays of any dtype go through as their ``uint8`` view; odd
row widths, empty batches and zero-width rows included.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fastvec._kernels.rows import gather_rows, scatter_rows

DTYPES = [np.bool_, np.uint8, np.int16, np.int32, np.float32, np.int64, np.float64,
          np.complex128]


def as_rows(array: np.ndarray) -> np.ndarray:
    """``array`` (n, ...) as n rows of bytes, sharing its memory."""
    width = int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).reshape(len(array), width)


@st.composite
def tables(draw, min_rows=0):
    """An (n, ...) array of some dtype and shape, with random bytes."""
    dtype = draw(st.sampled_from(DTYPES))
    n = draw(st.integers(min_rows, 9))
    shape = (n, *draw(st.lists(st.integers(0, 5), max_size=2)))
    raw = draw(hnp.arrays(np.uint8, int(np.prod(shape)) * np.dtype(dtype).itemsize))
    return raw.view(dtype).reshape(shape)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_gather_rows_is_fancy_indexing(data):
    src = data.draw(tables(min_rows=1))
    index = np.array(data.draw(st.lists(st.integers(0, len(src) - 1), max_size=12)),
                     dtype=np.int64)
    out = np.zeros((len(index), *src.shape[1:]), dtype=src.dtype)
    gather_rows(as_rows(src), index, as_rows(out))
    assert as_rows(out).tobytes() == as_rows(src[index]).tobytes()  # NaN payloads too


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_scatter_rows_is_fancy_assignment(data):
    out = data.draw(tables(min_rows=1))
    index = np.array(data.draw(st.lists(st.integers(0, len(out) - 1), max_size=len(out),
                                        unique=True)), dtype=np.int64)
    src = data.draw(hnp.arrays(np.uint8, (len(index), as_rows(out).shape[1])))
    expected = as_rows(out).copy()
    expected[index] = src
    scatter_rows(src, index, as_rows(out))
    assert as_rows(out).tobytes() == expected.tobytes()


def test_scatter_with_a_repeated_index_keeps_the_last_row():
    out = np.zeros((3, 2), np.uint8)
    scatter_rows(np.array([[1, 1], [2, 2]], np.uint8), np.array([1, 1]), out)
    assert out.tolist() == [[0, 0], [2, 2], [0, 0]]  # as numpy's out[index] = src


def run(kernel, table: np.ndarray, index, batch: np.ndarray) -> None:
    """``kernel`` between the table and a batch: gather from the table into the
    batch, or scatter the batch into the table."""
    index = np.asarray(index, dtype=np.int64) if isinstance(index, list) else index
    if kernel is gather_rows:
        kernel(table, index, batch)
    else:
        kernel(batch, index, table)


@pytest.mark.parametrize("kernel", [gather_rows, scatter_rows])
def test_empty_index_and_zero_width_rows_do_nothing(kernel):
    table = np.arange(12, dtype=np.uint8).reshape(4, 3)
    run(kernel, table, [], np.zeros((0, 3), np.uint8))
    assert table.tolist() == np.arange(12).reshape(4, 3).tolist()
    run(kernel, np.zeros((4, 0), np.uint8), [3, 0], np.zeros((2, 0), np.uint8))
    run(kernel, np.zeros((0, 0), np.uint8), [], np.zeros((0, 0), np.uint8))


@pytest.mark.parametrize("bad", [-1, 4, 2**40])
@pytest.mark.parametrize("kernel", [gather_rows, scatter_rows])
def test_an_index_out_of_range_is_an_index_error_and_nothing_moves(kernel, bad):
    table = np.arange(8, dtype=np.uint8).reshape(4, 2)
    batch = np.full((2, 2), 99, np.uint8)
    before = (table.copy(), batch.copy())
    with pytest.raises(IndexError, match=rf"row index {bad} out of range \[0, 4\)"):
        run(kernel, table, [1, bad], batch)
    assert table.tolist() == before[0].tolist() and batch.tolist() == before[1].tolist()


@pytest.mark.parametrize("kernel", [gather_rows, scatter_rows])
def test_mismatched_widths_and_batch_lengths_are_value_errors(kernel):
    table = np.zeros((4, 3), np.uint8)
    with pytest.raises(ValueError, match="rows of [34] bytes on both sides, got [34]"):
        run(kernel, table, [0, 2], np.zeros((2, 4), np.uint8))
    with pytest.raises(ValueError, match="expected 2 batch rows, got 3"):
        run(kernel, table, [0, 2], np.zeros((3, 3), np.uint8))


@pytest.mark.parametrize("kernel", [gather_rows, scatter_rows])
def test_wrong_dtypes_layouts_and_read_only_targets_are_refused(kernel):
    table = np.zeros((4, 3), np.uint8)
    batch = np.zeros((2, 3), np.uint8)
    index = np.array([0, 1])
    read_only = np.zeros((4, 3), np.uint8)
    read_only.flags.writeable = False
    for args in [
        (table.astype(np.int16), index, batch),  # not bytes
        (table, index.astype(np.int32), batch),  # not int64 ids
        (np.zeros((3, 4), np.uint8).T, index, batch),  # a table not C-contiguous
        (table, index, batch[::-1]),  # a batch not C-contiguous
        (table, np.array([0, 9, 1, 9])[::2], batch),  # a strided index
    ]:
        with pytest.raises((ValueError, TypeError)):
            run(kernel, *args)
    with pytest.raises((ValueError, TypeError)):  # where the kernel writes
        if kernel is gather_rows:
            gather_rows(table, index, read_only[:2])
        else:
            scatter_rows(batch, index, read_only)
