"""The self-play trainers: short runs end to end (export, plot, league state), and their
pieces by hand: advantages per row, rewards paid to samples, exploring moves, openings,
the symmetric networks, the exact tic-tac-toe check, the plain PettingZoo loop."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pettingzoo.classic.tictactoe_v3")  # needs pygame

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _load(name: str):
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(EXAMPLES))  # the trainers import their helpers beside them
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


ppo = _load("selfplay_ppo")
common = _load("selfplay_common")
ttt = _load("selfplay_tictactoe")
c4 = _load("selfplay_connect_four")
search = _load("search_players")


def _run(script: str, *flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(EXAMPLES / script), *flags]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)


def _check_export(path: Path, shape: tuple, actions: int, rng: np.random.Generator) -> None:
    """The exported TorchScript takes float32 boards and bool masks and returns logits whose
    best move is legal; illegal moves sit at -1e9."""
    policy = torch.jit.load(str(path))
    board = torch.from_numpy(rng.integers(0, 2, (32, *shape)).astype(np.float32))
    board[..., 1] *= 1 - board[..., 0]  # no cell holds both colours
    mask = torch.from_numpy(rng.random((32, actions)) < 0.5)
    mask[:, 0] = True
    logits = policy(board, mask)
    assert logits.shape == (32, actions) and logits.dtype == torch.float32
    assert mask.gather(1, logits.argmax(1, keepdim=True)).all()
    assert (logits[~mask] == -1e9).all()


@pytest.mark.subprocess
@pytest.mark.slow
def test_tictactoe_trainer_runs_checks_and_exports(tmp_path: Path) -> None:
    flags = ["--num-games", "8", "--total-steps", "3000", "--num-steps", "8",
             "--eval-every", "1500", "--eval-games", "20", "--snapshot-every", "300",
             "--max-snapshots", "2", "--export", str(tmp_path / "policy.pt"),
             "--save-league", str(tmp_path / "league.json"), "--backend", "local",
             "--update-threads", "1"]
    if importlib.util.find_spec("matplotlib") is not None:
        flags += ["--plot", str(tmp_path / "curves.png")]
    proc = _run("selfplay_tictactoe.py", *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    checks = re.findall(r"^step +[\d,]+ .* lost lines vs every legal reply (\d+)/(\d+), vs "
                        r"every optimal reply (\d+)/(\d+)", proc.stdout, re.M)
    assert len(checks) == 3, proc.stdout  # at 0, past 1,500 and past 3,000
    assert re.search(r"^vs perfect \(all seats, 20 games\): win", proc.stdout, re.M)
    assert re.search(r"^vs random-eval \(seat 1, 10 games\)", proc.stdout, re.M)
    assert re.search(r"^throughput: [\d,]+ agent-steps/s .* vector env [\d.]+ s \(\d+%\)",
                     proc.stdout, re.M)
    _check_export(tmp_path / "policy.pt", (3, 3, 2), 9, np.random.default_rng(0))
    state = json.loads((tmp_path / "league.json").read_text())
    assert state["counters"]["snapshots_taken"] >= 2
    if "--plot" in flags:
        assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "Traceback" not in proc.stderr


@pytest.mark.subprocess
@pytest.mark.slow
def test_connect_four_trainer_runs_evaluates_and_exports(tmp_path: Path) -> None:
    proc = _run("selfplay_connect_four.py", "--num-games", "8", "--total-steps", "2000",
                "--num-steps", "8", "--channels", "4", "--hidden", "16", "--eval-every",
                "1000", "--eval-games", "10", "--final-games", "4", "--snapshot-every",
                "300", "--backend", "sync", "--update-threads", "1",
                "--export", str(tmp_path / "policy.pt"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    evals = re.findall(r"^step +[\d,]+ +[\d.]+ s  vs negamax-3: win", proc.stdout, re.M)
    assert len(evals) == 3, proc.stdout
    for depth in (3, 5):
        assert re.search(rf"^vs negamax-{depth} \(seat 1, 4 games\)", proc.stdout, re.M)
    _check_export(tmp_path / "policy.pt", (6, 7, 2), 7, np.random.default_rng(1))


def test_the_shared_loop_checks_on_schedule_and_plays_its_snapshots() -> None:
    """A check at 0 and once each ``eval_every`` more agent-steps are in, one more at the
    end with ``last_check``; an update per rollout; snapshots join the games and retire."""
    from fastvec.selfplay import League

    args = ttt.Args.parse(["--total-steps", "250", "--eval-every", "100", "--num-steps", "4",
                           "--seed", "0"])
    assert isinstance(args, common.BoardSettings)
    envs = common.make_games("tictactoe_v3", 4, "sync")
    league = League.from_env(envs, shares={"self_play": 0.5, "snapshots": 0.5},
                             snapshot_every=20, max_snapshots=2, seed=0)
    checks, updates = [], []
    try:
        steps, seconds, clock = common.run(
            envs, league, ttt.Agent(8), args, lambda roll, progress: updates.append(progress),
            lambda agent_steps, seconds: checks.append(agent_steps), last_check=True)
    finally:
        envs.close()
    assert 250 <= steps < 250 + 16 and seconds > 0 and set(clock) == {"env", "eval"}
    assert len(checks) == 4 and checks[-1] == steps  # the last one: last_check
    assert [k * 100 <= step < k * 100 + 16 for k, step in enumerate(checks[:3])] == [True] * 3
    # a rollout: at most 16 moves (4 steps of 4 games), fewer when games reset
    assert len(updates) >= steps / 16 and updates[0] == 0 and updates == sorted(updates)
    assert league.snapshots_taken > 2 and len(league.pool_ids) == 2  # the others retired


def test_advantages_run_over_each_rows_own_turns() -> None:
    """Worked by hand (gamma = lambda = 0.5).  Row 0 moves at t = 0, 2, 4 and wins on its
    last move; row 1 moves at t = 1 (its game ends, -1), then at 3 and 5 in a new game,
    the last move still waiting for its reward (not trainable; its value bootstraps t = 3)."""
    roll = ppo.Rollout.zeros(6, 2, (1,), 1)
    for t, row, value, reward, done in [(0, 0, 0.5, 0.0, 0), (2, 0, 0.25, 0.0, 0),
                                        (4, 0, 0.5, 1.0, 1), (1, 1, 0.0, -1.0, 1),
                                        (3, 1, 0.5, 0.5, 0), (5, 1, 1.0, 0.0, 0)]:
        roll.sample[t, row], roll.values[t, row] = True, value
        roll.rewards[t, row], roll.done[t, row] = reward, done
    advantages, trainable = ppo.row_advantages(roll, 0.5, 0.5)
    assert advantages[:, 0].tolist() == [-0.34375, 0, 0.125, 0, 0.5, 0]
    assert advantages[:, 1].tolist() == [0, -1.0, 0, 0.5, 0, 0]
    assert trainable.tolist() == [[True, False], [False, True], [True, False],
                                  [False, True], [True, False], [False, False]]


@pytest.mark.parametrize("backend", ["sync", "plain"])
def test_the_rollout_pays_each_sample_its_rows_rewards(backend: str) -> None:
    """Replay the collected steps: a sample is every active learner row (both rows of a
    self-play game); its reward is what its row got until the row's next sample or its
    game's end, in which it is done."""
    from fastvec.selfplay import LEARNER, League, RandomPlayer
    num_games, num_steps = 6, 60
    envs = common.make_games("tictactoe_v3", num_games, backend)
    league = League.from_env(envs, opponents={"random": RandomPlayer(seed=0)},
                             shares={"self_play": 0.5, "fixed": 0.5}, seed=0)
    seen: list[list] = []  # per step: obs, active, the learner's rows, actions, results
    step, policy_rows = envs.step, league.policy_rows

    def recording_rows(where=None, env_ids=None):
        groups = policy_rows(where, env_ids)
        seen.append([where.copy(), set(groups.get(LEARNER, np.empty(0)).tolist())])
        return groups

    def recording_step(actions):
        results = step(actions)
        seen[-1] += [actions.copy(), results]
        return results

    envs.step, league.policy_rows = recording_step, recording_rows
    try:
        torch.manual_seed(0)
        agent = ttt.Agent(16)
        roll = ppo.Rollout.zeros(num_steps, envs.num_envs, (3, 3, 2), 9)
        obs, infos = envs.reset(seed=0)
        _, _, moves = ppo.collect(envs, league, agent, {}, roll, obs, infos,
                                     torch.Generator().manual_seed(0),
                                     {"env": 0.0, "eval": 0.0})
    finally:
        envs.close()
    assert moves == sum(int(active.sum()) for active, *_ in seen)
    closed = 0
    for row in range(envs.num_envs):
        last, owed = None, 0.0
        for t, (active, learner, actions, results) in enumerate(seen):
            _, rewards, terms, truncs, _ = results
            if active[row] and row in learner:
                assert roll.sample[t, row] and roll.actions[t, row] == actions[row]
                if last is not None:
                    assert (roll.rewards[last, row], roll.done[last, row]) == (owed, 0.0)
                last, owed = t, 0.0
            else:
                assert not roll.sample[t, row], (t, row)
            if last is not None:
                owed += float(rewards[row])
                if terms[row] or truncs[row]:
                    assert (roll.rewards[last, row], roll.done[last, row]) == (owed, 1.0)
                    last, closed = None, closed + 1
    assert closed > num_games  # games ended, and each paid its learner rows


def test_plain_games_give_the_rows_of_a_fastvec_vector_env() -> None:
    rng = np.random.default_rng(0)
    plain = common.make_games("tictactoe_v3", 5, "plain")
    fast = common.make_games("tictactoe_v3", 5, "sync")
    try:
        got, want = plain.reset(seed=3), fast.reset(seed=3)
        for t in range(80):
            for a, b in zip(got, want, strict=True):  # obs, (rewards, flags,) infos
                if isinstance(b, dict):
                    for key in a:
                        np.testing.assert_array_equal(a[key], b[key], err_msg=f"{t} {key}")
                else:
                    np.testing.assert_array_equal(a, b, err_msg=str(t))
            mask = want[0]["action_mask"].astype(bool)
            actions = np.where(mask, rng.random(mask.shape), -1).argmax(1)
            got, want = plain.step(actions), fast.step(actions)
    finally:
        plain.close()
        fast.close()


def test_exploring_moves_come_from_the_mixture_and_say_so() -> None:
    logits = torch.tensor([[0.0, 5.0, -1e9], [2.0, -1e9, 2.0]])
    generator = torch.Generator().manual_seed(0)
    moves, logprobs = ppo.sample_moves(logits.repeat(1000, 1), generator, explore=0.5)
    policy = torch.softmax(logits, 1)
    mixture = 0.5 * policy + 0.5 * torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.0, 0.5]])
    rows = torch.arange(2000) % 2
    assert (moves != 2).logical_or(rows == 1).all() and (moves != 1).logical_or(rows == 0).all()
    assert torch.allclose(logprobs, mixture[rows, moves].log())
    share = (moves[rows == 0] == 0).float().mean()
    assert abs(share - mixture[0, 0]) < 0.05
    plain_moves, plain_logprobs = ppo.sample_moves(logits, generator)
    assert torch.allclose(plain_logprobs, torch.log_softmax(logits, 1)[[0, 1], plain_moves])


def test_openings_play_the_first_plies_at_random() -> None:
    openings = ppo.Openings(3, num_games=4, seed=0)
    openings.plies[:] = [0, 1, 3, 2]
    board = np.zeros((8, 3, 3, 2), dtype=np.int8)
    board[2:, 0, 0, 0] = 1  # games 1, 2, 3 have one piece down, games 2 and 3 two
    board[4:, 0, 1, 1] = 1
    obs = {"observation": board}
    active = np.array([True, False, True, False, False, True, True, False])
    game_of_row = np.repeat(np.arange(4), 2)
    flagged = openings.rows(obs, active, game_of_row)
    # game 1 at ply 1 of 1: its own move; game 2 at ply 2 of 3: random; game 3 at ply 2
    # of 2: its own move; game 0 starts (ply 0): its opening is drawn again, 0..3 plies
    assert flagged[[2, 5, 6]].tolist() == [False, True, False]
    assert flagged[0] == (openings.plies[0] > 0) and not flagged[~active].any()
    draws = set()
    for _ in range(50):
        openings.rows(obs, active, game_of_row)
        draws.add(int(openings.plies[0]))
    assert draws == {0, 1, 2, 3} and openings.plies[1:].tolist() == [1, 3, 2]


def test_the_tictactoe_network_plays_every_symmetric_board_alike() -> None:
    torch.manual_seed(0)
    agent = ttt.Agent(32)
    rng = np.random.default_rng(0)
    cells = rng.integers(0, 3, (64, 9))
    board = np.stack([cells == 1, cells == 2], axis=2).astype(np.float32)
    mask = torch.from_numpy(cells == 0)
    logits, values = agent(torch.from_numpy(board).reshape(64, 3, 3, 2), mask)
    codes = np.stack([(cells[:, perm] * 3 ** np.arange(9)).sum(1) for perm in ttt.PERMS])
    plain = (codes == codes.min(0)).sum(0) == 1  # boards no symmetry maps onto themselves
    assert plain.sum() > 40
    for perm in ttt.PERMS:
        moved = board[:, perm]  # cell i of the moved board holds cell perm[i]
        moved_logits, moved_values = agent(torch.from_numpy(moved).reshape(64, 3, 3, 2),
                                           mask[:, perm])
        assert torch.allclose(moved_logits[plain], logits[:, perm][plain])
        assert torch.allclose(moved_values, values)


def test_the_connect_four_network_plays_mirrored_boards_alike() -> None:
    torch.manual_seed(0)
    agent = c4.Agent("cnn", 4, 16)
    board = torch.from_numpy(np.random.default_rng(1).integers(0, 2, (32, 6, 7, 2))).float()
    board[..., 1] *= 1 - board[..., 0]
    mask = torch.ones(32, 7, dtype=torch.bool)
    logits, values = agent(board, mask)
    mirrored, mirrored_values = agent(board.flip(2), mask)
    assert torch.allclose(mirrored, logits.flip(1), atol=1e-6)
    assert torch.allclose(mirrored_values, values, atol=1e-6)


def test_the_exact_check_counts_every_line() -> None:
    """The perfect player loses no line from either seat; a first-legal-move player does,
    and its lines against every legal reply add up as a direct recursion counts them."""
    perfect = search.PerfectTicTacToe(seed=0)
    for seat in (0, 1):
        for replies in ("all", "optimal"):
            assert ttt.exact_check(perfect, seat, replies)["loss"] == 0

    def first_legal(observation, action_mask):
        return np.asarray(action_mask).argmax(axis=1)

    def lines(board: list[int], ply: int, seat: int) -> dict[str, int]:
        mover = 1 + ply % 2
        moves = [int(np.argmax(np.array(board) == 0))] if ply % 2 == seat else \
            [i for i in range(9) if board[i] == 0]
        counts = {"win": 0, "draw": 0, "loss": 0}
        for move in moves:
            child = board.copy()
            child[move] = mover
            if any(all(child[i] == mover for i in line) for line in ttt.LINES.tolist()):
                counts["win" if ply % 2 == seat else "loss"] += 1
            elif 0 not in child:
                counts["draw"] += 1
            else:
                for key, n in lines(child, ply + 1, seat).items():
                    counts[key] += n
        return counts

    for seat in (0, 1):
        assert ttt.exact_check(first_legal, seat, "all") == lines([0] * 9, 0, seat)
