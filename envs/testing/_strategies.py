"""Conversation strategies with tool calls (thinking ones come from :mod:`renderers_ext.testing`)."""

from __future__ import annotations

import json

from hypothesis import strategies as st
from tinker_cookbook.renderers import Message, ToolCall

from renderers_ext.testing import assistant_messages, conversations, texts

_NAMES = st.from_regex(r"[a-z][a-z_]{0,15}", fullmatch=True)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def tool_calls(draw: st.DrawFn, *, max_calls: int = 2) -> list[ToolCall]:
    """1..``max_calls`` tool calls with JSON-object arguments and ids ``call_<k>``."""
    n = draw(st.integers(1, max_calls))
    out: list[ToolCall] = []
    for k in range(n):
        args = draw(st.dictionaries(_NAMES, _JSON_VALUES, max_size=3))
        out.append(
            ToolCall(
                function=ToolCall.FunctionBody(name=draw(_NAMES), arguments=json.dumps(args)),
                id=f"call_{k}",
            )
        )
    return out


@st.composite
def tool_call_conversations(
    draw: st.DrawFn, *, min_turns: int = 1, max_turns: int = 4, thinking: bool | None = None
) -> list[Message]:
    """``user (assistant+tool_calls tool_result+)* assistant``: a conversation whose assistant
    turns call tools (with or without thinking) and whose tool results answer each call."""
    body = texts(max_size=24, long=False)
    conv: list[Message] = [{"role": "user", "content": draw(body)}]
    for _ in range(draw(st.integers(min_turns, max_turns)) - 1):
        message = dict(draw(assistant_messages(thinking=thinking, text=body)))
        calls = draw(tool_calls())
        message["tool_calls"] = calls
        conv.append(message)  # type: ignore[arg-type]
        for call in calls:
            conv.append(
                {
                    "role": "tool",
                    "content": draw(body),
                    "tool_call_id": call.id or "",
                    "name": call.function.name,
                }
            )
    conv.append(draw(assistant_messages(thinking=thinking, text=body)))
    return conv


__all__ = ["conversations", "tool_call_conversations", "tool_calls"]
