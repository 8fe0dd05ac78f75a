"""Property tests of the extension property, per renderer, on the embedded tokenizer (no model).

For every offline renderer, hypothesis draws conversations (system/user/assistant, with and
without thinking, unicode, empty and long turns, template markers inside the text) and checks
the prompt of each assistant turn against the previous prompt + the renderer's own rendering of
the previous assistant message (its "sampled tokens", see ``renderers_ext.testing.sampled_action``):

- renderers that claim the property extend at every turn;
- renderers that strip thinking from history break exactly where they must, and only inside
  the previous action (never in older history);
- ``CompactingRenderer(base, N)`` breaks at most once per N turns, exactly at window starts
  whose window had thinking to strip, and never inside a window.

Counterexamples print the conversation and the decoded side-by-side of the break.
"""

from __future__ import annotations

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from tinker_cookbook.renderers import Message, RenderContext, Renderer
from tinker_cookbook.renderers.base import has_thinking

from backend.model import SMOLLM2
from renderers_ext import QWEN3_PRESERVE_THINKING, CompactingRenderer, extension_expected, load_renderer
from renderers_ext._compaction import strip_thinking
from renderers_ext.testing import (
    ALPHABET,
    ROLE_COLON_SAFE_FRAGMENTS,
    TurnRecord,
    conversations,
    describe_conversation,
    extension_reports,
    memoized_encode,
    role_colon_conversations,
    texts,
    turn_records,
    visible_thinking,
)

PROPERTY = settings(max_examples=200, deadline=None)

RENDERERS = {
    name: load_renderer(name, SMOLLM2)
    for name in ("qwen3_instruct", "qwen3", QWEN3_PRESERVE_THINKING, "role_colon")
}

# role_colon cannot render structured content (so no thinking), and its stop string
# "\n\nUser:" announces a user message: the reply to an assistant message starts with one.
ROLE_COLON_CONVERSATIONS = role_colon_conversations()
ROLE_COLON_NO_THINK = role_colon_conversations(
    text=texts(fragments=ROLE_COLON_SAFE_FRAGMENTS, forbid=("<think>", "\n\nUser:", "<|im_end|>"))
)


@pytest.fixture(autouse=True, scope="module")
def _fast_encode():
    """Memoise tokenizer.encode: every turn re-renders the same messages (results unchanged)."""
    with memoized_encode(next(iter(RENDERERS.values())).tokenizer):
        yield


def _explain(renderer: Renderer, conversation: list[Message], records: list[TurnRecord]) -> str:
    tok = renderer.tokenizer
    lines = [f"renderer {type(renderer).__name__}", describe_conversation(conversation)]
    lines += [r.describe(tok) for r in records]
    return "\n".join(lines)


def _prev_assistant(conversation: list[Message], records: list[TurnRecord], rec: TurnRecord) -> Message:
    return conversation[records[rec.turn - 1].message_index]


# --- 1. renderers that claim the property have it --------------------------------------


@pytest.mark.parametrize(
    ("name", "strategy"),
    [
        ("qwen3_instruct", conversations(thinking=False)),
        (QWEN3_PRESERVE_THINKING, conversations()),
        (QWEN3_PRESERVE_THINKING, conversations(thinking=True, system=True, max_extra_replies=2)),
        ("role_colon", ROLE_COLON_CONVERSATIONS),
    ],
    ids=["qwen3_instruct-no-thinking", "qwen3_preserve", "qwen3_preserve-all-thinking", "role_colon"],
)
@PROPERTY
@given(data=st.data())
def test_claiming_renderers_extend_at_every_turn(name: str, strategy, data: st.DataObject) -> None:
    renderer = RENDERERS[name]
    assert renderer.has_extension_property, f"{name} should claim the extension property"
    conversation = data.draw(strategy, label="conversation")
    records = turn_records(renderer, conversation)
    note(_explain(renderer, conversation, records))
    for rec in records[1:]:
        assert rec.report is not None
        assert rec.report.ok, rec.describe(renderer.tokenizer)


# --- 1b. renderers that strip thinking are caught breaking exactly where expected -------


@PROPERTY
@given(conversation=conversations(max_turns=5))
def test_qwen3_stripping_breaks_after_every_framed_turn(conversation: list[Message]) -> None:
    """``qwen3`` (thinking stripped from history, like the HF template) breaks after every turn.

    The produced turn is always framed ``<think>\\n…\\n</think>\\n\\n`` (an empty block when the
    message did not reason), and history drops the whole block, so the break is at the start of
    the previous action, whether or not that turn had reasoning.
    """
    renderer = RENDERERS["qwen3"]
    assert not renderer.has_extension_property
    records = turn_records(renderer, conversation)
    note(_explain(renderer, conversation, records))
    for rec in records[1:]:
        assert rec.report is not None
        prev = records[rec.turn - 1]
        content = conversation[prev.message_index]["content"]
        # A string with a literal "<think>" is taken as already-written reasoning (not framed).
        literal = isinstance(content, str) and "<think>" in content
        if not literal:
            assert renderer.tokenizer.decode(prev.action).startswith("<think>\n")
            assert not rec.report.ok, f"expected a break: {rec.describe(renderer.tokenizer)}"
        # Earlier history was already stripped in the previous prompt: the break is in the action.
        if not rec.report.ok:
            assert rec.report.divergence is not None and rec.report.divergence >= len(prev.prompt), (
                rec.describe(renderer.tokenizer)
            )


@PROPERTY
@given(conversation=conversations(max_turns=5))
def test_qwen3_instruct_breaks_exactly_after_turns_with_thinking(conversation: list[Message]) -> None:
    """``qwen3_instruct`` claims the property but strips ThinkingParts from history (the cookbook's
    documented caveat): it breaks exactly at turns following an assistant message with thinking."""
    renderer = RENDERERS["qwen3_instruct"]
    records = turn_records(renderer, conversation)
    note(_explain(renderer, conversation, records))
    for rec in records[1:]:
        assert rec.report is not None
        prev_msg = _prev_assistant(conversation, records, rec)
        expect_break = has_thinking(prev_msg["content"]) and isinstance(prev_msg["content"], list)
        assert rec.report.ok != expect_break, (
            f"expected break={expect_break}: {rec.describe(renderer.tokenizer)}"
        )
        if expect_break:
            prev = records[rec.turn - 1]
            assert rec.report.divergence is not None and rec.report.divergence >= len(prev.prompt)


# --- 3. compaction: one break per window start with thinking, none inside a window ------


def _renders_differently_stripped(renderer: CompactingRenderer, message: Message) -> bool:
    """Whether compaction changes how this history message renders (what a window start strips)."""
    ctx = RenderContext(idx=1, is_last=False, last_user_index=0)
    before = renderer.render_message(message, ctx).output
    after = renderer.render_message(strip_thinking(message), ctx).output
    return [c.tokens for c in before] != [c.tokens for c in after]  # type: ignore[attr-defined]


@pytest.mark.parametrize("base_name", ["qwen3", QWEN3_PRESERVE_THINKING, "qwen3_instruct"])
@PROPERTY
@given(period=st.integers(1, 4), conversation=conversations(min_turns=1, max_turns=9, max_extra_replies=0))
def test_compaction_breaks_once_per_window_and_never_inside(
    base_name: str, period: int, conversation: list[Message]
) -> None:
    renderer = CompactingRenderer(RENDERERS[base_name], period)
    records = turn_records(renderer, conversation)
    note(_explain(renderer, conversation, records))
    for rec in records[1:]:
        assert rec.report is not None
        k = rec.turn
        assert extension_expected(renderer, k) == (k % period != 0)
        if extension_expected(renderer, k, conversation[: rec.message_index]):  # nothing to strip
            assert rec.report.ok, rec.describe(renderer.tokenizer)
        if k % period != 0:
            assert rec.report.ok, f"break inside a window (turn {k}, period {period}): {rec.describe()}"
            continue
        window = [conversation[records[j].message_index] for j in range(k - period, k)]
        expect_break = any(_renders_differently_stripped(renderer, m) for m in window)
        if base_name != "qwen3_instruct":  # Qwen3 framing: visible reasoning always changes the render
            assert expect_break or not any(visible_thinking(m) for m in window)
        assert rec.report.ok != expect_break, f"turn {k} period {period}: {rec.describe(renderer.tokenizer)}"
        if expect_break:
            # Only the window that just closed is compacted; older turns were stripped before.
            window_start = records[k - period].prompt
            assert rec.report.divergence is not None and rec.report.divergence >= len(window_start)


@PROPERTY
@given(
    period=st.integers(1, 4),
    conversation=conversations(
        min_turns=2,
        max_turns=9,
        thinking=True,
        thinking_text=st.text(ALPHABET, min_size=1, max_size=12).filter(
            lambda s: s.strip("\n") and "<think>" not in s
        ),
    ),
)
def test_compaction_with_thinking_breaks_exactly_at_every_window_start(
    period: int, conversation: list[Message]
) -> None:
    renderer = CompactingRenderer(RENDERERS["qwen3"], period)
    records = turn_records(renderer, conversation)
    note(_explain(renderer, conversation, records))
    breaks = [r.turn for r in records[1:] if r.report is not None and not r.report.ok]
    turns = len(records) - 1
    assert breaks == [k for k in range(1, turns + 1) if k % period == 0]


@pytest.mark.parametrize("base_name", ["qwen3_instruct", "role_colon"])
@PROPERTY
@given(period=st.integers(1, 5), data=st.data())
def test_compaction_leaves_renderers_without_thinking_untouched(
    base_name: str, period: int, data: st.DataObject
) -> None:
    base = RENDERERS[base_name]
    # (a literal "<think>…</think>" in a string is inline reasoning: compacting it is the point)
    strategy = (
        ROLE_COLON_NO_THINK
        if base_name == "role_colon"
        else conversations(thinking=False, text=texts(forbid=("<think>",)))
    )
    conversation = data.draw(strategy, label="conversation")
    renderer = CompactingRenderer(base, period)
    for end in range(len(conversation) + 1):
        head = conversation[:end]
        assert (
            renderer.build_generation_prompt(head).to_ints() == base.build_generation_prompt(head).to_ints()
        )
    assert renderer.get_stop_sequences() == base.get_stop_sequences()


# --- a deliberate prefix bug is caught, with a readable report --------------------------


def test_injected_prefix_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A renderer that drops one token of history fails the property test, readably."""
    renderer = load_renderer(QWEN3_PRESERVE_THINKING, SMOLLM2)  # a fresh instance, patched below
    original = renderer.render_message

    def drop_a_token(message, ctx):
        rendered = original(message, ctx)
        if message["role"] == "assistant" and not ctx.is_last:
            first = rendered.output[0]
            rendered.output[0] = type(first)(tokens=list(first.tokens)[:-1])
        return rendered

    monkeypatch.setattr(renderer, "render_message", drop_a_token)

    @settings(max_examples=200, deadline=None, database=None, print_blob=False)
    @given(conversation=conversations(min_turns=2, trailing_reply=True))
    def prop(conversation: list[Message]) -> None:
        for rec in extension_reports(renderer, conversation):
            assert rec.report is not None
            assert rec.report.ok, rec.describe(renderer.tokenizer)

    with pytest.raises(AssertionError) as info:
        prop()
    message = str(info.value)
    assert "extension breaks at token" in message
    assert "expected:" in message and "actual:" in message  # decoded side by side
    assert "<|im_end|>" in message  # decoded text, not only ids
