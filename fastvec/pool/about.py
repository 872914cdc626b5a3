"""What a block of envs built: its spaces, metadata, render mode, games' agents.

Every place envs run (this process, a worker, a Ray actor) describes what it
built as an :class:`About`, and the pool checks that the blocks agree
(:func:`check_blocks`) before it lays out the batch: action spaces, agents,
games or envs, and observation spaces unless ``observation_mode`` says
otherwise.  A block that cannot be batched is the user's mistake: a
``SpacesMismatchError`` (a ``ValueError``) naming the env or game.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from fastvec.errors import SpacesMismatchError
from fastvec.pool.games import is_game, unit_spaces
from fastvec.spaces.frame_stack import FrameStack, stacked_space

__all__ = ["About", "check_blocks", "describe", "mixed_message", "stacked"]


class About(NamedTuple):
    """What a block built: the first env's spaces, metadata and render mode, every env's
    ``(observation_space, action_space, agents)`` (for checking), and for games the
    agent of each seat (None for single-agent envs).
    """

    observation_space: Any
    action_space: Any
    metadata: dict
    render_mode: str | None
    env_spaces: list[tuple[Any, Any, tuple[str, ...]]]
    agents: tuple[str, ...] | None = None


def describe(envs: list, first: int = 0) -> About:
    """What a block of envs (or games) is: the first one's spaces, metadata, render mode,
    every one's spaces and agents (for checking), and the agent of each seat of a game.

    Raises:
        SpacesMismatchError: a game's agents have different spaces, or it has none; the
            message names the game by its index in the vector env (``first`` is the
            block's first).
    """
    env_spaces = []
    games = is_game(envs[0])
    for k, env in enumerate(envs):
        if is_game(env) != games:
            raise SpacesMismatchError(mixed_message(first + k, is_game(env), first))
        try:
            env_spaces.append(unit_spaces(env))
        except SpacesMismatchError as exc:
            raise SpacesMismatchError(f"game {first + k}: {exc}") from None
    obs_space, act_space, agents = env_spaces[0]
    return About(obs_space, act_space, dict(getattr(envs[0], "metadata", {}) or {}),
                 getattr(envs[0], "render_mode", None), env_spaces,
                 agents if is_game(envs[0]) else None)


def stacked(about: About, frame_stack: FrameStack | None) -> About:
    """``about`` as the vector env sees it with ``frame_stack``: stacked observation spaces.

    Raises:
        ValueError: games (frames are stacked for single-agent envs), or a space whose
            frames cannot be kept in a record.
    """
    if frame_stack is None:
        return about
    if about.agents is not None:
        raise ValueError("frame_stack stacks the frames of single-agent envs, not of "
                         "PettingZoo games")
    env_spaces = [(stacked_space(obs, frame_stack), act, agents)
                  for obs, act, agents in about.env_spaces]
    return about._replace(observation_space=env_spaces[0][0], env_spaces=env_spaces)


def check_blocks(abouts: list[About], first: int = 0, same_obs: bool = True,
                 hint: str = "") -> None:
    """Raise unless the blocks' envs agree: action spaces, agents, games or envs, and
    observation spaces too with ``same_obs`` (``hint`` ends that message).

    ``abouts``: what each block built (:class:`About`), in order; their envs are numbered from
    ``first``.
    """
    start = first
    for about in abouts:
        if (about.agents is None) != (abouts[0].agents is None):
            raise SpacesMismatchError(mixed_message(start, about.agents is not None, first))
        start += len(about.env_spaces)
    expected = abouts[0].env_spaces[0]
    triples = [triple for about in abouts for triple in about.env_spaces]
    for index, (obs_space, act_space, agents) in enumerate(triples, start=first):
        obs_differs = same_obs and obs_space != expected[0]
        if obs_differs or act_space != expected[1]:
            raise SpacesMismatchError(
                f"env {index} has spaces ({obs_space}, {act_space}); expected "
                f"({expected[0]}, {expected[1]}) as env {first}{hint if obs_differs else ''}")
        if agents != expected[2]:
            raise SpacesMismatchError(f"env {index} has agents {agents}; expected "
                                      f"{expected[2]} as env {first}")


def mixed_message(index: int, game: bool, first: int) -> str:
    """The error for env function ``index`` returning a game where ``first`` did not, or
    the other way round.
    """
    kinds = ("a PettingZoo game", "a Gymnasium env")
    return (f"expected every env function to return a game, or none of them: env {index} "
            f"returned {kinds[not game]}, env {first} {kinds[game]}")
