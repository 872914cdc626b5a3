"""The vector envs: Gymnasium's ``VectorEnv`` surface over a pool of blocks.

:mod:`~fastvec.vector.sync` (``SyncVecEnv``), :mod:`~fastvec.vector.subproc`
(``SubprocVecEnv``) and :mod:`~fastvec.vector.ray` (``RayVecEnv``) share
:mod:`~fastvec.vector.base` (the call guard, ``reset`` and ``step``, outputs),
:mod:`~fastvec.vector.split_calls`, :mod:`~fastvec.vector.env_calls`,
:mod:`~fastvec.vector.call_state`, :mod:`~fastvec.vector.arguments`,
:mod:`~fastvec.vector.episode_stats` and :mod:`~fastvec.vector.game_infos`; the
two whose envs run elsewhere add :mod:`~fastvec.vector.async_batches`.
"""
