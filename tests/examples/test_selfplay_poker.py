"""The poker trainer (examples/selfplay_poker.py): a short run end to end, its NashConv
moving down from the uniform strategy's, the exported strategy, and the average-policy
network's ring and fit."""

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
pytest.importorskip("pyspiel")
pytest.importorskip("pettingzoo")

from fastvec.openspiel import information_states, nash_conv, softmax_policy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "selfplay_poker.py"
UNIFORM = {"kuhn_poker": 0.9167, "kuhn_poker(players=3)": 2.0625}


def _run(*flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(EXAMPLE), *flags]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("game, flags", [
    ("kuhn_poker", ["--backend", "local", "--average-share", "0.25"]),
    ("kuhn_poker(players=3)", ["--backend", "sync", "--no-league", "--average", "network",
                               "--max-weight", "20", "--exact-average"]),
])
def test_a_short_run_lowers_nash_conv_and_exports_the_strategy(tmp_path: Path, game: str,
                                                               flags: list) -> None:
    export, history = tmp_path / "strategy.pt", tmp_path / "history.json"
    proc = _run("--game", game, "--num-games", "32", "--total-steps", "40000",
                "--eval-every", "20000", "--snapshot-every", "5000", "--seed", "3",
                "--export", str(export), "--history", str(history), *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    curve = json.loads(history.read_text())["curve"]
    assert [step for step, _ in curve][:1] == [0] and len(curve) == 3
    if "--exact-average" in flags:  # the ring's exact average, judged at each later check
        exact = json.loads(history.read_text())["exact_curve"]
        assert [step for step, _ in exact] == [step for step, _ in curve[1:]]
        assert all(0.0 <= value < UNIFORM[game] for _, value in exact), exact
    assert curve[0][1] == pytest.approx(UNIFORM[game], abs=1e-4)  # the uniform start
    assert curve[-1][1] < 0.8 * curve[0][1], curve
    assert re.search(r"^throughput: [\d,]+ agent-steps/s .* vector env", proc.stdout, re.M)
    # The export: float32 states and bool masks in, logits out; softmax over the legal
    # actions is a strategy, and OpenSpiel's NashConv of it is the run's last figure.
    strategy = torch.jit.load(str(export))
    _, states, legal = information_states(game)
    logits = strategy(torch.from_numpy(states), torch.from_numpy(legal))
    assert logits.shape == legal.shape and logits.dtype == torch.float32
    probs = torch.softmax(logits, 1).numpy()
    assert np.allclose(probs.sum(1), 1.0) and (probs[~legal] == 0).all()

    def exported(info_state: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return strategy(torch.from_numpy(info_state), torch.from_numpy(legal_mask)).numpy()

    assert nash_conv(game, softmax_policy(exported)) == pytest.approx(curve[-1][1], abs=1e-6)


def _poker_module():
    sys.path.insert(0, str(EXAMPLE.parent))  # the trainer imports its helpers beside it
    spec = importlib.util.spec_from_file_location("selfplay_poker", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["selfplay_poker"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_average_network_fits_the_reach_weighted_mean_of_the_strategies() -> None:
    """Samples of one state played by two strategies, three times as often by the first:
    the fit is their 3:1 mixture; the ring keeps only the last ``window`` samples."""
    poker = _poker_module()
    torch.manual_seed(0)
    size, actions = 4, 3
    average = poker.AverageNetwork(poker.Agent(size, actions, 16), window=8, size=size,
                                   num_actions=actions, learning_rate=1e-2, seed=0)

    def played(logits: list[float], samples: int) -> tuple:
        agent = poker.Agent(size, actions, 16)
        agent.actor[-1].bias.data = torch.tensor(logits)  # the same strategy everywhere
        roll = poker.Rollout.zeros(samples, 2, (size,), actions, torch.float32)
        roll.obs[:] = 1.0
        roll.masks[:] = True
        roll.sample[:, 0] = True  # only row 0 is the learner's
        return agent, roll

    first = torch.softmax(torch.tensor([2.0, 0.0, -2.0]), 0)
    second = torch.softmax(torch.tensor([-1.0, 1.0, 0.0]), 0)
    average.add(*played([9.0, 9.0, 9.0], 5))  # pushed out of the ring by the next eight
    average.add(*played([2.0, 0.0, -2.0], 6))
    average.add(*played([-1.0, 1.0, 0.0], 2))
    assert average.count == 13
    assert torch.allclose(average.probs.sum(0), 6 * first + 2 * second, atol=1e-6)
    average.fit(batches=400, batch_size=64)
    with torch.no_grad():
        fitted = torch.softmax(average.net.actor(torch.ones(1, size)), 1)[0]
    assert torch.allclose(fitted, 0.75 * first + 0.25 * second, atol=0.03), fitted


_STATE_SIZE = 4  # the one state of _fed's rings: four floats of 1


def _fed(strategies: list[list[float]], samples: int, window: int, **options):
    """An average network on one state (4 floats of 1, 3 actions) that has kept ``samples``
    samples of each strategy (logits, the same in every state), in turn."""
    poker = _poker_module()
    torch.manual_seed(0)
    size, actions = _STATE_SIZE, 3
    average = poker.AverageNetwork(poker.Agent(size, actions, 16), window=window, size=size,
                                   num_actions=actions, learning_rate=1e-2, seed=0, **options)
    for logits in strategies:
        agent = poker.Agent(size, actions, 16)
        agent.actor[-1].bias.data = torch.tensor(logits)
        roll = poker.Rollout.zeros(samples, 1, (size,), actions, torch.float32)
        roll.obs[:], roll.masks[:], roll.sample[:] = 1.0, True, True
        average.add(agent, roll)
    return average


def _fitted_after(strategies: list[list[float]], samples: int, window: int, batches: int,
                  batch_size: int, **options) -> torch.Tensor:
    """The fitted probabilities at that state after ``batches`` of fit."""
    average = _fed(strategies, samples, window, **options)
    average.fit(batches=batches, batch_size=batch_size)
    with torch.no_grad():
        return torch.softmax(average.net.actor(torch.ones(1, _STATE_SIZE)), 1)[0]


@pytest.mark.parametrize("weighting, newer", [("uniform", 0.5), ("linear", 0.75)])
def test_the_exact_average_weighs_the_kept_samples_as_the_fit_draws_them(
        weighting: str, newer: float) -> None:
    """Eight samples of one strategy, then eight of another, in a ring of 16: the exact
    average is their mean, uniformly or with the chances fit() draws them with, 1, 3, ...,
    31 in 256 from the oldest (the newer eight hold 3/4); a state never kept gets the
    uniform legal strategy."""
    strategies = [[2.0, 0.0, -2.0], [-1.0, 1.0, 0.0]]
    probabilities = _fed(strategies, samples=8, window=16, weighting=weighting).exact()
    older, newest = (torch.softmax(torch.tensor(logits), 0).double().numpy()
                     for logits in strategies)
    states = np.array([[1.0] * 4, [0.0, 1.0, 0.0, 1.0]], dtype=np.float32)
    legal = np.array([[True, True, True], [True, False, True]])
    got = probabilities(states, legal)
    assert np.allclose(got[0], (1 - newer) * older + newer * newest, atol=1e-6), got
    assert np.allclose(got[1], [0.5, 0.0, 0.5]), got


def test_the_average_network_can_fit_only_the_newest_share_of_the_samples() -> None:
    """``recent=0.5``: after six samples of one strategy and then six of another, the
    fit draws from the newest six only, so it learns the second strategy."""
    fitted = _fitted_after([[3.0, 0.0, 0.0], [0.0, 0.0, 3.0]], samples=6, window=16,
                           batches=300, batch_size=4, recent=0.5)
    newest = torch.softmax(torch.tensor([0.0, 0.0, 3.0]), 0)
    assert torch.allclose(fitted, newest, atol=0.03), fitted


def test_the_average_network_can_weigh_the_samples_by_recency() -> None:
    """``weighting="linear"``: eight samples of one strategy, then eight of another; the
    newer half of the window holds 3/4 of the weight (CFR+'s linear averaging), so the
    fit is 1/4 of the first strategy and 3/4 of the second."""
    strategies = [[2.0, 0.0, -2.0], [-1.0, 1.0, 0.0]]
    fitted = _fitted_after(strategies, samples=8, window=16, batches=400, batch_size=64,
                           weighting="linear")
    older, newer = (torch.softmax(torch.tensor(logits), 0) for logits in strategies)
    assert torch.allclose(fitted, 0.25 * older + 0.75 * newer, atol=0.03), fitted
    with pytest.raises(ValueError, match="'uniform' or 'linear'"):
        _fitted_after(strategies, samples=1, window=4, batches=1, batch_size=1,
                      weighting="cfr")


def test_the_exact_average_needs_the_average_network() -> None:
    with pytest.raises(ValueError, match="needs --average network, not --average ema"):
        _poker_module().main(["--exact-average", "--average", "ema"])


def test_the_step_size_decays_to_its_floor() -> None:
    """``--mmd-eta 0.2 --eta-floor 0.25``: 0.2 at the start, half of it half-way, then
    no lower than 0.05; without a floor it reaches 0, without annealing it stays."""
    poker = _poker_module()
    floored = poker.Args(mmd_eta=0.2, eta_floor=0.25)
    assert [poker.step_size(floored, p) for p in (0.0, 0.5, 0.8, 1.0, 1.2)] == \
        pytest.approx([0.2, 0.1, 0.05, 0.05, 0.05])
    assert poker.step_size(poker.Args(mmd_eta=0.2), 1.0) == 0.0
    assert poker.step_size(poker.Args(mmd_eta=0.2, anneal_eta=False), 0.9) == 0.2


@pytest.mark.parametrize("baseline", [False, True])
def test_the_advantage_estimates_are_unbiased(baseline: bool) -> None:
    """Over the actions a strategy draws, each estimate's mean is every action's expected
    return, up to one constant for the state; the baseline's estimates with an exact
    critic do not vary at all."""
    poker = _poker_module()
    probs = torch.tensor([0.5, 0.3, 0.2])
    expected = torch.tensor([1.0, -2.0, 4.0])  # E[G | a]
    guess = torch.tensor([0.5, 0.0, 3.0])  # the critic's Q(s, a), wrong on purpose
    value = (probs * guess).sum()
    actions = torch.arange(3)
    estimates = poker.advantage_estimates(
        guess.expand(3, 3), actions, expected, probs, expected - value, baseline)
    mean = (probs.unsqueeze(1) * estimates).sum(0)
    assert mean - mean[0] == pytest.approx((expected - expected[0]).tolist())
    exact = poker.advantage_estimates(expected.expand(3, 3), actions, expected, probs,
                                      expected - value, baseline)
    assert bool((exact == exact[0]).all()) is baseline


def _documented_commands() -> list[list[str]]:
    """The flags of every ``python examples/selfplay_poker.py ...`` command in the README,
    in examples/README.md and in the trainer's docstring: continued lines joined, the
    prose's ``--seed S`` read as seed 1 and a choice ``sync|plain`` as its first."""
    import shlex

    command = re.compile(r"python examples/selfplay_poker\.py ([^`#]*?)\s*"
                         r"(?=`|#|\n\s*(?:python|pip|```|\"\"\")|$)", re.S)
    commands = []
    for page in (ROOT / "README.md", ROOT / "examples" / "README.md", EXAMPLE):
        text = page.read_text().replace("\\\n", " ").replace("--seed S", "--seed 1")
        commands += [[flag.split("|")[0] for flag in shlex.split(flags)]
                     for flags in command.findall(text)]
    return commands


def test_the_documented_commands_and_the_benchmarks_flags_parse() -> None:
    """The flags the docs and ``benchmarks/poker_league.py`` give are the trainer's."""
    poker = _poker_module()
    flag_sets = _documented_commands()
    assert len(flag_sets) >= 10, flag_sets
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from poker_league import FLAGS, MODES
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    flag_sets += [["--game", game, *flags, *mode] for game, flags in FLAGS.items()
                  for mode in MODES.values()]
    for flags in flag_sets:
        args = poker.Args.parse(flags)
        assert args.game in {"kuhn_poker", "leduc_poker", "kuhn_poker(players=3)"}, flags
