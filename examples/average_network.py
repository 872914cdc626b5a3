"""NFSP's average-policy network for ``selfplay_poker.py``: the learner's average strategy
fitted to its own samples, and that average computed exactly from the same samples."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from selfplay_ppo import Rollout  # beside this file
from torch import nn


class AverageNetwork:
    """The learner's average strategy learned from its own samples (NFSP's average-policy
    network): a ring of its last ``window`` samples, each an information state, its legal
    mask and the learner's probabilities there when it played, and an actor fitted to
    them by cross-entropy.  A state's fit is the mean of the learner's strategies over
    the window, each weighted by how often the learner reached the state then;
    ``weighting="linear"`` weighs each sample by its place in the window as well (the
    oldest least, the newest most: CFR+'s linear averaging over a window that holds the whole
    run)."""

    def __init__(self, net: nn.Module, window: int, size: int, num_actions: int,
                 learning_rate: float, seed: int, recent: float = 0.0,
                 weighting: str = "uniform") -> None:
        if weighting not in ("uniform", "linear"):
            raise ValueError(f"weighting must be 'uniform' or 'linear', not {weighting!r}")
        self.net, self.window, self.recent, self.count = net, window, recent, 0
        self.weighting = weighting
        self.states = torch.zeros(window, size)
        self.masks = torch.zeros(window, num_actions, dtype=torch.bool)
        self.probs = torch.zeros(window, num_actions)
        self.optimizer = torch.optim.Adam(net.actor.parameters(), lr=learning_rate, eps=1e-5)
        self.generator = torch.Generator().manual_seed(seed)

    def add(self, agent: nn.Module, roll: Rollout) -> None:
        """Keep the learner's samples of ``roll`` with ``agent``'s probabilities (call it
        before the update, while ``agent`` is the strategy that played them)."""
        states, masks = roll.obs[roll.sample].float(), roll.masks[roll.sample]
        with torch.no_grad():
            probs = torch.softmax(agent.actor(states).masked_fill(~masks, -1e9), 1)
        at = (self.count + torch.arange(len(states))) % self.window
        self.states[at], self.masks[at], self.probs[at] = states, masks, probs
        self.count += len(states)

    def held(self, least: int = 1) -> int:
        """How many of the newest samples the fit draws from (at least ``least``)."""
        held = min(self.count, self.window)
        if self.recent > 0:
            held = min(held, max(least, int(self.recent * self.count)))
        return held

    def exact(self) -> Any:
        """What the network is fitted to, computed exactly from the ring: per information
        state, the mean of the kept probabilities, each sample weighted as ``fit`` draws
        it; a probabilities function for ``nash_conv`` (a state never kept: uniform)."""
        held = self.held()
        at = (self.count - 1 - torch.arange(held)) % self.window
        # the chance that fit() draws the k-th oldest of the held samples: (2k - 1) / held^2
        weights = (2 * (held - torch.arange(held)) - 1).double() \
            if self.weighting == "linear" else torch.ones(held, dtype=torch.float64)
        states = np.ascontiguousarray(self.states[at].numpy())
        row = np.dtype((np.void, states.dtype.itemsize * states.shape[1]))
        keys, inverse = np.unique(states.view(row).ravel(), return_inverse=True)
        inverse = inverse.ravel()  # numpy 2 keeps the input's shape
        probs = self.probs[at].double() * weights[:, None]
        table = np.stack([np.bincount(inverse, probs[:, a].numpy(), len(keys))
                          for a in range(probs.shape[1])], 1)
        table /= np.bincount(inverse, weights.numpy(), len(keys))[:, None]

        def probabilities(info_state: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
            query = np.ascontiguousarray(info_state, dtype=states.dtype).view(row).ravel()
            found = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
            known = keys[found] == query
            uniform = legal_mask / legal_mask.sum(1, keepdims=True)
            return np.where(known[:, None], table[found] * legal_mask, uniform)

        return probabilities

    def fit(self, batches: int, batch_size: int) -> None:
        """``batches`` steps of cross-entropy on samples drawn from the ring (from its
        newest ``recent`` share of all the samples so far, if ``recent``): uniformly, or
        (``linear``) with a probability that grows linearly from the oldest to the newest."""
        held = self.held(batch_size)
        for _ in range(batches):
            if self.weighting == "linear":  # density of the age 1 - back/held: 2 * age
                draws = torch.rand(batch_size, generator=self.generator)
                back = (held * (1.0 - draws.sqrt())).long().clamp_(0, held - 1)
            else:
                back = torch.randint(held, (batch_size,), generator=self.generator)
            at = (self.count - 1 - back) % self.window
            logits = self.net.actor(self.states[at]).masked_fill(~self.masks[at], -1e9)
            loss = -(self.probs[at] * torch.log_softmax(logits, 1)).sum(1).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
