"""The registry of the systems ``python -m fastvec.bench`` can measure.

``@system(...)`` registers a loader in :data:`SYSTEMS`; :mod:`fastvec.bench.systems`
and :mod:`fastvec.bench.atari_peers` hold the systems themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastvec.bench.drivers import Builder
from fastvec.bench.workloads import WORKLOADS

__all__ = ["SYSTEMS", "TIERS", "System", "system"]

TIERS = ("quick", "full", "named")


@dataclass(frozen=True)
class System:
    """A vector env to measure: ``load()`` imports it and returns a builder.

    ``workloads``: the only workloads it can run (None: every one).
    """

    name: str
    about: str
    load: Callable[[], Builder]
    tier: str = "full"
    workloads: tuple[str, ...] | None = None
    envs: bool = True  # runs single-agent workloads
    games: bool = False  # runs multi-agent (game) workloads

    def runs_on(self, workload: str) -> bool:
        """Whether this system can run ``workload``."""
        spec = WORKLOADS.get(workload)
        if spec is not None and not (self.games if spec.game else self.envs):
            return False
        return self.workloads is None or workload in self.workloads


SYSTEMS: dict[str, System] = {}


def system(
    name: str, about: str, tier: str = "full", workloads: tuple[str, ...] | None = None,
    envs: bool = True, games: bool = False,
) -> Callable[[Callable[[], Builder]], Callable[[], Builder]]:
    """Register a loader under ``name``; the loader may raise if its package is absent.

    ``envs`` / ``games``: whether it runs single-agent and multi-agent workloads.
    """
    if tier not in TIERS:
        raise ValueError(f"expected tier in {TIERS}, got {tier!r}")

    def register(load: Callable[[], Builder]) -> Callable[[], Builder]:
        SYSTEMS[name] = System(name, about, load, tier, workloads, envs, games)
        return load

    return register
