"""A Ray head for the test run, outside this process's tree of children.

``ray.init()`` would start Ray's daemons as children of the test process, and
the leak checks (``tests/support/leaks.py``) would then find them after every test.
``ray start --head`` daemonizes them instead; they are found again by their
temp dir (unique per run, in every Ray process's command line) and stopped by
:func:`stop`.  Every address is 127.0.0.1 and Ray runs in its single-machine
mode (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), so nothing listens on or talks
to the network; token authentication stays on, with a token of the run's own.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tests.support import leaks

__all__ = ["LOOPBACK_ENV", "processes", "set_environment", "start", "stop"]

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
START_SECONDS = 60


def set_environment() -> None:
    """Before Ray is imported: single-machine mode, and token authentication with a token
    of this test run's own (``RAY_AUTH_TOKEN``), which the head and every driver share."""
    for key, value in {**LOOPBACK_ENV, "RAY_AUTH_MODE": "token",
                       "RAY_AUTH_TOKEN": secrets.token_hex(32)}.items():
        os.environ.setdefault(key, value)


def start(num_cpus: int = 2) -> tuple[str, str]:
    """Start a head with ``num_cpus`` CPUs; ``(address, temp_dir)``."""
    temp_dir = tempfile.mkdtemp(prefix="ray-tests-", dir="/tmp")  # short: socket paths
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
           f"--num-cpus={num_cpus}", "--node-ip-address=127.0.0.1", "--port=0",
           "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=START_SECONDS,
                            env={**os.environ, **LOOPBACK_ENV}, start_new_session=True)
    if result.returncode:
        stop(temp_dir)
        raise RuntimeError(f"ray start failed:\n{result.stdout}\n{result.stderr}")
    with open(os.path.join(temp_dir, "ray_current_cluster")) as f:
        address = f.read().strip()
    return address, temp_dir


def processes(temp_dir: str) -> list[int]:
    """Pids of the processes of the head started in ``temp_dir``."""
    return sorted(info.pid for info in leaks._processes().values()
                  if temp_dir in info.cmdline)


def stop(temp_dir: str, grace: float = 2.0) -> None:
    """Stop every process of the head in ``temp_dir`` (SIGTERM, then SIGKILL); remove it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in processes(temp_dir):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        while processes(temp_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
    shutil.rmtree(temp_dir, ignore_errors=True)
