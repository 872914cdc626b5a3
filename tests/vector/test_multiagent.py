"""Multi-agent games as rows: every backend against a plain-Python reference loop.

The reference (:func:`reference_run`) steps fresh copies of the games itself by
the rules of docs/multiagent.md (one row per seat, zero rows for agents not in
the game, per-game autoreset in the three modes, turn-based rewards as
PettingZoo's ``last()`` gives them), sharing no code with fastvec.  The games
(``tests/support/games.py``) encode game, step and seat in their observations, and
agents leave early, by termination and truncation, or join late.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv

pytest.importorskip("pettingzoo")

from pettingzoo import AECEnv  # noqa: E402

from tests.support import backends  # noqa: E402
from tests.support.compare import assert_tree_equal, snapshot  # noqa: E402
from tests.support.games import RelayGame, TurnGame, game_fns  # noqa: E402

pytestmark = pytest.mark.fastvec_only

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]

# (name, backend of tests/support/backends.py, constructor kwargs); games: 5 (4 for async)
SETUPS = [
    ("sync", backends.SYNC, {}),
    ("subproc-1", backends.SUBPROC, {"num_workers": 1}),
    ("subproc-3-uneven", backends.SUBPROC, {"num_workers": 3}),
    ("subproc-local", backends.LOCAL, {"num_workers": 2}),
    ("subproc-nocopy", backends.SUBPROC, {"num_workers": 2, "copy": False}),
    ("subproc-async", backends.ASYNC, {"num_workers": 2}),
    ("ray", backends.RAY, {"num_actors": 2}),
    ("ray-subproc", backends.RAY, {"num_actors": 2, "inner": "subproc",
                                   "inner_options": {"num_workers": 1, "context": "fork"}}),
]
# Ray actors take ~0.5 s of CPU each to start: a few cases there, the rest elsewhere.
RAY_CASES = {("ray", "relay-late", AutoresetMode.NEXT_STEP),
             ("ray", "turns-3", AutoresetMode.SAME_STEP),
             ("ray", "relay", AutoresetMode.DISABLED),
             ("ray-subproc", "turns-3", AutoresetMode.NEXT_STEP)}
GAMES = {
    "relay": functools.partial(RelayGame, num_agents=3, horizon=6),
    "relay-late": functools.partial(RelayGame, num_agents=3, horizon=5, late_seat=2),
    "turns": functools.partial(TurnGame, num_agents=2, horizon=5),
    "turns-3": functools.partial(TurnGame, num_agents=3, horizon=7),
}


class _Infos:
    """Gymnasium's own info batching, for the expected infos."""

    _add_info = VectorEnv._add_info

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.infos: dict = {}

    def add(self, row: int, info: dict) -> None:
        if info:
            self.infos = self._add_info(self.infos, info, row)


def _zero_like(obs: Any) -> Any:
    if isinstance(obs, dict):
        return {k: _zero_like(v) for k, v in obs.items()}
    return np.zeros_like(obs)


def _play(game: Any, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
    """One step of a parallel game, or one move of a turn-based one in PettingZoo's loop.

    For a turn-based game: the mover moves; every live agent is observed; agents
    that ended report ``last()``'s reward for them and leave (dead steps); the
    next mover gets its ``last()`` reward.
    """
    if not isinstance(game, AECEnv):
        return game.step(actions)
    mover = game.agent_selection
    game.step(actions[mover])
    obs, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
    for agent in game.agents:
        obs[agent], infos[agent] = game.observe(agent), game.infos[agent]
        terms[agent], truncs[agent] = game.terminations[agent], game.truncations[agent]
        rewards[agent] = 0.0
    while game.agents and (game.terminations[game.agent_selection]
                           or game.truncations[game.agent_selection]):
        leaving = game.agent_selection
        rewards[leaving] = game.last()[1]
        game.step(None)
    for agent in list(rewards):  # ended but not stepped out yet (not selected): owed now
        if (terms[agent] or truncs[agent]) and agent in game.agents:
            rewards[agent] = game._cumulative_rewards[agent]
    if game.agents:
        rewards[game.agent_selection] = game.last()[1]
    return obs, rewards, terms, truncs, infos


def _reset(game: Any, seed: int | None) -> tuple[dict, dict]:
    if isinstance(game, AECEnv):
        game.reset(seed=seed)
        return ({a: game.observe(a) for a in game.agents},
                {a: game.infos[a] for a in game.agents})
    return game.reset(seed=seed)


def _live(game: Any) -> list:
    if isinstance(game, AECEnv):
        return [game.agent_selection] if game.agents else []
    return list(game.agents)


def reference_run(game_fn: Any, num_games: int, seed: int, actions: list[np.ndarray],
                  mode: AutoresetMode) -> list[tuple]:
    """``[(obs, rewards, terms, truncs, infos)]`` of a reset then a step per action batch."""
    games = [game_fn() for _ in range(num_games)]
    agents = games[0].possible_agents
    seats = len(agents)
    n = num_games * seats
    template: dict = {}
    over = [False] * num_games
    results = []

    def write(rows: dict, g: int, obs: dict, infos: dict, batch: _Infos) -> None:
        for s, agent in enumerate(agents):
            rows["alive"][g * seats + s] = agent in obs
            if agent in obs:
                template.setdefault("obs", obs[agent])
                rows["obs"][g * seats + s] = obs[agent]
                batch.add(g * seats + s, infos.get(agent) or {})
        turn_based = isinstance(games[g], AECEnv)  # parallel games: active == alive
        live = _live(games[g]) if turn_based else agents
        for s, agent in enumerate(agents):
            rows["active"][g * seats + s] = agent in live and rows["alive"][g * seats + s]

    def fresh() -> dict:
        return {"obs": [None] * n, "rew": np.zeros(n), "term": np.zeros(n, bool),
                "trunc": np.zeros(n, bool), "alive": np.zeros(n, bool),
                "active": np.zeros(n, bool)}

    def finish(rows: dict, batch: _Infos) -> tuple:
        obs = [o if o is not None else _zero_like(template["obs"]) for o in rows["obs"]]
        infos = batch.infos
        infos.update({"alive": rows["alive"], "_alive": np.ones(n, bool),
                      "active": rows["active"], "_active": np.ones(n, bool)})
        return obs, rows["rew"], rows["term"], rows["trunc"], infos

    rows, batch = fresh(), _Infos(n)
    for g, game in enumerate(games):
        write(rows, g, *_reset(game, seed + g), batch)
    results.append(finish(rows, batch)[::4])
    for batch_actions in actions:
        rows, batch = fresh(), _Infos(n)
        for g, game in enumerate(games):
            if over[g]:
                assert mode is AutoresetMode.NEXT_STEP
                write(rows, g, *_reset(game, None), batch)
                over[g] = False
                continue
            acting = {a: batch_actions[g * seats + agents.index(a)] for a in _live(game)}
            obs, rewards, terms, truncs, infos = _play(game, acting)
            for s, agent in enumerate(agents):
                if agent in obs:
                    i = g * seats + s
                    rows["rew"][i] = rewards.get(agent, 0.0)
                    rows["term"][i], rows["trunc"][i] = terms[agent], truncs[agent]
            same_step_reset = not game.agents and mode is AutoresetMode.SAME_STEP
            # SAME_STEP: the rows of a game reset now carry the reset's infos; this
            # step's are only in final_info (as Gymnasium's SAME_STEP for one env)
            write(rows, g, obs, {} if same_step_reset else infos, batch)
            if not game.agents:  # the game is over
                if same_step_reset:
                    for s, agent in enumerate(agents):
                        batch.add(g * seats + s, {
                            "final_obs": obs.get(agent, _zero_like(template["obs"])),
                            "final_info": infos.get(agent) or {}})
                    kept = {k: rows[k][g * seats:(g + 1) * seats].copy()
                            for k in ("rew", "term", "trunc")}
                    rows["obs"][g * seats:(g + 1) * seats] = [None] * seats
                    write(rows, g, *_reset(game, None), batch)
                    for k, v in kept.items():
                        rows[k][g * seats:(g + 1) * seats] = v
                else:
                    over[g] = True
        results.append(finish(rows, batch))
    return results


def _actions(env: Any, steps: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 3, env.num_envs) for _ in range(steps)]


def _rows(obs: Any, n: int) -> list:
    obs = snapshot(obs)  # copy=False: views of the batch, overwritten by the next step
    if isinstance(obs, dict):
        return [{k: v[i] for k, v in obs.items()} for i in range(n)]
    return [obs[i] for i in range(n)]


def _run(env: Any, seed: int, actions: list[np.ndarray]) -> list[tuple]:
    obs, infos = env.reset(seed=seed)
    results = [(_rows(obs, env.num_envs), infos)]
    for batch in actions:
        obs, rewards, terms, truncs, infos = env.step(batch)
        results.append((_rows(obs, env.num_envs), rewards, terms, truncs, infos))
    return results


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("game", list(GAMES))
@pytest.mark.parametrize("setup", [pytest.param(s, marks=backends.marks(s[1]), id=s[0])
                                   for s in SETUPS])
def test_equals_the_reference_loop(vec_envs: Any, setup: tuple, game: str,
                                   mode: AutoresetMode, request: Any) -> None:
    name, backend, kwargs = setup
    if backend == backends.RAY and (name, game, mode) not in RAY_CASES:
        pytest.skip("Ray: the cases of RAY_CASES (an actor takes ~0.5 s to start)")
    if backend == backends.RAY:
        request.getfixturevalue("ray_session")  # the one Ray of the test run
    num_games = 4 if backend == backends.ASYNC else 5
    if backend == backends.ASYNC and mode is AutoresetMode.DISABLED:
        pytest.skip("DISABLED with async batches: covered by the single-agent contract suite")
    if backend == backends.ASYNC:  # batches of whole worker blocks: half the rows
        kwargs = {**kwargs, "batch_size": num_games // 2 * len(GAMES[game]().possible_agents)}
    env = vec_envs.make_backend(backend, game_fns(GAMES[game], num_games),
                                autoreset_mode=mode, **kwargs)
    steps = 3 if mode is AutoresetMode.DISABLED else 14  # DISABLED: before any game ends
    actions = _actions(env, steps, seed=7)
    expected = reference_run(GAMES[game], num_games, 100, actions, mode)
    actual = _run(env, 100, actions)
    for t, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert_tree_equal(list(got), list(want), path=f"step {t}")


@pytest.mark.parametrize("backend", [backends.param(b) for b in
                                     (backends.SYNC, backends.SUBPROC, backends.LOCAL)])
def test_tictactoe_equals_the_reference_loop_in_same_step(vec_envs: Any, backend: str) -> None:
    """PettingZoo's own turn-based game, illegal moves (which end a game) included."""
    tictactoe = pytest.importorskip("pettingzoo.classic.tictactoe_v3")  # needs pygame
    kwargs = {"num_workers": 2} if backend != backends.SYNC else {}
    env = vec_envs.make_backend(backend, [tictactoe.env] * 4,
                                autoreset_mode=AutoresetMode.SAME_STEP, **kwargs)
    rng = np.random.default_rng(3)
    actions = [rng.integers(0, 9, env.num_envs) for _ in range(30)]
    expected = reference_run(tictactoe.env, 4, 100, actions, AutoresetMode.SAME_STEP)
    actual = _run(env, 100, actions)
    for t, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert_tree_equal(list(got), list(want), path=f"step {t}")


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP],
                         ids=lambda m: m.value)
@pytest.mark.parametrize("players", [2, 3])
@pytest.mark.parametrize("backend", [backends.param(b) for b in
                                     (backends.SYNC, backends.SUBPROC, backends.LOCAL,
                                      backends.RAY)])
def test_openspiel_poker_equals_the_reference_loop(vec_envs: Any, backend: str, players: int,
                                                   mode: AutoresetMode, request: Any) -> None:
    """OpenSpiel's Kuhn poker as rows (fastvec.openspiel): chance inside the games, the
    returns at the end; both actions are legal at every decision of Kuhn poker."""
    pytest.importorskip("pyspiel")
    from fastvec.openspiel import OpenSpielGame

    game = functools.partial(OpenSpielGame, game=f"kuhn_poker(players={players})")
    kwargs = {"num_workers": 2} if backend != backends.SYNC else {}
    if backend == backends.RAY:
        if (players, mode) != (3, AutoresetMode.NEXT_STEP):
            pytest.skip("Ray: one case (an actor takes ~0.5 s to start)")
        request.getfixturevalue("ray_session")  # the one Ray of the test run
        kwargs = {"num_actors": 2}
    env = vec_envs.make_backend(backend, [game] * 4, autoreset_mode=mode, **kwargs)
    rng = np.random.default_rng(5)
    actions = [rng.integers(0, 2, env.num_envs) for _ in range(25)]
    expected = reference_run(game, 4, 100, actions, mode)
    actual = _run(env, 100, actions)
    for t, (got, want) in enumerate(zip(actual, expected, strict=True)):
        assert_tree_equal(list(got), list(want), path=f"step {t}")
