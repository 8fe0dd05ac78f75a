"""Scripted completers for tests and scripted policies: replay fixed replies with no model.

- :class:`ScriptedTokenCompleter`: one script of replies, handed out in call order (with optional
  delay, hangs and raised exceptions; it counts calls in flight).
- :class:`ScriptedGroupCompleter`: one :class:`ScriptedTokenCompleter` per env of a group (each
  call is routed to the conversation it continues), so a group of envs plays in parallel, each its
  own script.
- :class:`ScriptedMessageCompleter`: scripted assistant messages for message-level callers.

A token-level reply is a token list, a string (encoded, then the stop token), an assistant
message (text, thinking, ``tool_calls``; rendered by ``render``, e.g.
``functools.partial(renderers_ext.render_action, renderer)``, which
``envs.testing.scripted_policy`` sets up) or an exception (raised on that call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeAlias

import anyio
import tinker
from tinker_cookbook import renderers
from tinker_cookbook.completers import MessageCompleter, StopCondition, TokenCompleter, TokensWithLogprobs

ScriptedReply: TypeAlias = Sequence[int] | str | Mapping[str, Any] | BaseException
"""One scripted token-level reply: tokens, text, an assistant message or an exception."""


class ScriptExhaustedError(RuntimeError):
    """A scripted completer was called more times than it has replies."""


class ScriptedTokenCompleter(TokenCompleter):
    """Replays given completions, one per call, as :class:`TokensWithLogprobs`.

    Args:
        replies: token lists, strings (encoded with ``tokenizer``; ``stop_token`` appended when
            given, e.g. ``2`` for ``<|im_end|>``), assistant messages (rendered with
            ``renderer``, end of turn included), or exception instances, raised on that call.
        tokenizer: needed when replies are strings (default: ``renderer.tokenizer``).
        stop_token: appended to string replies (reported ``stop_reason="stop"``).
        render: turns a message reply into its action tokens (needed when replies are messages).
        logprob: logprob reported for every token.
        delay: seconds to ``await anyio.sleep`` before answering (0: it never yields).
        cycle: start over after the last reply instead of raising :class:`ScriptExhaustedError`.
        hang_calls: call numbers (0-based, over the completer's life) that never answer.

    Replies report ``stop_reason="stop"``; ``max_tokens`` (per call) truncates a longer reply and
    reports ``"length"``.
    ``calls`` records ``(prompt tokens, stop)`` of every call; ``in_flight`` counts the calls
    running now and ``max_in_flight`` the most seen at once.
    """

    def __init__(
        self,
        replies: Sequence[ScriptedReply],
        tokenizer: Any = None,
        *,
        stop_token: int | None = None,
        logprob: float = -1.0,
        delay: float = 0.0,
        cycle: bool = False,
        render: Callable[[renderers.Message], Sequence[int]] | None = None,
        hang_calls: Collection[int] = (),
    ) -> None:
        self._replies = _script(replies, tokenizer, stop_token, render)
        self.logprob = logprob
        self.delay = delay
        self.cycle = cycle
        self.hang_calls = frozenset(hang_calls)
        self.calls: list[tuple[list[int], StopCondition]] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        """The next scripted reply."""
        i = len(self.calls)
        self.calls.append((model_input.to_ints(), stop))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if i in self.hang_calls:
                await anyio.sleep_forever()
            if self.delay:
                await anyio.sleep(self.delay)
        finally:
            self.in_flight -= 1
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


def _script(
    replies: Sequence[ScriptedReply],
    tokenizer: Any,
    stop_token: int | None,
    render: Callable[[renderers.Message], Sequence[int]] | None,
) -> list[list[int] | BaseException]:
    """Scripted replies as token lists (exceptions kept)."""
    out: list[list[int] | BaseException] = []
    for i, r in enumerate(replies):
        if isinstance(r, BaseException):
            out.append(r)
        elif isinstance(r, str):
            if tokenizer is None:
                raise ValueError("string replies need a tokenizer")
            toks = list(tokenizer.encode(r, add_special_tokens=False))
            out.append(toks + ([stop_token] if stop_token is not None else []))
        elif isinstance(r, Mapping):
            if render is None:
                raise ValueError(f"reply {i} is a message: message replies need render=")
            out.append([int(t) for t in render(dict(r))])  # type: ignore[arg-type]
        else:
            out.append([int(t) for t in r])
    return out


class _Conversation:
    """One script of a :class:`ScriptedGroupCompleter` and where its conversation stands."""

    def __init__(self, completer: ScriptedTokenCompleter, initial: list[int]):
        self.completer = completer
        self.initial = initial
        self.expected = initial
        """The last prompt + the reply given to it: the next prompt of this env starts with it."""


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class ScriptedGroupCompleter(TokenCompleter):
    """A scripted policy for a group of envs: each env plays its own script.

    Envs of a group sample through one policy, in whatever order their turns interleave. A
    call is routed to the conversation it continues: its prompt starts with that script's
    previous prompt + reply (token-in/token-out envs), else, when it starts with a script's
    first prompt (an env that re-rendered its history), to the closest such conversation. A
    prompt that continues no conversation starts the next unused script. Identical envs are
    interchangeable, so scripts are given out in order of first calls.

    Args:
        scripts: one :class:`ScriptedTokenCompleter` per env.

    ``calls`` records ``(script index, prompt tokens)`` of every call.
    """

    def __init__(self, scripts: Sequence[ScriptedTokenCompleter]) -> None:
        self._scripts = list(scripts)
        self._conversations: list[_Conversation] = []
        self.calls: list[tuple[int, list[int]]] = []

    def _route(self, prompt: list[int]) -> _Conversation:
        extended = [c for c in self._conversations if prompt[: len(c.expected)] == c.expected]
        if extended:
            return max(extended, key=lambda c: len(c.expected))
        rerendered = [
            c for c in self._conversations if len(prompt) > len(c.initial) and prompt[: len(c.initial)] == c.initial
        ]
        if rerendered:
            return max(rerendered, key=lambda c: _common_prefix(prompt, c.expected))
        k = len(self._conversations)
        if k >= len(self._scripts):
            raise ScriptExhaustedError(
                f"ScriptedGroupCompleter has {len(self._scripts)} scripts; a prompt continuing none of "
                f"their conversations would start script {k + 1}"
            )
        conversation = _Conversation(self._scripts[k], prompt)
        self._conversations.append(conversation)
        return conversation

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        """The next reply of the script whose conversation ``model_input`` continues."""
        prompt = list(model_input.to_ints())
        conversation = self._route(prompt)
        self.calls.append((self._conversations.index(conversation), prompt))
        reply = _reply_preview(conversation.completer)
        conversation.expected = [*prompt, *(reply[:max_tokens] if max_tokens is not None else reply)]
        return await conversation.completer(model_input, stop, max_tokens=max_tokens)


def _reply_preview(completer: ScriptedTokenCompleter) -> list[int]:
    """The tokens the completer's next call returns (empty for an exception or an exhausted script)."""
    i = len(completer.calls)
    replies = completer._replies
    if i >= len(replies):
        if not completer.cycle or not replies:
            return []
        i %= len(replies)
    reply = replies[i]
    return [] if isinstance(reply, BaseException) else list(reply)


class ScriptedMessageCompleter(MessageCompleter):
    """Answers with scripted assistant messages.

    Args:
        replies: a list of reply strings / messages / exceptions (one per call), or a callable
            ``messages -> str | Message`` (sync or async).
        delay: seconds to ``await anyio.sleep`` before answering.
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
            await anyio.sleep_forever()
        if self.delay:
            await anyio.sleep(self.delay)
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
