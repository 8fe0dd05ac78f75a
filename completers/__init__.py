"""Completers: policies to sample from, over either backend, plus scripted ones for tests.

- :class:`TokenCompleter`, :class:`MessageCompleter`, :class:`TokensWithLogprobs`,
  ``StopCondition``: the cookbook's interfaces, re-exported (so cookbook code accepts ours).
- :class:`SamplingTokenCompleter`, :class:`SamplingMessageCompleter`: over any sampling client
  with tinker's ``sample`` (``tinker.SamplingClient`` or ``backend.LocalSamplingClient``).
- :class:`ScriptedTokenCompleter`, :class:`ScriptedMessageCompleter`: replay fixed replies, with
  optional delay / raise / hang, for tests of envs and rollouts.
"""

from tinker_cookbook.completers import MessageCompleter, StopCondition, TokenCompleter, TokensWithLogprobs

from completers._sampling import SamplingClientLike, SamplingMessageCompleter, SamplingTokenCompleter
from completers._scripted import ScriptedMessageCompleter, ScriptedTokenCompleter, ScriptExhaustedError

__all__ = [
    "MessageCompleter",
    "SamplingClientLike",
    "SamplingMessageCompleter",
    "SamplingTokenCompleter",
    "ScriptExhaustedError",
    "ScriptedMessageCompleter",
    "ScriptedTokenCompleter",
    "StopCondition",
    "TokenCompleter",
    "TokensWithLogprobs",
]
