"""The bench's baselines and its picture: the plain loop builds the batch a trainer needs
(equal to Gymnasium's ``SyncVectorEnv`` with same-step autoreset), the old loop that
throws the results away is ``plain-discard``, the synthetic frames workload is named
``atari-like`` (``atari`` still accepted), and the plot has a legend and min-max whiskers.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from fastvec.bench import cli, drivers, report, systems
from fastvec.bench.envs import AtariLikeEnv, DictObsEnv, InfoEnv
from fastvec.bench.workloads import WORKLOAD_ALIASES, WORKLOADS

ENVS = {
    "atari-like": AtariLikeEnv,
    "dict": DictObsEnv,
    "info": InfoEnv,
    "cartpole": functools.partial(gym.make, "CartPole-v1"),
}


def _assert_same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and ours.keys() == theirs.keys()
        for key in theirs:
            _assert_same(ours[key], theirs[key])
    else:
        assert isinstance(ours, np.ndarray) and ours.dtype == np.asarray(theirs).dtype
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name", list(ENVS))
def test_plain_loop_batch_equals_sync_vector_env(name: str) -> None:
    fns = [ENVS[name]] * 4
    plain = drivers.PlainLoop(fns)
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    space = batch_space(ref.single_action_space, 4)
    space.seed(1)
    try:
        plain.reset(7)
        obs, _ = ref.reset(seed=7)
        assert plain.batch is not None
        _assert_same(plain.batch[0], obs)
        ends = 0
        for _ in range(260):  # episodes end after 50-200 steps: resets happen
            actions = space.sample()
            assert plain.step(actions) == 4
            obs, rewards, terms, truncs, infos = ref.step(actions)
            got_obs, got_rewards, got_terms, got_truncs, got_infos = plain.batch
            _assert_same(got_obs, obs)
            _assert_same(got_rewards, rewards)
            _assert_same(got_terms, terms)
            _assert_same(got_truncs, truncs)
            assert isinstance(got_infos, list) and len(got_infos) == 4
            for i in np.flatnonzero(terms | truncs):
                ends += 1
                assert data_equivalence(got_infos[i]["final_obs"], infos["final_obs"][i])
        assert ends > 0
    finally:
        plain.close()
        ref.close()


def test_plain_loop_stacks_a_game_by_rows() -> None:
    spec = WORKLOADS["duel"]
    if cli.workload_unavailable_reason("duel"):
        pytest.skip("needs pettingzoo")
    plain = drivers.PlainLoop([spec.make_env] * 3)
    plain.reset(0)
    rows = plain.num_envs
    assert rows == 6
    for _ in range(40):
        plain.step(np.ones(rows, dtype=np.int64))
        obs, rewards, terms, truncs, infos = plain.batch or ()
        assert obs.shape == (rows, 8) and obs.dtype == np.float32
        assert rewards.shape == terms.shape == truncs.shape == (rows,) and len(infos) == rows
    plain.close()


def test_stack_takes_arrays_dicts_and_tuples() -> None:
    items = [({"a": np.full(2, i)}, i) for i in range(3)]
    stacked = drivers.stack(items)
    np.testing.assert_array_equal(stacked[0]["a"], [[0, 0], [1, 1], [2, 2]])
    np.testing.assert_array_equal(stacked[1], [0, 1, 2])


def test_discard_loop_is_plain_discard_and_not_a_default() -> None:
    assert systems.SYSTEMS["plain"].load() is drivers.PlainLoop
    assert systems.SYSTEMS["plain-discard"].load() is drivers.DiscardLoop
    assert "plain-discard" not in cli.parse_args([]).systems
    discard = drivers.DiscardLoop([InfoEnv] * 2)
    discard.reset(0)
    before = discard.batch
    assert discard.step(np.zeros(2, dtype=np.int64)) == 2
    assert discard.batch is before  # nothing batched by the step
    discard.close()
    record = cli.measure("plain-discard", "info", seconds=0.02, warmup=0.0, seed=0)
    assert record["env_steps"] == 16 * record["batches"] > 0


def test_atari_like_is_the_synthetic_frames_and_atari_an_alias() -> None:
    assert WORKLOAD_ALIASES == {"atari": "atari-like"}
    spec = WORKLOADS["atari-like"]
    assert spec.make_env is AtariLikeEnv and "synthetic" in spec.about
    assert WORKLOADS["atari"] is spec and "atari" in WORKLOADS
    assert WORKLOADS.get("atari") is spec and WORKLOADS.get("nope") is None
    assert "atari" not in list(WORKLOADS)  # listed once, by its name
    with pytest.raises(KeyError):
        WORKLOADS["nope"]
    assert cli.parse_args(["--workloads=atari,info,atari-like"]).workloads == [
        "atari-like", "info"]
    assert cli.parse_args([]).workloads == ["cartpole", "atari-like", "dict", "info"]
    record = cli.measure("plain", "atari", seconds=0.02, warmup=0.0, seed=0)
    assert record["env_steps"] > 0


def _cells() -> report.Cells:
    def cell(system: str, rates: list[float]) -> report.Cell:
        return report.Cell("info", system, [{"rate": r} for r in rates])

    return {
        ("info", "plain"): cell("plain", [90.0, 100.0, 130.0]),
        ("info", "gymnasium-async"): cell("gymnasium-async", [10.0, 12.0, 11.0]),
        ("info", "fastvec-local"): cell("fastvec-local", [200.0, 150.0, 210.0]),
        ("info", "sb3-subproc"): report.Cell("info", "sb3-subproc", error="unavailable: x"),
    }


def test_plot_has_a_legend_min_max_whiskers_and_where_envs_step() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    fig = report.bench_figure(_cells(), ["info"], "test")
    try:
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert legend == ["fastvec", "other vector envs", "a for-loop, no vector env"]
        ax = fig.axes[0]
        bars = [p.get_width() for p in ax.patches]
        assert bars == [100.0, 11.0, 200.0]  # medians, in the order of the systems
        colors = [p.get_facecolor()[:3] for p in ax.patches]
        assert colors[0] == (1.0, 1.0, 1.0) and colors[1] != colors[2]
        (whiskers,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        segments = whiskers.lines[2][0].get_segments()
        spans = [(float(s[0][0]), float(s[1][0])) for s in segments]
        assert spans == [(90.0, 130.0), (10.0, 12.0), (150.0, 210.0)]
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        assert ticks == ["plain (in the trainer)", "gymnasium-async (a process per env)",
                         "fastvec-local (trainer + 1 worker)"]
        assert "synthetic" in ax.get_title()
        assert "min-max" in fig._suptitle.get_text()
    finally:
        plt.close(fig)


def test_plot_notes_that_panel_scales_differ(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    cells = _cells()
    cells["cartpole", "plain"] = report.Cell("cartpole", "plain", [{"rate": 5.0}])
    fig = report.bench_figure(cells, ["info", "cartpole"], "test")
    assert "each panel has its own x scale" in fig._suptitle.get_text()
    plt.close(fig)
    report.write_plot(str(tmp_path / "b.png"), cells, ["info", "cartpole"], "test")
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
