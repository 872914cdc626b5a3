"""What the self-play trainers share: the training loop, their settings, the vector envs.

One loop trains every trainer: :func:`run` collects a rollout from a vector env of
turn-based games driven by a :class:`fastvec.selfplay.League`, updates, takes
snapshots, drops the retired ones and checks the learner every so often.
:func:`train` wraps it for the board games (``selfplay_tictactoe.py``,
``selfplay_connect_four.py``): the league, the PPO update, the final games, the
report and the outputs.  A board game trainer keeps only its network, its
:class:`Checks` and its defaults (its ``Args``, a :class:`BoardSettings`);
``selfplay_poker.py`` runs :func:`run` with an update of its own.  The rollout, the
advantages per row and the PPO update are in ``selfplay_ppo.py``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from selfplay_ppo import PPO, Openings, Rollout, collect, train_ppo  # beside this file
from torch import nn

from fastvec.multiagent import make_multiagent
from fastvec.selfplay import PFSP, League, RandomPlayer, plot_history

BACKENDS = ("local", "subproc", "sync", "plain")
"""``local``: the trainer steps half the games and one worker process the other half;
``subproc``: two worker processes; ``sync``: all in the trainer; ``plain``: PettingZoo's
games stepped one by one in a Python loop, without fastvec (for comparison)."""


@dataclass(kw_only=True)
class Settings(PPO):
    """What :func:`run` reads; each trainer's ``Args`` extends it and gives every default."""

    num_games: int
    total_steps: int  # agent-steps: moves of every player in every game
    backend: str  # see BACKENDS
    seed: int
    num_steps: int  # env steps per rollout
    explore: float  # the learner's move is uniformly random with this probability
    snapshot_every: int  # learner steps between snapshots
    max_snapshots: int
    eval_every: int  # agent-steps between checks

    @classmethod
    def parse(cls, argv: list[str] | None, doc: str | None = None) -> Any:
        """A flag for every field; the settings the command line gives (``argv``, or
        ``sys.argv``), built once here; ``doc``'s first line describes the command."""
        parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
        for arg in dataclasses.fields(cls):
            flag = "--" + arg.name.replace("_", "-")
            if arg.type == "bool":
                parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                    default=arg.default, help=f"default: {arg.default}")
                continue
            kind = {"int": int, "float": float, "str": str}[arg.type]
            parser.add_argument(flag, type=kind, default=arg.default,
                                choices=BACKENDS if arg.name == "backend" else None,
                                help=f"default: {arg.default!r}")
        return cls(**vars(parser.parse_args(argv)))


@dataclass(kw_only=True)
class BoardSettings(Settings):
    """What :func:`train` reads besides: the league's shares, the openings, the outputs."""

    self_play_share: float  # games with the learner in both seats
    snapshot_share: float  # games against a snapshot (PFSP)
    random_share: float  # games against the random player
    opening_plies: int  # each game opens with 0..opening_plies random moves (no samples)
    random_moves: float  # later moves are random with this probability (no samples)
    update_threads: int  # torch threads in the PPO update (the envs are idle then)
    export: str  # write the greedy policy as TorchScript here
    plot: str  # write the ratings and evaluation curves here (PNG)
    save_league: str  # write the league's state here (JSON)


# -- the vector envs -----------------------------------------------------------------

def game_fn(name: str) -> Any:
    """PettingZoo's ``env`` constructor of a classic game (turn-based)."""
    return importlib.import_module(f"pettingzoo.classic.{name}").env


def make_games(name: str, num_games: int, backend: str) -> Any:
    """``num_games`` games of ``name`` as one vector env of rows (or a plain loop)."""
    return make_rows(game_fn(name), num_games, backend)


def make_rows(fn: Callable[..., Any], num_games: int, backend: str, **kwargs: Any) -> Any:
    """``num_games`` games ``fn(**kwargs)`` as one vector env of rows on ``backend``."""
    if backend == "plain":
        return PlainGames(functools.partial(fn, **kwargs), num_games)
    vector = {"local": {"num_workers": 1, "local_block": True},
              "subproc": {"num_workers": 2}, "sync": {}}[backend]
    return make_multiagent(fn, num_games, backend="sync" if backend == "sync" else "subproc",
                           vector_kwargs=vector, **kwargs)


class PlainGames:
    """PettingZoo games stepped one by one, with the rows a fastvec vector env of games
    gives (``NEXT_STEP`` autoreset) for games that pay rewards only at their end.
    """

    def __init__(self, fn: Any, num_games: int) -> None:
        self.games = [fn() for _ in range(num_games)]
        self.agents = tuple(self.games[0].possible_agents)
        seats = len(self.agents)
        self.num_games, self.num_envs = num_games, num_games * seats
        self.game_of_row = np.repeat(np.arange(num_games), seats)
        self.seat_of_row = np.tile(np.arange(seats), num_games)
        self.over = np.zeros(num_games, dtype=bool)

    def reset(self, seed: int | None = None) -> tuple[dict, dict]:
        for g, game in enumerate(self.games):
            game.reset(seed=None if seed is None else seed + g)
        self.over[:] = False
        return self._observe()

    def step(self, actions: np.ndarray) -> tuple:
        rewards = np.zeros(self.num_envs)
        ended = np.zeros(self.num_envs, dtype=bool)
        seats = len(self.agents)
        for g, game in enumerate(self.games):
            if self.over[g]:
                game.reset()
                self.over[g] = False
                continue
            mover = self.agents.index(game.agent_selection)
            game.step(int(actions[g * seats + mover]))
            if all(game.terminations.values()) or all(game.truncations.values()):
                self.over[g] = True
                ended[g * seats:(g + 1) * seats] = True
                rewards[g * seats:(g + 1) * seats] = [game.rewards[a] for a in self.agents]
        obs, infos = self._observe(ended)
        return obs, rewards, ended, np.zeros_like(ended), infos

    def _observe(self, ended: np.ndarray | None = None) -> tuple[dict, dict]:
        seen = [game.observe(agent) for game in self.games for agent in self.agents]
        obs = {key: np.stack([o[key] for o in seen]) for key in seen[0]}
        active = np.array([not self.over[g] and game.agent_selection == agent
                           for g, game in enumerate(self.games) for agent in self.agents])
        alive = ~np.repeat(self.over, len(self.agents))
        if ended is not None:
            alive |= ended
        return obs, {"alive": alive, "active": active}

    def close(self) -> None:
        for game in self.games:
            game.close()


def make_league(envs: Any, settings: BoardSettings, fixed_share: float | None = None) -> League:
    """The board games' league: self-play, snapshots drawn by PFSP and a random player, in
    the shares ``settings`` gives (the fixed opponents': ``fixed_share`` if given), a
    snapshot every ``settings.snapshot_every`` learner steps."""
    return League.from_env(
        envs, opponents={"random": RandomPlayer(seed=settings.seed)},
        shares={"self_play": settings.self_play_share, "snapshots": settings.snapshot_share,
                "fixed": settings.random_share if fixed_share is None else fixed_share},
        sampling=PFSP("hard", power=2.0, floor=0.05), snapshot_every=settings.snapshot_every,
        max_snapshots=settings.max_snapshots, seed=settings.seed)


class Greedy(nn.Module):
    """What ``--export`` writes: the learner's masked logits, no value head."""

    def __init__(self, agent: nn.Module) -> None:
        super().__init__()
        self.agent = copy.deepcopy(agent).eval()

    def forward(self, observation: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
        """Logits [B, A] of boards [B, H, W, 2] (float32) with masks [B, A] (bool)."""
        return self.agent(observation.float(), action_mask.to(torch.bool))[0]


def greedy_player(agent: nn.Module) -> Any:
    """The greedy learner as a player ``act(observation, action_mask) -> actions``."""
    def act(observation: np.ndarray, action_mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = agent(torch.as_tensor(observation, dtype=torch.float32),
                              torch.as_tensor(action_mask, dtype=torch.bool))
        return logits.argmax(1).numpy()
    return act


def write_outputs(settings: BoardSettings, agent: nn.Module, league: League,
                  title: str) -> None:
    """``--export`` (TorchScript), ``--plot`` (``plot_history``), ``--save-league``."""
    if settings.export:
        torch.jit.save(torch.jit.script(Greedy(agent)), settings.export)
        print(f"greedy policy written to {settings.export} (TorchScript)")
    if settings.plot:
        plot_history(league, settings.plot, title)
        print(f"ratings and evaluations plotted to {settings.plot}")
    if settings.save_league:
        league.save(settings.save_league)


def report_throughput(agent_steps: int, seconds: float, clock: dict[str, float],
                      backend: str) -> None:
    """Print the loop's agent-steps/s and the share of it spent in the vector env."""
    print(f"throughput: {agent_steps / seconds:,.0f} agent-steps/s over the whole training loop "
          f"(backend {backend}); vector env {clock['env']:.1f} s "
          f"({clock['env'] / seconds:.0%}), evaluation {clock['eval']:.1f} s "
          f"({clock['eval'] / seconds:.0%})")


# -- the training loop -----------------------------------------------------------------

def run(envs: Any, league: League, agent: nn.Module, settings: Settings,
        update: Callable[[Rollout, float], Any], check: Callable[[int, float], Any], *,
        openings: Openings | None = None,
        last_check: bool = False) -> tuple[int, float, dict[str, float]]:
    """Every trainer's loop, until ``settings.total_steps`` agent-steps: a check every
    ``settings.eval_every`` agent-steps (the first at 0), then a rollout, ``update(roll,
    progress)``, a snapshot when one is due, the retired ones dropped.  With
    ``last_check`` the final agent is checked too if the last check came before the end.

    ``check(agent_steps, seconds)`` gets the agent-steps and the seconds since the loop
    began.  Returns the agent-steps, the loop's seconds (without a last check) and the
    clock: seconds in the envs' ``step`` (``env``) and in the checks (``eval``).
    """
    generator = torch.Generator().manual_seed(settings.seed)
    clock = {"env": 0.0, "eval": 0.0}
    snapshots: dict[str, nn.Module] = {}
    obs, infos = envs.reset(seed=settings.seed)
    roll = Rollout.zeros(settings.num_steps, envs.num_envs, obs["observation"].shape[1:],
                         obs["action_mask"].shape[1],
                         torch.from_numpy(obs["observation"]).dtype)
    agent_steps, next_eval, checked = 0, 0, -1
    start = time.perf_counter()

    def timed_check() -> None:
        nonlocal checked
        began = time.perf_counter()
        check(agent_steps, began - start)
        clock["eval"] += time.perf_counter() - began
        checked = agent_steps

    while True:
        if agent_steps >= next_eval:
            timed_check()
            next_eval += settings.eval_every
        if agent_steps >= settings.total_steps:
            break
        progress = agent_steps / settings.total_steps
        obs, infos, moves = collect(envs, league, agent, snapshots, roll, obs, infos,
                                    generator, clock, openings, settings.explore)
        agent_steps += moves
        update(roll, progress)
        if league.snapshot_due:
            snapshots[league.add_snapshot()] = copy.deepcopy(agent).requires_grad_(False)
        for policy in league.pop_retired():
            del snapshots[policy]
    elapsed = time.perf_counter() - start
    if last_check and checked != agent_steps:
        timed_check()
    return agent_steps, elapsed, clock


class Checks:
    """A board game trainer's own part of :func:`train`: its league's opponents and
    anchors, its checks along the way and its final games, on envs of its own."""

    legend = ""  # printed before the first check and before the final results
    final_games = "the final games"  # what the final games were, for the report
    envs: Any = None  # the envs the checks play on, opened by setup

    def setup(self, envs: Any) -> League:
        """The league over the training ``envs``, with the trainer's opponents and anchors."""
        raise NotImplementedError

    def check(self, agent: nn.Module, agent_steps: int, seconds: float) -> None:
        """Check the learner along the way and print a line."""
        raise NotImplementedError

    def final(self, agent: nn.Module) -> dict[str, Any]:
        """Play the final games; their results by opponent."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the envs the checks play on."""
        if self.envs is not None:
            self.envs.close()


def train(settings: BoardSettings, game: str, make_agent: Callable[[], nn.Module],
          checks: Checks, title: str) -> dict[str, Any]:
    """Train on ``settings.num_games`` games of ``game`` (PettingZoo classic) with PPO,
    check along the way, play the final games, report, write the outputs; the figures."""
    torch.manual_seed(settings.seed)
    torch.set_num_threads(1)
    envs = make_games(game, settings.num_games, settings.backend)
    try:
        league = checks.setup(envs)
        agent = make_agent()
        optimizer = torch.optim.Adam(agent.parameters(), lr=settings.learning_rate, eps=1e-5)
        openings = Openings(settings.opening_plies, settings.num_games, settings.seed,
                            settings.random_moves) \
            if settings.opening_plies or settings.random_moves else None

        def update(roll: Rollout, progress: float) -> None:
            train_ppo(agent, optimizer, roll, settings, progress, settings.update_threads)

        if checks.legend:
            print(checks.legend, flush=True)
        agent_steps, elapsed, clock = run(
            envs, league, agent, settings, update,
            lambda steps, seconds: checks.check(agent, steps, seconds), openings=openings)
        began = time.perf_counter()
        results = checks.final(agent)
        final_seconds = time.perf_counter() - began
    finally:
        envs.close()
        checks.close()
    print(f"\n{agent_steps:,} agent-steps in {elapsed:.1f} s of training "
          f"(+{final_seconds:.1f} s for {checks.final_games})")
    report_throughput(agent_steps, elapsed, clock, settings.backend)
    if checks.legend:
        print(checks.legend)
    for result in results.values():
        print(result.summary())
    print(league.table())
    write_outputs(settings, agent, league, title)
    return {"agent_steps": agent_steps, "seconds": elapsed, "results": results,
            "clock": clock, "agent": agent, "league": league}
