"""Renderer extensions: the extension property checked on tokens, periodic compaction, offline registration.

- :func:`check_extension` / :class:`ExtensionReport`: does an observation extend the previous
  observation + action, and if not, where and how (decoded side by side).
- :class:`CompactingRenderer`: thinking kept for ``period`` turns, then stripped from history once.
- :func:`render_continuation`: render only the messages a turn adds (token-in/token-out).
- :func:`render_action` / :func:`tool_call`: an assistant message (text, thinking, tool calls)
  as the action tokens a sampler returns, for scripted policies and tests.
- :func:`stop_overlap` / :func:`stop_token_sequences`: the stop string's tail that is the next
  header (role_colon), dropped once; :func:`is_valid_utf8`: byte-exact UTF-8 check of tokens.
- :mod:`renderers_ext.testing`: hypothesis strategies and turn/extension helpers for tests.
- :func:`load_renderer` / :func:`recommended_renderer_name` / :func:`register_renderers`: picklable
  cookbook renderers for any model, its tokenizer resolved by the cookbook's ``tokenizer_utils``
  (nothing is registered on import; this package knows no backend).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
