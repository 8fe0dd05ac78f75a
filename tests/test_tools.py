"""Tools from plain Python functions: the schema from the signature and docstring, the answers
(one tool message per call, by id, errors included), and a tool env built on them that passes the
conformance checker's tool-protocol check."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import anyio
import pytest
from tinker_cookbook.renderers import Message, get_text_content
from tinker_cookbook.rl.types import Env, EnvGroupBuilder
from tinker_cookbook.tool_use import ToolResult, simple_tool_result, tool

from backend.model import SMOLLM2
from envs import ChatEnv, EnvLimits, Reply
from envs.checker import CheckConfig, CheckName, Outcome, check_conformance
from envs.tools import METRIC_TOOL_ERRORS, PythonTool, Toolbox, as_tool_spec, parse_docstring
from renderers_ext import load_renderer, tool_call

LOOP_THREADS: list[int] = []


def stock(item: str, warehouse: int = 1) -> int:
    """Number of an item in stock.

    Args:
        item: the item's name,
            e.g. "pen".
        warehouse: which warehouse to ask.

    Returns:
        The count.
    """
    LOOP_THREADS.append(threading.get_ident())
    if item == "boom":
        raise RuntimeError("shelf collapsed")
    return {"pen": 3}.get(item, 0) * warehouse


async def price(item: Annotated[str, "the item to price"]) -> dict[str, float]:
    """Price of an item."""
    return {"price": 1.5 if item == "pen" else 0.0}


@tool
async def cookbook_done(reason: str) -> ToolResult:
    """End the game."""
    return simple_tool_result(f"ok: {reason}", should_stop=True)


def test_schema_comes_from_the_signature_and_docstring() -> None:
    spec = PythonTool(stock).to_spec()
    assert spec["name"] == "stock" and spec["description"] == "Number of an item in stock."
    params = spec["parameters"]
    assert params["required"] == ["item"]
    assert params["properties"]["item"] == {"type": "string", "description": 'the item\'s name, e.g. "pen".'}
    assert params["properties"]["warehouse"]["type"] == "integer"
    assert params["properties"]["warehouse"]["default"] == 1
    assert "title" not in params and "title" not in params["properties"]["item"]
    assert (
        PythonTool(price).to_spec()["parameters"]["properties"]["item"]["description"] == "the item to price"
    )
    assert parse_docstring("Do it.\n\nArgs:\n    x: the x\n\nReturns:\n    y") == ("Do it.", {"x": "the x"})


def test_untyped_or_variadic_functions_are_refused_with_one_line() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    def variadic(*xs: int) -> int:
        return sum(xs)

    with pytest.raises(TypeError, match="tool untyped: parameter 'x' has no type hint"):
        PythonTool(untyped)
    with pytest.raises(TypeError, match=r"\*xs cannot be described"):
        PythonTool(variadic)
    with pytest.raises(ValueError, match="two tools are named 'stock'"):
        Toolbox([stock, stock])


def test_specs_from_every_declaration_agree() -> None:
    spec = PythonTool(stock).to_spec()
    openai = {"type": "function", "function": dict(spec)}
    assert as_tool_spec(openai) == as_tool_spec(dict(spec)) == as_tool_spec(stock) == spec
    assert as_tool_spec(cookbook_done)["name"] == "cookbook_done"
    with pytest.raises(TypeError, match="needs a 'name'"):
        as_tool_spec({"description": "nameless"})


def test_toolbox_answers_each_call_by_id_in_the_tool_role() -> None:
    box = Toolbox([stock, price, cookbook_done])
    message: Message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            tool_call("stock", {"item": "pen", "warehouse": 2}, call_id="a"),
            tool_call("price", {"item": "pen"}, call_id="b"),
            tool_call("stock", {"item": 7}, call_id="c"),  # does not fit the schema
            tool_call("stock", {"item": "boom"}, call_id="d"),  # the tool raises
            tool_call("nope", {}, call_id="e"),
            tool_call("stock", "{not json", call_id="f"),
        ],
    }

    async def run() -> tuple[Reply, int]:
        return await box.answer(message), threading.get_ident()

    LOOP_THREADS.clear()
    reply, loop_thread = anyio.run(run)
    assert [m["role"] for m in reply.messages] == ["tool"] * 6
    assert [m.get("tool_call_id") for m in reply.messages] == list("abcdef")
    contents = [get_text_content(m) for m in reply.messages]
    assert contents[0] == "6" and contents[1] == '{"price": 1.5}'
    assert "invalid arguments" in contents[2] and "shelf collapsed" in contents[3]
    assert "not found" in contents[4] and "parse" in contents[5]
    assert reply.metrics[METRIC_TOOL_ERRORS] == 4.0 and not reply.done
    assert LOOP_THREADS and loop_thread not in LOOP_THREADS  # the sync tool ran off the event loop
    stop: Message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [tool_call("cookbook_done", {"reason": "x"})],
    }
    assert anyio.run(box.answer, stop).done


class ShopEnv(ChatEnv):
    """A tool env written with a Toolbox: tool calls are answered, a text reply ends it."""

    def __init__(self) -> None:
        self.box = Toolbox([stock, price])
        super().__init__(
            load_renderer("qwen3_instruct", SMOLLM2), limits=EnvLimits(max_turns=5), tools=self.box.specs
        )

    def initial_messages(self) -> list[Message]:
        return [*self.tool_prompt(), {"role": "user", "content": "How many pens, at what price?"}]

    async def on_message(self, message: Message) -> Reply:
        if message.get("tool_calls"):
            return await self.box.answer(message)
        return Reply(done=True, reward=float("3" in get_text_content(message)))


@dataclass(frozen=True)
class ShopGroup(EnvGroupBuilder):
    async def make_envs(self) -> Sequence[Env]:
        return [ShopEnv(), ShopEnv()]


def test_a_toolbox_env_passes_the_checker() -> None:
    report = check_conformance(ShopGroup(), CheckConfig(examples=8, block_threshold_s=1.5))
    assert report.ok, str(report)
    assert report[CheckName.TOOL_PROTOCOL].outcome == Outcome.PASS
    assert report.stats["tool_calls"] > 0
