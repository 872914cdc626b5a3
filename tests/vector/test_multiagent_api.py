"""Multi-agent games: SuperSuit equivalence, PettingZoo's API tests, real games, errors.

The step-by-step semantics are checked against a reference loop in
``tests/vector/test_multiagent.py``; here: the attributes, seeds, calls on games,
reset masks, DISABLED mode, episode statistics, restart, errors, and equality
with SuperSuit's in-process vectorization where SuperSuit is correct.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

pettingzoo = pytest.importorskip("pettingzoo")

from pettingzoo.test import api_test, parallel_api_test  # noqa: E402

import fastvec  # noqa: E402
from fastvec.errors import WorkerError  # noqa: E402
from tests.support.games import RelayGame, TurnGame, game_fns  # noqa: E402

pytestmark = pytest.mark.fastvec_only

BACKENDS = [("sync", {}), ("subproc", {"num_workers": 2, "context": "fork"}),
            ("local", {"num_workers": 1, "context": "fork", "local_block": True})]


def _make(kind: str, fns: list, **kwargs: Any) -> Any:
    options = dict(BACKENDS)[kind]
    if kind == "sync":
        return fastvec.SyncVecEnv(fns, **kwargs)
    return fastvec.SubprocVecEnv(fns, **options, **kwargs)


@pytest.fixture
def closing():
    made: list = []
    yield made.append
    for env in made:
        env.close()


def test_the_test_games_pass_pettingzoo_api_tests() -> None:
    parallel_api_test(RelayGame(), num_cycles=30)
    parallel_api_test(RelayGame(late_seat=2), num_cycles=30)
    api_test(TurnGame(), num_cycles=30)
    api_test(TurnGame(num_agents=3, horizon=7), num_cycles=30)


@pytest.mark.subprocess
@pytest.mark.parametrize("kind", [k for k, _ in BACKENDS])
def test_attributes_seeds_and_calls_count_games(kind: str, closing: Any) -> None:
    envs = _make(kind, game_fns(RelayGame, 3, num_agents=3))
    closing(envs)
    assert (envs.num_envs, envs.num_games) == (9, 3)
    assert envs.agents == ("runner_0", "runner_1", "runner_2")
    assert envs.game_of_row.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert envs.seat_of_row.tolist() == [0, 1, 2] * 3
    assert envs.game_of_row.dtype == envs.seat_of_row.dtype == np.int64
    obs, infos = envs.reset(seed=40)
    assert obs[:, 0].tolist() == [40] * 3 + [41] * 3 + [42] * 3  # game g: seed + g
    assert infos["alive"].all() and infos["active"].all() and infos["_alive"].all()
    obs, _ = envs.reset(seed=[7, None, 9])
    assert obs[[0, 6], 0].tolist() == [7, 9]
    assert envs.get_attr("tag") == (7, int(obs[3, 0]), 9)  # one entry per game
    envs.set_attr("horizon", [1, 2, 3])
    assert envs.get_attr("horizon") == (1, 2, 3)
    assert envs.call_each(lambda game: len(game.agents), indices=[2]) == (3,)
    with pytest.raises(ValueError, match="3 seeds \\(one per game\\)"):
        envs.reset(seed=[1] * 9)
    with pytest.raises(ValueError, match="whole games"):
        envs.reset(options={"reset_mask": np.array([True, False, False] + [False] * 6)})


def test_single_agent_envs_have_one_seat(closing: Any) -> None:
    import gymnasium as gym
    envs = fastvec.SyncVecEnv([lambda: gym.make("CartPole-v1")] * 3)
    closing(envs)
    assert (envs.num_games, envs.agents) == (3, ("agent_0",))
    assert envs.game_of_row.tolist() == [0, 1, 2] and envs.seat_of_row.tolist() == [0, 0, 0]
    _, infos = envs.reset(seed=0)
    assert "alive" not in infos


@pytest.mark.subprocess
@pytest.mark.parametrize("kind", [k for k, _ in BACKENDS])
def test_disabled_mode_needs_whole_game_resets(kind: str, closing: Any) -> None:
    envs = _make(kind, game_fns(RelayGame, 2, num_agents=2, horizon=2, early_exits=False),
                 autoreset_mode=AutoresetMode.DISABLED)
    closing(envs)
    envs.reset(seed=0)
    envs.step(np.zeros(4, np.int64))
    _, _, _, truncs, _ = envs.step(np.zeros(4, np.int64))
    assert truncs.all()
    with pytest.raises(RuntimeError, match="DISABLED"):
        envs.step(np.zeros(4, np.int64))
    obs, infos = envs.reset(options={"reset_mask": np.array([False, False, True, True])})
    # game 0 is still over; its rows keep their last results (its agents left, alive)
    assert infos["alive"].all() and obs[:2, 1].tolist() == [2, 2] and obs[2:, 1].tolist() == [0, 0]
    with pytest.raises(RuntimeError, match="DISABLED"):
        envs.step(np.zeros(4, np.int64))
    envs.reset(options={"reset_mask": np.array([True, True, False, False])})
    _, rewards, *_ = envs.step(np.ones(4, np.int64))
    assert rewards.tolist() == [0.6, 1.6, 0.6, 1.6]


def test_async_batch_sizes_count_whole_games_per_block() -> None:
    from fastvec.vector.async_batches import check_batch_size

    # 3 games of 2 seats: 6 rows split in 2, but blocks hold whole games (2 and 1)
    with pytest.raises(ValueError, match=r"num_games = 3 is not divisible by num_workers = 2 "
                                         r"\(try num_workers in \[1, 3\]\)"):
        check_batch_size(3, 6, 2, seats=2)
    with pytest.raises(ValueError, match=r"num_games = 3 .* num_actors \+ 1 = 2"):
        check_batch_size(3, 6, 1, local=1, host="actor", seats=2)
    assert check_batch_size(4, 8, 2, seats=2) == 4  # 4 games: 2 per block, 4 rows each
    with pytest.raises(ValueError, match="multiple of num_envs // num_workers = 4"):
        check_batch_size(2, 8, 2, seats=2)  # half a block would split games


@pytest.mark.subprocess
def test_async_batches_refuse_uneven_game_blocks() -> None:
    # Before: 6 rows passed as 2 blocks of 3, the blocks held 4 and 2 rows, recv()
    # returned batches of 4 or 2 rows and send() misread which envs were in flight.
    with pytest.raises(ValueError, match="num_games = 3 is not divisible by num_workers = 2"):
        fastvec.SubprocVecEnv(game_fns(RelayGame, 3, num_agents=2), num_workers=2,
                              context="fork", batch_size=3)


@pytest.mark.subprocess
@pytest.mark.parametrize("kind", [k for k, _ in BACKENDS])
def test_episode_statistics_per_agent(kind: str, closing: Any) -> None:
    envs = _make(kind, game_fns(RelayGame, 2, num_agents=3, horizon=6),
                 episode_statistics=True)
    closing(envs)
    envs.reset(seed=[3, 4])  # seat 1 leaves at step 2 + tag % 3: steps 2 and 3
    ended = {}
    returns = np.zeros(6)
    for t in range(1, 9):
        _, rewards, terms, truncs, infos = envs.step(np.ones(6, np.int64))
        if t <= 6:
            returns += rewards
        if "episode" in infos:
            for row in np.flatnonzero(infos["_episode"]):
                ended.setdefault(int(row), (t, infos["episode"]["r"][row],
                                            infos["episode"]["l"][row]))
    # seat 1 of game 0 (tag 3) leaves at step 2; of game 1 (tag 4) at step 3
    assert ended[1][0] == 2 and ended[1][2] == 2
    assert ended[4][0] == 3 and ended[4][2] == 3
    assert ended[0][2] == 6 and ended[0][1] == pytest.approx(returns[0])
    assert ended[1][1] == pytest.approx(returns[1])


@pytest.mark.subprocess
def test_restart_truncates_every_row_of_the_restarted_games(closing: Any) -> None:
    fns = game_fns(ExplodingRelay, 4, num_agents=2, horizon=50, early_exits=False)
    envs = fastvec.SubprocVecEnv(fns, num_workers=2, context="fork",
                                 on_worker_failure="restart")
    closing(envs)
    envs.reset(seed=[0, 1, 2, 3])
    actions = np.ones(8, np.int64)
    actions[2] = 2  # game 1 explodes (its block: games 0 and 1, rows 0-3)
    _, rewards, terms, truncs, infos = envs.step(actions)
    assert truncs.tolist() == [True] * 4 + [False] * 4
    assert rewards[:4].tolist() == [0.0] * 4
    assert infos["worker_restarted"][:4].all() and not infos["_worker_restarted"][4:].any()
    assert infos["alive"].all()


@pytest.mark.subprocess
@pytest.mark.parametrize("game", ["relay", "turns"])
def test_spawned_workers_give_the_same_results(game: str, closing: Any) -> None:
    factory = {"relay": functools.partial(RelayGame, late_seat=2),
               "turns": functools.partial(TurnGame, num_agents=3, horizon=7)}[game]
    runs = []
    for envs in (fastvec.SyncVecEnv(game_fns(factory, 3)),
                 fastvec.SubprocVecEnv(game_fns(factory, 3), num_workers=2, context="spawn")):
        closing(envs)
        rng = np.random.default_rng(1)
        out = [envs.reset(seed=5)[0]]
        for _ in range(12):
            obs, rewards, terms, truncs, infos = envs.step(rng.integers(0, 3, envs.num_envs))
            out += [obs, rewards, terms, truncs, infos["alive"], infos["active"]]
        runs.append(out)
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a["observation"] if isinstance(a, dict) else a,
                                      b["observation"] if isinstance(b, dict) else b)


# -- SuperSuit, where it is correct (no agent leaves early) --------------------------


def test_equals_supersuit_in_process_vectorization(closing: Any) -> None:
    ss = pytest.importorskip("supersuit")
    game = functools.partial(RelayGame, num_agents=2, horizon=4, early_exits=False)
    theirs = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(game()), 3, num_cpus=0,
                                   base_class="gymnasium")
    ours = fastvec.make_multiagent(game, 3, vector_kwargs={"autoreset_mode": "same_step"})
    closing(ours)
    try:
        their_obs, _ = theirs.reset(seed=11)
        our_obs, _ = ours.reset(seed=11)
        np.testing.assert_array_equal(our_obs, their_obs)
        rng = np.random.default_rng(0)
        for _ in range(11):  # crosses two game ends (SuperSuit resets in the same step)
            actions = rng.integers(0, 3, 6)
            their = theirs.step(actions)
            our = ours.step(actions)
            np.testing.assert_array_equal(our[0], their[0])
            np.testing.assert_array_equal(our[1].astype(np.float32), their[1])
            np.testing.assert_array_equal(our[2], their[2].astype(bool))
            np.testing.assert_array_equal(our[3], their[3].astype(bool))
            for row, info in enumerate(their[4]):
                if "terminal_observation" in info:
                    np.testing.assert_array_equal(our[4]["final_obs"][row],
                                                  info["terminal_observation"])
    finally:
        theirs.close()


# -- real PettingZoo games ---------------------------------------------------------


@pytest.mark.subprocess
@pytest.mark.parametrize("name", ["tictactoe_v3", "connect_four_v3", "rps_v2"])
def test_real_games_are_the_same_on_every_backend(name: str, closing: Any) -> None:
    classic = pytest.importorskip("pettingzoo.classic")
    module = getattr(classic, name)
    factory = module.parallel_env if name == "rps_v2" else module.env
    runs = []
    for kind, _ in BACKENDS:
        envs = _make(kind, [factory] * 3)
        closing(envs)
        rng = np.random.default_rng(3)
        obs, infos = envs.reset(seed=2)
        record = []
        for _ in range(40):
            if isinstance(obs, dict):  # a legal move for each row (ignored unless active)
                actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0
                                    for m in obs["action_mask"]])
                assert obs["action_mask"][infos["active"]].any(axis=1).all()
            else:
                actions = rng.integers(0, envs.single_action_space.n, envs.num_envs)
            obs, rewards, terms, truncs, infos = envs.step(actions)
            record.append((rewards.copy(), terms.copy(), truncs.copy(),
                           infos["alive"].copy(), infos["active"].copy()))
            if isinstance(obs, dict):
                record.append(obs["observation"].copy())
        runs.append(record)
        if name != "rps_v2":  # zero-sum: each game's rewards add up to 0
            totals = np.add.reduceat(sum(r[0] for r in record[::2]), np.arange(0, 6, 2))
            assert (totals == 0).all()
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            for x, y in zip(a if isinstance(a, tuple) else (a,),
                            b if isinstance(b, tuple) else (b,), strict=True):
                np.testing.assert_array_equal(x, y)


# -- games that misbehave ------------------------------------------------------------


class ExplodingRelay(RelayGame):
    """Raises on a step where seat 0 of an odd game plays 2."""

    def step(self, actions: dict) -> tuple:
        if self.tag % 2 and int(actions.get("runner_0", 0)) == 2:
            raise RuntimeError("boom")
        return super().step(actions)


class StrayAgentRelay(RelayGame):
    """Reports an agent that is not one of its possible agents."""

    def step(self, actions: dict) -> tuple:
        obs, rewards, terms, truncs, infos = super().step(actions)
        obs["stray"] = obs[self.possible_agents[0]]
        return obs, rewards, terms, truncs, infos


def test_a_wrapper_that_redefines_rewards_is_read_through() -> None:
    from pettingzoo.utils import BaseWrapper

    from fastvec.pool.games import TurnBasedGame

    class DoubleRewards(BaseWrapper):
        @property
        def rewards(self) -> dict:
            return {a: 2 * r for a, r in self.env.unwrapped.rewards.items()}

    plain, doubled = TurnBasedGame(TurnGame()), TurnBasedGame(DoubleRewards(TurnGame()))
    assert doubled.state is doubled.game and plain.state is plain.game
    wrapped = TurnBasedGame(pettingzoo.utils.OrderEnforcingWrapper(TurnGame()))
    assert wrapped.state is wrapped.game.unwrapped  # pass-through wrappers are skipped
    for game in (plain, doubled):
        game.reset(seed=0)
    _, r_plain, *_ = plain.step({"player_0": 2})
    _, r_doubled, *_ = doubled.step({"player_0": 2})
    assert r_doubled["player_1"] == 2 * r_plain["player_1"] == -1.0


@pytest.mark.ray
def test_games_on_ray_actors_count_games_in_calls_and_errors(ray_session: Any,
                                                             closing: Any) -> None:
    fns = game_fns(RelayGame, 3, num_agents=2) + [functools.partial(StrayAgentRelay,
                                                                    num_agents=2)]
    envs = fastvec.RayVecEnv(fns, num_actors=2)
    closing(envs)
    assert (envs.num_envs, envs.num_games, envs.agents) == (8, 4, ("runner_0", "runner_1"))
    obs, infos = envs.reset(seed=[10, 11, 12, 13])
    assert obs[::2, 0].tolist() == [10, 11, 12, 13] and infos["alive"].all()
    assert envs.get_attr("tag") == (10, 11, 12, 13)
    with pytest.raises(WorkerError, match="game 3 \\(actor 1\\).*reported agent 'stray'") as info:
        envs.step(np.zeros(8, np.int64))
    assert info.value.env_index == 3 and info.value.worker_index == 1


@pytest.mark.ray
def test_async_batches_on_ray_refuse_uneven_game_blocks(ray_session: Any) -> None:
    with pytest.raises(ValueError, match="num_games = 3 is not divisible by num_actors = 2"):
        fastvec.RayVecEnv(game_fns(RelayGame, 3, num_agents=2), num_actors=2, batch_size=3)
