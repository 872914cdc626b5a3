"""Ends the Ray that ``RayVecEnv`` started if the trainer dies without ``close()``.

Ray's processes outlive a trainer killed with SIGKILL: its raylet and workers
go, but agents it started (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``)
stay.  When ``RayVecEnv`` starts a Ray of its own, :func:`watch` starts a small
reaper process in a session of its own: while the trainer lives, it notes the
trainer's descendants that are Ray's (their command line names Ray), with their
start times so that a reused process id is never killed, every half second; once
the trainer is gone it kills those still running.  The trainer's other children
are left alone.  :func:`stop` ends the reaper after a normal shutdown.  Linux only (it
reads ``/proc``); elsewhere both are no-ops.

Run as ``python -m fastvec.pool.ray.reaper TRAINER_PID``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

__all__ = ["descendants", "stop", "watch"]

POLL_SECONDS = 0.5
_reaper: subprocess.Popen | None = None


def _stat(pid: int) -> tuple[int, int] | None:
    """``(parent pid, start time)`` of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19])  # ppid, starttime (fields 4 and 22 of stat)


def descendants(root: int, skip: int) -> dict[int, int]:
    """Every live descendant of ``root`` but ``skip``: process id -> start time."""
    children: dict[int, list[tuple[int, int]]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None:
                children.setdefault(stat[0], []).append((int(name), stat[1]))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid, started in children.get(todo.pop(), []):
            if pid != skip and pid not in found:
                found[pid] = started
                todo.append(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _stat(pid) is not None


def _is_ray(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"ray" in f.read().lower()
    except OSError:
        return False


def reap(trainer: int) -> None:
    """Note the trainer's Ray descendants until it is gone, then kill those still running."""
    me = os.getpid()
    known: dict[int, int] = {}
    while _alive(trainer) and os.getppid() == trainer:
        for pid, started in descendants(trainer, me).items():
            if pid not in known and _is_ray(pid):
                known[pid] = started
        time.sleep(POLL_SECONDS)
    for pid, started in known.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def watch() -> None:
    """Start the reaper for this process (once; Linux only)."""
    global _reaper
    if _reaper is not None or not os.path.isdir("/proc/self"):
        return
    _reaper = subprocess.Popen(
        [sys.executable, "-m", "fastvec.pool.ray.reaper", str(os.getpid())],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True)


def stop() -> None:
    """End the reaper (after Ray was shut down normally)."""
    global _reaper
    reaper, _reaper = _reaper, None
    if reaper is not None:
        reaper.kill()
        reaper.wait()


if __name__ == "__main__":
    reap(int(sys.argv[1]))
