"""Public test helpers for env authors: hypothesis strategies and a one-call conformance assertion.

Property-test your own env in three lines::

    from envs.testing import assert_env_conforms

    def test_my_env_conforms():
        assert_env_conforms(MyEnvGroupBuilder(secret=7))

Strategies:

- conversations: :func:`conversations` (thinking or not), :func:`tool_call_conversations`,
  :func:`messages`, :func:`assistant_messages`, :func:`thinking_contents`, :func:`texts`;
- actions: :func:`env_actions` (random, empty, invalid UTF-8, max length, stop token alone,
  well-formed; :class:`ActionKind`), :func:`token_actions` (raw token sequences);
- tool calls: :func:`tool_call_messages` (calls to declared tools, schema-shaped),
  :func:`json_values` (values of a JSON schema);
- env configs: :func:`env_limits`, :func:`fault_policies`.

Scripted policies: :func:`scripted_policy` (one script of replies per env of a group; replies are
text, tokens or assistant messages with tool calls), :func:`render_action` and :func:`tool_call`
(an assistant message as the action tokens a sampler returns).

Also :func:`cookbook_twenty_questions` (tinker-cookbook's own env with a :class:`ScriptedAnswerer`),
an example of checking a cookbook-style env offline.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
