"""Scripted completers for tests: replay fixed replies with no model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import tinker
from tinker_cookbook import renderers
from tinker_cookbook.completers import MessageCompleter, StopCondition, TokenCompleter, TokensWithLogprobs


class ScriptExhaustedError(RuntimeError):
    """A scripted completer was called more times than it has replies."""


class ScriptedTokenCompleter(TokenCompleter):
    """Replays given completions, one per call, as :class:`TokensWithLogprobs`.

    Args:
        replies: token lists, or strings (encoded with ``tokenizer``; ``stop_token`` appended when
            given, e.g. ``2`` for ``<|im_end|>``). A reply may also be an exception instance,
            raised on that call.
        tokenizer: needed when replies are strings.
        stop_token: appended to string replies (reported ``stop_reason="stop"``).
        logprob: logprob reported for every token.
        delay: seconds to ``await asyncio.sleep`` before answering.
        cycle: start over after the last reply instead of raising :class:`ScriptExhaustedError`.

    Replies report ``stop_reason="stop"``; ``max_tokens`` (per call) truncates a longer reply and
    reports ``"length"``.
    ``calls`` records ``(prompt tokens, stop)`` of every call.
    """

    def __init__(
        self,
        replies: Sequence[Sequence[int] | str | BaseException],
        tokenizer: Any = None,
        *,
        stop_token: int | None = None,
        logprob: float = -1.0,
        delay: float = 0.0,
        cycle: bool = False,
    ) -> None:
        self._replies: list[list[int] | BaseException] = []
        for r in replies:
            if isinstance(r, BaseException):
                self._replies.append(r)
            elif isinstance(r, str):
                if tokenizer is None:
                    raise ValueError("string replies need a tokenizer")
                toks = list(tokenizer.encode(r, add_special_tokens=False))
                self._replies.append(toks + ([stop_token] if stop_token is not None else []))
            else:
                self._replies.append([int(t) for t in r])
        self.logprob = logprob
        self.delay = delay
        self.cycle = cycle
        self.calls: list[tuple[list[int], StopCondition]] = []

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        """The next scripted reply."""
        i = len(self.calls)
        self.calls.append((model_input.to_ints(), stop))
        if self.delay:
            await asyncio.sleep(self.delay)
        if i >= len(self._replies):
            if not self.cycle or not self._replies:
                raise ScriptExhaustedError(
                    f"ScriptedTokenCompleter has {len(self._replies)} replies; call {i + 1}"
                )
            i %= len(self._replies)
        reply = self._replies[i]
        if isinstance(reply, BaseException):
            raise reply
        tokens, reason = list(reply), "stop"
        if max_tokens is not None and len(tokens) > max_tokens:
            tokens, reason = tokens[:max_tokens], "length"
        return TokensWithLogprobs(
            tokens=tokens, maybe_logprobs=[self.logprob] * len(tokens), stop_reason=reason
        )  # type: ignore[arg-type]


class ScriptedMessageCompleter(MessageCompleter):
    """Answers with scripted assistant messages.

    Args:
        replies: a list of reply strings / messages / exceptions (one per call), or a callable
            ``messages -> str | Message`` (sync or async).
        delay: seconds to ``await asyncio.sleep`` before answering.
        hang: never answer (sleeps forever; for timeout tests).
        cycle: start over after the last reply instead of raising :class:`ScriptExhaustedError`.

    ``calls`` records the messages of every call (copied).
    """

    def __init__(
        self,
        replies: Sequence[str | renderers.Message | BaseException] | Callable[[list[renderers.Message]], Any],
        *,
        delay: float = 0.0,
        hang: bool = False,
        cycle: bool = False,
    ) -> None:
        self._replies = replies
        self.delay = delay
        self.hang = hang
        self.cycle = cycle
        self.calls: list[list[renderers.Message]] = []

    async def __call__(self, messages: list[renderers.Message]) -> renderers.Message:
        """The next scripted reply as an assistant message."""
        i = len(self.calls)
        self.calls.append([dict(m) for m in messages])  # type: ignore[misc]
        if self.hang:
            await asyncio.Event().wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        if callable(self._replies):
            reply = self._replies(messages)
            if asyncio.iscoroutine(reply):
                reply = await reply
        else:
            if i >= len(self._replies):
                if not self.cycle or not self._replies:
                    raise ScriptExhaustedError(
                        f"ScriptedMessageCompleter has {len(self._replies)} replies; call {i + 1}"
                    )
                i %= len(self._replies)
            reply = self._replies[i]
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, str):
            return {"role": "assistant", "content": reply}
        return dict(reply)  # type: ignore[return-value]
