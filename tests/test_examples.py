"""The example trainer runs end to end on every --vector choice, and its rollouts are right."""

from __future__ import annotations

import collections
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tqdm")

ROOT = Path(__file__).resolve().parents[1]
PPO_CARTPOLE = ROOT / "examples" / "ppo_cartpole.py"
COMPARE = ROOT / "examples" / "compare_vector_envs.py"
CURVE_LINE = re.compile(r"^step +[\d,]+ +sps +[\d,]+ +mean_return +(nan|[\d.]+) ")


def _load(path: Path, name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _train(*flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(PPO_CARTPOLE), "--seed", "3", "--log-every", "1", *flags]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


# Each run is a fresh process importing torch (~4 s): the choices whose code paths
# differ most run end to end here (a subprocess env, the async collection with a local
# block, SB3's wrapper); every choice's rollout is checked in-process below and by
# the side-by-side runner.
END_TO_END = ["fastvec-subproc", "fastvec-local-async", "sb3-subproc"]


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("vector", END_TO_END)
def test_ppo_cartpole_runs_a_few_updates(vector: str) -> None:
    if vector == "sb3-subproc":
        pytest.importorskip("stable_baselines3")
    num_envs, num_steps, updates = 4, 64, 4
    # fastvec-subproc is asked for by its old name, --backend subproc.
    choice = ["--backend", "subproc"] if vector == "fastvec-subproc" else ["--vector", vector]
    proc = _train("--total-timesteps", str(num_envs * num_steps * updates),
                  "--num-envs", str(num_envs), "--num-steps", str(num_steps), *choice)
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{proc.stderr[-3000:]}"
    curve = [line for line in proc.stdout.splitlines() if CURVE_LINE.match(line)]
    assert len(curve) == updates, proc.stdout
    assert curve[-1].startswith(f"step {num_envs * num_steps * updates:>8,}")
    assert "global step" in proc.stdout  # the plot's axis
    assert re.search(r"^[\d,]+ steps in [\d.]+ s \([\d,]+ steps/s\)$", proc.stdout, re.M)
    share = re.search(r"^time in the vector env: [\d.]+ s \((\d+)% of the training loop; "
                      + re.escape(vector) + r"\)$", proc.stdout, re.MULTILINE)
    assert share is not None and 0 <= int(share.group(1)) <= 100, proc.stdout
    final = re.search(r"^final average return: ([\d.]+)$", proc.stdout, re.MULTILINE)
    assert final is not None, proc.stdout
    assert 0.0 < float(final.group(1)) <= 500.0
    assert "Traceback" not in proc.stderr


def _replay(rolls: list, final_obs: np.ndarray, num_envs: int, seed: int) -> int:
    """Step a fresh CartPole per env with the stored actions; check every stored step.

    Returns the number of episodes that ended (NEXT_STEP: the next step of that env
    is a reset step, stored as invalid).
    """
    ended = 0
    for e in range(num_envs):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=seed + e)
        resetting = False
        for roll in rolls:
            for t in range(roll.rewards.shape[0]):
                assert np.array_equal(roll.obs[t, e].numpy(), obs), (e, t)
                assert bool(roll.valid[t, e]) is not resetting, (e, t)
                if resetting:
                    obs, _ = env.reset()
                    reward, term, trunc = 0.0, False, False
                else:
                    obs, reward, term, trunc, _ = env.step(int(roll.actions[t, e]))
                resetting = term or trunc
                ended += resetting
                assert float(roll.rewards[t, e]) == reward, (e, t)
                assert bool(roll.terminated[t, e]) == term and bool(roll.done[t, e]) == resetting
        assert np.array_equal(final_obs[e], obs), e
    return ended


@pytest.mark.subprocess
@pytest.mark.parametrize("vector", ["fastvec-sync", "fastvec-async", "fastvec-local-async"])
def test_each_envs_steps_land_in_its_own_column(vector: str) -> None:
    """Async batches arrive in any order; each env's column still holds its own steps."""
    ppo = _load(PPO_CARTPOLE, "ppo_cartpole_under_test")
    num_envs, num_steps, seed = 4, 48, 5
    args = ppo.Args(num_envs=num_envs, num_steps=num_steps, vector=vector, seed=seed)
    envs = ppo.make_envs(args)
    torch.manual_seed(0)
    agent = ppo.Agent(4, 2)
    state = ppo.EnvState(obs=torch.zeros(num_envs, 4),
                         autoreset=np.zeros(num_envs, dtype=np.bool_),
                         recent=collections.deque(maxlen=100))
    rolls = []
    try:
        if vector.endswith("async"):
            ppo.start_async(envs, state, seed)
            collect = ppo.collect_async
        else:
            state.obs = torch.as_tensor(envs.reset(seed=seed)[0])
            collect = ppo.collect_sync
        for _ in range(3):  # the held batches carry over from one rollout to the next
            roll = ppo.Rollout.zeros(num_steps, num_envs, 4)
            assert collect(envs, agent, roll, state, 0.99) >= 0.0
            rolls.append(roll)
    finally:
        envs.close()
    assert _replay(rolls, state.obs.numpy(), num_envs, seed) > 0
    assert len(state.recent) > 0


@pytest.mark.subprocess
def test_sb3_wrapper_speaks_the_same_step_convention() -> None:
    pytest.importorskip("stable_baselines3")
    ppo = _load(PPO_CARTPOLE, "ppo_cartpole_under_test")
    envs = ppo.make_envs(ppo.Args(num_envs=2, vector="sb3-subproc"))
    try:
        obs, _ = envs.reset(seed=0)
        assert envs.same_step and obs.shape == (2, 4)
        for _ in range(200):  # always pushing left: episodes end within a few dozen steps
            obs, rewards, term, trunc, infos = envs.step(np.zeros(2, dtype=np.int64))
            if term.any():
                break
        assert term.any() and not trunc.any() and rewards.tolist() == [1.0, 1.0]
        assert infos["_final_obs"].tolist() == term.tolist()
        assert not np.array_equal(infos["final_obs"][term], obs[term])  # obs is a new episode
        assert infos["_episode"].tolist() == term.tolist()
        assert (infos["episode"]["r"][term] > 0).all()
    finally:
        envs.close()


@pytest.mark.subprocess
@pytest.mark.slow
def test_compare_runs_choices_side_by_side(tmp_path: Path) -> None:
    plot, out = tmp_path / "compare.png", tmp_path / "compare.json"
    command = [sys.executable, str(COMPARE), "--vectors", "fastvec-sync,gymnasium-sync",
               "--total-timesteps", "256", "--num-envs", "2", "--json", str(out)]
    if importlib.util.find_spec("matplotlib") is not None:
        command += ["--plot", str(plot)]
    command += ["--", "--num-steps", "64"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()
            if line.startswith(("fastvec-sync", "gymnasium-sync"))}
    assert set(rows) == {"fastvec-sync", "gymnasium-sync"}, proc.stdout
    assert rows["fastvec-sync"][3] == rows["gymnasium-sync"][3]  # same seed, same trajectories
    runs = json.loads(out.read_text())["runs"]
    for name in rows:
        (run,) = runs[name]
        assert run["steps"] == 256 and run["steps_per_second"] > 0
        assert 0.0 <= run["env_fraction"] <= 1.0
    assert json.loads(out.read_text())["trainer_args"] == ["--num-steps", "64"]
    if "--plot" in command:
        assert plot.read_bytes()[:4] == b"\x89PNG"


def test_compare_marks_a_missing_package_unavailable(monkeypatch) -> None:
    compare = _load(COMPARE, "compare_under_test")
    monkeypatch.setitem(compare.NEEDS, "sb3-subproc", "no_such_module_here")
    assert compare.unavailable("sb3-subproc").startswith("unavailable: no module")
    assert compare.unavailable("fastvec-local") is None
    runs = {"sb3-subproc": [{"error": "unavailable: x"}],
            "fastvec-sync": [{"steps_per_second": 10.0, "env_fraction": 0.25,
                              "final_return": 20.0, "wall_seconds": 3.0}]}
    table = compare.format_table(runs)
    assert "unavailable: x" in table and "25%" in table and "20.0" in table
    with pytest.raises(SystemExit):
        compare.parse_args(["--vectors", "nope"])


PPO_ATARI = ROOT / "examples" / "ppo_atari.py"


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("flags", [["--vector", "local"], ["--vector", "sync"], ["--envpool"]],
                         ids=["local", "sync", "envpool"])
def test_ppo_atari_runs_a_few_updates(flags: list[str]) -> None:
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    if "--envpool" in flags:
        pytest.importorskip("envpool")
    ppo = _load(PPO_ATARI, "ppo_atari_under_test")
    args = ppo.parse_args(["--num-envs", "2", "--num-steps", "16", "--total-timesteps", "64",
                           "--update-epochs", "1", *flags])
    result = ppo.train(args)
    assert result["steps_per_second"] > 0
    assert 0.0 <= result["env_share"] <= 1.0
