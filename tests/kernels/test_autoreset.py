"""Episode statistics kernel against the update rule of Gymnasium's ``RecordEpisodeStatistics``.

Two references: a plain-numpy rewrite of the wrapper's ``step`` (exact on every
array, with the clock passed in), and the wrapper itself around a scripted
vector env (returns and lengths; its clock is its own).
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fastvec._kernels.autoreset import update_episode_stats


class ReferenceStats:
    """The wrapper's update, in numpy, with ``now`` given instead of read from the clock."""

    def __init__(self, n, now):
        self.returns = np.zeros(n)
        self.lengths = np.zeros(n, dtype=np.int64)
        self.starts = np.full(n, now)
        self.prev_dones = np.zeros(n, dtype=bool)

    def step(self, rewards, terminations, truncations, now, same_step):
        if same_step:
            self.returns += rewards
            self.lengths += 1
        else:
            self.returns[self.prev_dones] = 0
            self.returns[~self.prev_dones] += rewards[~self.prev_dones]
            self.lengths[self.prev_dones] = 0
            self.lengths[~self.prev_dones] += 1
            self.starts[self.prev_dones] = now
        self.prev_dones = dones = np.logical_or(terminations, truncations)
        out = (np.where(dones, self.returns, 0.0),
               np.where(dones, self.lengths, 0),
               np.where(dones, np.round(now - self.starts, 6), 0.0))
        if same_step:
            self.returns[dones] = 0
            self.lengths[dones] = 0
            self.starts[dones] = now
        return int(dones.sum()), out


class KernelStats:
    """The arrays the kernel updates in place, as ``fastvec.vector.episode_stats`` keeps them."""

    def __init__(self, n, now):
        self.returns = np.zeros(n)
        self.lengths = np.zeros(n, dtype=np.int64)
        self.starts = np.full(n, now)
        self.prev_dones = np.zeros(n, dtype=np.bool_)
        # Outputs start as garbage: the kernel must write every entry.
        self.out = (np.full(n, 99.0), np.full(n, 99, np.int64), np.full(n, 99.0))

    def step(self, rewards, terminations, truncations, now, same_step):
        finished = update_episode_stats(
            terminations, truncations, rewards, self.prev_dones, self.returns, self.lengths,
            self.starts, now, same_step, *self.out)
        return finished, tuple(a.copy() for a in self.out)


@st.composite
def scripts(draw):
    """Per-step rewards, terminations, truncations and clock readings for n envs."""
    n = draw(st.integers(1, 5))
    steps = draw(st.integers(1, 25))
    rewards = draw(hnp.arrays(np.float64, (steps, n), elements=st.one_of(
        st.floats(-10, 10), st.sampled_from([0.0, 0.1, 1.0, 1e9]))))
    ends = st.sampled_from([False] * 4 + [True])
    terms = draw(hnp.arrays(np.bool_, (steps, n), elements=ends))
    truncs = draw(hnp.arrays(np.bool_, (steps, n), elements=ends))
    gaps = draw(hnp.arrays(np.float64, (steps,), elements=st.floats(0, 2)))
    clock = 1000.0 + np.cumsum(gaps)
    return rewards, terms, truncs, clock


@settings(max_examples=200, deadline=None)
@given(scripts(), st.booleans())
def test_matches_the_wrapper_update_rule(script, same_step):
    rewards, terms, truncs, clock = script
    n = rewards.shape[1]
    ref, kernel = ReferenceStats(n, 1000.0), KernelStats(n, 1000.0)
    for step in range(len(rewards)):
        args = (rewards[step], terms[step], truncs[step], clock[step], same_step)
        want_finished, (want_r, want_l, want_t) = ref.step(*args)
        finished, (r, lens, t) = kernel.step(*args)
        assert finished == want_finished
        np.testing.assert_array_equal(r, want_r, strict=True)
        np.testing.assert_array_equal(lens, want_l, strict=True)
        np.testing.assert_array_equal(t, want_t, strict=True)
        assert (t >= 0).all()
        np.testing.assert_array_equal(kernel.returns, ref.returns)
        np.testing.assert_array_equal(kernel.lengths, ref.lengths)
        np.testing.assert_array_equal(kernel.starts, ref.starts)
        np.testing.assert_array_equal(kernel.prev_dones, ref.prev_dones)


class ScriptedVectorEnv(VectorEnv):
    """Returns the scripted rewards and flags, one row per step."""

    def __init__(self, rewards, terms, truncs, mode):
        self.num_envs = rewards.shape[1]
        self.metadata = {"autoreset_mode": mode}
        self.single_observation_space = spaces.Discrete(1)
        self.single_action_space = spaces.Discrete(1)
        self.script = (rewards, terms, truncs)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        return np.zeros(self.num_envs, np.int64), {}

    def step(self, actions):
        rewards, terms, truncs = (a[self.t] for a in self.script)
        self.t += 1
        return np.zeros(self.num_envs, np.int64), rewards.copy(), terms.copy(), truncs.copy(), {}


@settings(max_examples=60, deadline=None)
@given(scripts(), st.sampled_from([AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP,
                                   AutoresetMode.DISABLED]))
def test_matches_gymnasium_wrapper(script, mode):
    rewards, terms, truncs, clock = script
    n = rewards.shape[1]
    wrapper = RecordEpisodeStatistics(ScriptedVectorEnv(rewards, terms, truncs, mode))
    wrapper.reset()
    kernel = KernelStats(n, 0.0)
    for step in range(len(rewards)):
        *_, infos = wrapper.step(np.zeros(n, np.int64))
        finished, (r, lens, t) = kernel.step(rewards[step], terms[step], truncs[step], clock[step],
                                          mode == AutoresetMode.SAME_STEP)
        assert (t >= 0).all()
        if "episode" in infos:
            dones = infos["_episode"]
            assert finished == int(dones.sum())
            np.testing.assert_array_equal(r, infos["episode"]["r"])
            np.testing.assert_array_equal(lens, infos["episode"]["l"])
            np.testing.assert_array_equal(kernel.prev_dones, dones)
            assert not t[~dones].any()
        else:
            assert finished == 0
            assert not r.any() and not lens.any() and not t.any()


def test_next_step_reset_step_starts_the_next_episode():
    kernel = KernelStats(1, 0.0)
    one = np.ones(1)
    yes, no = np.ones(1, np.bool_), np.zeros(1, np.bool_)
    assert kernel.step(one, no, no, 1.0, False)[0] == 0
    finished, (r, lens, t) = kernel.step(2 * one, yes, no, 2.5, False)
    assert finished == 1 and r[0] == 3.0 and lens[0] == 2 and t[0] == 2.5
    # The reset step: its reward is not counted; the clock restarts.
    finished, (r, lens, t) = kernel.step(100 * one, no, no, 3.0, False)
    assert finished == 0 and kernel.returns[0] == 0.0 and kernel.lengths[0] == 0
    assert kernel.starts[0] == 3.0
    finished, (r, lens, t) = kernel.step(5 * one, no, yes, 4.0, False)
    assert finished == 1 and r[0] == 5.0 and lens[0] == 1 and t[0] == 1.0


def test_same_step_restarts_at_once():
    kernel = KernelStats(2, 0.0)
    rewards = np.array([1.0, 2.0])
    yes_no = np.array([True, False])
    no = np.zeros(2, np.bool_)
    finished, (r, lens, t) = kernel.step(rewards, yes_no, no, 1.0, True)
    assert finished == 1
    np.testing.assert_array_equal(r, [1.0, 0.0])
    np.testing.assert_array_equal(lens, [1, 0])
    np.testing.assert_array_equal(kernel.returns, [0.0, 2.0])
    np.testing.assert_array_equal(kernel.lengths, [0, 1])
    finished, (r, lens, t) = kernel.step(rewards, no, no, 2.0, True)
    np.testing.assert_array_equal(kernel.returns, [1.0, 4.0])  # every step counts


def test_time_is_rounded_to_microseconds():
    kernel = KernelStats(1, 0.0)
    yes = np.ones(1, np.bool_)
    _, (_, _, t) = kernel.step(np.zeros(1), yes, yes, 1.23456789, True)
    assert t[0] == 1.234568


def test_empty_batch():
    kernel = KernelStats(0, 0.0)
    empty = np.zeros(0, np.bool_)
    assert kernel.step(np.zeros(0), empty, empty, 1.0, False)[0] == 0


ARGUMENTS = ["terminations", "truncations", "rewards", "prev_dones", "returns", "lengths",
             "start_times", "out_r", "out_l", "out_t"]


def _arguments(n):
    return {
        "terminations": np.zeros(n, np.bool_), "truncations": np.zeros(n, np.bool_),
        "rewards": np.zeros(n), "prev_dones": np.zeros(n, np.bool_), "returns": np.zeros(n),
        "lengths": np.zeros(n, np.int64), "start_times": np.zeros(n),
        "out_r": np.zeros(n), "out_l": np.zeros(n, np.int64), "out_t": np.zeros(n),
    }


def _call(args):
    return update_episode_stats(
        args["terminations"], args["truncations"], args["rewards"], args["prev_dones"],
        args["returns"], args["lengths"], args["start_times"], 1.0, False,
        args["out_r"], args["out_l"], args["out_t"])


@pytest.mark.parametrize("name", ARGUMENTS[1:])
def test_length_mismatch(name):
    args = _arguments(3)
    args[name] = np.zeros(4, dtype=args[name].dtype)
    with pytest.raises(ValueError, match="expected arrays of length 3, got one of length 4"):
        _call(args)


@pytest.mark.parametrize("name", ARGUMENTS)
def test_wrong_dtype(name):
    args = _arguments(3)
    args[name] = np.zeros(3, dtype=np.float32)
    with pytest.raises(ValueError):
        _call(args)


def test_read_only_outputs_are_refused():
    args = _arguments(2)
    args["returns"].flags.writeable = False
    with pytest.raises(ValueError):
        _call(args)
