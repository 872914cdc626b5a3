"""Where blocks of envs run: the pool beneath every vector env.

- :mod:`fastvec.pool.base`: the interface (``Pool``, an ABC) and the failure policy.
- :mod:`fastvec.pool.about`: what a block built, and the checks that blocks agree.
- :mod:`fastvec.pool.build`: env functions -> the pool that runs them.
- :mod:`fastvec.pool.local`: blocks stepped in this process (``SyncVecEnv``).
- :mod:`fastvec.pool.process`: worker processes and shared memory (``SubprocVecEnv``).
- :mod:`fastvec.pool.ray`: Ray actors (``RayVecEnv``).
- :mod:`fastvec.pool.buffers`, :mod:`fastvec.pool.obs_store`: where a step's results
  land; :mod:`fastvec.pool.games`: PettingZoo games as rows;
  :mod:`fastvec.pool.restarts`, :mod:`fastvec.pool.reports`: restarts and remote errors.

The pool never imports a vector env (an import-linter contract keeps it so).
"""
