"""Completers: scripted ones, and sampling ones over the local backend (TINY)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
import tinker
from backend_fixtures import TINY, encode, make_service
from tinker_cookbook.renderers import Message, get_text_content
from tinker_cookbook.rl.rollouts import do_group_rollout
from tinker_cookbook.rl.types import EnvGroupBuilder

from backend import SMOLLM2, load_tokenizer
from completers import (
    MessageCompleter,
    ScriptedMessageCompleter,
    ScriptedTokenCompleter,
    ScriptExhaustedError,
    TinkerMessageCompleter,
    TinkerTokenCompleter,
    TokenCompleter,
)
from envs import ChatEnv, EnvLimits, Reply
from envs.testing import scripted_policy
from renderers_ext import load_renderer, render_action, tool_call


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


class _LookupEnv(ChatEnv):
    """Answers a ``lookup`` call with a tool message; a text answer ends the episode (reward 1 when
    it names the count the tool gave)."""

    def __init__(self) -> None:
        super().__init__(load_renderer("qwen3_instruct", SMOLLM2), limits=EnvLimits(max_turns=4), tools=[_LOOKUP])
        self.looked_up = False

    def initial_messages(self) -> list[Message]:
        return [*self.tool_prompt(), {"role": "user", "content": "How many pens are in stock?"}]

    async def on_message(self, message: Message) -> Reply:
        calls = message.get("tool_calls") or []
        if calls:
            self.looked_up = True
            return Reply(messages=[{"role": "tool", "content": "3", "tool_call_id": calls[0].id or ""}])
        return Reply(done=True, reward=float(self.looked_up and "3" in get_text_content(message)))


_LOOKUP = {"name": "lookup", "description": "Stock of an item.", "parameters": {"type": "object"}}


@dataclass(frozen=True)
class _LookupGroup(EnvGroupBuilder):
    size: int = 3

    async def make_envs(self) -> list[_LookupEnv]:
        return [_LookupEnv() for _ in range(self.size)]


def test_scripted_group_completer_gives_each_env_its_own_script() -> None:
    renderer = load_renderer("qwen3_instruct", SMOLLM2)
    call = {"role": "assistant", "content": "", "tool_calls": [tool_call("lookup", {"item": "pen"})]}
    scripts = [
        [call, "There are 3 pens."],  # looks up, then answers: reward 1
        ["No idea."],  # answers at once: reward 0
        [call, {"role": "assistant", "content": "Maybe 5."}],  # looks up, answers wrong: reward 0
    ]
    policy = scripted_policy(renderer, scripts, delay=0.001)
    group = asyncio.run(do_group_rollout(_LookupGroup(), policy))
    by_len = sorted(group.trajectories_G, key=lambda t: (len(t.transitions), t.transitions[-1].reward))
    assert [len(t.transitions) for t in by_len] == [1, 2, 2]
    assert [t.transitions[-1].reward for t in by_len] == [0.0, 0.0, 1.0]
    assert sorted(i for i, _ in policy.calls) == [0, 0, 1, 2, 2]
    assert render_action(renderer, call)[-1] == 2  # ends with <|im_end|>
    with pytest.raises(ScriptExhaustedError, match="3 scripts"):
        asyncio.run(do_group_rollout(_LookupGroup(size=4), scripted_policy(renderer, scripts)))
    with pytest.raises(ValueError, match="message replies need render="):
        ScriptedTokenCompleter(scripts[0], renderer.tokenizer)


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
