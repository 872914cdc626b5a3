"""What a test left behind: live worker processes and new ``/dev/shm`` entries.

Linux only (it reads ``/proc``).  The processes that count are this process's
descendants: its children, and the processes multiprocessing's forkserver forked
for it (with the forkserver start method, workers are the forkserver's children,
not ours).  The forkserver itself and the resource tracker are started once and
live until the interpreter exits; they are not leaks, and ``exclude_forkserver``
leaves them out.  A zombie (exited, not yet reaped) counts as live: nobody
waited for it.

``/dev/shm`` is shared by the whole machine and its entries name no owner: the
check compares before and after, so other programs creating entries meanwhile
(tests run in parallel processes, say) would be blamed on the test.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from dataclasses import dataclass

__all__ = [
    "ProcInfo",
    "describe",
    "kill_processes",
    "live_children",
    "shm_entries",
    "wait_no_children",
    "wait_shm_released",
]

SHM_DIR = "/dev/shm"
POLL_SECONDS = 0.02
# Long-lived helpers multiprocessing starts for this process (matched on the
# command line of a direct child).
_HELPER_MARKERS = (
    "from multiprocessing.forkserver import main",
    "from multiprocessing.resource_tracker import main",
)


@dataclass(frozen=True)
class ProcInfo:
    """One process, as ``/proc/<pid>/stat`` and ``cmdline`` show it."""

    pid: int
    ppid: int
    state: str
    comm: str
    cmdline: str


def _read(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:  # gone meanwhile
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
    return ProcInfo(pid, int(ppid), state, comm, cmdline)


def _processes() -> dict[int, ProcInfo]:
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _read(int(name))
            if info is not None:
                procs[info.pid] = info
    return procs


def _is_helper(info: ProcInfo) -> bool:
    return any(marker in info.cmdline for marker in _HELPER_MARKERS)


def live_children(exclude_forkserver: bool = True) -> list[int]:
    """Pids of this process's live (or unreaped) descendants, sorted.

    With ``exclude_forkserver``, multiprocessing's forkserver and resource tracker
    (direct children with their well-known command lines) are left out, but the
    processes the forkserver forked for us are not.
    """
    procs = _processes()
    by_parent: dict[int, list[ProcInfo]] = {}
    for info in procs.values():
        by_parent.setdefault(info.ppid, []).append(info)
    found: list[int] = []
    stack = [(child, 1) for child in by_parent.get(os.getpid(), [])]
    while stack:
        info, depth = stack.pop()
        if not (exclude_forkserver and depth == 1 and _is_helper(info)):
            found.append(info.pid)
        stack.extend((child, depth + 1) for child in by_parent.get(info.pid, []))
    return sorted(found)


def wait_no_children(timeout: float, exclude_forkserver: bool = True) -> list[int]:
    """Wait up to ``timeout`` seconds for :func:`live_children` to be empty; return
    what is still there (empty when all are gone).  Reaps nothing itself."""
    deadline = time.monotonic() + timeout
    while True:
        left = live_children(exclude_forkserver)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL_SECONDS)


def describe(pids: list[int]) -> str:
    """One line per pid: pid, parent, state, name and command line."""
    lines = []
    for pid in pids:
        info = _read(pid)
        if info is None:
            lines.append(f"  pid {pid}: gone")
        else:
            lines.append(f"  pid {pid} (parent {info.ppid}, state {info.state}, "
                         f"{info.comm}): {info.cmdline[:160]}")
    return "\n".join(lines)


def kill_processes(pids: list[int], timeout: float = 2.0) -> list[int]:
    """SIGKILL ``pids`` (so that one test's leak does not fail the next) and reap
    them; return those still present after ``timeout``.

    Children that multiprocessing started are reaped through it (so that their
    ``Process`` objects learn the exit code), other children with ``waitpid``.
    """
    started_by_mp = {p.pid for p in multiprocessing.active_children()}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left:
        multiprocessing.active_children()  # reaps the ones that exited
        for pid in list(left):
            if pid not in started_by_mp:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # not our child (a forkserver's), or reaped
                    pass
            if _read(pid) is None:
                left.remove(pid)
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
    return left


def shm_entries() -> set[str]:
    """Names in ``/dev/shm`` now (empty if there is no such directory)."""
    try:
        return set(os.listdir(SHM_DIR))
    except FileNotFoundError:
        return set()


def wait_shm_released(before: set[str], timeout: float) -> set[str]:
    """Entries of ``/dev/shm`` not in ``before`` that are still there after up to
    ``timeout`` seconds (entries other processes create and unlink at once, such as
    POSIX semaphores, are given that time to go)."""
    deadline = time.monotonic() + timeout
    while True:
        new = shm_entries() - before
        if not new or time.monotonic() >= deadline:
            return new
        time.sleep(POLL_SECONDS)
