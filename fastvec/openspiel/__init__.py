"""OpenSpiel games as rows of fastvec's vector envs, and their exact exploitability.

Needs the ``openspiel`` extra (``pip install "fastvec[openspiel]"``: OpenSpiel's
``open_spiel`` package and PettingZoo).

- :class:`OpenSpielGame`: an OpenSpiel game as a PettingZoo turn-based game whose
  agents observe their ``information_state_tensor`` and the legal-action mask;
  ``fastvec.make_multiagent(OpenSpielGame, num_games, game="leduc_poker")`` runs
  it as rows on any backend.
- :func:`nash_conv`: OpenSpiel's exact NashConv of a batched policy
  ``probabilities(info_state, legal_mask)``; :func:`softmax_policy` turns one that
  returns logits into probabilities.

See docs/openspiel.md.
"""

from fastvec.openspiel.exploitability import (
    information_states,
    nash_conv,
    softmax_policy,
    tabular_policy,
)
from fastvec.openspiel.game import OpenSpielGame, load_game

__all__ = ["OpenSpielGame", "information_states", "load_game", "nash_conv", "softmax_policy",
           "tabular_policy"]
