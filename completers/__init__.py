"""Completers: the cookbook's policy interfaces and implementations, plus scripted ones for tests.

- :class:`TokenCompleter`, :class:`MessageCompleter`, :class:`TokensWithLogprobs`,
  ``StopCondition``: the cookbook's interfaces, re-exported (so cookbook code accepts ours).
- :class:`TinkerTokenCompleter`, :class:`TinkerMessageCompleter`: the cookbook's completers over a
  sampling client, re-exported. They call ``sampling_client.sample_async``, which both
  ``tinker.SamplingClient`` and the local backend's ``LocalSamplingClient`` have, so they serve
  either backend (TurnGym had a copy of them; one is enough).
- :class:`ScriptedTokenCompleter`, :class:`ScriptedMessageCompleter`: replay fixed replies, with
  optional delay / raise / hang, for tests of envs and rollouts; :class:`ScriptedGroupCompleter`
  gives each env of a group its own script (replies may be assistant messages with tool calls).
- :class:`~completers.openai_compat.OpenAICompatibleMessageCompleter` (imported from its module):
  any OpenAI-compatible ``/chat/completions`` endpoint.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
