"""Unit and property tests of renderers_ext's building blocks (tokenizer only, no model).

check_extension / first_divergence, stop_overlap, render_continuation, UTF-8 validity of token
sequences, CompactingRenderer (pickling, supervised examples, period validation).
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from tinker_cookbook.renderers import Message

from backend.model import SMOLLM2
from renderers_ext import (
    QWEN3_PRESERVE_THINKING,
    CompactingRenderer,
    check_extension,
    is_valid_utf8,
    load_renderer,
    prompt_tokens,
    render_continuation,
    stop_overlap,
    stop_token_sequences,
)
from renderers_ext._extension import first_divergence
from renderers_ext._render import token_bytes
from renderers_ext.testing import (
    assistant_indices,
    conversations,
    describe_conversation,
    memoized_encode,
    role_colon_conversations,
    sampled_action,
)

PROPERTY = settings(max_examples=200, deadline=None)
NAMES = ("qwen3_instruct", "qwen3", QWEN3_PRESERVE_THINKING, "role_colon")
RENDERERS = {name: load_renderer(name, SMOLLM2) for name in NAMES}
TOK = RENDERERS["qwen3"].tokenizer
IM_END = 2


@pytest.fixture(autouse=True, scope="module")
def _fast_encode():
    with memoized_encode(TOK):
        yield


# --- check_extension / first_divergence -------------------------------------------------


def test_check_extension_ok_and_break_are_readable() -> None:
    prompt = TOK.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    action = TOK.encode("Hello there<|im_end|>")
    good = prompt + action + TOK.encode("\n<|im_start|>user\nmore<|im_end|>\n")
    ok = check_extension(prompt, action, good, TOK)
    assert ok.ok and ok.divergence is None
    assert str(ok) == f"extension holds ({len(prompt) + len(action)} -> {len(good)} tokens)"

    bad = prompt + TOK.encode("Hello<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n")
    report = check_extension(prompt, action, bad, TOK)
    assert not report.ok
    assert report.divergence == len(prompt) + 1
    assert report.expected_token == action[1] and report.actual_token == bad[len(prompt) + 1]
    text = str(report)
    assert f"breaks at token {len(prompt) + 1}" in text
    assert "Hello⟦ there" in text and "Hello⟦<|im_end|>" in text


def test_check_extension_shorter_next_observation_breaks_at_its_end() -> None:
    prev = [1, 2, 3]
    report = check_extension(prev, [4, 5], [1, 2, 3, 4])
    assert not report.ok and report.divergence == 4
    assert report.expected_token == 5 and report.actual_token is None
    assert "⟦" not in report.expected_text  # no tokenizer: ids only
    assert "4 5" in report.expected_text


def test_check_extension_accepts_model_inputs() -> None:
    import tinker

    report = check_extension(
        tinker.ModelInput.from_ints([1, 2]), [3], tinker.ModelInput.from_ints([1, 2, 3, 9])
    )
    assert report.ok and report.expected_len == 3 and report.actual_len == 4


@PROPERTY
@given(a=st.lists(st.integers(0, 3), max_size=30), b=st.lists(st.integers(0, 3), max_size=30))
def test_first_divergence_matches_naive_scan(a: list[int], b: list[int]) -> None:
    naive = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    expected = None if len(b) >= len(a) and b[: len(a)] == a else naive
    assert first_divergence(a, b) == expected


# --- stop_overlap -------------------------------------------------------------------------


def test_stop_overlap_role_colon_drops_the_user_header_once() -> None:
    r = RENDERERS["role_colon"]
    stop = stop_token_sequences(r)
    assert stop == [TOK.encode("\n\nUser:", add_special_tokens=False)]
    conv: list[Message] = [
        {"role": "user", "content": "Capital?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "Thanks"},
    ]
    action = sampled_action(r, conv, 1)
    assert TOK.decode(action) == " Paris.\n\nUser:"
    new = render_continuation(r, conv, 2)
    k = stop_overlap(action, new, stop=stop)
    assert k == len(TOK.encode("User:", add_special_tokens=False))
    assert k == stop_overlap(action, new)  # the heuristic agrees on ordinary text
    assert prompt_tokens(r, conv[:1]) + action + new[k:] == prompt_tokens(r, conv)


def test_stop_overlap_zero_for_end_of_turn_token_renderers() -> None:
    r = RENDERERS["qwen3_instruct"]
    conv: list[Message] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "again"},
    ]
    action = sampled_action(r, conv, 1)
    new = render_continuation(r, conv, 2)
    assert stop_overlap(action, new) == 0
    assert stop_overlap(action, new, stop=stop_token_sequences(r)) == 0
    assert stop_token_sequences(r) == [[IM_END]]


def test_stop_overlap_with_stop_sequences_keeps_text_that_repeats_the_header() -> None:
    """Only a tail of the stop sequence is dropped; the longest-match heuristic would also
    drop the model's own tokens that happen to repeat the continuation's start."""
    action, cont, stop = [5, 8, 9, 8, 9], [8, 9, 8, 9, 3], [[4, 8, 9]]
    assert stop_overlap(action, cont) == 4
    assert stop_overlap(action, cont, stop=stop) == 2
    assert stop_overlap(action, cont, stop=[[1, 2]]) == 0
    assert stop_overlap(action, cont, max_overlap=1) == 0


@PROPERTY
@given(
    action=st.lists(st.integers(0, 5), max_size=12),
    cont=st.lists(st.integers(0, 5), max_size=12),
    stop=st.lists(st.integers(0, 5), min_size=1, max_size=4),
)
def test_stop_overlap_only_drops_a_true_overlap(action: list[int], cont: list[int], stop: list[int]) -> None:
    k = stop_overlap(action, cont)
    assert 0 <= k <= min(len(action), len(cont))
    assert action[len(action) - k :] == cont[:k]
    ks = stop_overlap(action, cont, stop=[stop])
    assert ks <= len(stop) and action[len(action) - ks :] == cont[:ks] == stop[len(stop) - ks :]


# --- render_continuation ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["qwen3_instruct", QWEN3_PRESERVE_THINKING, "role_colon"])
@PROPERTY
@given(data=st.data())
def test_render_continuation_agrees_with_full_prompt(name: str, data: st.DataObject) -> None:
    """prompt(before the turn) + the renderer's own action + render_continuation(rest) equals
    build_generation_prompt(whole conversation), for renderers with the extension property."""
    r = RENDERERS[name]
    if name == "role_colon":
        strategy = role_colon_conversations()
    else:
        strategy = conversations(thinking=False if name == "qwen3_instruct" else None)
    conv = data.draw(strategy, label="conversation")
    note(describe_conversation(conv))
    stop = stop_token_sequences(r)
    idxs = assistant_indices(conv)
    for n, idx in enumerate(idxs):
        end = idxs[n + 1] if n + 1 < len(idxs) else len(conv)  # the replies to this turn
        if end == idx + 1:
            continue
        head = prompt_tokens(r, conv[:idx])
        action = sampled_action(r, conv, idx)
        new = render_continuation(r, conv[:end], idx + 1)
        tokens = head + action + new[stop_overlap(action, new, stop=stop) :]
        report = check_extension(tokens, [], prompt_tokens(r, conv[:end]), TOK)
        assert tokens == prompt_tokens(r, conv[:end]), str(report)


def test_render_continuation_rejects_a_start_outside_the_conversation() -> None:
    with pytest.raises(ValueError, match="outside the conversation of 1 messages"):
        render_continuation(RENDERERS["qwen3"], [{"role": "user", "content": "x"}], 2)


# --- UTF-8 validity ------------------------------------------------------------------------


@PROPERTY
@given(text=st.text(st.characters(exclude_categories=("Cc", "Cs"), max_codepoint=0x3FFFF), max_size=40))
def test_tokens_of_any_text_are_valid_utf8_and_bytes_roundtrip(text: str) -> None:
    # (SmolLM2's vocabulary lacks the byte symbols of a few C0 controls and of the lead bytes
    # F1/F2, i.e. code points U+40000..U+BFFFF: those encode to <|endoftext|>, see test_model_loader)
    ids = TOK.encode(text, add_special_tokens=False)
    assert is_valid_utf8(TOK, ids)
    assert token_bytes(TOK, ids) == text.encode("utf-8")


def test_lone_byte_of_a_multibyte_character_is_invalid_utf8() -> None:
    ids = TOK.encode("𧌏", add_special_tokens=False)
    assert len(ids) > 1
    assert not is_valid_utf8(TOK, ids[:1])
    assert not is_valid_utf8(TOK, [*TOK.encode("ok ", add_special_tokens=False), ids[0], IM_END])
    assert is_valid_utf8(TOK, ids)


def test_a_written_replacement_character_is_valid_utf8() -> None:
    ids = TOK.encode("bad byte: \ufffd<|im_end|>", add_special_tokens=False)
    assert "\ufffd" in TOK.decode(ids)
    assert is_valid_utf8(TOK, ids)
    assert token_bytes(TOK, ids) == "bad byte: \ufffd<|im_end|>".encode()


# --- CompactingRenderer ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("period", [1, 3])
def test_compacting_renderer_pickles(name: str, period: int) -> None:
    renderer = CompactingRenderer(RENDERERS[name], period)
    clone = pickle.loads(pickle.dumps(renderer))
    assert isinstance(clone, CompactingRenderer)
    assert clone.period == period and type(clone.base) is type(renderer.base)
    assert repr(clone) == repr(renderer)
    conv: list[Message] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "q2"},
    ]
    if name != "role_colon":
        conv[1] = {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "a"}],
        }
    assert prompt_tokens(clone, conv) == prompt_tokens(renderer, conv)
    assert clone.get_stop_sequences() == renderer.get_stop_sequences()


def test_compacting_renderer_inner_keeps_base_untouched() -> None:
    base = load_renderer("qwen3", SMOLLM2)
    CompactingRenderer(base, 2)
    assert base.strip_thinking_from_history is True  # type: ignore[attr-defined]


@pytest.mark.parametrize("period", [0, -3])
def test_compacting_renderer_rejects_bad_period(period: int) -> None:
    with pytest.raises(ValueError, match=f"compaction period must be >= 1, got {period}"):
        CompactingRenderer(RENDERERS["qwen3"], period)


@PROPERTY
@given(
    period=st.integers(1, 3),
    conv=conversations(min_turns=1, max_turns=6, trailing_reply=False, max_extra_replies=0),
)
def test_supervised_example_is_prompt_plus_action_under_compaction(period: int, conv: list[Message]) -> None:
    """build_supervised_example(conversation ending on a turn) = the generation prompt that
    preceded that turn + the turn as sampled (its thinking kept), weights on the turn only."""
    renderer = CompactingRenderer(RENDERERS["qwen3"], period)
    note(describe_conversation(conv))
    model_input, weights = renderer.build_supervised_example(conv)
    prompt = prompt_tokens(renderer, conv[:-1])
    action = sampled_action(renderer, conv, len(conv) - 1)
    tokens = model_input.to_ints()
    assert tokens == prompt + action, str(check_extension(prompt, action, tokens, TOK))
    assert [float(w) for w in weights] == [0.0] * len(prompt) + [1.0] * len(action)


def test_compacting_renderer_delegates_the_rest_of_the_interface() -> None:
    base = RENDERERS["qwen3"]
    renderer = CompactingRenderer(base, 2)
    tools = [
        {"name": "add", "description": "Add two numbers", "parameters": {"type": "object", "properties": {}}}
    ]
    assert renderer.create_conversation_prefix_with_tools(
        tools, "sys"
    ) == base.create_conversation_prefix_with_tools(tools, "sys")
    assert renderer.supports_streaming == base.supports_streaming
    action = TOK.encode("<think>\nhm\n</think>\n\nok<|im_end|>", add_special_tokens=False)
    assert renderer.parse_response(action) == base.parse_response(action)
    if base.supports_streaming:
        assert list(renderer.parse_response_streaming(action))  # does not raise, yields deltas
