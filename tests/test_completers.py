"""Completers: scripted ones, and sampling ones over the local backend (TINY)."""

from __future__ import annotations

import asyncio

import pytest
import tinker
from backend_fixtures import TINY, encode, make_service

from backend import load_tokenizer
from completers import (
    MessageCompleter,
    ScriptedMessageCompleter,
    ScriptedTokenCompleter,
    ScriptExhaustedError,
    TinkerMessageCompleter,
    TinkerTokenCompleter,
    TokenCompleter,
)


def test_scripted_token_completer_replays_texts_and_tokens() -> None:
    tok = load_tokenizer()
    c = ScriptedTokenCompleter(["Hello!", [5, 6, 7], ValueError("boom")], tok, stop_token=2)
    assert isinstance(c, TokenCompleter)
    p = tinker.ModelInput.from_ints(encode("hi"))
    first = asyncio.run(c(p, [2]))
    assert first.tokens == [*tok.encode("Hello!"), 2]
    assert first.stop_reason == "stop"
    assert first.logprobs == [-1.0] * len(first.tokens)
    second = asyncio.run(c(p, [2], max_tokens=2))
    assert second.tokens == [5, 6] and second.stop_reason == "length"
    with pytest.raises(ValueError, match="boom"):
        asyncio.run(c(p, [2]))
    with pytest.raises(ScriptExhaustedError):
        asyncio.run(c(p, [2]))
    assert [call[0] for call in c.calls] == [p.to_ints()] * 4


def test_scripted_message_completer_list_callable_delay_hang() -> None:
    c = ScriptedMessageCompleter(["a", {"role": "assistant", "content": "b"}], cycle=True)
    assert isinstance(c, MessageCompleter)
    msgs = [{"role": "user", "content": "q"}]
    replies = [asyncio.run(c(msgs))["content"] for _ in range(3)]  # type: ignore[arg-type]
    assert replies == ["a", "b", "a"]

    async def echo(messages):
        return "echo: " + messages[-1]["content"]

    assert asyncio.run(ScriptedMessageCompleter(echo, delay=0.01)(msgs))["content"] == "echo: q"  # type: ignore[arg-type]

    async def hang() -> None:
        await asyncio.wait_for(ScriptedMessageCompleter(["x"], hang=True)(msgs), timeout=0.05)  # type: ignore[arg-type]

    with pytest.raises(TimeoutError):
        asyncio.run(hang())


def test_cookbook_completers_over_local_backend(tmp_path, renderer) -> None:
    """The cookbook's completers (re-exported, no copy of ours) serve the local backend's client."""
    sampler = make_service(tmp_path).create_sampling_client(base_model=TINY).result()
    p = tinker.ModelInput.from_ints(encode("hello"))
    policy = TinkerTokenCompleter(sampler, max_tokens=5)  # type: ignore[arg-type]
    out = asyncio.run(policy(p, [2], max_tokens=3))
    assert len(out.tokens) <= 3 and len(out.logprobs) == len(out.tokens)
    with pytest.raises(ValueError, match="context window"):
        asyncio.run(TinkerTokenCompleter(sampler, max_tokens=5, context_window=p.length)(p, [2]))  # type: ignore[arg-type]
    msg = asyncio.run(
        TinkerMessageCompleter(sampler, renderer, max_tokens=6)([{"role": "user", "content": "hi"}])  # type: ignore[arg-type]
    )
    assert msg["role"] == "assistant"
    assert isinstance(msg["content"], str)
