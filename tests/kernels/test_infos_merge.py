"""Merging infos of blocks batched already with raw entries, in one pass
(``merge_entries``): equal to folding every env's info in row order."""

import numpy as np
import pytest

from fastvec._kernels import infos as kernel
from tests.kernels.infos_reference import assert_same, ref_batch_infos


class _Block:
    """A block batched already, as ``merge_entries`` reads it: its batched dict
    (``keep_dict``) or, with ``batched`` None, its leaf paths and arrays."""

    def __init__(self, batched: dict, keep_dict: bool = False) -> None:
        self.batched = batched if keep_dict else None
        self.paths, self.views = [], []

        def walk(node: dict, prefix: tuple) -> None:
            for key, value in node.items():
                if isinstance(value, dict):
                    walk(value, (*prefix, key))
                else:
                    self.paths.append((*prefix, key))
                    self.views.append(value)
        walk(batched, ())
        self.paths = tuple(self.paths)


def _mixed(groups: list[tuple[int, list, bool]], keep_dict: bool = False) -> list:
    """Entries where each ``(start, entries, as_block)`` group is raw or one block."""
    out: list = []
    for start, entries, as_block in groups:
        if as_block and entries:
            size = max(i for i, _ in entries) + 1 - start
            batched = kernel.batch_infos([(i - start, info) for i, info in entries], size)
            out.append((start, _Block(batched, keep_dict)))
        else:
            out.extend(entries)
    return out


@pytest.mark.parametrize("keep_dict", [False, True], ids=["leaves", "dict"])
def test_merged_blocks_and_raw_entries_equal_folding_every_info(keep_dict):
    first = [(0, {"a": 1, "n": {"v": np.arange(3.0)}}), (1, {"b": 2.5})]
    second = [(2, {"a": 3}), (3, {"n": {"v": np.ones(3)}, "c": True})]
    third = [(4, {"b": 0.5, "a": 7})]
    entries = first + second + third
    for shapes in ([True, False, True], [False, True, True], [True, True, False]):
        got = kernel.merge_entries(_mixed([(0, first, shapes[0]), (2, second, shapes[1]),
                                           (4, third, shapes[2])], keep_dict), 5, _Block)
        assert_same(got, ref_batch_infos(entries, 5))


@pytest.mark.parametrize("keep_dict", [False, True], ids=["leaves", "dict"])
@pytest.mark.parametrize("later", [{"a": 1.5}, {"a": np.zeros(2)}, {"a": {"x": 1}}])
def test_a_block_that_disagrees_raises_blocks_disagree(later, keep_dict):
    blocks = _mixed([(0, [(0, {"a": 1})], True), (1, [(1, later)], True)], keep_dict)
    with pytest.raises(kernel.InfosDisagree):
        kernel.merge_entries(blocks, 2, _Block)


def test_merge_entries_without_blocks_is_batch_infos():
    entries = [(0, {"a": 1}), (2, {"b": np.zeros(2, np.float32)})]
    assert_same(kernel.merge_entries(entries, 3, _Block), ref_batch_infos(entries, 3))
