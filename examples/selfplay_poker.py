"""Self-play on OpenSpiel's poker games, driven by a fastvec league: exact exploitability.

    python examples/selfplay_poker.py --game kuhn_poker --average network \
        --average-window 1000000 --export strategy.pt   # --no-league: naive; --help: all
    python examples/selfplay_poker.py --game "kuhn_poker(players=3)" --total-steps 2500000 \
        --mmd-eta 1.0
    python examples/selfplay_poker.py --game leduc_poker --total-steps 10000000 \
        --average network --max-weight 20 --average-window 4000000 --mmd-eta 0.125 \
        --magnet-coef 0.8 --eta-floor 0.25 --plot nash_conv.png

``--num-games`` games run as one fastvec vector env of rows
(``fastvec.openspiel.OpenSpielGame``: each row observes its player's
``information_state_tensor`` and legal-action mask; chance is played inside the
game).  A :class:`fastvec.selfplay.League` gives each game's seats to the learner
(self-play: every seat makes samples) or to the learner in one seat and a frozen
snapshot of it, drawn by PFSP, in the others; ``--no-league``: only self-play;
``--average-share``: that share of the games against the judged average strategy
(fictitious play's opponent).

One network plays every seat.  The default update (``--method mmd``) is magnetic
mirror descent in logit space fitted by regression: per state ``logits <- (logits +
eta * A + eta * alpha * magnet) / (1 + eta * alpha)``, each sample estimating the
advantages ``A`` without bias by importance weighting (``--max-weight`` caps the
weight: a little bias for much less variance on rare moves); the magnet is the
judged strategy; ``--baseline`` subtracts the critic's action values from the
estimate and adds them back to every action (a control variate: no bias, less
variance).  ``--method ppo`` is CleanRL's clipped PPO, for comparison.

The judged strategy averages the learner's: a moving average of the actor's weights
(``--average ema``), or a network fitted to the learner's probabilities on its last
``--average-window`` samples (``--average network``, NFSP's average-policy network),
alike or, with ``--average-weighting linear``, each by its recency (CFR+'s linear
averaging: with a window as long as the run, the whole run weighted towards its end);
``--exact-average`` also judges the average it is fitted to, computed exactly from
the ring (``average_network.py``).
Every ``--eval-every`` agent-steps (moves of every seat) OpenSpiel computes its
NashConv exactly (``fastvec.openspiel.nash_conv``; 0 at a Nash equilibrium) and the
learner's own.  ``--export PATH`` writes it as TorchScript: ``forward(info_state
float32 [B, D], legal_mask bool [B, A]) -> logits [B, A]`` (illegal actions at -1e9;
the softmax over the legal actions is the strategy); ``--plot PATH`` draws NashConv
over agent-steps; ``--history PATH`` writes the curves as JSON.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from average_network import AverageNetwork  # beside this file
from selfplay_common import Settings, make_rows, report_throughput, run
from selfplay_ppo import Rollout, row_advantages, sample_moves
from torch import nn

from fastvec.openspiel import OpenSpielGame, load_game, nash_conv, softmax_policy
from fastvec.selfplay import PFSP, League


@dataclass
class Args(Settings):
    """Hyperparameters; each is also a command-line flag (``num_games`` is ``--num-games``)."""

    game: str = "kuhn_poker"  # an OpenSpiel game with information-state tensors
    num_games: int = 128
    total_steps: int = 2_000_000  # agent-steps: moves of every seat in every game
    backend: str = "sync"  # see selfplay_common.BACKENDS
    seed: int = 1
    num_steps: int = 32  # env steps per rollout
    hidden: int = 128
    learning_rate: float = 1e-3
    anneal_lr: bool = False  # decay the learning rate linearly to 0
    gamma: float = 1.0
    gae_lambda: float = 1.0
    update_epochs: int = 8
    num_minibatches: int = 4
    ent_coef: float = 0.02  # entropy bonus, decaying linearly to ent_final
    ent_final: float = 0.0
    magnet_coef: float = 0.2  # the pull towards the magnet (ppo: a reverse KL)
    magnet: str = "ema"  # "uniform", "copy" (the learner every magnet_every updates), "ema"
    magnet_every: int = 10
    ema_decay: float = 0.99  # average "ema": the decay of the moving average of the weights
    average: str = "ema"  # the judged strategy: "ema" (of the weights) or "network"
    average_window: int = 1_000_000  # network: keep the learner's last this many samples
    average_recent: float = 0.0  # network: >0 fits only the newest this share of them all
    average_weighting: str = "uniform"  # network: "uniform" or "linear" (CFR+'s: by recency)
    average_batches: int = 4  # network: minibatches of the fit per update
    max_weight: float = 0.0  # mmd: >0 caps the importance weight 1/pi(a) of a sample
    baseline: bool = False  # mmd: the critic's action values as a control variate
    method: str = "mmd"  # "ppo" (clipped, entropy bonus) or "mmd" (mirror descent by regression)
    mmd_eta: float = 0.5  # mmd: the step size in logit space
    anneal_eta: bool = True  # mmd: decay the step size linearly to eta_floor of it
    eta_floor: float = 0.0  # mmd: the share of mmd_eta the decay stops at
    explore: float = 0.0  # the learner's moves are uniformly random with this probability
    league: bool = True  # False: naive self-play, the learner plays only itself
    snapshot_share: float = 0.5  # games against a snapshot (the rest: self-play)
    average_share: float = 0.0  # games against the judged average strategy
    snapshot_every: int = 50_000  # learner steps between snapshots
    max_snapshots: int = 20
    eval_every: int = 100_000  # agent-steps between NashConv checks
    exact_average: bool = False  # network: also judge the exact average of the ring (a table)
    export: str = ""  # write the final strategy as TorchScript here
    plot: str = ""  # plot NashConv over agent-steps here
    history: str = ""  # write the NashConv curve (and the settings) as JSON here


class Agent(nn.Module):
    """MLPs over the information state: masked logits, and the value of each action (the
    state's value is their mean under the strategy)."""

    def __init__(self, size: int, num_actions: int, hidden: int) -> None:
        super().__init__()

        def mlp(out: int) -> nn.Sequential:
            return nn.Sequential(nn.Linear(size, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                                 nn.Tanh(), nn.Linear(hidden, out))

        self.actor, self.critic = mlp(num_actions), mlp(num_actions)
        nn.init.zeros_(self.actor[-1].weight)
        nn.init.zeros_(self.actor[-1].bias)  # the uniform strategy to start

    def forward(self, info_state: torch.Tensor,
                legal_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits [B, A] (illegal actions at -1e9) and values [B]."""
        logits = self.actor(info_state).masked_fill(~legal_mask, -1e9)
        return logits, (torch.softmax(logits, 1) * self.critic(info_state)).sum(1)


class Strategy(nn.Module):
    """What ``--export`` writes: the learner's masked logits, no value head."""

    def __init__(self, agent: Agent) -> None:
        super().__init__()
        self.actor = copy.deepcopy(agent.actor).eval().requires_grad_(False)

    def forward(self, info_state: torch.Tensor, legal_mask: torch.Tensor) -> torch.Tensor:
        """Logits [B, A] of information states [B, D] with legal masks [B, A]."""
        return self.actor(info_state.float()).masked_fill(~legal_mask.to(torch.bool), -1e9)


def logits_of(agent: Agent) -> Any:
    """The agent's logits as a numpy function of (info_state, legal_mask)."""
    def logits(info_state: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return agent(torch.as_tensor(info_state), torch.as_tensor(legal_mask))[0].numpy()
    return logits


def average(judged: Agent, agent: Agent, decay: float) -> None:
    """``judged`` becomes the exponential moving average of ``agent``'s weights (decay 0:
    a copy of them)."""
    with torch.no_grad():
        for mean, now in zip(judged.parameters(), agent.parameters(), strict=True):
            mean.mul_(decay).add_(now, alpha=1.0 - decay)


class AveragePlayer:
    """The judged strategy as a league opponent: it samples its moves from the softmax of
    ``net``'s logits (it follows ``net`` as it learns)."""

    def __init__(self, net: Agent, seed: int) -> None:
        self.net, self.generator = net, torch.Generator().manual_seed(seed)

    def __call__(self, observation: np.ndarray, action_mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits = self.net(torch.as_tensor(observation, dtype=torch.float32),
                              torch.as_tensor(action_mask).bool())[0]
        return sample_moves(logits, self.generator)[0].numpy()


def update(agent: Agent, magnet: Agent, optimizer: torch.optim.Optimizer, roll: Rollout,
           args: Args, progress: float) -> None:
    """PPO's clipped update with an entropy bonus and a reverse-KL pull to the magnet."""
    left = max(0.0, 1.0 - progress)
    optimizer.param_groups[0]["lr"] = args.learning_rate * left if args.anneal_lr \
        else args.learning_rate
    ent_coef = args.ent_final + (args.ent_coef - args.ent_final) * left
    advantages, trainable = row_advantages(roll, args.gamma, args.gae_lambda)
    returns = advantages + roll.values
    b_obs, b_masks = roll.obs[trainable].float(), roll.masks[trainable]
    b_actions, b_logprobs = roll.actions[trainable], roll.logprobs[trainable]
    b_advantages, b_returns = advantages[trainable], returns[trainable]
    num_samples = len(b_obs)
    minibatch = max(1, num_samples // args.num_minibatches)
    for _ in range(args.update_epochs):
        order = torch.randperm(num_samples)
        for begin in range(0, num_samples, minibatch):
            mb = order[begin:begin + minibatch]
            logits, value = agent(b_obs[mb], b_masks[mb])
            logp_all = torch.log_softmax(logits, 1)
            probs = logp_all.exp()
            logprob = logp_all.gather(1, b_actions[mb].unsqueeze(1)).squeeze(1)
            entropy = -(probs * logp_all).sum(1)
            ratio = (logprob - b_logprobs[mb]).exp()
            adv = b_advantages[mb]
            policy_loss = torch.max(
                -adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
            taken = agent.critic(b_obs[mb]).gather(1, b_actions[mb].unsqueeze(1)).squeeze(1)
            loss = policy_loss - ent_coef * entropy.mean() \
                + args.vf_coef * 0.5 * (taken - b_returns[mb]).pow(2).mean()
            if args.magnet_coef and args.magnet != "uniform":
                with torch.no_grad():
                    anchor = torch.log_softmax(magnet(b_obs[mb], b_masks[mb])[0], 1)
                kl = (probs * (logp_all - anchor)).sum(1)
                loss = loss + args.magnet_coef * kl.mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()


def step_size(args: Args, progress: float) -> float:
    """Mirror descent's ``eta`` at ``progress`` (0 to 1) of the run: ``--mmd-eta``,
    decaying linearly to ``--eta-floor`` of it if ``--anneal-eta``."""
    left = max(0.0, 1.0 - progress)
    return args.mmd_eta * (max(left, args.eta_floor) if args.anneal_eta else 1.0)


def advantage_estimates(action_values: torch.Tensor, actions: torch.Tensor,
                        returns: torch.Tensor, probs: torch.Tensor, advantages: torch.Tensor,
                        baseline: bool) -> torch.Tensor:
    """Each sample's unbiased estimate of every action's advantage, [B, A], up to a
    constant per state (which mirror descent's centring removes).

    Without a ``baseline``: ``(G - V(s)) / pi(a)`` on the action ``a`` taken with
    probability ``pi(a)``, 0 on the others (``advantages`` is ``G - V(s)``; only the
    shape of ``action_values`` counts).  With one, the critic's ``action_values`` ``Q(s,
    .)`` are a control variate (VR-MCCFR's baseline): ``Q(s, b)`` for every action
    ``b``, plus ``(G - Q(s, a)) / pi(a)`` on the one taken; its mean over ``a ~ pi`` is
    still ``E[G | b]``, and its variance only that of ``G`` around the critic's guess.
    """
    if not baseline:
        return torch.zeros_like(action_values).scatter_(
            1, actions.unsqueeze(1), (advantages / probs).unsqueeze(1))
    taken = action_values.gather(1, actions.unsqueeze(1)).squeeze(1)
    return action_values.clone().scatter_add_(
        1, actions.unsqueeze(1), ((returns - taken) / probs).unsqueeze(1))


def update_mmd(agent: Agent, magnet: Agent, optimizer: torch.optim.Optimizer, roll: Rollout,
               args: Args, progress: float) -> None:
    """One step of magnetic mirror descent in logit space, fitted by regression.

    Per information state the step is ``logits <- (logits + eta * A + eta * alpha *
    magnet_logits) / (1 + eta * alpha)`` over the legal actions (centred: a constant
    per state does not change the strategy), with ``A`` the advantage of every action.
    Each sample estimates ``A`` without bias: ``(G - V(s)) / pi(a)`` on the action
    ``a`` it took with probability ``pi(a)``, 0 on the others (``G`` its return), or with
    ``--baseline`` the critic's action values as a control variate
    (:func:`advantage_estimates`).  The actor regresses onto the samples' targets, so its
    fit averages them per state; the critic regresses onto the returns of the actions taken.
    """
    left = max(0.0, 1.0 - progress)
    optimizer.param_groups[0]["lr"] = args.learning_rate * left if args.anneal_lr \
        else args.learning_rate
    eta = step_size(args, progress)
    alpha = args.magnet_coef
    advantages, trainable = row_advantages(roll, args.gamma, args.gae_lambda)
    returns = advantages + roll.values
    b_obs, b_masks = roll.obs[trainable].float(), roll.masks[trainable]
    b_actions, b_returns = roll.actions[trainable], returns[trainable]
    b_probs = roll.logprobs[trainable].exp()
    if args.max_weight > 0:
        b_probs = b_probs.clamp_min(1.0 / args.max_weight)
    legal = b_masks.float()
    num_samples = len(b_obs)
    minibatch = max(1, num_samples // args.num_minibatches)

    def centred(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (logits - (logits * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True)) * mask

    with torch.no_grad():
        old = agent.actor(b_obs)
        estimate = advantage_estimates(
            agent.critic(b_obs) if args.baseline else torch.zeros_like(old), b_actions,
            b_returns, b_probs, advantages[trainable], args.baseline)
        towards = magnet.actor(b_obs) if args.magnet != "uniform" else torch.zeros_like(old)
        target = centred((old + eta * estimate + eta * alpha * towards) / (1 + eta * alpha),
                         legal)
    for _ in range(args.update_epochs):
        order = torch.randperm(num_samples)
        for begin in range(0, num_samples, minibatch):
            mb = order[begin:begin + minibatch]
            error = centred(agent.actor(b_obs[mb]), legal[mb]) - target[mb]
            values = agent.critic(b_obs[mb]).gather(1, b_actions[mb].unsqueeze(1)).squeeze(1)
            loss = error.pow(2).sum(1).mean() \
                + args.vf_coef * 0.5 * (values - b_returns[mb]).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()


def plot(curves: dict[str, list[tuple[int, float]]], path: str, title: str) -> None:
    """NashConv over agent-steps, one line per curve, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, points in curves.items():
        steps, values = zip(*points, strict=True)
        ax.plot(steps, values, label=label)
    ax.set(yscale="log", xlabel="agent-steps", ylabel="NashConv (exact, OpenSpiel)",
           title=title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train, measure NashConv along the way and at the end, export; the final figures."""
    args = Args.parse(argv, __doc__)
    if args.exact_average and args.average != "network":
        raise ValueError("--exact-average judges the samples the average network keeps: "
                         f"it needs --average network, not --average {args.average}")
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    game = load_game(args.game)
    size, num_actions = game.information_state_tensor_size(), game.num_distinct_actions()
    envs = make_rows(OpenSpielGame, args.num_games, args.backend, game=args.game)
    agent = Agent(size, num_actions, args.hidden)
    magnet = copy.deepcopy(agent).requires_grad_(False)
    judged = copy.deepcopy(agent).requires_grad_(args.average == "network")
    shares = {"self_play": 1.0 - args.snapshot_share - args.average_share,
              "snapshots": args.snapshot_share, "fixed": args.average_share}
    league = League.from_env(
        envs, shares=shares if args.league else {"self_play": 1.0},
        opponents={"average": AveragePlayer(judged, args.seed)}
        if args.league and args.average_share else None,
        sampling=PFSP("hard", power=2.0, floor=0.05),
        snapshot_every=args.snapshot_every if args.league and args.snapshot_share else None,
        max_snapshots=args.max_snapshots, seed=args.seed)
    averager = AverageNetwork(judged, args.average_window, size, num_actions,
                              args.learning_rate, args.seed, args.average_recent,
                              args.average_weighting) \
        if args.average == "network" else None
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    curve: list[tuple[int, float]] = []  # the judged strategy's NashConv
    learner_curve: list[tuple[int, float]] = []  # the learner's last iterate's
    exact_curve: list[tuple[int, float]] = []  # the ring's exact average's (--exact-average)
    updates = 0

    def check(agent_steps: int, seconds: float) -> None:
        value = nash_conv(game, softmax_policy(logits_of(judged)))
        learner = nash_conv(game, softmax_policy(logits_of(agent)))
        curve.append((agent_steps, value))
        learner_curve.append((agent_steps, learner))
        exact = ""
        if args.exact_average and averager is not None and averager.count:
            exact_curve.append((agent_steps, nash_conv(game, averager.exact())))
            exact = f"  exact average {exact_curve[-1][1]:.4f}"
        print(f"step {agent_steps:>10,}  {seconds:7.1f} s  NashConv {value:.4f}  "
              f"(the learner's own {learner:.4f}){exact}  pool {len(league.pool_ids)}",
              flush=True)

    def learn(roll: Rollout, progress: float) -> None:
        nonlocal updates
        if averager is not None:
            averager.add(agent, roll)
        (update_mmd if args.method == "mmd" else update)(agent, magnet, optimizer, roll,
                                                          args, progress)
        updates += 1
        if averager is not None:
            averager.fit(args.average_batches, args.num_games * args.num_steps // 2)
        else:
            average(judged, agent, args.ema_decay)
        if args.magnet == "ema":
            magnet.load_state_dict(judged.state_dict())
        elif args.magnet == "copy" and updates % args.magnet_every == 0:
            magnet.load_state_dict(agent.state_dict())

    try:  # the final strategy is always judged (last_check)
        agent_steps, elapsed, clock = run(envs, league, agent, args, learn, check,
                                          last_check=True)
    finally:
        envs.close()
    final = curve[-1][1]
    print(f"\n{agent_steps:,} agent-steps in {elapsed:.1f} s; NashConv of the final strategy "
          f"{final:.4f} ({args.game}, {'league' if args.league else 'naive self-play'})")
    report_throughput(agent_steps, elapsed, clock, args.backend)
    if args.export:
        torch.jit.save(torch.jit.script(Strategy(judged)), args.export)
        print(f"strategy written to {args.export} (TorchScript)")
    label = "league" if args.league else "naive self-play"
    if args.plot:
        plot({label: curve}, args.plot, f"{args.method.upper()} on {args.game}")
    if args.history:
        with open(args.history, "w") as file:
            json.dump({"args": asdict(args), "curve": curve, "learner_curve": learner_curve,
                       "exact_curve": exact_curve,
                       "seconds": elapsed, "agent_steps": agent_steps, "env_seconds": clock["env"]},
                      file)
    return {"agent_steps": agent_steps, "seconds": elapsed, "nash_conv": final,
            "curve": curve, "clock": clock, "agent": judged, "league": league}


if __name__ == "__main__":
    main()
