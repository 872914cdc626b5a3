"""The command line of ``python -m fastvec.bench``.

Its options, the tiers of workloads and systems it defaults to, and its ``--help``,
whose lists are read from the registries (``WORKLOADS``, ``SYSTEMS``) so that they
cannot drift from them.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

from fastvec.bench.systems import SYSTEMS
from fastvec.bench.workloads import WORKLOAD_ALIASES, WORKLOADS

__all__ = ["parse_args"]


def _names(kind: str, known: dict[str, Any], aliases: dict[str, str] | None = None
           ) -> Callable[[str], list[str]]:
    """A parser of comma-separated names of ``known``.

    An old name in ``aliases`` (the workload ``atari``) becomes its current one
    (``atari-like``).
    """
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {kind} {unknown}; known: {', '.join(known)}")
        return list(dict.fromkeys((aliases or {}).get(n, n) for n in names))

    return parse


_EPILOG = """\
defaults (without --workloads / --systems):
  quick run, about a minute on 2 cores:
    workloads  {quick_w}
    systems    {quick_s}
  --full adds
    workloads  {full_w}
    systems    {full_s}
  only when named in --systems (many workers or Ray: heavy on a small machine):
    systems    {named_s}
  only when named in --workloads:
    workloads  {named_synthetic} (synthetic, no extra needed)
    workloads  {named_atari} (real Atari games)
{only_on}
the workload atari-like (synthetic 84x84x4 uint8 frames, no game) was named atari;
--workloads still takes that name.
optional systems whose package is absent are skipped with a note: sb3-subproc
(pip install stable-baselines3), pufferlib-* (pip install pufferlib), envpool
(pip install envpool), ale-vector (the atari extra), supersuit* (pip install -e
".[compare]"), fastvec-ray* (pip install -e ".[ray]"). The Atari workloads need
the atari extra: pip install -e ".[atari]" (ale-py, which ships the ROMs, and
opencv-python-headless), the duel workloads the multiagent extra (pip install -e
".[multiagent]"); without them they are skipped with a note.
--policy-us N: the trainer burns N us of CPU per batch of all num_envs actions,
as a policy forward pass would, between receiving a batch and sending its
actions (sync systems: before each step). A driver handing out a smaller batch
(recv of half the envs) burns N * batch / num_envs, so per env-step the policy
costs the same on every system. Async batches pay off when this work overlaps
with the workers' stepping (e.g. --workloads heavy --policy-us 2000).
heavy, jitter and --policy-us burn CPU by a loop calibrated once per run; set
FASTVEC_BENCH_SPIN_RATE (loop iterations per us, printed in the JSON) to reuse
a calibration and compare runs.
method and dated results: benchmarks/README.md in the source tree.
"""


def _defaults() -> dict[str, list[str]]:
    """The workloads (``quick_w``...) and systems (``quick_s``...) of each tier."""
    tiers: dict[str, list[str]] = {}
    for tier in ("quick", "full", "named"):
        tiers[f"{tier}_w"] = [w.name for w in WORKLOADS.values() if w.tier == tier]
        tiers[f"{tier}_s"] = [s.name for s in SYSTEMS.values() if s.tier == tier]
    return tiers


def _epilog(tiers: dict[str, list[str]]) -> str:
    """The help's epilog, its lists read from the registries (so they cannot drift)."""
    named = [WORKLOADS[w] for w in tiers["named_w"]]
    restricted: dict[tuple[str, ...], list[str]] = {}
    for s in SYSTEMS.values():
        if s.workloads is not None:
            restricted.setdefault(s.workloads, []).append(s.name)
    only_on = "\n".join(f"{' and '.join(names)} run only on {', '.join(only)}."
                        for only, names in restricted.items())
    lists = {k: ", ".join(v) for k, v in tiers.items()}
    return _EPILOG.format(
        **lists, only_on=only_on,
        named_synthetic=", ".join(w.name for w in named if not w.requires),
        named_atari=", ".join(w.name for w in named if "ale_py" in w.requires))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line; ``--child`` is the hidden entry point of one measurement."""
    tiers = _defaults()
    p = argparse.ArgumentParser(
        prog="python -m fastvec.bench",
        description="Env-steps per second of vector envs on a few workloads (median of repeats), "
        "with the p50 and p99 duration of one batched step.",
        epilog=_epilog(tiers),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = p.add_argument
    # fmt: off
    add("--workloads", type=_names("workloads", WORKLOADS, WORKLOAD_ALIASES),
        help=f"comma-separated subset of {','.join(WORKLOADS)} "
             "(default: the quick ones, or all but the named-only ones with --full)")
    add("--systems", type=_names("systems", SYSTEMS),
        help=f"comma-separated subset of {','.join(SYSTEMS)} "
             "(default: the quick ones, or all but the named-only ones with --full)")
    add("--full", action="store_true",
        help="default to every workload and every system except the named-only ones")
    add("--policy-us", type=float, default=0.0, metavar="N",
        help="a policy in the loop: burn N us of CPU in the trainer per batch of all "
             "num_envs actions (calibrated like heavy), between receiving a batch and "
             "sending its actions; a batch of k envs burns N * k / num_envs, so per "
             "env-step the policy costs the same on every system (default: 0)")
    add("--repeats", type=int, default=3, help="interleaved rounds per workload (default: 3)")
    add("--seconds", type=float, default=0.3, help="timed window per measurement (default: 0.3)")
    add("--warmup", type=float, default=0.1, help="untimed seconds before it (default: 0.1)")
    add("--seed", type=int, default=0, help="seed of the envs and of the actions (default: 0)")
    add("--json", metavar="PATH", help="write per-repeat figures, medians and machine info")
    add("--plot", metavar="PATH", help="write a PNG bar chart (needs matplotlib)")
    add("--list", action="store_true", help="describe the workloads and systems, then exit")
    add("--child", nargs=2, metavar=("SYSTEM", "WORKLOAD"), help=argparse.SUPPRESS)
    # fmt: on
    args = p.parse_args(argv)
    if args.workloads is None:
        args.workloads = tiers["quick_w"] + (tiers["full_w"] if args.full else [])
    if args.systems is None:
        args.systems = tiers["quick_s"] + (tiers["full_s"] if args.full else [])
    if args.repeats < 1 or args.seconds <= 0 or args.warmup < 0 or args.policy_us < 0:
        p.error("need --repeats >= 1, --seconds > 0, --warmup >= 0 and --policy-us >= 0")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        p.error("--plot needs matplotlib: pip install matplotlib (or pip install -e '.[bench]')")
    return args
