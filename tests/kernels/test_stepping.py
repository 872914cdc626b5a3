"""The step loop (``EnvStepper``) against a plain-Python loop with ``SyncVectorEnv``'s logic.

The envs are tiny in-test ``gymnasium.Env`` subclasses whose observation is the
step count, so an off-by-one in auto-reset shows up as wrong arithmetic.  No
processes are started.
"""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

from fastvec._kernels.stepping import Autoreset, EnvStepper
from fastvec.errors import ObservationError
from fastvec.spaces.layout import batch_views, layout_of

MODES = [Autoreset.NEXT_STEP, Autoreset.SAME_STEP, Autoreset.DISABLED]
GYM_MODES = {Autoreset.NEXT_STEP: AutoresetMode.NEXT_STEP,
             Autoreset.SAME_STEP: AutoresetMode.SAME_STEP,
             Autoreset.DISABLED: AutoresetMode.DISABLED}


class CountEnv(gym.Env):
    """Observation: which env, how many steps since reset, how many resets."""

    observation_space = spaces.Dict({
        "count": spaces.Discrete(1000),
        "tag": spaces.Box(0, 255, (2,), np.uint8),
        "resets": spaces.Tuple((spaces.Box(0, 1000, (), np.float32),)),
    })
    action_space = spaces.Discrete(4)

    def __init__(self, ident, episode_len, truncate_len):
        self.ident, self.episode_len, self.truncate_len = ident, episode_len, truncate_len
        self.count = self.resets = 0

    def _obs(self):
        return {"count": self.count,
                "tag": np.array([self.ident, self.count % 256], np.uint8),
                "resets": (np.float32(self.resets),)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count = 0
        self.resets += 1
        info = {}
        if seed is not None:
            info["seed"] = seed
        if options:
            info["options"] = dict(options)
        return self._obs(), info

    def step(self, action):
        self.count += 1
        reward = float(action) * 0.5 + self.count if self.count % 2 else np.float32(self.count)
        terminated = self.count >= self.episode_len
        truncated = np.bool_(self.count >= self.truncate_len)
        info = {"count": self.count, "action": int(action)} if self.count % 2 == 0 else {}
        return self._obs(), reward, terminated, truncated, info


# -- the reference -------------------------------------------------------------------

class ReferenceLoop:
    """``SyncVectorEnv.step``'s per-env logic, with infos kept as ``(index, info)`` entries."""

    def __init__(self, envs, mode, first_index):
        self.envs, self.mode, self.first = envs, mode, first_index
        n = len(envs)
        self.obs = [None] * n
        self.rewards = np.full(n, -1.0)  # as the block's buffer starts: an env never stepped
        self.terms = np.zeros(n, dtype=bool)
        self.truncs = np.zeros(n, dtype=bool)
        self.autoreset = np.zeros(n, dtype=bool)

    def step(self, actions, mask=None):
        entries = []
        for i, (env, action) in enumerate(zip(self.envs, actions, strict=True)):
            if mask is not None and not mask[i]:
                continue  # not stepped: nothing of it changes
            if self.mode == Autoreset.NEXT_STEP and self.autoreset[i]:
                self.obs[i], info = env.reset()
                self.rewards[i], self.terms[i], self.truncs[i] = 0.0, False, False
            else:
                assert not (self.mode == Autoreset.DISABLED and self.autoreset[i])
                (self.obs[i], self.rewards[i], self.terms[i], self.truncs[i],
                 info) = env.step(action)
                if self.mode == Autoreset.SAME_STEP and (self.terms[i] or self.truncs[i]):
                    entries.append((self.first + i, {"final_obs": self.obs[i],
                                                     "final_info": info}))
                    self.obs[i], info = env.reset()
            if info:
                entries.append((self.first + i, info))
        self.autoreset = self.terms | self.truncs
        return entries

    def reset(self, seeds, options, mask=None):
        entries = []
        for i, env in enumerate(self.envs):
            if mask is not None and not mask[i]:
                continue
            self.obs[i], info = env.reset(seed=seeds[i], options=options)
            self.terms[i] = self.truncs[i] = self.autoreset[i] = False
            if info:
                entries.append((self.first + i, info))
        return entries


# -- the block under test ------------------------------------------------------------

class Block:
    """An EnvStepper with its buffers; ``obs()`` reads them back one env at a time."""

    def __init__(self, envs, mode, first_index=0, object_path=False):
        n = len(envs)
        self.layout = None if object_path else layout_of(CountEnv.observation_space)
        self.rows = None if object_path else np.zeros((n, self.layout.record_size), np.uint8)
        self.objects = [None] * n if object_path else None
        self.rewards = np.full(n, -1.0)
        self.terms = np.zeros(n, np.bool_)
        self.truncs = np.zeros(n, np.bool_)
        self.needs_reset = np.zeros(n, np.bool_)
        self.block = EnvStepper(envs, mode, None if object_path else self.layout.table,
                                self.rows, self.objects, self.rewards, self.terms,
                                self.truncs, self.needs_reset, first_index)

    def obs(self, i):
        if self.objects is not None:
            return self.objects[i]
        views = batch_views(self.layout, self.rows)
        return {"count": views["count"][i], "tag": views["tag"][i],
                "resets": (views["resets"][0][i],)}


def same_obs(got, want):
    if isinstance(want, dict):
        return list(got) == list(want) and all(same_obs(got[k], want[k]) for k in want)
    if isinstance(want, tuple):
        return len(got) == len(want) and all(same_obs(g, w) for g, w in zip(got, want, strict=True))
    return np.array_equal(np.asarray(got), np.asarray(want))


def same_entries(got, want):
    """Entries equal, comparing observations inside ``final_obs`` by value."""
    assert [index for index, _ in got] == [index for index, _ in want]
    for (_, got_info), (_, want_info) in zip(got, want, strict=True):
        assert list(got_info) == list(want_info)
        for key, value in want_info.items():
            if key == "final_obs":
                assert same_obs(got_info[key], value)
            else:
                assert got_info[key] == value


def assert_matches(block, ref, rewards=True):
    if rewards:  # (a reset leaves the rewards alone, as Gymnasium's does)
        np.testing.assert_array_equal(block.rewards, ref.rewards)
    np.testing.assert_array_equal(block.terms, ref.terms)
    np.testing.assert_array_equal(block.truncs, ref.truncs)
    np.testing.assert_array_equal(block.needs_reset, ref.terms | ref.truncs)
    for i, want in enumerate(ref.obs):
        assert same_obs(block.obs(i), want), (i, block.obs(i), want)


def twin_envs(lengths):
    return ([CountEnv(i, e, t) for i, (e, t) in enumerate(lengths)],
            [CountEnv(i, e, t) for i, (e, t) in enumerate(lengths)])


lengths_strategy = st.lists(st.tuples(st.integers(1, 4), st.integers(1, 6)), min_size=1,
                            max_size=4)


@settings(max_examples=120, deadline=None)
@given(lengths_strategy, st.sampled_from(MODES), st.integers(0, 5), st.booleans(),
       st.integers(0, 2**16), st.data())
def test_step_matches_reference_loop(lengths, mode, first_index, object_path, seed, data):
    envs, ref_envs = twin_envs(lengths)
    n = len(envs)
    block = Block(envs, mode, first_index, object_path)
    ref = ReferenceLoop(ref_envs, mode, first_index)
    seeds = [seed + i for i in range(n)]
    same_entries(block.block.reset(seeds, {"level": 2}), ref.reset(seeds, {"level": 2}))
    assert_matches(block, ref, rewards=False)
    for _ in range(data.draw(st.integers(1, 12))):
        if mode == Autoreset.DISABLED and ref.autoreset.any():
            mask = ref.autoreset.copy()  # as a user must: reset the finished envs first
            seeds = [seed] * n
            same_entries(block.block.reset(seeds, None, mask), ref.reset(seeds, None, mask))
            assert_matches(block, ref, rewards=False)
        actions = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        mask = data.draw(st.none() | st.lists(st.booleans(), min_size=n, max_size=n))
        if mask is not None:  # the rows left out keep what they hold, their actions unread
            actions = [a if m else None for a, m in zip(actions, mask, strict=True)]
        same_entries(block.block.step(actions, mask), ref.step(actions, mask))
        assert_matches(block, ref)


@pytest.mark.parametrize("mode", [Autoreset.NEXT_STEP, Autoreset.SAME_STEP])
def test_reference_loop_matches_sync_vector_env(mode):
    # The reference itself, checked against Gymnasium on observations, rewards and flags.
    lengths = [(2, 5), (3, 2), (1, 1)]
    gym_envs = SyncVectorEnv([lambda i=i, e=e, t=t: CountEnv(i, e, t)
                              for i, (e, t) in enumerate(lengths)],
                             autoreset_mode=GYM_MODES[mode])
    ref = ReferenceLoop([CountEnv(i, e, t) for i, (e, t) in enumerate(lengths)], mode, 0)
    gym_envs.reset(seed=3)
    ref.reset([3, 4, 5], None)
    for step in range(8):
        actions = [step % 4, (step + 1) % 4, 3]
        obs, rewards, terms, truncs, _ = gym_envs.step(np.array(actions))
        ref.step(actions)
        np.testing.assert_array_equal(rewards, ref.rewards)
        np.testing.assert_array_equal(terms, ref.terms)
        np.testing.assert_array_equal(truncs, ref.truncs)
        np.testing.assert_array_equal(obs["count"], [o["count"] for o in ref.obs])
    gym_envs.close()


def test_next_step_resets_on_the_step_after_the_end():
    envs = [CountEnv(0, 2, 100)]
    block = Block(envs, Autoreset.NEXT_STEP)
    block.block.reset([None], None)
    block.block.step([1])
    assert block.block.step([1]) == [(0, {"count": 2, "action": 1})]
    assert block.terms[0] and block.needs_reset[0] and block.obs(0)["count"] == 2
    assert block.block.step([3]) == []  # the reset step: reward 0, flags cleared
    assert block.obs(0)["count"] == 0 and block.obs(0)["resets"][0] == 2
    assert block.rewards[0] == 0.0 and not block.terms[0] and not block.needs_reset[0]


def test_same_step_reports_final_obs_then_resets():
    block = Block([CountEnv(0, 100, 1)], Autoreset.SAME_STEP, first_index=7)
    block.block.reset([None], None)
    entries = block.block.step([2])
    assert len(entries) == 1 and entries[0][0] == 7
    final = entries[0][1]
    assert list(final) == ["final_obs", "final_info"] and final["final_info"] == {}
    assert final["final_obs"]["count"] == 1
    assert block.truncs[0] and block.rewards[0] == 2.0
    assert block.obs(0)["count"] == 0 and block.obs(0)["resets"][0] == 2


def test_disabled_never_resets_by_itself():
    block = Block([CountEnv(0, 1, 100)], Autoreset.DISABLED)
    block.block.reset([None], None)
    block.block.step([0])
    block.block.step([0])  # stepping past the end is the caller's business in this mode
    assert block.obs(0)["count"] == 2 and block.obs(0)["resets"][0] == 1


def test_only_non_empty_infos_are_entries():
    envs = [CountEnv(i, 100, 100) for i in range(3)]
    block = Block(envs, Autoreset.NEXT_STEP, first_index=4)
    assert block.block.reset([None] * 3, None) == []
    assert block.block.reset([None, 1, None], None) == [(5, {"seed": 1})]
    assert block.block.step([0, 0, 0]) == []
    assert block.block.step([1, 2, 3]) == [(4, {"count": 2, "action": 1}),
                                           (5, {"count": 2, "action": 2}),
                                           (6, {"count": 2, "action": 3})]


def test_reset_with_mask_touches_only_masked_envs():
    envs = [CountEnv(i, 1, 100) for i in range(3)]
    block = Block(envs, Autoreset.DISABLED, first_index=2)
    block.block.reset([None] * 3, None)
    block.block.step([0, 0, 0])
    assert block.needs_reset.all()
    entries = block.block.reset([10, 11, 12], {"x": 1}, np.array([False, True, False]))
    assert entries == [(3, {"seed": 11, "options": {"x": 1}})]
    np.testing.assert_array_equal(block.needs_reset, [True, False, True])
    np.testing.assert_array_equal(block.terms, [True, False, True])
    assert [block.obs(i)["count"] for i in range(3)] == [1, 0, 1]


def test_blocks_share_one_buffer_without_overlap():
    # As SyncVecEnv / the workers do: each block gets a slice of the batch buffers.
    layout = layout_of(CountEnv.observation_space)
    rows = np.zeros((4, layout.record_size), np.uint8)
    rewards, terms, truncs, needs = (np.zeros(4), np.zeros(4, np.bool_),
                                     np.zeros(4, np.bool_), np.zeros(4, np.bool_))
    blocks = [EnvStepper([CountEnv(first + i, 100, 100) for i in range(2)],
                         Autoreset.NEXT_STEP, layout.table, rows[first:first + 2], None,
                         rewards[first:first + 2], terms[first:first + 2],
                         truncs[first:first + 2], needs[first:first + 2], first)
              for first in (0, 2)]
    for block in blocks:
        block.reset([None, None], None)
    blocks[1].step([1, 1])
    views = batch_views(layout, rows)
    np.testing.assert_array_equal(views["count"], [0, 0, 1, 1])
    np.testing.assert_array_equal(views["tag"][:, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(rewards, [0, 0, 1.5, 1.5])


# -- errors --------------------------------------------------------------------------

class BadObsEnv(CountEnv):
    def step(self, action):
        obs, *rest = super().step(action)
        obs["tag"] = np.zeros(3, np.uint8)
        return (obs, *rest)


class RaisingEnv(CountEnv):
    def step(self, action):
        raise RuntimeError("boom")


def test_bad_observation_names_the_global_env_index_and_leaf():
    envs = [CountEnv(0, 9, 9), BadObsEnv(1, 9, 9)]
    block = Block(envs, Autoreset.NEXT_STEP, first_index=5)
    block.block.reset([None, None], None)
    with pytest.raises(ObservationError) as err:
        block.block.step([0, 0])
    message = str(err.value)
    assert re.search(r"\benv 6\b", message) and 'obs["tag"]' in message, message
    assert block.block.current == 1


def test_env_exception_propagates_and_current_names_the_env():
    envs = [CountEnv(0, 9, 9), CountEnv(1, 9, 9), RaisingEnv(2, 9, 9)]
    block = Block(envs, Autoreset.NEXT_STEP, first_index=3)
    block.block.reset([None] * 3, None)
    with pytest.raises(RuntimeError, match="boom"):
        block.block.step([1, 1, 1])
    assert block.block.current == 2
    assert [block.obs(i)["count"] for i in range(2)] == [1, 1]  # envs before it did step


class BadRewardEnv(CountEnv):
    def step(self, action):
        obs, _, *rest = super().step(action)
        return (obs, "1.0", *rest)


def test_unconvertible_reward_raises():
    block = Block([BadRewardEnv(0, 9, 9)], Autoreset.NEXT_STEP)
    block.block.reset([None], None)
    with pytest.raises(TypeError):
        block.block.step([0])


def test_object_path_keeps_the_objects():
    envs = [CountEnv(i, 9, 9) for i in range(2)]
    block = Block(envs, Autoreset.NEXT_STEP, object_path=True)
    block.block.reset([None, None], None)
    block.block.step([0, 1])
    assert all(isinstance(o, dict) and o["count"] == 1 for o in block.objects)
    assert block.objects[1]["tag"].tolist() == [1, 1]


def test_action_and_seed_length_mismatch():
    block = Block([CountEnv(i, 9, 9) for i in range(3)], Autoreset.NEXT_STEP)
    with pytest.raises(ValueError, match="expected 3 actions, got 2"):
        block.block.step([0, 0])
    with pytest.raises(ValueError, match="expected 3 seeds"):
        block.block.reset([None] * 4, None)
    with pytest.raises(ValueError, match="expected 3 seeds and mask"):
        block.block.reset([None] * 3, None, np.ones(2, bool))
    assert all(env.resets == 0 and env.count == 0 for env in block.block.envs)


def _buffers(n, record_size=8):
    return dict(rows=np.zeros((n, record_size), np.uint8), rewards=np.zeros(n),
                terms=np.zeros(n, np.bool_), truncs=np.zeros(n, np.bool_),
                needs=np.zeros(n, np.bool_))


def _make(envs, mode=Autoreset.NEXT_STEP, table="layout", objects=None, **overrides):
    b = {**_buffers(len(envs), layout_of(CountEnv.observation_space).record_size), **overrides}
    if table == "layout":
        table = layout_of(CountEnv.observation_space).table
    return EnvStepper(envs, mode, table, b["rows"], objects, b["rewards"], b["terms"],
                      b["truncs"], b["needs"])


def test_constructor_checks():
    envs = [CountEnv(i, 9, 9) for i in range(2)]
    _make(envs)  # valid
    _make(envs, table=None, objects=[None, None])
    with pytest.raises(ValueError, match="Autoreset mode"):
        _make(envs, mode=3)
    with pytest.raises(ValueError, match="2 observation slots"):
        _make(envs, table=None, objects=None)
    with pytest.raises(ValueError, match="2 observation slots"):
        _make(envs, table=None, objects=[None])
    with pytest.raises(ValueError, match="2 non-empty record rows"):
        _make(envs, rows=np.zeros((3, 40), np.uint8))
    with pytest.raises(ValueError, match="2 non-empty record rows"):
        _make(envs, rows=None)
    for name in ("rewards", "terms", "truncs", "needs"):
        bad = np.zeros(3) if name == "rewards" else np.zeros(3, np.bool_)
        with pytest.raises(ValueError, match="arrays of length 2"):
            _make(envs, **{name: bad})
