"""Rendering only the messages a turn adds (the token-in/token-out step), and actions.

:func:`render_continuation` renders ``messages[start:]`` plus the generation header exactly as
``Renderer.build_generation_prompt`` renders them inside the whole conversation, without
re-rendering (and re-tokenising) anything before ``start``. :func:`render_action` renders an
assistant message (text, thinking, tool calls) as the tokens a sampler returns for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import tinker
from tinker_cookbook.renderers import Message, RenderContext, Renderer, ToolCall
from tinker_cookbook.tokenizer_utils import Tokenizer


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


def tool_call(name: str, arguments: Mapping[str, Any] | str | None = None, *, call_id: str | None = None) -> ToolCall:
    """A cookbook ``ToolCall`` of ``name`` with ``arguments`` (a mapping, dumped as JSON, or a
    JSON string as is)."""
    args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}))
    return ToolCall(function=ToolCall.FunctionBody(name=name, arguments=args), id=call_id)


def render_action(renderer: Renderer, message: Message, history: Sequence[Message] = ()) -> list[int]:
    """The tokens a sampler returns for the assistant ``message``, with any renderer.

    ``message`` may hold text, thinking parts and ``tool_calls``; it is rendered as the turn
    being produced (thinking kept) after ``history``, and followed by the renderer's end of
    turn (its stop token, or for ``role_colon`` the stop string's overlap), so
    ``renderer.parse_response`` gives the message back. Use it to script policies and to
    build actions in tests.

    Raises:
        ValueError: ``message`` is not an assistant message.
        tinker_cookbook.exceptions.RendererError: the renderer cannot render it (e.g. tool
            calls or thinking parts for a renderer without them).
    """
    if message["role"] != "assistant":
        raise ValueError(f"an action is an assistant message, got a {message['role']!r} message")
    head = [*history, message]
    idx = len(head) - 1
    last_user = max((i for i, m in enumerate(head) if m["role"] == "user"), default=-1)
    ctx = RenderContext(
        idx=idx,
        is_last=True,
        prev_message=head[idx - 1] if idx > 0 else None,
        last_user_index=last_user,
        in_last_assistant_turn=True,
    )
    rendered = renderer.render_message(message, ctx)
    tokens = [t for chunk in rendered.output for t in _chunk_tokens(chunk)]
    if rendered.stop_overlap is not None:
        tokens.extend(rendered.stop_overlap.tokens)
    return tokens


def prompt_tokens(renderer: Renderer, messages: list[Message]) -> list[int]:
    """``build_generation_prompt(messages)`` as a flat token list (text chunks only)."""
    return [t for chunk in renderer.build_generation_prompt(messages).chunks for t in _chunk_tokens(chunk)]


def stop_token_sequences(renderer: Renderer) -> list[list[int]]:
    """The renderer's stop condition as token sequences (strings encoded, ids as singletons)."""
    out: list[list[int]] = []
    for s in renderer.get_stop_sequences():
        if isinstance(s, int):
            out.append([s])
        else:
            out.append(list(renderer.tokenizer.encode(s, add_special_tokens=False)))
    return out


def stop_overlap(
    action: Sequence[int],
    continuation: Sequence[int],
    max_overlap: int = 16,
    *,
    stop: Sequence[Sequence[int]] | None = None,
) -> int:
    """Length of the tail of ``action`` that ``continuation`` starts with (to render it once).

    Renderers whose stop sequence is a string spanning the next header (``role_colon`` stops on
    ``"\n\nUser:"``) leave that header's start inside the sampled tokens; it must not be
    rendered twice. Renderers that stop on an end-of-turn token have no overlap (0).

    With ``stop`` (the renderer's stop sequences as tokens, see :func:`stop_token_sequences`)
    only a tail that is also a tail of a stop sequence counts: text the model wrote that merely
    repeats the next header (e.g. ``"…\nUser: x"`` before a user message ``"x…"``) is kept.
    Without it, the longest matching tail wins (a heuristic that such text can fool).
    """
    action = list(action)
    continuation = list(continuation)
    limit = min(len(action), len(continuation), max_overlap)
    if stop is not None:
        best = 0
        for seq in stop:
            seq = list(seq)
            for k in range(min(limit, len(seq)), best, -1):
                if action[-k:] == continuation[:k] == seq[-k:]:
                    best = k
                    break
        return best
    for k in range(limit, 0, -1):
        if action[-k:] == continuation[:k]:
            return k
    return 0


_BYTE_DECODER: dict[str, int] | None = None


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: printable stand-in character -> byte."""
    global _BYTE_DECODER
    if _BYTE_DECODER is None:
        bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
        cs = list(bs)
        n = 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        _BYTE_DECODER = {chr(c): b for b, c in zip(bs, cs, strict=True)}
    return _BYTE_DECODER


def token_bytes(tokenizer: Tokenizer, tokens: Sequence[int]) -> bytes | None:
    """The raw bytes of ``tokens`` for a byte-level BPE tokenizer (None if it is not one).

    Added/special tokens contribute their text encoded as UTF-8.
    """
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    table = _byte_decoder()
    out = bytearray()
    pieces = tokenizer.convert_ids_to_tokens(list(tokens))
    for tid, piece in zip(tokens, pieces, strict=True):
        if tid in added:
            out += str(added[tid]).encode("utf-8")
            continue
        if piece is None:
            return None
        try:
            out += bytes(table[ch] for ch in piece)
        except KeyError:  # not a byte-level vocabulary
            return None
    return bytes(out)


def is_valid_utf8(tokenizer: Tokenizer, tokens: Sequence[int]) -> bool:
    """Whether ``tokens`` decode to valid UTF-8 (no split multi-byte character).

    A decoded U+FFFD is ambiguous (the model may have written the replacement character
    itself); for byte-level tokenizers the raw bytes decide. Other tokenizers: no U+FFFD.
    """
    text = tokenizer.decode(list(tokens))
    if "\ufffd" not in text:
        return True
    raw = token_bytes(tokenizer, tokens)
    if raw is None:
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
