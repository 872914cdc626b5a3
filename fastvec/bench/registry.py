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

    ``workloads``: the only workloads it can run (None: every one).  ``procs``: where
    its envs step, as the plot labels it ("in the trainer", "2 workers", "a process
    per env").
    """

    name: str
    about: str
    load: Callable[[], Builder]
    tier: str = "full"
    workloads: tuple[str, ...] | None = None
    envs: bool = True  # runs single-agent workloads
    games: bool = False  # runs multi-agent (game) workloads
    frame_stack: bool = False  # its builder takes frame_stack= (fastvec's vector envs)
    procs: str = ""

    def runs_on(self, workload: str) -> bool:
        """Whether this system can run ``workload``."""
        spec = WORKLOADS.get(workload)
        if spec is not None and not (self.games if spec.game else self.envs):
            return False
        return self.workloads is None or workload in self.workloads


SYSTEMS: dict[str, System] = {}


def system(
    name: str, about: str, tier: str = "full", workloads: tuple[str, ...] | None = None,
    envs: bool = True, games: bool = False, frame_stack: bool | None = None, procs: str = "",
) -> Callable[[Callable[[], Builder]], Callable[[], Builder]]:
    """Register a loader under ``name``; the loader may raise if its package is absent.

    ``envs`` / ``games``: whether it runs single-agent and multi-agent workloads;
    ``frame_stack``: whether its builder stacks a workload's frames in the records
    (fastvec's ``frame_stack``; default: for the ``fastvec-*`` systems); other systems
    get ``FrameStackObservation`` envs.  ``procs``: where its envs step (for the plot).
    """
    stacks = name.startswith("fastvec-") if frame_stack is None else frame_stack
    if tier not in TIERS:
        raise ValueError(f"expected tier in {TIERS}, got {tier!r}")

    def register(load: Callable[[], Builder]) -> Callable[[], Builder]:
        SYSTEMS[name] = System(name, about, load, tier, workloads, envs, games, stacks,
                               procs)
        return load

    return register
