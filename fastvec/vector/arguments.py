"""The arguments of the vector envs' constructors and resets, checked and normalised."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from fastvec._kernels.stepping import Autoreset
from fastvec.vector.game_infos import check_whole_games

__all__ = ["async_vector_env_options", "mode_code", "parse_autoreset_mode", "reset_args",
           "reset_rows"]

_MODE_CODES = {
    AutoresetMode.NEXT_STEP: Autoreset.NEXT_STEP,
    AutoresetMode.SAME_STEP: Autoreset.SAME_STEP,
    AutoresetMode.DISABLED: Autoreset.DISABLED,
}


def parse_autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """``AutoresetMode`` from the enum, its value (``"NextStep"``) or name (``"next_step"``).

    Args:
        mode: An ``AutoresetMode``, or a string naming one; case and underscores
            do not matter.

    Returns:
        The ``AutoresetMode``.

    Raises:
        ValueError: ``mode`` names no mode (the message lists the accepted ones).

    Example:
        >>> parse_autoreset_mode("same_step")
        <AutoresetMode.SAME_STEP: 'SameStep'>
        >>> parse_autoreset_mode("Disabled") is AutoresetMode.DISABLED
        True
    """
    if isinstance(mode, AutoresetMode):
        return mode
    key = mode.replace("_", "").lower() if isinstance(mode, str) else None
    for candidate in AutoresetMode:
        if key in (candidate.value.lower(), candidate.name.replace("_", "").lower()):
            return candidate
    names = [m.value for m in AutoresetMode]
    raise ValueError(f"expected autoreset_mode to be an AutoresetMode or one of {names} "
                     f"(or 'next_step', 'same_step', 'disabled'), got {mode!r}")


def mode_code(mode: AutoresetMode) -> int:
    """The compiled kernels' code of an ``AutoresetMode``."""
    return int(_MODE_CODES[mode])


def reset_args(seed: Any, options: dict | None, num_envs: int, unit: str = "env"
               ) -> tuple[list, np.ndarray | None]:
    """Per-env seeds of ``seed``, and ``options["reset_mask"]`` checked (None if absent).

    As Gymnasium does, the mask is taken out of the caller's ``options`` dict.
    """
    seeds = _seeds(seed, num_envs, unit)
    mask = None
    if options is not None and "reset_mask" in options:
        mask = _reset_mask(options.pop("reset_mask"), num_envs)
    return seeds, mask


def reset_rows(seed: Any, options: dict | None, num_rows: int, seats: int = 1
               ) -> tuple[list, np.ndarray | None]:
    """Per-row seeds, and the reset mask taken out of ``options`` (as Gymnasium does).

    For games (``seats`` rows each), ``seed`` counts games (game ``g`` gets ``seed +
    g``) and the mask must select whole games; each row carries its game's seed.
    """
    if seats == 1:
        return reset_args(seed, options, num_rows)
    seeds, _ = reset_args(seed, None, num_rows // seats, "game")
    _, mask = reset_args(None, options, num_rows)
    if mask is not None:
        check_whole_games(mask, seats)
    return [seeds[row // seats] for row in range(num_rows)], mask


def _seeds(seed: Any, num_envs: int, unit: str = "env") -> list:
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return [int(seed) + i for i in range(num_envs)]
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ValueError(f"expected an int seed or a list of {num_envs} seeds (one per "
                         f"{unit}), got a list of {len(seeds)}")
    return seeds


def _reset_mask(mask: Any, num_envs: int) -> np.ndarray:
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
        raise ValueError("expected options['reset_mask'] to be a numpy bool array, got "
                         f"{getattr(mask, 'dtype', type(mask).__name__)}")
    if mask.shape != (num_envs,):
        raise ValueError(f"expected options['reset_mask'] of shape ({num_envs},), "
                         f"got {mask.shape}")
    if not mask.any():
        raise ValueError("expected options['reset_mask'] to select at least one env")
    return mask


def async_vector_env_options(num_workers: int | None, default_workers: Callable[[], int],
                             shared_memory: bool, worker: Callable | None,
                             max_concurrency: int | None, local_block: bool = False
                             ) -> int | None:
    """Gymnasium ``AsyncVectorEnv``'s options, taken so that its arguments carry over.

    ``max_concurrency`` caps the blocks that step at once (each steps its envs one
    after another, so at most that many envs step at once): the workers, and with
    ``local_block`` the trainer's block too, so one worker fewer.
    ``shared_memory=False`` and a custom ``worker`` cannot apply and each says so in
    a ``UserWarning``.  Returns the number of workers (None: the default).
    """
    if not shared_memory:
        warnings.warn("SubprocVecEnv always steps through shared memory: "
                      "shared_memory=False changes nothing", UserWarning, stacklevel=3)
    if worker is not None:
        warnings.warn("SubprocVecEnv's workers step their envs with compiled code through "
                      "shared memory: a custom AsyncVectorEnv worker function is ignored",
                      UserWarning, stacklevel=3)
    if max_concurrency is None:
        return num_workers
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, numbers.Integral) \
            or max_concurrency < 1:
        raise ValueError(f"expected max_concurrency to be a positive int or None, got "
                         f"{max_concurrency!r}")
    cap = int(max_concurrency) - bool(local_block)  # the trainer's block steps beside them
    if cap < 1:
        raise ValueError("expected max_concurrency >= 2 with local_block=True (the trainer's "
                         "block steps beside at least one worker), got "
                         f"{max_concurrency!r}; use local_block=False to step one block at a time")
    return min(default_workers() if num_workers is None else num_workers, cap)


def refuse_ended(needs_reset: np.ndarray, ids: np.ndarray | None, how: str) -> None:
    """In ``DISABLED`` mode: refuse to step envs whose episode ended (of ``ids``, or any).

    Raises:
        RuntimeError: some did; the message names them and says to reset them ``how``.
    """
    ended = needs_reset if ids is None else needs_reset[ids]
    if ended.any():
        done = (np.flatnonzero(ended) if ids is None else ids[ended]).tolist()
        raise RuntimeError(f"envs {done} ended their episodes and autoreset_mode is DISABLED: "
                           f"reset them with {how}")
