"""A worker process per block, stepping through shared memory and a futex barrier.

:mod:`~fastvec.pool.process.pool` (``ProcessPool``, the trainer's side),
:mod:`~fastvec.pool.process.workers` (the processes and the barrier),
:mod:`~fastvec.pool.process.procs` (one process and its pipe),
:mod:`~fastvec.pool.process.worker` (the worker's side),
:mod:`~fastvec.pool.process.protocol` (what both sides say),
:mod:`~fastvec.pool.process.shm` (the shared block),
:mod:`~fastvec.pool.process.shared_infos` (infos through it),
:mod:`~fastvec.pool.process.start` (start-up).
"""
