"""Smoke test of an installed fastvec (run from outside the source tree).

Checks that the compiled kernels came with the install and that every backend
steps: SyncVecEnv, SubprocVecEnv, async batches, and ``fastvec.make``.
"""

import pathlib
import sys

import gymnasium as gym
import numpy as np

import fastvec


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def main() -> None:
    where = pathlib.Path(fastvec.__file__).resolve()
    assert "site-packages" in where.parts, f"fastvec imported from {where}, not an install"
    kernels = sorted(p.name.split(".")[0] for p in (where.parent / "_kernels").glob("*.so"))
    print("fastvec from", where.parent, "kernels:", ", ".join(kernels))

    reference = gym.vector.SyncVectorEnv([cartpole] * 4)
    ref_obs, _ = reference.reset(seed=7)
    for backend in ("sync", "subproc"):
        with fastvec.make("CartPole-v1", num_envs=4, backend=backend) as envs:
            obs, _ = envs.reset(seed=7)
            np.testing.assert_array_equal(obs, ref_obs)
            for _ in range(50):
                obs, rewards, terminations, truncations, infos = envs.step(np.ones(4, np.int64))
            print(f"{backend}: ok, obs[0] = {obs[0]}")

    with fastvec.SubprocVecEnv([cartpole] * 4, num_workers=2, batch_size=2) as envs:
        envs.async_reset(seed=0)
        seen = set()
        for _ in range(20):
            obs, rewards, terminations, truncations, infos, env_ids = envs.recv()
            seen.update(env_ids.tolist())
            envs.send(np.zeros(len(env_ids), np.int64), env_ids)
        assert seen == {0, 1, 2, 3}, seen
        print("async batches: ok")
    reference.close()


if __name__ == "__main__":
    main()
    sys.exit(0)
