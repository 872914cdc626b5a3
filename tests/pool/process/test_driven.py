"""A command's batch gives each block its part: the actions of its rows, its seeds, its
targets; whatever order or subset of rows the batch came for.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space
from hypothesis import given
from hypothesis import strategies as st

from fastvec.pool.process.driven import ControlBatch, ResetBatch, StepBatch
from fastvec.spaces.actions import ActionChecker

BOUNDS = [(0, 3), (3, 5), (5, 9)]


def checker(space: spaces.Space, n: int) -> ActionChecker:
    return ActionChecker(space, batch_space(space, n), n)


def test_every_row_each_block_gets_its_rows():
    actions = np.arange(9)
    batch = StepBatch(actions, checker(spaces.Discrete(10), 9), None, BOUNDS)
    assert [batch.rows(b) for b in range(3)] == [[0, 1, 2], [3, 4], [5, 6, 7, 8]]
    assert batch.message(1).actions == [3, 4]


def test_dict_actions_are_split_per_row():
    space = spaces.Dict({"a": spaces.Discrete(10), "b": spaces.Discrete(10)})
    actions = {"a": np.arange(9), "b": np.arange(9) + 1}
    batch = StepBatch(actions, checker(space, 9), None, BOUNDS)
    assert [dict(x) for x in batch.rows(1)] == [{"a": 3, "b": 4}, {"a": 4, "b": 5}]


@given(st.permutations(list(range(3, 9))))
def test_env_ids_in_any_order_reach_their_rows(order):
    """Blocks 1 and 2 sent in any order (an async send): each row gets its own action."""
    ids = np.array(order)
    batch = StepBatch(ids * 10, checker(spaces.Discrete(100), len(ids)), ids, BOUNDS)
    assert batch.rows(1) == [30, 40]
    assert batch.rows(2) == [50, 60, 70, 80]


@given(st.permutations([5, 6, 7, 8]))
def test_one_block_sent_alone_in_any_order(order):
    ids = np.array(order)
    batch = StepBatch(ids * 10, checker(spaces.Discrete(100), 4), ids, BOUNDS)
    assert batch.rows(2) == [50, 60, 70, 80]


def test_reset_batch_slices_seeds_and_mask():
    mask = np.array([True, False, True, True, False, True, True, True, False])
    batch = ResetBatch(list(range(9)), {"x": 1}, mask, BOUNDS)
    message = batch.message(1)
    assert message.seeds == [3, 4] and message.options == {"x": 1}
    np.testing.assert_array_equal(message.mask, [True, False])
    assert ResetBatch([None] * 9, None, None, BOUNDS).message(2).mask is None


def test_control_batch_counts_targets_from_each_block():
    batch = ControlBatch(len, [1, 4, 5, 8], [(1,), (4,), (5,), (8,)], BOUNDS)
    assert batch.select(0) == ([1], [(1,)])
    assert batch.select(1) == ([1], [(4,)])
    assert batch.select(2) == ([0, 3], [(5,), (8,)])
    assert batch.message(2).envs == [0, 3]
    assert isinstance(batch.message(2).fn, bytes)
