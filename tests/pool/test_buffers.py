"""One table of per-row results (``RESULT_FIELDS``): the buffers, the shared segment's
regions and Ray's packed replies all follow it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fastvec.pool.buffers import ENV_RESULTS, RESULT_FIELDS, Buffers
from fastvec.pool.process.segment import plan_segment

NAMES = [field.name for field in RESULT_FIELDS]


def test_buffers_hold_obs_and_one_array_per_result_field_in_order():
    assert [f.name for f in dataclasses.fields(Buffers)] == ["obs", *NAMES]
    assert set(ENV_RESULTS) <= set(NAMES)


def test_allocate_and_over_give_each_field_its_dtype_and_rows():
    buffers = Buffers.allocate(None, 5)  # type: ignore[arg-type]
    for field in RESULT_FIELDS:
        array = getattr(buffers, field.name)
        assert array.dtype == field.dtype and array.shape == (5,)
    arrays = {name: np.arange(3) + k for k, name in enumerate(NAMES)}
    over = Buffers.over(None, arrays)  # type: ignore[arg-type]
    for name in NAMES:  # by name, not by position
        assert getattr(over, name) is arrays[name]
    views = over.results(1, 3, ("truncations", "rewards"))
    assert list(views) == ["truncations", "rewards"]
    np.testing.assert_array_equal(views["rewards"], arrays["rewards"][1:3])


def test_the_shared_block_has_a_region_per_result_field():
    plan = plan_segment(4, 2, None, None)
    regions = {region.name: region for region in plan.regions}
    for field in RESULT_FIELDS:
        assert regions[field.name].shape == (4,)
        assert np.dtype(regions[field.name].dtype) == field.dtype


def test_ray_packing_round_trips_every_field_and_the_records():
    actor = pytest.importorskip("fastvec.pool.ray.actor")
    rng = np.random.default_rng(0)
    count, record_size = 3, 5
    buffers = Buffers.allocate(None, count)  # type: ignore[arg-type]
    buffers.rewards[:] = rng.normal(size=count)
    for name in NAMES[1:]:
        getattr(buffers, name)[:] = rng.random(count) < 0.5
    records = rng.integers(0, 256, (count, record_size), dtype=np.uint8)
    out = np.zeros(actor.packed_size(count, record_size), np.uint8)
    fields, rows = actor.unpack(actor.pack(out, buffers, records), count, record_size)
    assert list(fields) == NAMES
    for name in NAMES:
        np.testing.assert_array_equal(fields[name], getattr(buffers, name))
    np.testing.assert_array_equal(rows, records)
