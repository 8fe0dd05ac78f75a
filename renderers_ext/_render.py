"""Rendering only the messages a turn adds (the token-in/token-out step).

:func:`render_continuation` renders ``messages[start:]`` plus the generation header exactly as
``Renderer.build_generation_prompt`` renders them inside the whole conversation, without
re-rendering (and re-tokenising) anything before ``start``.
"""

from __future__ import annotations

import tinker
from tinker_cookbook.renderers import Message, RenderContext, Renderer


def _chunk_tokens(chunk: tinker.ModelInputChunk) -> list[int]:
    if isinstance(chunk, tinker.EncodedTextChunk):
        return list(chunk.tokens)
    raise TypeError(f"only text chunks are supported in token histories, got {type(chunk).__name__}")


def render_continuation(
    renderer: Renderer, messages: list[Message], start: int, role: str = "assistant"
) -> list[int]:
    """Tokens of ``messages[start:]`` followed by the generation header for ``role``.

    The context of each message (index, neighbours, last user index, produced turn) is
    computed over the whole list, as ``build_generation_prompt`` does, so for a renderer with
    the extension property ``prompt(messages[:start] + sampled) + render_continuation(...)``
    equals ``build_generation_prompt(messages)``.
    """
    if not 0 <= start <= len(messages):
        raise ValueError(f"start={start} is outside the conversation of {len(messages)} messages")
    last_user_idx = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    turn_start = renderer._last_assistant_turn_start_index(messages)
    out: list[int] = []
    for idx in range(start, len(messages)):
        message = messages[idx]
        ctx = RenderContext(
            idx=idx,
            is_last=idx == len(messages) - 1,
            prev_message=messages[idx - 1] if idx > 0 else None,
            next_message=messages[idx + 1] if idx + 1 < len(messages) else None,
            last_user_index=last_user_idx,
            in_last_assistant_turn=idx >= turn_start,
        )
        rendered = renderer.render_message(message, ctx)
        if rendered.header is not None:
            out.extend(rendered.header.tokens)
        for chunk in rendered.output:
            out.extend(_chunk_tokens(chunk))
    suffix_ctx = RenderContext(
        idx=len(messages),
        is_last=True,
        prev_message=messages[-1] if messages else None,
        last_user_index=last_user_idx,
        in_last_assistant_turn=True,
    )
    out.extend(renderer._get_generation_suffix(role, suffix_ctx))  # type: ignore[arg-type]
    return out


def prompt_tokens(renderer: Renderer, messages: list[Message]) -> list[int]:
    """``build_generation_prompt(messages)`` as a flat token list (text chunks only)."""
    return [t for chunk in renderer.build_generation_prompt(messages).chunks for t in _chunk_tokens(chunk)]


def stop_overlap(action: list[int], continuation: list[int], max_overlap: int = 16) -> int:
    """Length of the longest tail of ``action`` that ``continuation`` starts with.

    Renderers whose stop sequence is a string spanning the next header (``role_colon`` stops on
    ``"\n\nUser:"``) leave that header's start inside the sampled tokens; it must not be
    rendered twice. Renderers that stop on an end-of-turn token have no overlap (0).
    """
    for k in range(min(len(action), len(continuation), max_overlap), 0, -1):
        if action[-k:] == continuation[:k]:
            return k
    return 0
