"""Hypothesis strategies for env actions and env configs (re-exported by :mod:`envs.testing`).

Actions are what a sampler can return: random tokens, nothing at all, invalid UTF-8, a
max-length run that never stopped (stepped with ``stop_reason="length"``), the stop token
alone, well-formed replies (text followed by end-of-turn) so that episodes also run long, and
for envs that declare them, calls to their tools (schema-shaped arguments, wrong ones, unknown
tools), malformed tool calls (arguments that are not JSON) and the env's own messages. Like a
real sample, an action holds a stop token only as its last token (sampling stops at the first).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from hypothesis import strategies as st
from tinker_cookbook.completers import StopCondition
from tinker_cookbook.renderers import Message, Renderer, ToolSpec
from tinker_cookbook.tokenizer_utils import Tokenizer

from envs.core import EnvLimits, Fault, FaultPolicy
from renderers_ext import render_action, tool_call
from renderers_ext.testing import token_actions

WELL_FORMED_TEXTS: tuple[str, ...] = (
    "Is it alive?",
    "Is it bigger than a breadbox?",
    "The answer is 42.",
    "Let me think step by step: 2 + 2 = 4, so the answer is \\boxed{4}.",
    "I am not sure. Could you give me a hint?",
    "Guess: cat",
    "Final answer: 7",
    "",
)
"""Replies that parse cleanly with any chat renderer (questions, answers, guesses, empty)."""

_MULTIBYTE_PROBES = ("😀", "🙂", "🤖", "𝔘", "中文", "é", "€", "👍🏽")


class ActionKind(StrEnum):
    """The kinds of action :func:`env_actions` draws."""

    RANDOM = "random"
    """Random vocabulary ids (lone bytes and special tokens included), sometimes stop-terminated."""
    EMPTY = "empty"
    """No tokens at all."""
    INVALID_UTF8 = "invalid_utf8"
    """Text cut inside a multi-byte character, then end-of-turn: decodes to invalid UTF-8."""
    MAX_LENGTH = "max_length"
    """``max_length`` tokens without a stop token (a sampler that hit ``max_tokens``): random
    ids, or a readable reply cut mid-sentence; stepped with ``stop_reason="length"``."""
    STOP_ONLY = "stop_only"
    """The end-of-turn token(s) alone: an empty reply."""
    WELL_FORMED = "well_formed"
    """Readable text followed by end-of-turn: a clean reply."""
    TOOL_CALL = "tool_call"
    """A parseable call to a declared tool (mostly schema-shaped arguments; sometimes wrong
    arguments or an unknown tool name), rendered by the env's renderer."""
    MALFORMED_TOOL_CALL = "malformed_tool_call"
    """A declared tool's call whose arguments are not JSON (the renderer's ``unparsed_tool_calls``)."""
    MESSAGE = "message"
    """An assistant message the env declares worth drawing (``action_messages()``), rendered."""


CLEAN_KINDS = frozenset({ActionKind.WELL_FORMED, ActionKind.TOOL_CALL, ActionKind.MESSAGE})
"""Kinds that parse as a clean message by construction (the extension check applies after them)."""


@dataclass(frozen=True)
class DrawnAction:
    """One drawn action: its kind, its tokens, and the sampler's stop reason for it."""

    kind: ActionKind
    """What was drawn."""
    tokens: list[int]
    """The action tokens."""
    clean: bool
    """Whether it parses as a clean message by construction (fixed text, a tool call, the env's
    own message): the extension property is checked after it."""

    @property
    def extra(self) -> dict[str, str]:
        """The ``extra`` of ``Env.step``: ``stop_reason`` "length" for a max-length action."""
        return {"stop_reason": "length" if self.kind is ActionKind.MAX_LENGTH else "stop"}


def stop_tokens(stop: StopCondition, tokenizer: Tokenizer) -> list[int]:
    """The first stop sequence of ``stop`` as tokens (ids as is, strings encoded); [] if none."""
    if not stop:
        return []
    first = stop[0]
    if isinstance(first, int):
        return [first]
    return list(tokenizer.encode(first, add_special_tokens=False))


def invalid_utf8_fragments(tokenizer: Tokenizer) -> list[list[int]]:
    """Token sequences that decode to invalid UTF-8 (a multi-byte character cut short).

    Found by encoding a few multi-byte characters and keeping the prefixes that decode to
    ``U+FFFD``; empty for tokenizers that never split a character.
    """
    out: list[list[int]] = []
    for probe in _MULTIBYTE_PROBES:
        ids = list(tokenizer.encode(probe, add_special_tokens=False))
        for k in range(1, len(ids)):
            if "\ufffd" in tokenizer.decode(ids[:k]):
                out.append(ids[:k])
    return out


def cut_text_action(text: str, tokenizer: Tokenizer, max_length: int) -> list[int]:
    """A reply that starts with ``text`` and goes on until a sampler's ``max_tokens`` cut it:
    ``max_length`` tokens of ``text`` then rambling, without end-of-turn."""
    tokens = list(tokenizer.encode(text + " Let me think about it more", add_special_tokens=False))
    filler = list(tokenizer.encode(" and more", add_special_tokens=False)) or tokens
    while len(tokens) < max_length:
        tokens += filler
    return tokens[:max_length]


def well_formed_action(text: str, tokenizer: Tokenizer, stop: StopCondition) -> list[int]:
    """``text`` as tokens followed by the end-of-turn of ``stop``."""
    return list(tokenizer.encode(text, add_special_tokens=False)) + stop_tokens(stop, tokenizer)


def json_values(schema: Mapping[str, Any] | None, *, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that fit a JSON schema: ``enum``, ``const``, and types ``object`` (required
    properties always, others sometimes), ``array``, ``string``, ``integer``, ``number``,
    ``boolean``, ``null`` (with their ``minimum``/``maximum``/length bounds); anything else
    (``anyOf``, ``$ref``...) draws any small JSON value."""
    schema = schema or {}
    if "const" in schema:
        return st.just(schema["const"])
    if schema.get("enum"):
        return st.sampled_from(list(schema["enum"]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return (
            st.one_of(*[json_values({**schema, "type": k}, depth=depth) for k in kind]) if kind else _ANY_JSON
        )
    if kind == "object" or (kind is None and "properties" in schema):
        props: Mapping[str, Any] = schema.get("properties") or {}
        required = [k for k in schema.get("required", []) if k in props]
        optional = {k: json_values(v, depth=depth + 1) for k, v in props.items() if k not in required}
        return st.fixed_dictionaries(
            {k: json_values(props[k], depth=depth + 1) for k in required}, optional=optional
        )
    if kind == "array":
        items = json_values(schema.get("items"), depth=depth + 1) if depth < 3 else st.none()
        lo = int(schema.get("minItems", 0))
        return st.lists(items, min_size=lo, max_size=max(lo, int(schema.get("maxItems", 3))))
    if kind == "string":
        lo = int(schema.get("minLength", 0))
        hi = max(lo, int(schema.get("maxLength", 24)))
        return st.one_of(st.sampled_from(_WORDS), st.text(min_size=lo, max_size=hi)).filter(
            lambda x: lo <= len(x) <= hi
        )
    if kind == "integer":
        return st.integers(schema.get("minimum", -1000), schema.get("maximum", 1000))
    if kind == "number":
        return st.floats(
            schema.get("minimum", -1e6), schema.get("maximum", 1e6), allow_nan=False, allow_infinity=False
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return _ANY_JSON


def example_json(schema: Mapping[str, Any] | None) -> Any:
    """One plain value that fits a JSON schema (deterministic; for scripted episodes)."""
    schema = schema or {}
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "object" or (kind is None and "properties" in schema):
        props: Mapping[str, Any] = schema.get("properties") or {}
        return {k: example_json(props[k]) for k in schema.get("required", []) if k in props}
    if kind == "array":
        return [example_json(schema.get("items"))] * int(schema.get("minItems", 1))
    if kind == "string":
        return "pen"[: schema.get("maxLength", 3)].ljust(int(schema.get("minLength", 0)), "x")
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), min(1, int(schema.get("maximum", 1))))
    if kind == "number":
        return float(max(schema.get("minimum", 1.5), min(1.5, schema.get("maximum", 1.5))))
    return {"boolean": True, "null": None}.get(str(kind), "x")


_WORDS = ("pen", "apple", "2 + 3 * 4", "", "x" * 30, "naïve café", "'; DROP TABLE", "\n", "0")
_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
_PREAMBLES = ("", "Let me check.", "I will use a tool.")


def tool_specs(tools: Sequence[Any]) -> list[ToolSpec]:
    """Tool declarations as ``ToolSpec`` dicts: specs as they are, the cookbook's ``Tool``
    objects through ``to_spec()``."""
    out: list[ToolSpec] = []
    for tool in tools:
        spec = tool.to_spec() if hasattr(tool, "to_spec") else tool
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            raise TypeError(f"a tool is a ToolSpec dict with a 'name' (or a cookbook Tool), got {tool!r:.80}")
        out.append(spec)  # type: ignore[arg-type]
    return out


def tool_call_messages(tools: Sequence[ToolSpec], *, max_calls: int = 2) -> st.SearchStrategy[Message]:
    """Assistant messages with 1..``max_calls`` parseable calls to ``tools``: mostly
    schema-shaped arguments, sometimes arbitrary JSON arguments or an unknown tool name."""
    if not tools:
        raise ValueError("no tools to call")

    def call_of(spec: ToolSpec) -> st.SearchStrategy[Any]:
        args = json_values(spec.get("parameters") or {"type": "object"}).filter(lambda a: isinstance(a, dict))
        return args.map(lambda a: (spec["name"], a))

    good = st.one_of(*[call_of(t) for t in tools])
    wrong_args = st.tuples(
        st.sampled_from([t["name"] for t in tools]),
        st.dictionaries(st.text(max_size=8), _ANY_JSON, max_size=3),
    )
    unknown = st.tuples(st.sampled_from(["no_such_tool", "", "lookup "]), st.just({}))
    # 7 in 10 calls fit the schema (sampled_from draws uniformly; one_of does not)
    named = st.sampled_from([good] * 7 + [wrong_args] * 2 + [unknown]).flatmap(lambda strategy: strategy)

    @st.composite
    def message(draw: st.DrawFn) -> Message:
        calls = draw(st.lists(named, min_size=1, max_size=max_calls))
        return {
            "role": "assistant",
            "content": draw(st.sampled_from(_PREAMBLES)),
            "tool_calls": [
                tool_call(name, args, call_id=f"call_{k}") for k, (name, args) in enumerate(calls)
            ],
        }

    return message()


def example_tool_call(spec: ToolSpec, text: str = "") -> Message:
    """An assistant message calling ``spec`` once with :func:`example_json` arguments."""
    args = example_json(spec.get("parameters") or {"type": "object"})
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [tool_call(spec["name"], args if isinstance(args, dict) else {}, call_id="call_0")],
    }


def malformed_tool_call_action(renderer: Renderer, spec: ToolSpec, corruption: int = 0) -> list[int] | None:
    """A call to ``spec`` rendered by ``renderer`` with its JSON arguments corrupted (a trailing
    comma, a missing brace or single quotes), as tokens; None when the renderer still parses it
    cleanly (its tool-call format does not carry JSON arguments)."""
    message = example_tool_call(spec)
    call = message["tool_calls"][0]  # type: ignore[typeddict-item]
    args = call.function.arguments
    text = renderer.tokenizer.decode(render_action(renderer, message))
    if not isinstance(text, str) or args not in text:
        return None
    broken = [args[:-1] + ",}", args[:-1], args.replace('"', "'") if '"' in args else "{'"][corruption % 3]
    tokens = list(renderer.tokenizer.encode(text.replace(args, broken, 1), add_special_tokens=False))
    parsed, termination = renderer.parse_response(tokens)
    return tokens if termination.is_clean and parsed.get("unparsed_tool_calls") else None


def env_actions(
    tokenizer: Tokenizer,
    stop: StopCondition,
    *,
    max_length: int = 256,
    kinds: Sequence[ActionKind] = tuple(ActionKind),
    texts: st.SearchStrategy[str] | None = None,
    renderer: Renderer | None = None,
    tools: Sequence[ToolSpec] = (),
    messages: st.SearchStrategy[Message] | None = None,
) -> st.SearchStrategy[list[int]]:
    """Actions of the given :class:`ActionKind` s for an env whose tokenizer and stop condition
    are given; well-formed replies and the env's messages twice, tool calls three times as likely
    as the other kinds, so that episodes run long.

    Args:
        tokenizer: the policy tokenizer (vocabulary ids are drawn below ``len(tokenizer)``).
        stop: the env's stop condition (its first sequence is the end-of-turn).
        max_length: length of :attr:`ActionKind.MAX_LENGTH` actions (the sampler's max_tokens).
        kinds: which kinds to draw (tool and message kinds need ``renderer`` and ``tools`` /
            ``messages``).
        texts: text of well-formed replies (default: :data:`WELL_FORMED_TEXTS` or short text).
        renderer: renders tool calls and ``messages`` into tokens.
        tools: the env's tools (:attr:`ActionKind.TOOL_CALL`, :attr:`ActionKind.MALFORMED_TOOL_CALL`).
        messages: assistant messages worth drawing (:attr:`ActionKind.MESSAGE`).
    """
    drawn = drawn_actions(
        tokenizer,
        stop,
        max_length=max_length,
        kinds=kinds,
        texts=texts,
        renderer=renderer,
        tools=tools,
        messages=messages,
    )
    return drawn.map(lambda d: d.tokens)


def drawn_actions(
    tokenizer: Tokenizer,
    stop: StopCondition,
    *,
    max_length: int = 256,
    kinds: Sequence[ActionKind] = tuple(ActionKind),
    texts: st.SearchStrategy[str] | None = None,
    renderer: Renderer | None = None,
    tools: Sequence[ToolSpec] = (),
    messages: st.SearchStrategy[Message] | None = None,
) -> st.SearchStrategy[DrawnAction]:
    """:func:`env_actions` with each action's :class:`DrawnAction` label (kind, cleanliness and
    the stop reason to step it with)."""
    eot = stop_tokens(stop, tokenizer)
    vocab = len(tokenizer)
    stop_ids = {s for s in stop if isinstance(s, int)}

    def sampleable(action: list[int]) -> bool:  # a sampler stops at the first stop token
        body = action[:-1] if action and action[-1] in stop_ids else action
        return not stop_ids.intersection(body)

    def max_length_action(rng: random.Random) -> list[int]:
        out: list[int] = []
        while len(out) < max_length:
            token = rng.randrange(vocab)
            if token not in stop_ids:
                out.append(token)
        return out

    def label(kind: ActionKind, clean: bool = False) -> Any:
        return lambda tokens: DrawnAction(kind, list(tokens), clean)

    fixed = st.sampled_from(WELL_FORMED_TEXTS).map(
        lambda t: DrawnAction(ActionKind.WELL_FORMED, well_formed_action(t, tokenizer, stop), True)
    )
    if texts is not None:
        well_formed = texts.map(
            lambda t: DrawnAction(ActionKind.WELL_FORMED, well_formed_action(t, tokenizer, stop), False)
        )
    else:
        well_formed = st.one_of(
            fixed,
            st.text(max_size=40).map(
                lambda t: DrawnAction(ActionKind.WELL_FORMED, well_formed_action(t, tokenizer, stop), False)
            ),
        )
    fragments = invalid_utf8_fragments(tokenizer)
    by_kind: dict[ActionKind, st.SearchStrategy[DrawnAction]] = {
        ActionKind.RANDOM: token_actions(tokenizer, max_size=min(max_length, 48), stop=eot or None)
        .filter(sampleable)
        .map(label(ActionKind.RANDOM)),
        ActionKind.EMPTY: st.just(DrawnAction(ActionKind.EMPTY, [], False)),
        ActionKind.MAX_LENGTH: st.sampled_from([0, 1, 1]).flatmap(  # 2 in 3: a readable reply cut
            lambda readable: st.sampled_from([t for t in WELL_FORMED_TEXTS if t]).map(
                lambda text: DrawnAction(ActionKind.MAX_LENGTH, cut_text_action(text, tokenizer, max_length), False)
            )
            if readable
            else st.integers(0, 2**32 - 1).map(
                lambda seed: DrawnAction(ActionKind.MAX_LENGTH, max_length_action(random.Random(seed)), False)
            )
        ),
        ActionKind.STOP_ONLY: st.just(DrawnAction(ActionKind.STOP_ONLY, eot, False)),
        ActionKind.WELL_FORMED: well_formed,
    }
    if fragments:
        by_kind[ActionKind.INVALID_UTF8] = st.tuples(
            st.sampled_from(WELL_FORMED_TEXTS), st.sampled_from(fragments)
        ).map(
            lambda t: DrawnAction(
                ActionKind.INVALID_UTF8,
                list(tokenizer.encode(t[0], add_special_tokens=False)) + t[1] + eot,
                False,
            )
        )
    if renderer is not None and tools:
        by_kind[ActionKind.TOOL_CALL] = tool_call_messages(tools).map(
            lambda m: DrawnAction(ActionKind.TOOL_CALL, render_action(renderer, m), True)
        )
        broken = [
            a for spec in tools for k in range(3) if (a := malformed_tool_call_action(renderer, spec, k))
        ]
        if broken:
            by_kind[ActionKind.MALFORMED_TOOL_CALL] = st.sampled_from(broken).map(
                label(ActionKind.MALFORMED_TOOL_CALL)
            )
    if renderer is not None and messages is not None:
        by_kind[ActionKind.MESSAGE] = (
            messages.map(lambda m: _render_or_none(renderer, m))
            .filter(lambda t: t is not None)
            .map(label(ActionKind.MESSAGE, clean=True))
        )
    weights = {ActionKind.WELL_FORMED: 2, ActionKind.MAX_LENGTH: 2, ActionKind.TOOL_CALL: 3, ActionKind.MESSAGE: 2}
    chosen = [k for k in kinds if k in by_kind for _ in range(weights.get(k, 1))]
    if not chosen:
        raise ValueError(f"no action kind available among {list(kinds)}")
    # the kind first, uniformly over this weighted list (st.one_of favours its first branches at
    # small example counts), then an action of that kind
    return st.sampled_from(chosen).flatmap(lambda kind: by_kind[kind])


def _render_or_none(renderer: Renderer, message: Message) -> list[int] | None:
    try:
        return render_action(renderer, message)
    except Exception:  # a message this renderer cannot render (e.g. thinking parts in role_colon)
        return None


def env_limits(*, max_turns: int = 12, token_caps: bool = True) -> st.SearchStrategy[EnvLimits]:
    """:class:`~envs.core.EnvLimits`: 1..``max_turns`` turns, sometimes a trajectory token cap
    (small ones included, so that initial prompts overflow)."""
    cap = st.none() | st.integers(16, 4096) if token_caps else st.none()
    return st.builds(EnvLimits, max_turns=st.integers(1, max_turns), max_trajectory_tokens=cap)


def fault_policies() -> st.SearchStrategy[dict[Fault, FaultPolicy]]:
    """Per-fault policies: a (finite) reward and whether the fault ends the episode."""
    policy = st.builds(
        FaultPolicy,
        reward=st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False),
        end_episode=st.booleans(),
    )
    return st.dictionaries(st.sampled_from(list(Fault)), policy)
