"""The per-game step loop (``GameStepper``) against a plain numpy reference, with hypothesis.

A scripted game replays a random plan: which agents are present on each step,
their rewards and flags.  The reference builds the rows a step must write with
numpy (zeros for absent agents, the agent's values for present ones) and the
alive/active bytes; the kernel must write exactly those, into flat records and
into observation objects alike.  No processes are started.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from fastvec._kernels.games import GameStepper
from fastvec._kernels.stepping import Autoreset
from fastvec.errors import WorkerError
from fastvec.pool.games import ParallelGame
from fastvec.spaces.layout import batch_views, layout_of

AGENTS = ("a", "b", "c")
SPACE = spaces.Box(-1e9, 1e9, (2,), np.float64)


class ScriptedGame:
    """Plays ``plan[t]``: a dict agent -> (obs value, reward, terminated, truncated)."""

    possible_agents = list(AGENTS)

    def __init__(self, plan: list[dict]) -> None:
        self.plan, self.t, self.agents = plan, 0, []

    def observation_space(self, agent: str) -> spaces.Space:
        return SPACE

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(AGENTS)
        return {a: np.full(2, -1.0) for a in AGENTS}, {}

    def step(self, actions):
        assert set(actions) == set(self.agents)  # the live agents' actions, no others
        present = self.plan[min(self.t, len(self.plan) - 1)]
        self.t += 1
        obs = {a: np.array([v, actions.get(a, -1)], np.float64)  # -1: joins on this step
               for a, (v, *_) in present.items()}
        self.agents = [a for a, (_, _, te, tr) in present.items() if not (te or tr)]
        return (obs, {a: p[1] for a, p in present.items()},
                {a: p[2] for a, p in present.items()}, {a: p[3] for a, p in present.items()},
                {a: {"v": p[0]} for a, p in present.items()})


def _plans(draw_steps: int):
    agent_step = st.tuples(st.integers(0, 99), st.floats(-5, 5, allow_nan=False),
                           st.booleans(), st.booleans())
    step = st.dictionaries(st.sampled_from(AGENTS), agent_step, min_size=1)
    return st.lists(step, min_size=1, max_size=draw_steps)


def _block(games: list, records: bool):
    n = len(games) * len(AGENTS)
    layout = layout_of(SPACE)
    rows = np.zeros((n, layout.record_size), np.uint8) if records else None
    objects = None if records else [None] * n
    arrays = [np.zeros(n)] + [np.zeros(n, np.bool_) for _ in range(5)]
    block = GameStepper(games, [ParallelGame(g) for g in games], AGENTS, Autoreset.DISABLED,
                        layout.table if records else None, rows, objects,
                        np.zeros(2), *arrays, 0)
    view = batch_views(layout, rows) if records else None
    return block, rows, objects, arrays, view


@settings(max_examples=60, deadline=None)
@given(plans=st.lists(_plans(4), min_size=1, max_size=3), records=st.booleans(),
       data=st.data())
def test_rows_match_a_numpy_reference(plans: list, records: bool, data) -> None:
    games = [ScriptedGame(plan) for plan in plans]
    block, rows, objects, (rewards, terms, truncs, needs_reset, alive, active), view = \
        _block(games, records)
    block.reset([None] * len(games) * 3, None)
    assert alive.all() and active.all()
    steps = max(len(p) for p in plans)
    live = [set(AGENTS) for _ in plans]  # who acts on the next step, per game
    for t in range(steps):
        if needs_reset.any():  # DISABLED: stop at the first game over
            break
        actions = data.draw(st.lists(st.integers(0, 1), min_size=len(alive),
                                     max_size=len(alive)))
        entries = block.step(list(actions))
        want_obs = np.zeros((len(alive), 2))
        want = {k: np.zeros(len(alive), dt) for k, dt in
                (("r", float), ("te", bool), ("tr", bool), ("alive", bool))}
        want_infos = []
        for g, plan in enumerate(plans):
            present = plan[min(t, len(plan) - 1)]
            for s, agent in enumerate(AGENTS):
                if agent in present:
                    i = g * 3 + s
                    v, r, te, tr = present[agent]
                    want_obs[i] = (v, actions[i] if agent in live[g] else -1)
                    want["r"][i], want["te"][i], want["tr"][i] = r, te, tr
                    want["alive"][i] = True
                    want_infos.append((i, {"v": v}))
        got_obs = np.stack(objects) if objects is not None else np.asarray(view)
        np.testing.assert_array_equal(got_obs, want_obs)
        np.testing.assert_array_equal(rewards, want["r"])
        np.testing.assert_array_equal(terms, want["te"])
        np.testing.assert_array_equal(truncs, want["tr"])
        np.testing.assert_array_equal(alive, want["alive"])
        np.testing.assert_array_equal(active, want["alive"])  # parallel: active == alive
        assert entries == want_infos
        for g, plan in enumerate(plans):
            present = plan[min(t, len(plan) - 1)]
            live[g] = {a for a, (_, _, te, tr) in present.items() if not (te or tr)}
        over = np.repeat([not game.agents for game in games], 3)
        np.testing.assert_array_equal(needs_reset, over)


@settings(max_examples=40, deadline=None)
@given(plans=st.lists(_plans(4), min_size=2, max_size=3), records=st.booleans(),
       data=st.data())
def test_a_mask_steps_the_games_it_selects_as_a_full_step_would(plans: list, records: bool,
                                                                data) -> None:
    """A masked step gives the selected games' rows what a step of every game gives them
    (a twin block steps every game), and leaves the other games and their rows alone."""
    games, twins = [ScriptedGame(p) for p in plans], [ScriptedGame(p) for p in plans]
    block, rows, objects, arrays, view = _block(games, records)
    twin, twin_rows, twin_objects, twin_arrays, twin_view = _block(twins, records)
    n = len(games) * 3
    block.reset([None] * n, None)
    twin.reset([None] * n, None)
    for _ in range(4):
        if arrays[3].any():  # DISABLED: stop at the first game over
            break
        chosen = np.array(data.draw(st.lists(st.booleans(), min_size=len(games),
                                             max_size=len(games))))
        mask = np.repeat(chosen, 3)
        actions = data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
        before = ([a.copy() for a in arrays], np.array(rows if records else objects).copy(),
                  [g.t for g in games])
        block.step([a if m else None for a, m in zip(actions, mask, strict=True)], mask)
        for g in np.flatnonzero(~chosen):  # the twin's game g steps on its own, later
            assert games[g].t == before[2][g]
        for array, old in zip(arrays, before[0], strict=True):
            np.testing.assert_array_equal(array[~mask], old[~mask])
        got_rows = np.array(rows if records else objects)
        np.testing.assert_array_equal(got_rows[~mask], before[1][~mask])
        # the twin steps only the chosen games too, by a step of each chosen game alone
        for g in np.flatnonzero(chosen):
            one = np.zeros(n, np.bool_)
            one[g * 3:(g + 1) * 3] = True
            twin.step(list(actions), one)
        for array, want in zip(arrays, twin_arrays, strict=True):
            np.testing.assert_array_equal(array, want)
        np.testing.assert_array_equal(got_rows, np.array(twin_rows if records else twin_objects))


def test_a_step_mask_of_the_wrong_length_is_refused() -> None:
    games = [ScriptedGame([{"a": (1, 0.0, False, False)}]) for _ in range(2)]
    block, *_ = _block(games, True)
    block.reset([None] * 6, None)
    with pytest.raises(ValueError, match="step mask of 6 rows, got 5"):
        block.step([0] * 6, np.ones(5, np.bool_))


def test_an_agent_outside_possible_agents_is_named() -> None:
    game = ScriptedGame([{"a": (1, 0.0, False, False), "zed": (2, 0.0, False, False)}])
    block, *_ = _block([game], records=True)
    block.reset([None] * 3, None)
    with pytest.raises(WorkerError, match="game 0 reported agent 'zed'") as caught:
        block.step([0, 0, 0])
    assert caught.value.env_index == 0


def test_the_block_checks_its_buffers() -> None:
    game = ScriptedGame([{}])
    with pytest.raises(ValueError, match="length 3"):
        GameStepper([game], [ParallelGame(game)], AGENTS, 0, None, None, [None] * 3, None,
                    np.zeros(2), *[np.zeros(3, np.bool_) for _ in range(5)])
