"""Periodic compaction: keep thinking in history for N turns, then strip it from all earlier turns.

Keeping every thinking block makes the prompt grow fast; stripping it every turn (what Qwen3's
template does) breaks the extension property at every turn, so each turn becomes its own datum.
:class:`CompactingRenderer` takes the middle road: inside a window of ``period`` assistant turns
the history is kept verbatim (the extension property holds), and at the start of each new window
the thinking of every earlier turn is stripped once (one break per window). An episode of T turns
then trains as ceil(T / period) sequences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import tinker
from tinker_cookbook.renderers import Message, RenderContext, Renderer
from tinker_cookbook.renderers.base import RenderedMessage, remove_thinking

_THINK_RE = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


def strip_thinking(message: Message) -> Message:
    """A copy of ``message`` without thinking (ThinkingPart items or inline ``<think>`` blocks)."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": remove_thinking(content)}
    if isinstance(content, str) and "<think>" in content:
        return {**message, "content": _THINK_RE.sub("", content)}
    return message


def _preserving(base: Renderer) -> Renderer:
    """A shallow twin of ``base`` that never strips thinking from history on its own."""
    if not getattr(base, "strip_thinking_from_history", False):
        return base
    twin = object.__new__(type(base))
    vars(twin).update(vars(base))
    twin.strip_thinking_from_history = False  # type: ignore[attr-defined]
    return twin


class CompactingRenderer(Renderer):
    """Wraps a renderer so that thinking is stripped from history once every ``period`` turns.

    A prompt that follows ``k`` assistant turns keeps the thinking of turns
    ``[period * (k // period), k)`` and strips it from all earlier ones. Renderers without
    thinking are unchanged (stripping finds nothing). Picklable when ``base`` is.
    """

    def __init__(self, base: Renderer, period: int):
        if period < 1:
            raise ValueError(f"compaction period must be >= 1, got {period}")
        super().__init__(base.tokenizer)
        self.base = base
        self.period = period
        self._inner = _preserving(base)
        self.supports_streaming = base.supports_streaming
        self.disables_thinking = base.disables_thinking

    def __reduce__(self) -> tuple[Any, ...]:
        return (CompactingRenderer, (self.base, self.period))

    def __repr__(self) -> str:
        return f"CompactingRenderer({type(self.base).__name__}, period={self.period})"

    @property
    def has_extension_property(self) -> bool:
        """False: the extension property holds only inside a window (see :meth:`extends_at`)."""
        return False

    @property
    def extends_within_windows(self) -> bool:
        """Whether the prompt extends inside each window (the base renderer, with history
        thinking kept, has the extension property), so the only breaks are compactions."""
        return self._inner.has_extension_property

    def extends_at(self, turn: int, messages: Sequence[Message] | None = None) -> bool:
        """Whether the prompt after ``turn`` completed assistant turns extends the previous one.

        Without ``messages``: inside a window only. With the conversation after that turn,
        windows count the conversation's own assistant messages (a few-shot assistant example
        counts, as it does in :meth:`compact`), and a window start whose closing window has no
        thinking to strip extends too (compacting it changes nothing, so there is no reason to
        re-render).
        """
        if not self._inner.has_extension_property:
            return False
        if messages is None:
            return turn == 0 or turn % self.period != 0
        assistant = [m for m in messages if m["role"] == "assistant"]
        n = len(assistant)
        if n == 0 or n % self.period != 0:
            return True
        return all(strip_thinking(m) == m for m in assistant[n - self.period : n])

    def compact(self, messages: list[Message], produced_from: int | None = None) -> list[Message]:
        """The history as this renderer shows it: thinking stripped before the current window.

        Messages from index ``produced_from`` on are the turn being produced (a supervised
        example's trained turn): they are neither counted nor stripped. ``None``: all history
        (a generation prompt).
        """
        end = len(messages) if produced_from is None else max(0, min(produced_from, len(messages)))
        n_assistant = sum(1 for m in messages[:end] if m["role"] == "assistant")
        cutoff = (n_assistant // self.period) * self.period
        out: list[Message] = []
        seen = 0
        for idx, m in enumerate(messages):
            if m["role"] == "assistant" and idx < end:
                out.append(strip_thinking(m) if seen < cutoff else m)
                seen += 1
            else:
                out.append(m)
        return out

    # --- Renderer interface, delegated to the thinking-preserving base -------------------
    @property
    def _bos_tokens(self) -> list[int]:
        return self._inner._bos_tokens

    def get_stop_sequences(self) -> list[str] | list[int]:
        return self._inner.get_stop_sequences()

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        return self._inner.render_message(message, ctx)

    def parse_response(self, response: list[int]) -> Any:
        return self._inner.parse_response(response)

    def _get_generation_suffix(self, role: Any, ctx: RenderContext) -> list[int]:
        return self._inner._get_generation_suffix(role, ctx)

    def _last_assistant_turn_start_index(self, messages: list[Message]) -> int:
        return self._inner._last_assistant_turn_start_index(messages)

    def build_generation_prompt(
        self, messages: list[Message], role: Any = "assistant", prefill: str | None = None
    ) -> tinker.ModelInput:
        return self._inner.build_generation_prompt(self.compact(messages), role, prefill)

    def build_supervised_example(self, messages: list[Message], *args: Any, **kwargs: Any) -> Any:
        """Like the base's; the last assistant message (the produced turn, one env step) keeps
        its thinking, and what precedes it is compacted exactly as in the generation prompt
        that preceded it."""
        produced_from = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
        return self._inner.build_supervised_example(self.compact(messages, produced_from), *args, **kwargs)

    # --- the rest of the interface, so the wrapper is a drop-in replacement --------------
    @property
    def _end_message_token(self) -> int:
        return self._inner._end_message_token

    def _normalize_response_tokens(self, response: list[int]) -> list[int]:
        return self._inner._normalize_response_tokens(response)

    def _parse_response_for_streaming(self, response: list[int]) -> Any:
        return self._inner._parse_response_for_streaming(response)

    def to_openai_message(self, message: Message) -> dict:
        return self._inner.to_openai_message(message)

    def create_conversation_prefix_with_tools(self, tools: Any, system_prompt: str = "") -> list[Message]:
        return self._inner.create_conversation_prefix_with_tools(tools, system_prompt)


def extension_expected(renderer: Renderer, turn: int, messages: Sequence[Message] | None = None) -> bool:
    """Whether the observation after ``turn`` completed turns should extend the previous one.

    ``messages`` (the conversation after that turn, optional) lets a compacting renderer say
    that a window start with nothing to strip extends too (see :meth:`CompactingRenderer.extends_at`).
    """
    if isinstance(renderer, CompactingRenderer):
        return renderer.extends_at(turn, messages)
    return renderer.has_extension_property
