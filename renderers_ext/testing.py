"""Hypothesis strategies and helpers for property-testing renderers and token-in/token-out envs.

Public and reusable (gym adapters, env checkers)::

    from hypothesis import given
    from renderers_ext.testing import conversations, extension_reports

    @given(conversations(thinking=True))
    def test_preserving_renderer_extends(conversation):
        for rec in extension_reports(renderer, conversation):
            assert rec.report.ok, rec.describe(renderer.tokenizer)

Strategies:

- :func:`texts`: unicode text with empty strings, long runs and adversarial fragments
  (``<think>``, ``\\n\\nUser:``, ``<|im_end|>``, lone newlines, emoji...).
- :func:`thinking_contents`: reasoning text (possibly empty or only newlines).
- :func:`assistant_messages` / :func:`messages`: single messages, with or without thinking.
- :func:`conversations`: ``[system?] user assistant (reply+ assistant)* [reply+]``.
- :func:`token_actions`: random sampled-token sequences (ordinary, lone-byte and special
  tokens, optionally ending with a stop sequence).

Helpers (plain functions, no hypothesis needed):

- :func:`sampled_action`: a renderer's own rendering of an assistant message as the produced
  turn, i.e. the tokens a perfect sampler would return (stop-sequence overlap included).
- :func:`turn_records` / :func:`extension_reports`: generation prompts per assistant turn and
  the extension check between consecutive ones, with decoded side-by-side diagnostics.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.tokenizer_utils import Tokenizer

from renderers_ext._extension import ExtensionReport, check_extension
from renderers_ext._render import prompt_tokens, render_action, stop_token_sequences

__all__ = [
    "ADVERSARIAL_FRAGMENTS",
    "ALPHABET",
    "ROLE_COLON_SAFE_FRAGMENTS",
    "TurnRecord",
    "assistant_indices",
    "assistant_messages",
    "conversations",
    "describe_conversation",
    "extension_reports",
    "memoized_encode",
    "messages",
    "role_colon_conversations",
    "sampled_action",
    "stop_token_sequences",
    "texts",
    "thinking_contents",
    "token_actions",
    "turn_records",
    "visible_thinking",
]

ADVERSARIAL_FRAGMENTS: tuple[str, ...] = (
    "",
    " ",
    "\n",
    "\n\n",
    "\n\n\n",
    "<think>",
    "</think>",
    "<think>\n\n</think>\n\n",
    "<|im_end|>",
    "<|im_start|>",
    "User:",
    "\n\nUser:",
    "Assistant:",
    "<tool_call>",
    "é",
    "中文",
    "🙂",
    "\u200b",
    "\ufffd",
    "\r\n",
    "\t",
)
"""Text fragments that have broken chat renderers before: template markers, stop strings,
whitespace runs that BPE merges across boundaries, multi-byte characters."""

ROLE_COLON_SAFE_FRAGMENTS: tuple[str, ...] = tuple(
    f for f in ADVERSARIAL_FRAGMENTS if f not in ("\n\nUser:", "<|im_end|>", "<|im_start|>")
)
"""Fragments that keep a ``role_colon`` assistant message parseable (no stop string, no EOS)."""


ALPHABET: st.SearchStrategy[str] = st.characters(max_codepoint=0x3FFFF, exclude_categories=("Cs", "Cc"))
"""Characters for drawn text: Unicode up to plane 3, without surrogates and C0/C1 controls
(newline, tab and CR come from :data:`ADVERSARIAL_FRAGMENTS`). Left out because SmolLM2's
byte-level vocabulary cannot represent them: six C0 controls (U+0004, U+0006, U+0013, U+0014,
U+0016, U+001D) encode to ``<|endoftext|>``, and planes 4-11 (U+40000..U+BFFFF, unassigned)
to ``<|endoftext|>`` + stray continuation bytes. Such text does not survive
text -> tokens -> text, so a re-rendered history differs from the sampled tokens."""


def texts(
    *,
    max_size: int = 40,
    fragments: Sequence[str] = ADVERSARIAL_FRAGMENTS,
    long: bool = True,
    forbid: Sequence[str] = (),
) -> st.SearchStrategy[str]:
    """Unicode text: empty, short, fragment-laden, and (when ``long``) a few hundred characters.

    ``forbid`` lists substrings the result never contains (drawn text is filtered).
    """
    piece = st.one_of(
        st.sampled_from(list(fragments)) if fragments else st.just(""),
        st.text(ALPHABET, max_size=6),
        st.sampled_from(["hello", " world", "42", ".", "Paris", "ok"]),
    )
    short = st.lists(piece, max_size=max(1, max_size // 8)).map("".join)
    options: list[st.SearchStrategy[str]] = [st.just(""), short, st.text(ALPHABET, max_size=max_size)]
    if long:
        options.append(
            st.tuples(st.sampled_from(["word ", "数 ", "a\n", "🙂", "x"]), st.integers(50, 300)).map(
                lambda t: t[0] * t[1]
            )
        )
    strategy = st.one_of(*options)
    if forbid:
        bad = tuple(forbid)
        strategy = strategy.filter(lambda s: not any(b in s for b in bad))
    return strategy


def thinking_contents(
    *, max_size: int = 40, fragments: Sequence[str] = ("", "\n", " ", "é", "🙂")
) -> st.SearchStrategy[str]:
    """Reasoning text for a ThinkingPart: may be empty, only newlines, unicode or long.

    Never contains ``<think>``/``</think>`` (the parser could not round-trip it).
    """
    return st.one_of(
        st.just(""),
        st.just("\n"),
        texts(max_size=max_size, fragments=fragments, forbid=("<think>", "</think>")),
    )


def visible_thinking(message: Message) -> bool:
    """Whether ``message`` has a ThinkingPart whose text is more than newlines.

    This is what survives Qwen3's framing (``<think>\\n{reasoning.strip('\\n')}\\n</think>``):
    an empty or newline-only block renders the same as no block.
    """
    content = message.get("content")
    if not isinstance(content, list):
        return False
    return any(p["type"] == "thinking" and p["thinking"].strip("\n") for p in content)


@st.composite
def assistant_messages(
    draw: st.DrawFn,
    *,
    thinking: bool | None = None,
    string_content: bool = False,
    text: st.SearchStrategy[str] | None = None,
    thinking_text: st.SearchStrategy[str] | None = None,
) -> Message:
    """An assistant message. ``thinking``: True always, False never, None either.

    With thinking the content is structured (``[ThinkingPart, TextPart]``, the shape
    ``parse_response`` returns); without, a string or a single TextPart.
    ``string_content=True`` forces string content (renderers that reject lists, e.g. role_colon)
    and implies no thinking.
    """
    body = draw(text if text is not None else texts())
    if string_content:
        return {"role": "assistant", "content": body}
    think = draw(st.booleans()) if thinking is None else thinking
    if think:
        reasoning = draw(thinking_text if thinking_text is not None else thinking_contents())
        return {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": reasoning}, {"type": "text", "text": body}],
        }
    if draw(st.booleans()):
        return {"role": "assistant", "content": [{"type": "text", "text": body}]}
    return {"role": "assistant", "content": body}


def messages(
    role: str | Sequence[str] = ("system", "user", "assistant"),
    *,
    thinking: bool | None = None,
    string_content: bool = False,
    text: st.SearchStrategy[str] | None = None,
) -> st.SearchStrategy[Message]:
    """One message of the given role(s); assistant messages as in :func:`assistant_messages`."""
    roles = [role] if isinstance(role, str) else list(role)

    def build(r: str) -> st.SearchStrategy[Message]:
        if r == "assistant":
            return assistant_messages(thinking=thinking, string_content=string_content, text=text)
        return (text if text is not None else texts()).map(lambda s, r=r: {"role": r, "content": s})

    return st.sampled_from(roles).flatmap(build)


@st.composite
def conversations(
    draw: st.DrawFn,
    *,
    min_turns: int = 1,
    max_turns: int = 6,
    thinking: bool | None = None,
    system: bool | None = None,
    first_reply_roles: Sequence[str] = ("user", "system"),
    max_extra_replies: int = 1,
    string_content: bool = False,
    text: st.SearchStrategy[str] | None = None,
    thinking_text: st.SearchStrategy[str] | None = None,
    trailing_reply: bool | None = None,
) -> list[Message]:
    """A conversation: ``[system] user (assistant reply+){turns-1} assistant [reply+]``.

    Args:
        min_turns / max_turns: number of assistant messages.
        thinking: per assistant message, see :func:`assistant_messages`.
        system: leading system message (None: either).
        first_reply_roles: roles allowed for the message right after an assistant message
            (``("user",)`` for role_colon, whose stop string ``\\n\\nUser:`` announces it).
        max_extra_replies: more user/system messages after that first one.
        string_content: string content only (implies no thinking).
        text: strategy for message text (default :func:`texts`).
        thinking_text: strategy for reasoning text (default :func:`thinking_contents`).
        trailing_reply: end with replies after the last assistant message (None: either).
    """
    body = text if text is not None else texts()
    n_turns = draw(st.integers(min_turns, max_turns))
    conv: list[Message] = []
    if draw(st.booleans()) if system is None else system:
        conv.append({"role": "system", "content": draw(body)})
    conv.append({"role": "user", "content": draw(body)})

    def reply() -> list[Message]:
        out: list[Message] = [{"role": draw(st.sampled_from(list(first_reply_roles))), "content": draw(body)}]
        for _ in range(draw(st.integers(0, max_extra_replies))):
            out.append({"role": draw(st.sampled_from(["user", "system"])), "content": draw(body)})
        return out

    for turn in range(n_turns):
        conv.append(
            draw(
                assistant_messages(
                    thinking=thinking, string_content=string_content, text=body, thinking_text=thinking_text
                )
            )
        )
        last = turn == n_turns - 1
        if not last or (draw(st.booleans()) if trailing_reply is None else trailing_reply):
            conv.extend(reply())
    return conv


def _special_ids(tokenizer: Tokenizer) -> set[int]:
    ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    decoder = getattr(tokenizer, "added_tokens_decoder", None)
    if decoder:
        ids.update(int(i) for i in decoder)
    return ids


def token_actions(
    tokenizer: Tokenizer,
    *,
    min_size: int = 0,
    max_size: int = 24,
    stop: Sequence[int] | None = None,
    stop_probability: bool = True,
    interesting: Sequence[int] = (),
) -> st.SearchStrategy[list[int]]:
    """Random sampled-token sequences, as a sampler could return them.

    Tokens are ordinary vocabulary ids (lone bytes of multi-byte characters included, so some
    sequences are invalid UTF-8), plus ``interesting`` ids (e.g. ``<think>`` pieces, special
    tokens) with a higher weight. With ``stop`` (a token sequence such as ``[im_end]``), the
    action ends with it; when ``stop_probability`` is True it ends with it only sometimes
    (a truncated or malformed sample otherwise).
    """
    vocab = int(getattr(tokenizer, "vocab_size", 0) or len(tokenizer))  # type: ignore[arg-type]
    special = _special_ids(tokenizer)
    ordinary = st.integers(0, vocab - 1).filter(lambda i: i not in special)
    token = st.one_of(ordinary, st.sampled_from(list(interesting))) if interesting else ordinary
    body = st.lists(token, min_size=min_size, max_size=max_size)
    if stop is None:
        return body
    tail = list(stop)
    if stop_probability:
        return st.tuples(body, st.booleans()).map(lambda t: t[0] + tail if t[1] else t[0])
    return body.map(lambda b: b + tail)


def assistant_indices(conversation: Sequence[Message]) -> list[int]:
    """Indices of the assistant messages of ``conversation``."""
    return [i for i, m in enumerate(conversation) if m["role"] == "assistant"]


def sampled_action(renderer: Renderer, conversation: Sequence[Message], idx: int) -> list[int]:
    """The tokens a perfect sampler returns for ``conversation[idx]`` (an assistant message):
    :func:`renderers_ext.render_action` after ``conversation[:idx]``."""
    message = conversation[idx]
    if message["role"] != "assistant":
        raise ValueError(f"message {idx} is a {message['role']!r} message, not an assistant message")
    return render_action(renderer, message, conversation[:idx])


@dataclass(frozen=True)
class TurnRecord:
    """The prompt before assistant turn ``turn`` (0-based), the action, and the extension check.

    ``report`` compares the previous turn's prompt + action with this turn's prompt
    (None for turn 0).
    """

    turn: int
    """Number of assistant turns completed before this prompt."""
    message_index: int
    """Index of this turn's assistant message in the conversation."""
    prompt: list[int]
    """``build_generation_prompt(conversation[:message_index])`` as tokens."""
    action: list[int]
    """:func:`sampled_action` of this turn's assistant message."""
    report: ExtensionReport | None
    """Extension check of the previous prompt + action against ``prompt``."""

    def describe(self, tokenizer: Tokenizer | None = None) -> str:
        """One readable paragraph: the turn, the report, and the decoded previous action."""
        head = f"turn {self.turn} (message {self.message_index}): {self.report}"
        if tokenizer is None:
            return head
        return f"{head}\n  prompt tail: {tokenizer.decode(self.prompt[-24:])!r}"


def turn_records(renderer: Renderer, conversation: Sequence[Message]) -> list[TurnRecord]:
    """One :class:`TurnRecord` per assistant message, with the extension check between turns.

    The final prompt after the last assistant message (when replies follow it) is included
    as an extra record whose ``action`` is empty, so a break after the last turn is seen too.
    """
    conv = list(conversation)
    records: list[TurnRecord] = []
    prev: tuple[list[int], list[int]] | None = None
    tokenizer = renderer.tokenizer
    idxs = assistant_indices(conv)
    ends = [*idxs, len(conv)] if conv and conv[-1]["role"] != "assistant" else idxs
    for turn, idx in enumerate(ends):
        prompt = prompt_tokens(renderer, conv[:idx])
        action = sampled_action(renderer, conv, idx) if idx < len(conv) else []
        report = None if prev is None else check_extension(prev[0], prev[1], prompt, tokenizer)
        records.append(TurnRecord(turn=turn, message_index=idx, prompt=prompt, action=action, report=report))
        prev = (prompt, action)
    return records


def extension_reports(renderer: Renderer, conversation: Sequence[Message]) -> list[TurnRecord]:
    """The records of :func:`turn_records` that carry an extension check (turn >= 1)."""
    return [r for r in turn_records(renderer, conversation) if r.report is not None]


def describe_conversation(conversation: Sequence[Message], width: int = 60) -> str:
    """A compact, readable one-line-per-message dump (for ``hypothesis.note``)."""

    def show(content: Any) -> str:
        if isinstance(content, str):
            return repr(content[:width]) + ("…" if len(content) > width else "")
        parts = []
        for p in content:
            key = "thinking" if p["type"] == "thinking" else "text"
            value = p.get(key, "")
            parts.append(f"{p['type']}:{value[:width]!r}")
        return "[" + ", ".join(parts) + "]"

    return "\n".join(f"  {i:2d} {m['role']:9s} {show(m['content'])}" for i, m in enumerate(conversation))


@contextmanager
def memoized_encode(tokenizer: Tokenizer, maxsize: int = 65536) -> Iterator[None]:
    """Within the block, ``tokenizer.encode(str, **kwargs)`` is memoised (a copy is returned).

    Property tests re-render the same messages at every turn (O(T^2) encodes per conversation);
    encoding is deterministic, so caching it changes no result and makes tests several times
    faster. The tokenizer is restored on exit.
    """
    original = tokenizer.encode
    shadowed = "encode" in vars(tokenizer)
    cache: dict[tuple[Any, ...], list[int]] = {}

    def encode(text: Any, *args: Any, **kwargs: Any) -> Any:
        if args or not isinstance(text, str):
            return original(text, *args, **kwargs)
        try:
            key = (text, *sorted(kwargs.items()))
            hit = cache.get(key)
        except TypeError:  # unhashable keyword value
            return original(text, **kwargs)
        if hit is None:
            hit = list(original(text, **kwargs))
            if len(cache) >= maxsize:
                cache.clear()
            cache[key] = hit
        return list(hit)

    tokenizer.encode = encode  # type: ignore[method-assign]
    try:
        yield
    finally:
        if shadowed:
            tokenizer.encode = original  # type: ignore[method-assign]
        else:
            del tokenizer.encode  # back to the class method


def role_colon_conversations(**kwargs: Any) -> st.SearchStrategy[list[Message]]:
    """:func:`conversations` that ``role_colon`` can render and parse back.

    String content only; the reply to an assistant message starts with a user message (the
    stop string ``"\\n\\nUser:"`` announces it); text never contains the stop string nor
    ``<|im_end|>`` (its EOS), so every assistant rendering parses cleanly. Keyword arguments
    are passed on to :func:`conversations`.
    """
    kwargs.setdefault("text", texts(fragments=ROLE_COLON_SAFE_FRAGMENTS, forbid=("\n\nUser:", "<|im_end|>")))
    return conversations(string_content=True, first_reply_roles=("user",), **kwargs)
