"""``observation_mode``: how the envs' observation spaces make the batched one.

As Gymnasium's ``SyncVectorEnv``/``AsyncVectorEnv`` take it:

- ``"same"`` (the default): every env has env 0's observation space; the batched
  space is ``batch_space(single, num_envs)``.
- ``"different"``: the envs' spaces may differ in their parameters (a ``Box``'s
  bounds, a ``Discrete``'s ``n``) but not in shapes and dtypes; the single space
  is env 0's and the batched space ``batch_differing_spaces`` of all of them.
- ``(observation_space, single_observation_space)``: the user's own two spaces;
  every env's space must have the single space's shapes and dtypes.

Every env writes its observations into the record layout of the single space
(``fastvec.spaces.layout``), and a worker lays out its records by its own first env's
space, so apart from ``"same"`` fastvec needs every env's space to have the
single space's *layout*: the same space types, ``Dict`` keys in the same order,
``Tuple`` lengths, and leaf shapes and dtypes.  Bounds may differ: records hold
values, not bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gymnasium import spaces
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector.utils import batch_differing_spaces

from fastvec.errors import SpacesMismatchError
from fastvec.spaces.layout import leaf_name

__all__ = ["ObservationMode", "check_observation_mode", "observation_spaces",
           "same_space_hint"]

ObservationMode = str | tuple[spaces.Space, spaces.Space]

_FUNDAMENTAL = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)

same_space_hint = ("; if the spaces differ on purpose (the same shapes and dtypes, other "
                   "bounds), use observation_mode='different'")


def check_observation_mode(mode: Any) -> None:
    """Refuse a mode that is none of the three, before any env is built.

    Raises:
        ValueError: ``mode`` is neither ``"same"``, ``"different"`` nor a pair
            (Gymnasium's message).
        TypeError: a pair whose items are not both spaces.
    """
    if isinstance(mode, tuple) and len(mode) == 2:
        if not all(isinstance(space, spaces.Space) for space in mode):
            raise TypeError("expected observation_mode=(observation_space, "
                            "single_observation_space), both Gymnasium spaces, got "
                            f"({type(mode[0]).__name__}, {type(mode[1]).__name__})")
        return
    if isinstance(mode, str) and mode in ("same", "different"):
        return
    # Gymnasium's words, which its own tests match
    raise ValueError("Invalid `observation_mode`, expected: 'same' or 'different' or tuple "
                     f"of single and batch observation space, actual got {mode} (the "
                     "tuple is (observation_space, single_observation_space))")


def observation_spaces(mode: ObservationMode, env_spaces: Sequence[spaces.Space],
                       games: bool = False, first: int = 0
                       ) -> tuple[spaces.Space, spaces.Space | None]:
    """``(single_observation_space, observation_space)`` for ``mode``.

    ``env_spaces``: every env's observation space, in order (env ``first`` first).
    The batched space is ``None`` for ``"same"`` (``batch_space`` of the single one,
    made by the vector env), whose checks are the caller's.

    Raises:
        ValueError: games with a mode other than ``"same"``.
        SpacesMismatchError: an env's space does not have the single space's layout
            (the message names the env and what differs).
    """
    if isinstance(mode, str) and mode == "same":
        return env_spaces[0], None
    if games:
        raise ValueError(f"observation_mode={mode!r} is for single-agent envs: a game's "
                         "agents share one observation space, so games need "
                         "observation_mode='same'")
    if isinstance(mode, tuple):
        batched, single = mode
        expected = "observation_mode's single_observation_space"
    else:
        single, batched = env_spaces[0], None
        expected = f"env {first}'s"
    for index, space in enumerate(env_spaces, start=first):
        difference = space_difference(single, space)
        if difference is not None:
            raise SpacesMismatchError(
                f"env {index} has observation space {space}, which does not match {expected} "
                f"{single} in shape and dtype ({difference}); with {_words(mode)} the "
                "envs' spaces may differ in their bounds, not in their shapes and dtypes")
    if batched is None:
        batched = batch_differing_spaces(list(env_spaces))
    return single, batched


def _words(mode: ObservationMode) -> str:
    if isinstance(mode, tuple):
        return "observation_mode=(observation_space, single_observation_space)"
    return f"observation_mode={mode!r}"


def space_difference(space: Any, other: Any,
                     path: tuple[str | int, ...] = ()) -> str | None:
    """What keeps ``other`` from sharing ``space``'s layout, or None when nothing does.

    Types, ``Dict`` keys (in order), ``Tuple`` lengths, leaf shapes and dtypes; a
    space with no record layout (``Text``, ``Graph``...) as Gymnasium's
    ``is_space_dtype_shape_equiv`` says (or ``==`` for a space it does not know).
    """
    where = leaf_name(path)
    if type(space) is not type(other):
        return f"{where} is a {type(other).__name__}, expected a {type(space).__name__}"
    if isinstance(space, spaces.Dict):
        keys, other_keys = list(space.spaces), list(other.spaces)
        if keys != other_keys:
            return f"{where} has keys {other_keys}, expected {keys} (in that order)"
        for key in keys:
            found = space_difference(space.spaces[key], other.spaces[key], (*path, key))
            if found is not None:
                return found
        return None
    if isinstance(space, spaces.Tuple):
        if len(space.spaces) != len(other.spaces):
            return f"{where} has {len(other.spaces)} items, expected {len(space.spaces)}"
        for index, (sub, other_sub) in enumerate(zip(space.spaces, other.spaces, strict=True)):
            found = space_difference(sub, other_sub, (*path, index))
            if found is not None:
                return found
        return None
    if isinstance(space, _FUNDAMENTAL):
        if space.shape != other.shape:
            return f"{where} has shape {other.shape}, expected {space.shape}"
        if space.dtype != other.dtype:
            return f"{where} has dtype {other.dtype}, expected {space.dtype}"
        return None
    try:
        same = bool(is_space_dtype_shape_equiv(space, other))
    except (NotImplementedError, TypeError):
        same = bool(space == other)
    return None if same else f"{where} is {other}, expected {space}"
