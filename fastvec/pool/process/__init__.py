"""A worker process per block, stepping through shared memory and a futex barrier.

:mod:`~fastvec.pool.process.pool` (``ProcessPool``, the trainer's side),
:mod:`~fastvec.pool.process.driven` (the kinds of block it drives, and a command's batch),
:mod:`~fastvec.pool.process.worker_blocks` (the workers' blocks),
:mod:`~fastvec.pool.process.trainer_block` (the trainer's own block, ``local_block``),
:mod:`~fastvec.pool.process.workers` (the processes and the barrier),
:mod:`~fastvec.pool.process.procs` (one process and its pipe),
:mod:`~fastvec.pool.process.worker` (the worker's side),
:mod:`~fastvec.pool.process.protocol` (what both sides say),
:mod:`~fastvec.pool.process.shm` (the shared segment),
:mod:`~fastvec.pool.process.segment` (its plan),
:mod:`~fastvec.pool.process.shared_infos` (infos through it).
"""
