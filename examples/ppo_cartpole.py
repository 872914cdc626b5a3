"""PPO on CartPole-v1 over a vector env of your choice: one file, one training loop.

    python examples/ppo_cartpole.py                            # fastvec, 2 worker processes
    python examples/ppo_cartpole.py --vector fastvec-sync      # everything in this process
    python examples/ppo_cartpole.py --vector gymnasium-async   # the same loop on Gymnasium's
    python examples/ppo_cartpole.py --help                     # every hyperparameter

``--vector`` picks the vector env (``--num-workers`` counts the processes that
step envs, 2 by default):

- ``gymnasium-sync``, ``gymnasium-async``: Gymnasium's ``SyncVectorEnv`` /
  ``AsyncVectorEnv`` (a process per env), with its ``RecordEpisodeStatistics``.
- ``sb3-subproc``: Stable-Baselines3's ``SubprocVecEnv`` (a process per env) behind
  a thin wrapper, :class:`SB3Vector` (needs ``pip install stable-baselines3``).
- ``fastvec-sync``: ``fastvec.SyncVecEnv``, in this process.
- ``fastvec-subproc``: ``fastvec.SubprocVecEnv`` with ``--num-workers`` workers (default).
- ``fastvec-local``: the same with ``local_block=True``: this process steps the
  first block of envs itself, ``--num-workers - 1`` workers step the others.
- ``fastvec-async``: ``--num-workers`` workers and async batches of half the envs:
  the rollout is collected with ``recv()`` / ``send()`` (:func:`collect_async`), so
  that the policy runs on one half while the workers step the other.
- ``fastvec-local-async``: async batches with ``local_block=True``.
- ``fastvec-ray``: ``fastvec.RayVecEnv`` with ``--num-workers`` actors, on the Ray this
  process joined (``ray.init(address=...)`` before :func:`main`) or on a local one;
  ``--actor-resources envs=1`` asks each actor for Ray resources (to keep actors on the
  nodes that offer them), ``--on-worker-failure restart`` and ``--timeout`` say what a
  lost or hung node does (``benchmarks/ray_ppo_node_loss.py`` trains so while nodes die).

The envs use Gymnasium's default autoreset mode, ``NEXT_STEP`` (fastvec's too): the
step after an episode ends returns the first observation of the next episode with
reward 0 and ignores its action.  That step is not a transition of any episode, so
the loop marks it invalid and leaves it out of the advantages and of the loss.  A
side benefit: the step that ends an episode returns that episode's real last
observation, so a time-limit truncation is bootstrapped from its value.  SB3 resets
an env within the step that ends its episode instead; :func:`collect_sync` handles
that case as SB3's own PPO does.

Every ``--log-every`` updates one line of the learning curve is printed (global
step, steps per second, mean return of the last ``--return-window`` episodes); at
the end, a plot of return against steps, the steps per second of the whole
training loop, the share of it spent in the vector env (``step``, or ``recv`` +
``send``) and the final average return.  ``examples/compare_vector_envs.py`` runs
every ``--vector`` choice side by side.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical
from tqdm import tqdm

import fastvec

VECTORS = ("gymnasium-sync", "gymnasium-async", "sb3-subproc", "fastvec-sync",
           "fastvec-subproc", "fastvec-local", "fastvec-async", "fastvec-local-async",
           "fastvec-ray")


@dataclass
class Args:
    """Hyperparameters; each is also a command-line flag (``num_envs`` is ``--num-envs``)."""

    env_id: str = "CartPole-v1"
    total_timesteps: int = 200_000
    num_envs: int = 8
    vector: str = "fastvec-subproc"  # which vector env: one of VECTORS
    num_workers: int = 2  # processes that step envs (fastvec-local*: this one and 1 worker)
    seed: int = 1
    num_steps: int = 128  # steps per env per rollout
    learning_rate: float = 2.5e-3
    anneal_lr: bool = True  # decay the learning rate linearly to 0
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    log_every: int = 10  # updates between two lines of the learning curve
    return_window: int = 20  # episodes averaged for "mean return"
    target_return: float = 450.0  # report when the mean return first exceeds this
    on_worker_failure: str = "raise"  # fastvec's vector envs: "raise" or "restart"
    timeout: float = 0.0  # fastvec's vector envs: seconds a step may take (0: no limit)
    actor_resources: str = ""  # fastvec-ray: Ray resources per actor, "name=amount,..."


def parse_args(argv: list[str] | None = None) -> Args:
    """Build a flag for every field of :class:`Args` and parse ``argv`` (the command line)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for arg in dataclasses.fields(Args):
        flag = "--" + arg.name.replace("_", "-")
        if arg.type == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                default=arg.default, help=f"default: {arg.default}")
        elif arg.name == "vector":
            parser.add_argument(flag, choices=VECTORS, default=arg.default,
                                help=f"the vector env (default: {arg.default})")
        else:
            kind = {"int": int, "float": float, "str": str}[arg.type]
            parser.add_argument(flag, type=kind, default=arg.default,
                                help=f"default: {arg.default}")
    # The flag of earlier versions: --backend sync / subproc.
    parser.add_argument("--backend", choices=("sync", "subproc"), help=argparse.SUPPRESS)
    values = vars(parser.parse_args(argv))
    backend = values.pop("backend")
    if backend:
        values["vector"] = f"fastvec-{backend}"
    return Args(**values)


def layer(in_size: int, out_size: int, gain: float = np.sqrt(2)) -> nn.Linear:
    """A linear layer with orthogonal weights and zero bias."""
    linear = nn.Linear(in_size, out_size)
    nn.init.orthogonal_(linear.weight, gain)
    nn.init.zeros_(linear.bias)
    return linear


class Agent(nn.Module):
    """Separate actor and critic MLPs (two hidden layers of 64, tanh)."""

    def __init__(self, obs_size: int, num_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer(obs_size, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, gain=1.0))
        self.actor = nn.Sequential(
            layer(obs_size, 64), nn.Tanh(), layer(64, 64), nn.Tanh(),
            layer(64, num_actions, gain=0.01))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs), shape ``(batch,)``."""
        return self.critic(obs).squeeze(-1)

    def act(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """Sample an action (or score ``action``): action, log-prob, entropy, value."""
        dist = Categorical(logits=self.actor(obs))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


def ascii_plot(points: list[tuple[int, float]], width: int = 60, height: int = 11) -> str:
    """Return against global step as a text plot (one ``*`` per column)."""
    if not points:
        return "(no finished episodes to plot)"
    steps = np.array([p[0] for p in points], dtype=float)
    values = np.array([p[1] for p in points], dtype=float)
    top = max(values.max(), 1.0)
    columns = np.minimum((steps / steps.max() * (width - 1)).astype(int), width - 1)
    rows = np.round(values / top * (height - 1)).astype(int)
    grid = [[" "] * width for _ in range(height)]
    for col, row in zip(columns, rows, strict=True):
        grid[height - 1 - row][col] = "*"
    lines = []
    for i, cells in enumerate(grid):
        label = f"{top * (height - 1 - i) / (height - 1):7.1f}" if i % 2 == 0 else " " * 7
        lines.append(f"{label} |{''.join(cells)}")
    lines.append(" " * 8 + "+" + "-" * width)
    lines.append(" " * 9 + "0" + f"{int(steps.max()):>{width - 1},}" + "  global step")
    return "\n".join(lines)


class SB3Vector:
    """Stable-Baselines3's ``SubprocVecEnv`` behind the calls this trainer makes.

    SB3's ``step`` returns ``(obs, rewards, dones, infos)`` with ``infos`` a list of
    dicts, and resets an env within the step that ends its episode (its last
    observation in ``infos[i]["terminal_observation"]``, ``"TimeLimit.truncated"``
    on a truncation).  This returns Gymnasium's five values in that ``SAME_STEP``
    convention: ``terminated`` and ``truncated`` apart, ``infos["final_obs"]`` with
    its ``"_final_obs"`` mask, and ``infos["episode"]`` from SB3's ``VecMonitor``.
    """

    same_step = True

    def __init__(self, env_fns: list) -> None:
        from stable_baselines3.common.vec_env import SubprocVecEnv, VecMonitor

        self.venv = VecMonitor(SubprocVecEnv(env_fns))
        self.num_envs = len(env_fns)
        self.single_observation_space = self.venv.observation_space
        self.single_action_space = self.venv.action_space

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        self.venv.seed(seed)  # env i gets seed + i at this reset, as in Gymnasium
        return self.venv.reset(), {}

    def step(self, actions: np.ndarray) -> tuple:
        obs, rewards, dones, infos = self.venv.step(actions)
        truncated = np.array([bool(d and i.get("TimeLimit.truncated", False))
                              for d, i in zip(dones, infos, strict=True)])
        out: dict[str, Any] = {}
        if dones.any():
            final = np.zeros_like(obs)
            for k in np.flatnonzero(dones):
                final[k] = infos[k]["terminal_observation"]
            out["final_obs"], out["_final_obs"] = final, dones.copy()
        ended = np.array(["episode" in i for i in infos])
        if ended.any():
            out["episode"] = {"r": np.array([i["episode"]["r"] if "episode" in i else 0.0
                                             for i in infos])}
            out["_episode"] = ended
        return obs, rewards, dones & ~truncated, truncated, out

    def close(self) -> None:
        self.venv.close()


def make_envs(args: Args) -> Any:
    """The vector env named by ``--vector``, reporting finished episodes' returns."""
    n, workers = args.num_envs, min(args.num_workers, args.num_envs)
    env_fns = [functools.partial(gym.make, args.env_id)] * n
    if args.vector in ("gymnasium-sync", "gymnasium-async"):
        cls = gym.vector.SyncVectorEnv if args.vector == "gymnasium-sync" \
            else gym.vector.AsyncVectorEnv
        return gym.wrappers.vector.RecordEpisodeStatistics(cls(env_fns))
    if args.vector == "sb3-subproc":
        return SB3Vector(env_fns)
    vector_kwargs: dict = {"episode_statistics": True}  # infos["episode"], infos["_episode"]
    if args.vector != "fastvec-sync":
        vector_kwargs.update(on_worker_failure=args.on_worker_failure,
                             timeout=args.timeout or None)
    if args.vector == "fastvec-ray":
        resources = dict(item.split("=") for item in args.actor_resources.split(",") if item)
        vector_kwargs.update(num_actors=workers, actor_options={
            "resources": {name: float(amount) for name, amount in resources.items()}})
        return fastvec.make(args.env_id, num_envs=n, backend="ray", vector_kwargs=vector_kwargs)
    if args.vector == "fastvec-sync":
        return fastvec.make(args.env_id, num_envs=n, backend="sync", vector_kwargs=vector_kwargs)
    if args.vector.startswith("fastvec-local"):
        vector_kwargs.update(num_workers=max(1, workers - 1), local_block=True)
    else:
        vector_kwargs["num_workers"] = workers
    if args.vector.endswith("async"):
        vector_kwargs["batch_size"] = n // 2
    return fastvec.make(args.env_id, num_envs=n, backend="subproc", vector_kwargs=vector_kwargs)


@dataclass
class Rollout:
    """One rollout, each tensor ``(num_steps, num_envs)``: column ``e`` is env ``e``'s steps.

    ``valid[t, e]`` is False where step ``t`` of env ``e`` was an autoreset step: its
    obs is the previous episode's last one and its action was ignored.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    done: torch.Tensor  # terminated or truncated
    values: torch.Tensor
    valid: torch.Tensor

    @classmethod
    def zeros(cls, num_steps: int, num_envs: int, obs_size: int) -> Rollout:
        shape = (num_steps, num_envs)
        return cls(obs=torch.zeros(shape + (obs_size,)),
                   actions=torch.zeros(shape, dtype=torch.long),
                   logprobs=torch.zeros(shape), rewards=torch.zeros(shape),
                   terminated=torch.zeros(shape), done=torch.zeros(shape),
                   values=torch.zeros(shape), valid=torch.zeros(shape, dtype=torch.bool))


@dataclass
class EnvState:
    """What the loop carries from one rollout to the next."""

    obs: torch.Tensor  # (num_envs, obs_size): each env's current observation
    autoreset: np.ndarray  # NEXT_STEP: this env's next step is a reset step
    recent: collections.deque  # returns of the last finished episodes
    same_step: bool = False  # SB3: finished envs were reset within the step
    held: list = field(default_factory=list)  # async: env_ids received and not sent yet


def record_episodes(infos: dict, recent: collections.deque) -> None:
    """Keep the returns of the episodes that ended in this step (or batch); an episode cut
    short by a restart of its worker or actor (``infos["worker_restarted"]``) ended by no
    doing of the agent's and is left out.
    """
    if "_episode" in infos:
        ended = infos["_episode"]
        if "_worker_restarted" in infos:
            ended = ended & ~infos["_worker_restarted"]
        recent.extend(infos["episode"]["r"][ended].tolist())


def collect_sync(envs: Any, agent: Agent, roll: Rollout, state: EnvState, gamma: float) -> float:
    """Fill ``roll`` with ``num_steps`` batched steps of every env; return seconds in ``step``."""
    env_seconds = 0.0
    for t in range(roll.rewards.shape[0]):
        roll.obs[t] = state.obs
        roll.valid[t] = torch.from_numpy(~state.autoreset)
        with torch.no_grad():
            action, logprob, _, value = agent.act(state.obs)
        roll.actions[t], roll.logprobs[t], roll.values[t] = action, logprob, value
        start = time.perf_counter()
        next_obs, reward, term, trunc, infos = envs.step(action.numpy())
        env_seconds += time.perf_counter() - start
        rewards = torch.as_tensor(reward, dtype=torch.float32)
        done = term | trunc
        if state.same_step:
            # SB3 reset the finished envs in this step, so every step is a transition and
            # next_obs starts the next episode.  A truncated episode is bootstrapped from
            # its real last observation through its reward, as SB3's PPO does, then ends.
            if trunc.any():
                with torch.no_grad():
                    last = torch.as_tensor(infos["final_obs"][trunc], dtype=torch.float32)
                    rewards[torch.from_numpy(trunc)] += gamma * agent.value(last)
            term = done
        else:
            state.autoreset = done  # the next step of these envs is a reset
        roll.rewards[t] = rewards
        roll.terminated[t] = torch.from_numpy(term)
        roll.done[t] = torch.from_numpy(done)
        state.obs = torch.as_tensor(next_obs, dtype=torch.float32)
        record_episodes(infos, state.recent)
    return env_seconds


def start_async(envs: Any, state: EnvState, seed: int) -> None:
    """Reset every env with async batches and hold the batches until the first rollout."""
    envs.async_reset(seed=seed)
    while sum(len(ids) for ids in state.held) < envs.num_envs:
        obs, _, _, _, _, env_ids = envs.recv()
        state.obs[torch.from_numpy(env_ids)] = torch.as_tensor(obs, dtype=torch.float32)
        state.held.append(env_ids)


def collect_async(envs: Any, agent: Agent, roll: Rollout, state: EnvState,
                  gamma: float) -> float:
    """Fill ``roll`` by async batches (double buffering); return the seconds in recv/send.

    ``recv()`` hands out whichever half of the envs is ready; while this process
    computes that half's actions, the workers step the other half.  The halves do
    not take turns in a fixed order, so each env counts its own steps (``filled``)
    and writes step ``t`` to row ``t`` of its own column: every column then holds
    one env's consecutive steps, as in :func:`collect_sync`, and GAE per env is
    unchanged.  An env that has all ``num_steps`` steps is held (received, not sent)
    until the next rollout; a batch is whole worker blocks whose envs always step
    together, so what is sent or held is whole blocks too.  NEXT_STEP autoreset
    steps are masked per env id, as in the sync loop.
    """
    num_steps, num_envs = roll.rewards.shape
    filled = np.zeros(num_envs, dtype=np.int64)  # steps stored per env in this rollout
    env_seconds = 0.0

    def act_and_send(env_ids: np.ndarray) -> None:
        nonlocal env_seconds
        t, e = torch.from_numpy(filled[env_ids]), torch.from_numpy(env_ids)
        obs = state.obs[e]
        with torch.no_grad():
            action, logprob, _, value = agent.act(obs)
        roll.obs[t, e], roll.valid[t, e] = obs, torch.from_numpy(~state.autoreset[env_ids])
        roll.actions[t, e], roll.logprobs[t, e], roll.values[t, e] = action, logprob, value
        start = time.perf_counter()
        envs.send(action.numpy(), env_ids)
        env_seconds += time.perf_counter() - start

    for env_ids in state.held:  # every env starts the rollout at row 0
        act_and_send(env_ids)
    state.held = []
    held = 0
    while held < num_envs:
        start = time.perf_counter()
        next_obs, reward, term, trunc, infos, env_ids = envs.recv()
        env_seconds += time.perf_counter() - start
        t, e = torch.from_numpy(filled[env_ids]), torch.from_numpy(env_ids)
        roll.rewards[t, e] = torch.as_tensor(reward, dtype=torch.float32)
        roll.terminated[t, e] = torch.from_numpy(term).float()
        roll.done[t, e] = torch.from_numpy(term | trunc).float()
        state.autoreset[env_ids] = term | trunc  # their next step is a reset
        state.obs[e] = torch.as_tensor(next_obs, dtype=torch.float32)
        record_episodes(infos, state.recent)
        filled[env_ids] += 1
        full = filled[env_ids] == num_steps
        if full.any():
            state.held.append(env_ids[full])
            held += int(full.sum())
        if not full.all():
            act_and_send(env_ids[~full])
    return env_seconds


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse the flags, train, print the learning curve, the speed and the final return;
    those figures (``reached``, ``held``: ``(step, seconds)`` or None).
    """
    args = parse_args(argv)
    batch_size = args.num_envs * args.num_steps
    num_updates = max(1, args.total_timesteps // batch_size)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    is_async = args.vector.endswith("-async") and args.vector.startswith("fastvec")
    collect = collect_async if is_async else collect_sync

    envs = make_envs(args)
    try:
        obs_size = int(np.prod(envs.single_observation_space.shape))
        agent = Agent(obs_size, int(envs.single_action_space.n))
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
        roll = Rollout.zeros(args.num_steps, args.num_envs, obs_size)
        shape = (args.num_steps, args.num_envs)

        state = EnvState(obs=torch.zeros(args.num_envs, obs_size),
                         autoreset=np.zeros(args.num_envs, dtype=np.bool_),
                         recent=collections.deque(maxlen=args.return_window),
                         same_step=getattr(envs, "same_step", False))
        recent = state.recent
        curve: list[tuple[int, float]] = []
        reached: tuple[int, float] | None = None  # (step, seconds) first above target
        held: tuple[int, float] | None = None  # ... and above it ever since
        global_step = 0
        env_seconds = 0.0  # in the vector env's step (or recv + send)
        start = time.perf_counter()
        if is_async:
            start_async(envs, state, args.seed)
        else:
            state.obs = torch.as_tensor(envs.reset(seed=args.seed)[0], dtype=torch.float32)
        progress = tqdm(total=num_updates * batch_size, unit="step", disable=None,
                        dynamic_ncols=True)

        for update in range(1, num_updates + 1):
            if args.anneal_lr:
                optimizer.param_groups[0]["lr"] = \
                    args.learning_rate * (1.0 - (update - 1) / num_updates)

            env_seconds += collect(envs, agent, roll, state, args.gamma)
            global_step += batch_size

            # GAE.  next_values[t] = V(obs[t + 1]); after a terminal or truncated step that
            # obs is the episode's real last one, so a truncation is bootstrapped from it.
            # (1 - done[t]) stops the recursion at an episode's end, so nothing from the
            # autoreset step that follows flows back into the episode.
            with torch.no_grad():
                next_values = torch.cat([roll.values[1:], agent.value(state.obs)[None]])
            advantages = torch.zeros(shape)
            last_gae = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                delta = roll.rewards[t] + args.gamma * next_values[t] \
                    * (1.0 - roll.terminated[t]) - roll.values[t]
                last_gae = delta + args.gamma * args.gae_lambda * (1.0 - roll.done[t]) \
                    * last_gae
                advantages[t] = last_gae
            returns = advantages + roll.values

            # Minibatch epochs over the valid transitions only.
            keep = roll.valid.reshape(-1)
            b_obs = roll.obs.reshape(-1, obs_size)[keep]
            b_actions = roll.actions.reshape(-1)[keep]
            b_logprobs, b_advantages = roll.logprobs.reshape(-1)[keep], advantages.reshape(-1)[keep]
            b_returns = returns.reshape(-1)[keep]
            num_valid = len(b_obs)
            minibatch_size = max(1, num_valid // args.num_minibatches)
            loss = torch.tensor(float("nan"))  # stays nan if every step was an autoreset
            for _ in range(args.update_epochs):
                order = torch.from_numpy(rng.permutation(num_valid))
                for begin in range(0, num_valid, minibatch_size):
                    mb = order[begin:begin + minibatch_size]
                    _, new_logprob, entropy, new_value = agent.act(b_obs[mb], b_actions[mb])
                    ratio = (new_logprob - b_logprobs[mb]).exp()
                    adv = b_advantages[mb]
                    adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
                    policy_loss = torch.max(
                        -adv * ratio,
                        -adv * ratio.clamp(1.0 - args.clip_coef, 1.0 + args.clip_coef),
                    ).mean()
                    value_loss = 0.5 * (new_value - b_returns[mb]).pow(2).mean()
                    loss = policy_loss - args.ent_coef * entropy.mean() \
                        + args.vf_coef * value_loss
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()

            elapsed = time.perf_counter() - start
            mean_return = float(np.mean(recent)) if recent else float("nan")
            progress.update(batch_size)
            progress.set_postfix(ret=f"{mean_return:.1f}")
            if recent:
                curve.append((global_step, mean_return))
            if len(recent) == recent.maxlen and mean_return > args.target_return:
                held = held or (global_step, elapsed)
                reached = reached or held
            else:
                held = None
            if update % args.log_every == 0 or update == num_updates:
                progress.write(
                    f"step {global_step:>8,}  sps {global_step / elapsed:>6,.0f}  "
                    f"mean_return {mean_return:6.1f}  (last {len(recent)} episodes)  "
                    f"loss {loss.item():.3f}")
        elapsed = time.perf_counter() - start
        progress.close()
    finally:
        envs.close()

    print(f"\nmean return of the last {len(recent)} episodes vs global step "
          f"({args.num_envs} envs, vector {args.vector}, seed {args.seed}):")
    print(ascii_plot(curve))
    if reached is None:
        print(f"mean return never exceeded {args.target_return:g}")
    else:
        print(f"mean return first exceeded {args.target_return:g} at step {reached[0]:,} "
              f"after {reached[1]:.1f} s")
    if held is not None:
        print(f"mean return stayed above {args.target_return:g} from step {held[0]:,} "
              f"({held[1]:.1f} s) to the end")
    print(f"{global_step:,} steps in {elapsed:.1f} s ({global_step / elapsed:,.0f} steps/s)")
    print(f"time in the vector env: {env_seconds:.1f} s ({env_seconds / elapsed:.0%} of the "
          f"training loop; {args.vector})")
    final = float(np.mean(recent)) if recent else float("nan")
    print(f"final average return: {final:.1f}")
    return {"reached": reached, "held": held, "final_return": final, "steps": global_step,
            "seconds": elapsed}


if __name__ == "__main__":  # a script's entry point (fastvec's workers never re-import it)
    main()
