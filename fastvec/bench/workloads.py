"""The workloads of ``python -m fastvec.bench``: which env, how many, which tier.

The envs themselves are in :mod:`fastvec.bench.envs` (synthetic and CPU-bound
envs, Pong) and :mod:`fastvec.bench.games` (two-player games).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from fastvec.bench.envs import (
    ATARI_EXTRA,
    AtariLikeEnv,
    BlockEnv,
    DictObsEnv,
    HeavyEnv,
    InfoEnv,
    LongTailEnv,
    make_breakout,
    make_breakout_direct,
    make_pong,
    make_pong_direct,
)
from fastvec.bench.games import MULTIAGENT_EXTRA, DuelGame, HeavyDuelGame

__all__ = [
    "MULTIAGENT_EXTRA",
    "WORKLOADS",
    "WORKLOAD_ALIASES",
    "WORKLOAD_TIERS",
    "Workload",
    "Workloads",
    "stacked_env",
]


WORKLOAD_TIERS = ("quick", "full", "named")


@dataclass(frozen=True)
class Workload:
    """A benchmark workload: how to make one env, and how many to batch.

    ``tier``: ``quick`` runs by default, ``full`` with ``--full``, ``named`` only when
    named in ``--workloads``.  ``requires``: modules it imports (absent: the workload
    is reported unavailable, ``install`` says how to get them).
    """

    name: str
    make_env: Callable[[], gym.Env[Any, Any]]
    about: str
    num_envs: int = 16
    tier: str = "quick"
    requires: tuple[str, ...] = ()
    install: str = ""
    game: bool = False  # make_env returns a PettingZoo game: a row per agent
    frame_stack: int | None = None  # frames stacked by the vector env (fastvec's option)
    label: str = ""  # a panel's second title line in the plot: what the env is

    @property
    def quick(self) -> bool:
        """In the default (quick) run."""
        return self.tier == "quick"


def _atari(name: str, make_env: Callable[[], gym.Env[Any, Any]], about: str,
           frame_stack: int | None = None) -> Workload:
    """A named-only Atari workload of 8 envs, which needs the atari extra."""
    game = "Breakout" if name.startswith("breakout") else "Pong"
    label = f"real {game}, " + ("fastvec.atari's frame loop" if frame_stack
                                else "Gymnasium's Atari wrappers")
    return Workload(name, make_env, f"{about}; needs the atari extra: {ATARI_EXTRA}",
                    num_envs=8, tier="named", requires=("ale_py", "cv2"),
                    install=ATARI_EXTRA, frame_stack=frame_stack, label=label)


def stacked_env(make_env: Callable[[], gym.Env[Any, Any]], stack_size: int
                ) -> gym.Env[Any, Any]:
    """``FrameStackObservation(make_env(), stack_size)``: a frame-stack workload's env for
    the systems that do not stack frames themselves.
    """
    from gymnasium.wrappers import FrameStackObservation

    return FrameStackObservation(make_env(), stack_size)


def make_duel() -> Any:
    """The cheap two-player game of :mod:`fastvec.bench.games` (needs PettingZoo)."""
    return DuelGame()


def make_heavy_duel() -> Any:
    """The CPU-bound two-player game of :mod:`fastvec.bench.games` (needs PettingZoo)."""
    return HeavyDuelGame()

# Old names that scripts may still pass: looked up as the workload they now name.
WORKLOAD_ALIASES = {"atari": "atari-like"}


class Workloads(dict[str, Workload]):
    """The workloads by name.

    An old name (:data:`WORKLOAD_ALIASES`) finds its workload too, but only the current
    names are iterated.
    """

    def canonical(self, name: str) -> str:
        """The current name of ``name`` (itself, unless it is an alias)."""
        return WORKLOAD_ALIASES.get(name, name)

    def __missing__(self, name: str) -> Workload:
        if name in WORKLOAD_ALIASES:
            return self[WORKLOAD_ALIASES[name]]
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return super().__contains__(WORKLOAD_ALIASES.get(name, name) if isinstance(name, str)
                                    else name)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """``self[name]`` (an alias too), or ``default``."""
        return self[name] if name in self else default


# Env makers are module-level classes, functions or partials, so subprocess backends
# can pickle them.
WORKLOADS = Workloads({
    w.name: w
    for w in (
        Workload(
            "cartpole",
            functools.partial(gym.make, "CartPole-v1"),
            "gymnasium.make('CartPole-v1'): tiny float obs, real physics, default wrappers",
            label="CartPole-v1",
        ),
        Workload(
            "atari-like",
            AtariLikeEnv,
            "synthetic: uint8 (84, 84, 4) frames, Discrete(6), no game and no emulator "
            "(one pixel changes per step; formerly named 'atari')",
            label="synthetic 84x84x4 uint8 frames, no game",
        ),
        Workload(
            "dict",
            DictObsEnv,
            "Dict obs: image uint8 (64, 64, 3), vec float32 (32,), MultiBinary(8), Discrete(10)",
            label="synthetic Dict obs",
        ),
        Workload(
            "info", InfoEnv, "float32 (4,) obs, infos int, float, bool, float32 (3,) per step",
            label="synthetic, 4 infos per step",
        ),
        Workload(
            "heavy",
            HeavyEnv,
            "float32 (4,) obs, Discrete(2); each step burns ~300 us of CPU (lognormal, sigma 0.1)",
            num_envs=8,
            tier="full",
        ),
        Workload(
            "jitter",
            LongTailEnv,
            "float32 (4,) obs, Discrete(2); step CPU cost lognormal, mean 300 us, sigma 1.0",
            num_envs=8,
            tier="full",
        ),
        Workload(
            "block10ms",
            BlockEnv,
            "float32 (4,) obs, Discrete(2); each step burns ~2.5 ms of CPU (lognormal, "
            "sigma 0.1): ~10 ms per block of 4 envs, where a remote call per block pays",
            num_envs=8,
            tier="named",
        ),
        _atari("pong", make_pong,
               "ALE/Pong-v5 (frameskip 1) + AtariPreprocessing (frame skip 4, 84x84 gray, "
               "noop reset 30) + FrameStackObservation(4): uint8 (4, 84, 84), Discrete(6)"),
        _atari("pong-direct", make_pong_direct,
               "pong as fastvec.atari runs it (bit-identical; the frame loop calls the "
               "emulator directly; fastvec's systems stack the frames in the records, the "
               "others get FrameStackObservation)", frame_stack=4),
        _atari("breakout", make_breakout,
               "ALE/Breakout-v5 through pong's Gymnasium pipeline: uint8 (4, 84, 84), "
               "Discrete(4)"),
        _atari("breakout-direct", make_breakout_direct,
               "breakout as fastvec.atari runs it (bit-identical)", frame_stack=4),
        Workload(
            "duel",
            make_duel,
            "a two-player parallel PettingZoo game, 16 games = 32 rows: float32 (8,) obs, "
            "Discrete(3), seeded episodes; rates count agent-steps",
            num_envs=16,
            tier="full",
            requires=("pettingzoo",),
            install=MULTIAGENT_EXTRA,
            game=True,
        ),
        Workload(
            "duel-heavy",
            make_heavy_duel,
            "the duel game, 8 games = 16 rows, each game step burns ~300 us of CPU "
            "(lognormal, sigma 0.1)",
            num_envs=8,
            tier="full",
            requires=("pettingzoo",),
            install=MULTIAGENT_EXTRA,
            game=True,
        ),
    )
})
