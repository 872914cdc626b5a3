"""``tests/support/leaks.py``, the leak check after subprocess tests, sees what it is meant
to see: live workers (in every start method) and new ``/dev/shm`` entries."""

from __future__ import annotations

import os

import pytest

from tests.support import leaks
from tests.support.envs import ProbeEnv, make_fns


@pytest.mark.fastvec_only
@pytest.mark.subprocess
@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_leak_check_sees_live_workers(context, make_subproc):
    vec = make_subproc(make_fns(ProbeEnv, 3), num_workers=2, context=context)
    procs = vec.call("process")
    pids = {p["pid"] for p in procs}
    assert pids <= set(leaks.live_children()), f"workers {pids} not seen"
    everything = set(leaks.live_children(exclude_forkserver=False))
    assert pids <= everything
    if context == "forkserver":  # the workers' parent is the forkserver, left out
        parents = {p["ppid"] for p in procs}
        assert parents != {os.getpid()} and parents <= everything
        assert not parents & set(leaks.live_children())
    vec.close()
    assert leaks.wait_no_children(2.0) == []


@pytest.mark.skipif(not os.path.isdir(leaks.SHM_DIR), reason="no /dev/shm")
def test_leak_check_sees_new_shared_memory_entries():
    before = leaks.shm_entries()
    name = f"fastvec-leak-check-{os.getpid()}"
    fd = os.open(os.path.join(leaks.SHM_DIR, name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        assert leaks.shm_entries() - before == {name}
        assert leaks.wait_shm_released(before, 0.05) == {name}
    finally:
        os.close(fd)
        os.unlink(os.path.join(leaks.SHM_DIR, name))
    assert leaks.wait_shm_released(before, 0.05) == set()
