"""The benchmark behind ``python -m fastvec.bench``: env-steps per second of vector envs.

- :mod:`fastvec.bench.cli`: the command: options, measuring in fresh processes, the run.
- :mod:`fastvec.bench.systems`: the vector envs it can measure, each behind a driver.
- :mod:`fastvec.bench.drivers`: the drivers, one per vector env API, and the policy
  they burn between receiving a batch and sending its actions (``--policy-us``).
- :mod:`fastvec.bench.workloads`: the workloads: which env, how many, which tier.
- :mod:`fastvec.bench.envs`: their synthetic and CPU-bound envs and the real-game
  ``pong`` (importable by worker processes by module path);
  :mod:`fastvec.bench.games`: the two-player games.
- :mod:`fastvec.bench.report`: results: the table, JSON and plot.
"""

from __future__ import annotations

from fastvec.bench.cli import main, measure, run
from fastvec.bench.report import BASELINES, Cell, format_table, ratio, write_json, write_plot
from fastvec.bench.systems import SYSTEMS, Builder, Driver, System, system

__all__ = [
    "BASELINES",
    "SYSTEMS",
    "Builder",
    "Cell",
    "Driver",
    "System",
    "format_table",
    "main",
    "measure",
    "ratio",
    "run",
    "system",
    "write_json",
    "write_plot",
]
