"""A Ray actor per block: :mod:`~fastvec.pool.ray.pool` (``RayPool``, the trainer's side),
:mod:`~fastvec.pool.ray.actor` (``EnvActor``, each actor's pool),
:mod:`~fastvec.pool.ray.session` (the loopback-only Ray it starts when none runs) and
:mod:`~fastvec.pool.ray.reaper` (which ends that Ray if the trainer dies).

Nothing here imports Ray at module level: ``import fastvec`` works without it.
"""
