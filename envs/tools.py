"""Tools from plain Python functions, beside OpenAI spec dicts and the cookbook's ``@tool``.

A typed function is a tool: its name, its docstring's summary (the description), its parameters'
type hints (the JSON schema, through pydantic, as the cookbook's ``FunctionTool`` builds it) and
their descriptions (``Annotated[int, "..."]``, else the docstring's ``Args:`` section). It may
be sync (run in a worker thread, off the event loop) or async, and return a ``str`` (the tool
message's content), any JSON-able value (dumped), or a cookbook ``ToolResult``.

:class:`Toolbox` answers the tool calls of an assistant message the way the conformance checker
requires (one ``tool``-role message per call, carrying its ``tool_call_id``), with an error
message for an unknown tool, arguments that are not JSON or do not fit the schema, or a tool that
raises (the cookbook's ``handle_tool_call``). A game declares ``tools=toolbox.specs`` to its
:class:`~envs.core.ChatEnv` and returns ``await toolbox.answer(message)`` from ``on_message``::

    def stock(item: str) -> int:
        \"\"\"Number of an item in stock.

        Args:
            item: the item's name, e.g. "pen".
        \"\"\"
        return SHELF.get(item, 0)

    toolbox = Toolbox([stock])
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
from tinker_cookbook.renderers import Message, ToolSpec
from tinker_cookbook.tool_use import FunctionTool, Tool, ToolInput, ToolResult, handle_tool_call
from tinker_cookbook.tool_use.tools import error_tool_result

from envs.core import Reply

METRIC_TOOL_CALLS = "tools/calls"
"""Tool calls answered on a step."""
METRIC_TOOL_ERRORS = "tools/errors"
"""Tool calls answered with an error (unknown tool, bad arguments, the tool raised)."""

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(summary, {param: description})`` of a Google-style docstring: the summary is the text
    before the first blank line; the descriptions come from its ``Args:`` section."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _ARGS_HEADER.match(line):
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    in_args, current, indent = False, "", None
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args, indent = True, None
            continue
        if not in_args:
            continue
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent or (depth == indent and not _ARG_LINE.match(line)):
            break  # the next section
        match = _ARG_LINE.match(line)
        if depth == indent and match:
            current = match.group(1).lstrip("*")
            params[current] = match.group(3).strip()
        elif current:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return " ".join(summary), params


class PythonTool(FunctionTool):
    """The cookbook's ``FunctionTool`` for a plain typed function (see the module docstring).

    Raises:
        TypeError: ``fn`` is not callable, or a parameter has no type hint (``*args`` and
            ``**kwargs`` are not allowed either): the schema could not say what to send.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None):
        if not callable(fn):
            raise TypeError(f"a tool is a function, got {type(fn).__name__}")
        label = getattr(fn, "__name__", repr(fn))
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {label}: *{param.name} cannot be described by a JSON schema")
            if param.name != "self" and param.annotation is inspect.Parameter.empty:
                raise TypeError(f"tool {label}: parameter {param.name!r} has no type hint")
        super().__init__(fn)
        summary, self._param_docs = parse_docstring(fn.__doc__)
        self._name = name or label
        self._description = description if description is not None else summary

    @property
    def parameters_schema(self) -> dict[str, Any]:
        """The JSON schema of the parameters, with the docstring's descriptions (pydantic's
        ``title`` keys dropped: they repeat the names and cost prompt tokens)."""
        schema = _drop_titles(self._params_model.model_json_schema())
        for name, prop in (schema.get("properties") or {}).items():
            if "description" not in prop and name in self._param_docs:
                prop["description"] = self._param_docs[name]
        return schema

    async def run(self, input: ToolInput) -> ToolResult:
        """Validate the arguments, call the function (a sync one in a worker thread), and wrap
        its value in a ``ToolResult``; an error result when validation or the call fails."""
        call_id = input.call_id or ""
        try:
            kwargs = self._params_model.model_validate(input.arguments).model_dump()
        except Exception as error:
            message = str(error).splitlines()[0]
            return error_tool_result(f"invalid arguments: {message}", call_id=call_id, name=self.name)
        try:
            if inspect.iscoroutinefunction(self._fn):
                value = await self._fn(**kwargs)
            else:
                value = await anyio.to_thread.run_sync(lambda: self._fn(**kwargs))
        except Exception as error:
            return error_tool_result(
                f"{type(error).__name__}: {error}",
                call_id=call_id,
                name=self.name,
                error_type="execution_failed",
            )
        if isinstance(value, ToolResult):
            return value
        content = value if isinstance(value, str) else json.dumps(value, default=str)
        return ToolResult(
            messages=[{"role": "tool", "content": content, "tool_call_id": call_id, "name": self.name}]
        )


def _drop_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _drop_titles(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_drop_titles(v) for v in schema]
    return schema


def python_tool(fn: Callable[..., Any]) -> PythonTool:
    """A tool from a plain typed function (usable as a decorator)."""
    return PythonTool(fn)


def as_tool_spec(tool: ToolSpec | Mapping[str, Any] | Tool | Callable[..., Any]) -> ToolSpec:
    """A ``ToolSpec`` from any way of declaring a tool: a ``ToolSpec`` dict, an OpenAI spec
    (``{"type": "function", "function": {...}}``), a cookbook ``Tool`` or a plain function."""
    if isinstance(tool, Mapping):
        body = tool.get("function") if tool.get("type") == "function" else tool
        if not isinstance(body, Mapping) or not isinstance(body.get("name"), str):
            raise TypeError(f"a tool spec needs a 'name' (and 'parameters'), got {dict(tool)!r:.100}")
        return {
            "name": body["name"],
            "description": str(body.get("description", "")),
            "parameters": dict(body.get("parameters") or {"type": "object", "properties": {}}),
        }
    if isinstance(tool, Tool):
        return tool.to_spec()
    return PythonTool(tool).to_spec()


class Toolbox:
    """Runnable tools by name, and the answer to an assistant message's tool calls.

    Args:
        tools: plain typed functions (wrapped by :class:`PythonTool`) or cookbook ``Tool`` s
            (e.g. from ``@tool``).

    Raises:
        ValueError: two tools share a name.
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]]):
        self.tools: dict[str, Tool] = {}
        """The tools by name."""
        for item in tools:
            runnable = item if isinstance(item, Tool) else PythonTool(item)
            if runnable.name in self.tools:
                raise ValueError(f"two tools are named {runnable.name!r}")
            self.tools[runnable.name] = runnable

    @property
    def specs(self) -> list[ToolSpec]:
        """The tools' specs, for ``ChatEnv(tools=...)``."""
        return [t.to_spec() for t in self.tools.values()]

    async def answer(self, message: Message) -> Reply:
        """One ``tool`` message per call of ``message`` (in order, each with the call's
        ``tool_call_id`` and the tool's name); ``done`` when a tool says stop. The tool's own
        metrics are summed under ``tools/<name>/``."""
        calls: Sequence[Any] = message.get("tool_calls") or []
        messages: list[Message] = []
        metrics: dict[str, float] = {METRIC_TOOL_CALLS: float(len(calls)), METRIC_TOOL_ERRORS: 0.0}
        stop = False
        for call in calls:
            result = await handle_tool_call(self.tools, call)
            for reply in result.messages:
                reply = dict(reply)  # type: ignore[assignment]
                reply["role"] = "tool"
                reply["tool_call_id"] = call.id or reply.get("tool_call_id") or ""
                reply.setdefault("name", call.function.name)
                messages.append(reply)  # type: ignore[arg-type]
            metrics[METRIC_TOOL_ERRORS] += float("error" in result.metadata)
            for key, value in result.metrics.items():
                name = f"tools/{call.function.name}/{key}"
                metrics[name] = metrics.get(name, 0.0) + float(value)
            stop = stop or result.should_stop
        return Reply(messages=messages, metrics=metrics, done=stop)
