"""Steps and resets of some games (``env_ids`` naming whole games) on every backend: each
game named moves exactly as it would alone, the others do not move.

The reference is a ``SyncVecEnv`` of each game alone, stepped whole; the games are
the small numpy games of ``tests/support/games.py`` (parallel and turn-based).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from gymnasium.vector import AutoresetMode  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fastvec  # noqa: E402
from tests.support import backends  # noqa: E402
from tests.support.backends import LOCAL, RAY, SUBPROC, SYNC, merge_infos, merge_obs  # noqa: E402
from tests.support.cases import MODES  # noqa: E402
from tests.support.compare import assert_infos_equal, assert_obs_equal  # noqa: E402
from tests.support.games import RelayGame, TurnGame, game_fns  # noqa: E402

GAMES = {"relay": RelayGame, "turns": TurnGame}
NUM_GAMES = 3


PARAMS = [backends.param(b, game, mode, id=f"{game}-{mode.value}")
          for game in GAMES for mode in MODES for b in (SYNC, SUBPROC)]
PARAMS += [backends.param(LOCAL, "turns", AutoresetMode.NEXT_STEP, id="turns-next"),
           backends.param(RAY, "relay", AutoresetMode.SAME_STEP, id="relay-same")]


def rows_of(games: list[int], seats: int) -> np.ndarray:
    """The rows of ``games``, game by game in that order."""
    return np.concatenate([np.arange(g * seats, (g + 1) * seats) for g in games])


def batched(vec: Any, parts: list) -> Any:
    """The observation batches of single games, one after the other."""
    seats = len(vec.agents)
    return merge_obs(vec.single_observation_space,
                     [(np.arange(k * seats, (k + 1) * seats), part)
                      for k, part in enumerate(parts)], len(parts) * seats)


def merged(games: list[int], infos: list[dict], seats: int) -> dict:
    """One batch of infos of ``games`` (each game's ``infos`` of its own rows), typed by
    the lowest game that reports a key, as a batch of every game is."""
    at = {g: np.arange(k * seats, (k + 1) * seats) for k, g in enumerate(games)}
    by_game = dict(zip(games, infos, strict=True))
    return merge_infos([(at[g], by_game[g]) for g in sorted(games)], len(games) * seats)


@pytest.mark.usefixtures("fastvec_only")
@pytest.mark.parametrize("backend, game, mode", PARAMS)
def test_subset_steps_of_games_match_each_game_alone(backend, game, mode, make_envs):
    fns = game_fns(GAMES[game], NUM_GAMES)
    vec = make_envs(fns, autoreset_mode=mode)
    seats = len(vec.agents)
    games = st.lists(st.integers(0, NUM_GAMES - 1), min_size=1, max_size=NUM_GAMES, unique=True)

    @settings(max_examples=8 if backend == SYNC else 3, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**16), plan=st.lists(games, min_size=1, max_size=15))
    def run(seed: int, plan: list[list[int]]) -> None:
        alone = [fastvec.SyncVecEnv([fn], autoreset_mode=mode) for fn in fns]
        try:
            vec.reset(seed=seed)
            for g, env in enumerate(alone):
                env.reset(seed=seed + g)
            for t, chosen in enumerate(plan):
                where = f"step {t} of games {chosen}"
                ended = [g for g in chosen if alone[g]._buffers.needs_reset.any()]
                if mode == AutoresetMode.DISABLED and ended:
                    got = vec.reset(env_ids=rows_of(ended, seats))
                    want = [alone[g].reset() for g in ended]
                    assert_obs_equal(got[0], batched(vec, [w[0] for w in want]), where)
                    assert_infos_equal(got[1], merged(ended, [w[1] for w in want], seats),
                                       where)
                ids = rows_of(chosen, seats)
                batch = np.random.default_rng(seed + t).integers(0, 2, len(ids))
                got = vec.step(batch, env_ids=ids)
                want = [alone[g].step(batch[k * seats:(k + 1) * seats])
                        for k, g in enumerate(chosen)]
                assert_obs_equal(got[0], batched(vec, [w[0] for w in want]), f"{where}: obs")
                for part in (1, 2, 3):
                    assert_obs_equal(got[part], np.concatenate([w[part] for w in want]),
                                     f"{where}: result {part}")
                assert_infos_equal(got[4], merged(chosen, [w[4] for w in want], seats),
                                   f"{where}: infos")
        finally:
            for env in alone:
                env.close()

    run()


@pytest.mark.usefixtures("fastvec_only")
@pytest.mark.parametrize("backend", [backends.param(SYNC), backends.param(SUBPROC)])
def test_a_subset_must_name_whole_games(backend, make_envs):
    vec = make_envs(game_fns(RelayGame, NUM_GAMES))
    vec.reset(seed=0)
    seats = len(vec.agents)
    with pytest.raises(ValueError, match="every row of a game or none: game 1"):
        vec.step(np.zeros(1, np.int64), env_ids=[seats])
    with pytest.raises(ValueError, match="every row of a game or none"):
        vec.reset(env_ids=[0])
