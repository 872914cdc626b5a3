"""RLlib (new API stack) on fastvec: PPO trains through ``gym_env_vectorize_mode=
"vector_entry_point"``, in the driver's env runner and in a remote one; what RLlib's
sampling loop needs of a vector env; what its multi-agent runner refuses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

pytest.importorskip("ray.rllib")
torch = pytest.importorskip("torch")

from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner  # noqa: E402

import fastvec  # noqa: E402
from fastvec.integrations import rllib as adapter  # noqa: E402
from fastvec.integrations.rllib import check_rllib_vector_kwargs, register_rllib_env  # noqa: E402
from fastvec.vector.arguments import parse_autoreset_mode  # noqa: E402

NUM_ENVS = 4
BATCH = 256
ROOT = Path(__file__).resolve().parents[2]


class StepCountEnv(gym.Env):
    """Observation: the steps since reset, as float32 (1,); episodes of ``episode_len``."""

    def __init__(self, episode_len: int = 5):
        self.episode_len = episode_len
        self.observation_space = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.episode_len, False, {}


@pytest.fixture(scope="module")
def step_count_id():
    """``StepCountEnv`` as a ``fastvec/`` id, removed from Gymnasium's registry after."""
    gym.register("FastvecTests/StepCount-v0", entry_point=StepCountEnv,
                 disable_env_checker=True)
    env_id = fastvec.register("FastvecTests/StepCount-v0")
    yield env_id
    for name in ("FastvecTests/StepCount-v0", env_id):
        gym.registry.pop(name, None)


@pytest.fixture
def one_torch_thread():
    """RLlib's learner and the driver's env runner on one torch thread (the machine's
    cores go to the envs and Ray), restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def ppo_config(env: str, runners: int, **environment) -> PPOConfig:
    """PPO with a small batch: one ``train()`` samples ``BATCH`` env steps."""
    return (PPOConfig()
            .environment(env, **environment)
            .env_runners(num_env_runners=runners, num_envs_per_env_runner=NUM_ENVS,
                         gym_env_vectorize_mode="vector_entry_point",
                         rollout_fragment_length=BATCH // NUM_ENVS)
            .training(train_batch_size_per_learner=BATCH, minibatch_size=128, num_epochs=1)
            .debugging(seed=0))


def train_once(config: PPOConfig) -> tuple[dict, list]:
    """One ``train()``; (the env runners' results, what ``describe`` says of each env)."""
    algo = config.build_algo()
    try:
        result = algo.train()["env_runners"]
        if config.num_env_runners:
            envs = algo.env_runner_group.foreach_env_runner(describe, local_env_runner=False)
        else:
            envs = [describe(algo.env_runner)]
    finally:
        algo.stop()
    return result, envs


def describe(runner) -> tuple:
    """The class, size, autoreset mode and workers of an env runner's env."""
    env = runner.env.unwrapped
    return (type(env).__name__, env.num_envs, env.metadata["autoreset_mode"],
            getattr(env, "num_workers", None))


def assert_trained(result: dict) -> None:
    assert result["num_env_steps_sampled"] >= BATCH
    assert result["num_episodes"] > 0  # a random CartPole policy ends ~1 episode in 20 steps
    assert np.isfinite(result["episode_return_mean"])


@pytest.mark.ray
@pytest.mark.slow
def test_ppo_trains_on_the_fastvec_id(ray_session, one_torch_thread):
    result, envs = train_once(ppo_config("fastvec/CartPole-v1", runners=0))
    assert envs == [("SyncVecEnv", NUM_ENVS, AutoresetMode.NEXT_STEP, None)]
    assert_trained(result)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("how", ["module-prefixed id", "register_rllib_env"])
def test_ppo_trains_in_a_remote_env_runner(how, ray_session, one_torch_thread):
    # A remote env runner has not imported fastvec: "fastvec:" makes Gymnasium import it
    # there (a bare "fastvec/CartPole-v1" raises NamespaceNotFound in the runner); Tune's
    # registry carries register_rllib_env's creator there.
    if how == "register_rllib_env":
        env = register_rllib_env("fastvec-tests-cartpole", "CartPole-v1", backend="subproc",
                                 vector_kwargs={"num_workers": 2})
        config = ppo_config(env, runners=1)
    else:
        config = ppo_config("fastvec:fastvec/CartPole-v1", runners=1, env_config={
            "backend": "subproc", "backend_kwargs": {"num_workers": 2}})
    result, envs = train_once(config)
    assert envs == [("SubprocVecEnv", NUM_ENVS, AutoresetMode.NEXT_STEP, 2)]
    assert_trained(result)


def sample_episodes(env_id: str, **backend_kwargs) -> list:
    """Episodes a driver-side env runner records from a ``StepCountEnv`` (length 5)."""
    config = (PPOConfig()
              .environment(env_id, env_config={"backend_kwargs": backend_kwargs})
              .env_runners(num_envs_per_env_runner=2, gym_env_vectorize_mode="vector_entry_point"))
    runner = SingleAgentEnvRunner(config=config)
    try:
        env = runner.env.unwrapped
        assert env.autoreset_mode is parse_autoreset_mode(
            backend_kwargs.get("autoreset_mode", "next_step"))
        episodes = [e for e in runner.sample(num_timesteps=40, random_actions=True)
                    if e.is_done]
    finally:
        runner.stop()
    assert len(episodes) >= 6
    return [e.get_observations().ravel().tolist() for e in episodes]


def test_rllib_records_episodes_right_with_next_step(step_count_id, one_torch_thread):
    observations = sample_episodes(step_count_id)
    assert observations == [[0, 1, 2, 3, 4, 5]] * len(observations)


# Why register_rllib_env refuses SAME_STEP and copy=False: RLlib records wrong episodes
# from such envs, and no one complains.
def test_rllib_records_wrong_episodes_with_same_step(step_count_id, one_torch_thread):
    # It takes the reset observation that a SAME_STEP env returns at an episode's end
    # for that episode's last, and the next episode's first step for its reset.
    observations = sample_episodes(step_count_id, autoreset_mode="same_step")
    assert observations[:2] == [[0, 1, 2, 3, 4, 0]] * 2  # the first episode of each env
    assert observations[2:] == [[1, 2, 3, 4, 0]] * (len(observations) - 2)


def test_rllib_records_wrong_episodes_without_copies(step_count_id, one_torch_thread):
    # It keeps views of the batch until an episode ends: every later step overwrites them.
    observations = sample_episodes(step_count_id, copy=False)
    assert observations == [[5, 5, 5, 5, 5, 5]] * len(observations)


def test_rllib_stops_at_the_first_episode_end_with_disabled(step_count_id, one_torch_thread):
    with pytest.raises(RuntimeError) as raised:  # RLlib's own, from fastvec's
        sample_episodes(step_count_id, autoreset_mode="disabled")
    assert "autoreset_mode is DISABLED" in str(raised.value.__cause__)


def test_check_rllib_vector_kwargs_refuses_what_rllib_cannot_run():
    assert check_rllib_vector_kwargs(None) == {}
    assert check_rllib_vector_kwargs({"num_workers": 2, "autoreset_mode": "NextStep"}) == \
        {"num_workers": 2, "autoreset_mode": "NextStep"}
    for bad, words in [({"autoreset_mode": "same_step"}, "next_step"),
                       ({"autoreset_mode": AutoresetMode.DISABLED}, "next_step"),
                       ({"copy": False}, "copy=False"),
                       ({"batch_size": 2}, "batch_size")]:
        with pytest.raises(ValueError, match=words):
            check_rllib_vector_kwargs(bad)
    with pytest.raises(ValueError, match="expected autoreset_mode"):
        check_rllib_vector_kwargs({"autoreset_mode": "soon"})
    with pytest.raises(TypeError, match="vector_kwargs"):
        check_rllib_vector_kwargs([("num_workers", 2)])


def test_register_rllib_env_checks_its_arguments():
    with pytest.raises(ValueError, match="next_step"):
        register_rllib_env("bad", "CartPole-v1", vector_kwargs={"autoreset_mode": "same_step"})
    with pytest.raises(ValueError, match="backend"):
        register_rllib_env("bad", "CartPole-v1", backend="threads")
    with pytest.raises(ValueError, match="name"):
        register_rllib_env("", "CartPole-v1")
    with pytest.raises(TypeError, match="env"):
        register_rllib_env("bad", 3)


def test_the_creator_makes_fastvec_envs_and_names_the_vectorize_mode_it_needs():
    creator = adapter.VectorCreator(StepCountEnv, "sync", {}, (), {"episode_len": 3})
    envs = creator({"num_envs": 3, "episode_len": 7})  # env_config wins
    try:
        assert isinstance(envs, fastvec.SyncVecEnv) and envs.num_envs == 3
        assert envs.get_attr("episode_len") == (7, 7, 7)
    finally:
        envs.close()
    with pytest.raises(ValueError, match="vector_entry_point"):
        creator({})  # what RLlib passes in its "sync" mode


def test_rllib_sync_mode_with_the_creator_says_what_to_set():
    register_rllib_env("fastvec-tests-stepcount", StepCountEnv)
    config = (PPOConfig().environment("fastvec-tests-stepcount")
              .env_runners(num_envs_per_env_runner=2, gym_env_vectorize_mode="sync"))
    with pytest.raises(ValueError, match="vector_entry_point"):
        SingleAgentEnvRunner(config=config)


def test_rllib_multiagent_vectorizes_only_its_own_sync_env():
    # MultiAgentEnvRunner.make_env always calls RLlib's own make_vec, which builds
    # only a SyncVectorMultiAgentEnv of MultiAgentEnvs: a fastvec env of PettingZoo
    # games cannot be its vector env.  When this fails, RLlib has lifted the limit.
    from ray.rllib.env.vector.registration import make_vec

    with pytest.raises(ValueError, match="only synchronous"):
        make_vec("CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point")


def test_missing_rllib_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray.tune.registry", None)
    with pytest.raises(ImportError, match=r"ray\[rllib\]"):
        register_rllib_env("fastvec-tests-missing", "CartPole-v1")


@pytest.mark.ray
@pytest.mark.slow
def test_ppo_example_runs_quick(ray_session):
    # The example joins the test run's Ray (RAY_ADDRESS) rather than starting one.
    env = {**os.environ, "RAY_ADDRESS": ray_session.get_runtime_context().gcs_address}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "rllib_ppo.py"), "--quick"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("agent steps")]
    assert len(lines) == 2 and "env-steps/s" in lines[0], out.stdout
    assert "stopped at mean return" in out.stdout, out.stdout
