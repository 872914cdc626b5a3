"""Processes by pid, as ``/proc`` shows them, with their start time (a pid may be reused)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["cmdline", "descendants", "running", "start_time", "timer", "wait_gone"]


@contextmanager
def timer() -> Iterator[list[float]]:
    """``with timer() as took:`` ... ``took[0]`` is the elapsed time in seconds."""
    took = [float("nan")]
    start = time.monotonic()
    try:
        yield took
    finally:
        took[0] = time.monotonic() - start


def _stat(pid: int) -> tuple[str, int, int] | None:
    """State, parent pid and start time of ``pid`` from ``/proc``, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def running(pid: int, started: int | None = None) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead), the same one if ``started``."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z" and (started is None or stat[2] == started)


def descendants(root: int) -> dict[int, int]:
    """Live descendants of ``root``: pid -> start time (to tell a reused pid)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and stat[0] != "Z":
                children.setdefault(stat[1], []).append(int(name))
    found: dict[int, int] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        stat = _stat(pid)
        if stat is not None:
            found[pid] = stat[2]
            stack.extend(children.get(pid, []))
    return found


def wait_gone(pids: dict[int, int], timeout: float) -> list[int]:
    """Wait until none of ``pids`` (pid -> start time) runs; return those still running."""
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid, started in pids.items() if running(pid, started)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


def start_time(pid: int) -> int | None:
    """``pid``'s start time (clock ticks since boot), None if it is gone."""
    stat = _stat(pid)
    return None if stat is None else stat[2]
