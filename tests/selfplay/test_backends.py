"""The league on every backend, for turn-based and parallel games: the same draws, games,
results and ratings as on SyncVecEnv; on async batches, every game judged once."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from fastvec.selfplay import LEARNER, League, RandomPlayer  # noqa: E402
from fastvec.selfplay.players import rows_view  # noqa: E402
from tests.support.games import RelayGame, TurnGame  # noqa: E402

GAMES = {
    # turn-based, two seats, every game 5 moves
    "turns": (functools.partial(TurnGame, num_agents=2, horizon=5), 3),
    # parallel, three seats; seats 1 and 2 leave early in some games
    "relay": (functools.partial(RelayGame, num_agents=3, horizon=6), 3),
}


def tictactoe() -> Any:
    return pytest.importorskip("pettingzoo.classic.tictactoe_v3").env()


def drive(envs: Any, steps: int, num_actions: int) -> tuple[list, dict]:
    """A league with a fixed random opponent and snapshots, random players for the learner
    and the snapshots; every outcome and the league's final state."""
    league = League.from_env(envs, opponents={"rnd": RandomPlayer(num_actions, seed=1)},
                             shares={"self_play": 0.3, "snapshots": 0.4, "fixed": 0.3},
                             snapshot_every=7, max_snapshots=2, seed=5)
    learner, snapshot = RandomPlayer(num_actions, seed=2), RandomPlayer(num_actions, seed=3)
    obs, infos = envs.reset(seed=0)
    outcomes = []
    for _ in range(steps):
        actions = np.zeros(envs.num_envs, dtype=np.int64)
        groups = league.policy_rows(infos.get("active"))
        for policy, rows in league.act_fixed(obs, groups, actions).items():
            actions[rows] = (learner if policy == LEARNER else snapshot)(*rows_view(obs, rows))
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        outcomes.extend(league.update(rewards, terminations, truncations, infos))
        if league.snapshot_due:
            league.add_snapshot()
        league.pop_retired()
    return outcomes, league.state_dict()


@pytest.mark.parametrize("game", ["turns", "relay", "tictactoe"])
def test_the_league_runs_the_same_on_every_backend(vec_envs: Any, backend: str,
                                                    game: str) -> None:
    fn, num_actions = GAMES[game] if game in GAMES else (tictactoe, 9)
    expected = drive(vec_envs.make_backend("sync", [fn] * 4), 40, num_actions)
    kwargs: dict[str, Any] = {"num_workers": 2} if backend not in ("sync", "ray") else {}
    if backend == "subproc-async":  # batches of whole worker blocks: half the rows
        kwargs["batch_size"] = 2 * len(fn().possible_agents)
    outcomes, state = drive(vec_envs.make_backend(backend, [fn] * 4, **kwargs), 40, num_actions)
    assert len(outcomes) >= 8
    assert outcomes == expected[0]
    assert state == expected[1]


def test_the_league_on_async_batches_judges_every_game_once(make_subproc) -> None:
    envs = make_subproc([tictactoe] * 8, num_workers=4, batch_size=4, context="fork")
    league = League.from_env(envs, opponents={"rnd": RandomPlayer(seed=1)},
                             shares={"self_play": 0.5, "fixed": 0.5}, seed=0)
    learner = RandomPlayer(seed=2)
    envs.async_reset(seed=0)
    ends, learner_moves, outcomes = 0, 0, []
    for _ in range(120):
        obs, rewards, terminations, truncations, infos, env_ids = envs.recv()
        assert len(env_ids) == 4 and (envs.game_of_row[env_ids].reshape(2, 2)[:, 0]
                                      == envs.game_of_row[env_ids].reshape(2, 2)[:, 1]).all()
        outcomes.extend(league.update(rewards, terminations, truncations, infos, env_ids))
        ends += int(terminations.sum()) // 2  # both seats of a game end together
        actions = np.zeros(4, dtype=np.int64)
        groups = league.policy_rows(infos["active"], env_ids)
        assert sorted(np.concatenate([np.empty(0, int), *groups.values()]).tolist()) \
            == np.flatnonzero(infos["active"]).tolist()  # positions in the batch
        for policy, positions in league.act_fixed(obs, groups, actions).items():
            assert policy == LEARNER
            learner_moves += len(positions)
            actions[positions] = learner(*rows_view(obs, positions))
        assert obs["action_mask"][np.flatnonzero(infos["active"]), actions[
            np.flatnonzero(infos["active"])]].all()  # only legal moves
        envs.send(actions, env_ids)
    assert ends > 20 and len(outcomes) == ends == league.games
    assert league.learner_steps == learner_moves
    rnd = league.entry("rnd")
    selfplay = sum(o.opponent == LEARNER for o in outcomes)
    assert rnd.games + selfplay == ends
