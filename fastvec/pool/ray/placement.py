"""Where ``RayVecEnv``'s actors go: the ``b``-th node that can host them, never one just lost.

Each actor is pinned (strict node affinity) to one of the *eligible* nodes: alive
in Ray's view and with at least the resources the actor options ask for (a
``resources={"envs": 1}`` keeps actors off nodes without that resource, the head
node for instance).  Actor ``b`` goes to the ``b``-th of them, sorted by node id,
so blocks spread over the nodes.

Ray's view of a node lags behind the node: one whose raylet was killed stays
"alive" in ``ray.nodes()`` until its health checks fail, seconds later, and a
stopped (hung) one longer still.  So a node on which one of our actors died or
hung is *distrusted* for :data:`DISTRUST_SECONDS`: a replacement goes to a
trusted eligible node while there is one, whatever Ray says of the distrusted
node.  Where every eligible node is distrusted (one machine, where an env took
its actor down), the replacement goes to one of them: if it dies there too, the
caller distrusts that node again and asks again, until Ray declares the node dead
and another node joins, or the caller's deadline passes.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["DISTRUST_SECONDS", "Placement"]

DISTRUST_SECONDS = 180.0  # well above the ~65 s Ray's default health checks take to
# declare a lost node dead (5 missed checks, 3 s apart, 10 s timeout each)
POLL_SECONDS = 0.2  # how often ray.nodes() is asked while no node can host an actor


class Placement:
    """Chooses a node for each actor from ``ray.nodes()``; ``needs``: the resources one
    actor asks for (Ray's resource names: ``CPU``, ``GPU``, ``memory``, custom ones).
    """

    def __init__(self, ray: Any, needs: dict[str, float]) -> None:
        self._ray = ray
        self.needs = needs
        self._distrusted: dict[str, float] = {}  # node id -> when it was distrusted

    @classmethod
    def for_options(cls, ray: Any, options: dict[str, Any]) -> Placement:
        """A placement for actors made with Ray ``options`` (``num_cpus``, ``resources``...)."""
        needs = dict(options.get("resources") or {})
        for option, name in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
            if options.get(option):
                needs[name] = float(options[option])
        return cls(ray, needs)

    def eligible(self) -> list[str]:
        """The alive nodes that have the resources an actor needs, sorted by node id."""
        return sorted(node["NodeID"] for node in self._ray.nodes() if node.get("Alive")
                      and all(node.get("Resources", {}).get(name, 0.0) >= amount
                              for name, amount in self.needs.items()))

    def distrust(self, node: str | None) -> None:
        """An actor of ours died or hung on ``node``: place nothing there for a while."""
        if node is not None:
            self._distrusted[node] = time.monotonic()

    def trusted_nodes(self) -> list[str]:
        """The eligible nodes not distrusted, sorted by node id."""
        return [node for node in self.eligible() if self.trusted(node)]

    def trusted(self, node: str) -> bool:
        since = self._distrusted.get(node)
        return since is None or time.monotonic() - since > DISTRUST_SECONDS

    def choose(self, b: int, deadline: float) -> str:
        """The node for actor ``b``: the ``b``-th trusted eligible node, else the ``b``-th
        eligible one; waits (until ``deadline``) while no node is eligible.

        Raises:
            TimeoutError: no alive node could host the actor before ``deadline``.
        """
        while True:
            nodes = self.eligible()
            trusted = [node for node in nodes if self.trusted(node)]
            if trusted or nodes:
                choice = trusted or nodes
                return choice[b % len(choice)]
            if time.monotonic() > deadline:
                wanted = f" with {self.needs}" if self.needs else ""
                raise TimeoutError(f"no alive Ray node{wanted} to place it on")
            time.sleep(POLL_SECONDS)
