"""The ChatEnv core: faulty actions, budgets, stop reasons, token-in/token-out observations.

A scripted game (``ScriptedEnv``) answers every assistant message with the next scripted
:class:`Reply`; tests drive it with hand-built action tokens and check rewards, stop reasons,
turn counts and observations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
import tinker
from tinker_cookbook.renderers import Message, get_text_content
from tinker_cookbook.rl.types import InitialObservationOverflow, StepResult, StopReason

from backend.model import SMOLLM2
from envs.core import (
    METRIC_FAULT_PREFIX,
    ChatEnv,
    EnvLimits,
    Fault,
    FaultPolicy,
    Reply,
    TurnEnd,
    decode_action,
)
from renderers_ext import CompactingRenderer, check_extension, load_renderer, prompt_tokens

IM_END = 2
QWEN = load_renderer("qwen3_instruct", SMOLLM2)
TOK = QWEN.tokenizer


class ScriptedEnv(ChatEnv):
    """Replies with ``replies[i]`` to the i-th parsed assistant message (then ends)."""

    def __init__(self, renderer, initial: Sequence[Message], replies: Sequence[Reply] = (), **kwargs):
        super().__init__(renderer, **kwargs)
        self._initial = list(initial)
        self._replies = list(replies)
        self.seen: list[Message] = []
        self.faults_seen: list[Fault] = []

    def initial_messages(self) -> list[Message]:
        return list(self._initial)

    async def on_message(self, message: Message) -> Reply:
        self.seen.append(message)
        i = len(self.seen) - 1
        return self._replies[i] if i < len(self._replies) else Reply(done=True, reward=0.0)

    async def on_fault(self, fault: Fault, message: Message | None) -> Reply:
        self.faults_seen.append(fault)
        return await super().on_fault(fault, message)


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def act(text: str, stop: bool = True) -> list[int]:
    return TOK.encode(text + ("<|im_end|>" if stop else ""), add_special_tokens=False)


def run(coro):
    return asyncio.run(coro)


async def start(env: ChatEnv) -> list[int]:
    ob = await env.initial_observation()
    assert not isinstance(ob, InitialObservationOverflow)
    return ob[0].to_ints()


def stop_metric(result: StepResult) -> list[str]:
    return sorted(k for k in result.metrics if k.startswith("stop/"))


# --- ordinary turns ----------------------------------------------------------------------


def test_two_turns_extend_and_end_with_the_game_reward() -> None:
    env = ScriptedEnv(
        QWEN, [user("Guess a number")], [Reply([user("higher")], reward=0.1), Reply(done=True, reward=1.0)]
    )

    async def go():
        ob0 = await start(env)
        assert ob0 == prompt_tokens(QWEN, [user("Guess a number")])
        a1 = act("5")
        r1 = await env.step(a1, extra={"stop_reason": "stop"})
        assert not r1.episode_done and r1.reward == pytest.approx(0.1)
        ob1 = r1.next_observation.to_ints()
        assert check_extension(ob0, a1, ob1, TOK).ok
        assert ob1 == prompt_tokens(QWEN, [user("Guess a number"), *env.seen, user("higher")])
        assert env.rerenders == 0
        assert r1.metrics["turngym/ob_tokens_added"] == len(ob1) - len(ob0) - len(a1)
        assert r1.next_stop_condition == [IM_END]
        r2 = await env.step(act("8"))
        assert r2.episode_done and r2.reward == pytest.approx(1.0)
        assert stop_metric(r2) == ["stop/completed"]
        assert r2.next_observation.length == 0
        assert [get_text_content(m) for m in env.seen] == ["5", "8"]
        assert env.turn == 2 and env.rerenders == 0
        assert env.observation_tokens == ob1 + act("8")

    run(go())


def test_reply_stop_reason_and_metrics_pass_through() -> None:
    env = ScriptedEnv(
        QWEN,
        [user("x")],
        [
            Reply(
                done=True,
                reward=-1.0,
                stop_reason=StopReason.TOOL_STOPPED,
                metrics={"game/score": 3.0},
                logs={"why": "tool"},
            )
        ],
    )

    async def go():
        await start(env)
        r = await env.step(act("call"))
        assert r.episode_done and r.reward == -1.0
        assert stop_metric(r) == ["stop/tool_stopped"]
        assert r.metrics["game/score"] == 3.0 and r.logs == {"why": "tool"}

    run(go())


# --- faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "extra", "fault", "reason"),
    [
        (
            act("I was cut off in the mid", stop=False),
            {"stop_reason": "length"},
            Fault.TRUNCATED,
            "max_tokens",
        ),
        (act("done but at the limit"), {"stop_reason": "length"}, Fault.TRUNCATED, "max_tokens"),
        ([], None, Fault.EMPTY, "parse_error"),
        ([], {"stop_reason": "length"}, Fault.EMPTY, "parse_error"),
        (act("no stop token", stop=False), None, Fault.MALFORMED, "parse_error"),
        (act("two<|im_end|>stops"), None, Fault.MALFORMED, "parse_error"),
        (
            TOK.encode("ok ", add_special_tokens=False)
            + TOK.encode("𧌏", add_special_tokens=False)[:1]
            + [IM_END],
            None,
            Fault.INVALID_UTF8,
            "parse_error",
        ),
        (
            TOK.encode("é", add_special_tokens=False) + TOK.encode("𧌏", add_special_tokens=False)[:2],
            {"stop_reason": "length"},
            Fault.TRUNCATED,
            "max_tokens",
        ),
    ],
    ids=[
        "truncated",
        "truncated-clean",
        "empty",
        "empty-length",
        "no-stop",
        "two-stops",
        "half-char",
        "truncated-mid-char",
    ],
)
def test_fault_ends_the_episode_with_its_reward_and_stop_reason(
    action, extra, fault: Fault, reason: str
) -> None:
    env = ScriptedEnv(QWEN, [user("hi")], [Reply([user("again")])], faults={fault: FaultPolicy(reward=-0.5)})

    async def go():
        ob0 = await start(env)
        r = await env.step(action, extra=extra)
        assert r.episode_done
        assert r.reward == -0.5
        assert stop_metric(r) == [f"stop/{reason}"]
        assert r.metrics[f"{METRIC_FAULT_PREFIX}{fault}"] == 1.0
        assert env.seen == [] and env.turn == 1
        assert env.observation_tokens == ob0 + list(action)  # the final sequence keeps the sample

    run(go())


def test_default_fault_policy_is_zero_reward_and_ends() -> None:
    env = ScriptedEnv(QWEN, [user("hi")])

    async def go():
        await start(env)
        r = await env.step(act("unterminated", stop=False))
        assert r.episode_done and r.reward == 0.0 and stop_metric(r) == ["stop/parse_error"]

    run(go())


def test_truncated_turn_that_does_not_end_is_closed_and_extends() -> None:
    env = ScriptedEnv(
        QWEN,
        [user("hi")],
        [Reply([user("go on")], reward=1.0), Reply(done=True)],
        faults={Fault.TRUNCATED: FaultPolicy(reward=-0.25, end_episode=False)},
    )

    async def go():
        first = await start(env)
        cut = act("partial answ", stop=False)
        r = await env.step(cut, extra={"stop_reason": "length"})
        assert not r.episode_done
        assert r.reward == pytest.approx(0.75)
        assert env.faults_seen == [Fault.TRUNCATED]
        assert get_text_content(env.seen[0]) == "partial answ"
        # The sample is kept verbatim and closed with the end-of-turn token: the prefix holds,
        # and the result equals the full render of the conversation.
        assert env.rerenders == 0
        ob = r.next_observation.to_ints()
        assert ob[: len(first) + len(cut)] == first + cut and ob[len(first) + len(cut)] == 2
        assert ob == prompt_tokens(QWEN, env.messages)

    run(go())


def test_empty_fault_that_does_not_end_still_ends_without_a_message() -> None:
    env = ScriptedEnv(QWEN, [user("hi")], faults={Fault.EMPTY: FaultPolicy(reward=-1.0, end_episode=False)})

    async def go():
        await start(env)
        r = await env.step([])
        assert r.episode_done and r.reward == -1.0 and stop_metric(r) == ["stop/parse_error"]
        assert env.faults_seen == [Fault.EMPTY] and env.seen == []

    run(go())


def test_a_written_replacement_character_is_not_a_fault() -> None:
    env = ScriptedEnv(QWEN, [user("hi")], [Reply(done=True, reward=1.0)])

    async def go():
        await start(env)
        r = await env.step(act("the byte was \ufffd"))
        assert r.reward == 1.0 and stop_metric(r) == ["stop/completed"]
        assert get_text_content(env.seen[0]) == "the byte was \ufffd"

    run(go())


def test_decode_action_role_colon() -> None:
    rc = load_renderer("role_colon", SMOLLM2)
    enc = rc.tokenizer.encode
    message, fault = decode_action(rc, enc(" Paris.\n\nUser:", add_special_tokens=False))
    assert fault is None and message is not None and message["content"] == "Paris."
    assert decode_action(rc, enc(" Paris, and", add_special_tokens=False))[1] is Fault.MALFORMED
    assert decode_action(rc, [])[1] is Fault.EMPTY


# --- budgets -------------------------------------------------------------------------------


def test_max_turns_ends_after_the_last_allowed_turn_with_its_reward() -> None:
    env = ScriptedEnv(QWEN, [user("hi")], [Reply([user("1")], reward=0.5)] * 5, limits=EnvLimits(max_turns=3))

    async def go():
        await start(env)
        results = [await env.step(act(f"t{i}")) for i in range(3)]
        assert [r.episode_done for r in results] == [False, False, True]
        assert stop_metric(results[-1]) == ["stop/max_turns"]
        assert [r.reward for r in results] == [0.5, 0.5, 0.5]
        assert env.turn == 3 and len(env.seen) == 3

    run(go())


def test_initial_prompt_over_budget_overflows() -> None:
    long = "word " * 50
    n = len(prompt_tokens(QWEN, [user(long)]))
    env = ScriptedEnv(QWEN, [user(long)], limits=EnvLimits(max_trajectory_tokens=n - 1))
    ob = run(env.initial_observation())
    assert isinstance(ob, InitialObservationOverflow)
    assert ob.metrics == {"stop/max_tokens": 1.0} and ob.reward == 0.0
    assert str(n) in str(ob.logs["overflow"])
    fits = ScriptedEnv(QWEN, [user(long)], limits=EnvLimits(max_trajectory_tokens=n))
    ob2 = run(fits.initial_observation())
    assert not isinstance(ob2, InitialObservationOverflow) and ob2[0].length == n


def test_observation_over_budget_ends_with_context_overflow() -> None:
    n0 = len(prompt_tokens(QWEN, [user("hi")]))
    env = ScriptedEnv(
        QWEN,
        [user("hi")],
        [Reply([user("a much longer reply " * 10)], reward=0.3)],
        limits=EnvLimits(max_trajectory_tokens=n0 + 20),
    )

    async def go():
        await start(env)
        r = await env.step(act("ok"))
        assert r.episode_done and r.reward == pytest.approx(0.3)
        assert stop_metric(r) == ["stop/context_overflow"]

    run(go())


# --- role_colon and compaction ---------------------------------------------------------------


def test_role_colon_observation_renders_the_stop_overlap_once() -> None:
    rc = load_renderer("role_colon", SMOLLM2)
    env = ScriptedEnv(rc, [user("Capital of France?")], [Reply([user("Thanks")])])

    async def go():
        ob0 = await start(env)
        action = rc.tokenizer.encode(" Paris.\n\nUser:", add_special_tokens=False)
        r = await env.step(action)
        ob1 = r.next_observation.to_ints()
        assert check_extension(ob0, action, ob1, rc.tokenizer).ok
        text = rc.tokenizer.decode(ob1)
        assert text.endswith("Assistant: Paris.\n\nUser: Thanks\n\nAssistant:"), text
        assert text.count("User:") == 2

    run(go())


def test_compacting_env_rerenders_exactly_at_window_starts() -> None:
    renderer = CompactingRenderer(load_renderer("qwen3", SMOLLM2), 2)
    env = ScriptedEnv(renderer, [user("start")], [Reply([user(f"r{i}")]) for i in range(6)])

    async def go():
        prev = await start(env)
        flags = []
        for i in range(5):
            action = renderer.tokenizer.encode(
                f"<think>\nstep {i}\n</think>\n\nanswer {i}<|im_end|>", add_special_tokens=False
            )
            before = env.rerenders
            r = await env.step(action)
            ob = r.next_observation.to_ints()
            flags.append((env.rerenders > before, check_extension(prev, action, ob).ok))
            prev = ob
        assert flags == [(False, True), (True, False), (False, True), (True, False), (False, True)]
        assert env.rerenders == 2
        text = renderer.tokenizer.decode(prev)
        assert "step 0" not in text and "step 3" not in text and "step 4" in text

    run(go())


def test_compacting_env_keeps_sampled_tokens_when_a_window_has_nothing_to_strip() -> None:
    """No thinking, period 1: every turn is a window start, yet nothing is re-rendered, so the
    sampled tokens stay verbatim (here a non-canonical split of "hello", which a re-render
    would re-tokenise)."""
    renderer = CompactingRenderer(load_renderer("qwen3_instruct", SMOLLM2), 1)
    tok = renderer.tokenizer
    odd = [*tok.encode("hel", add_special_tokens=False), *tok.encode("lo", add_special_tokens=False), IM_END]
    assert odd != act("hello") and tok.decode(odd) == "hello<|im_end|>"
    env = ScriptedEnv(renderer, [user("say hello")], [Reply([user(f"again {i}")]) for i in range(3)])

    async def go():
        prev = await start(env)
        for _ in range(3):
            r = await env.step(odd)
            ob = r.next_observation.to_ints()
            assert check_extension(prev, odd, ob, tok).ok
            prev = ob
        assert env.rerenders == 0

    run(go())


def test_env_with_model_input_chunks() -> None:
    env = ScriptedEnv(QWEN, [user("hi")], [Reply([user("next")])])

    async def go():
        ob = await env.initial_observation()
        assert isinstance(ob, tuple) and isinstance(ob[0], tinker.ModelInput)
        assert env.stop_condition == [IM_END]

    run(go())


# --- tool calls --------------------------------------------------------------------------
BAD_CALL = '<tool_call>\n{"name": "lookup", "arguments": {"item": "pen",}}\n</tool_call>'
GOOD_CALL = '<tool_call>\n{"name": "lookup", "arguments": {"item": "pen"}}\n</tool_call>'


def test_decode_action_reports_a_malformed_tool_call() -> None:
    message, fault = decode_action(QWEN, act(BAD_CALL))
    assert fault is Fault.MALFORMED_TOOL_CALL and message is not None
    assert message["unparsed_tool_calls"] and "tool_calls" not in message
    assert decode_action(QWEN, act(BAD_CALL), tool_calls=False)[1] is None  # no tools: just text
    message, fault = decode_action(QWEN, act(GOOD_CALL))
    assert fault is None and message is not None and message["tool_calls"][0].function.name == "lookup"


TOOL = {"name": "lookup", "description": "Stock of an item.", "parameters": {"type": "object"}}


def test_malformed_tool_call_is_a_fault_the_game_never_sees_by_default() -> None:
    env = ScriptedEnv(QWEN, [user("hi")], [Reply([user("text")], reward=1.0)], tools=[TOOL])

    async def go():
        await start(env)
        r = await env.step(act(BAD_CALL))
        assert r.episode_done and r.reward == 0.0 and stop_metric(r) == ["stop/parse_error"]
        assert r.metrics[f"{METRIC_FAULT_PREFIX}malformed_tool_call"] == 1.0
        assert env.seen == [] and env.faults_seen == []

    run(go())


def test_malformed_tool_call_that_does_not_end_gets_a_tool_error_and_keeps_the_prefix() -> None:
    env = ScriptedEnv(
        QWEN,
        [user("hi")],
        [Reply(done=True, reward=1.0)],
        faults={Fault.MALFORMED_TOOL_CALL: FaultPolicy(reward=-0.2, end_episode=False)},
        tools=[TOOL],
    )

    async def go():
        ob0 = await start(env)
        bad = act(BAD_CALL)
        r = await env.step(bad)
        assert not r.episode_done and r.reward == pytest.approx(-0.2)
        assert env.seen == [] and env.faults_seen == [Fault.MALFORMED_TOOL_CALL]
        assert env.messages[-1]["role"] == "tool" and "malformed tool call" in env.messages[-1]["content"]
        ob1 = r.next_observation.to_ints()
        assert check_extension(ob0, bad, ob1, TOK).ok and env.rerenders == 0
        r2 = await env.step(act(GOOD_CALL))  # the game sees the well-formed call
        assert r2.episode_done and r2.reward == 1.0 and env.seen[0]["tool_calls"]

    run(go())


class DictReplyEnv(ChatEnv):
    def initial_messages(self) -> list[Message]:
        return [user("hi")]

    async def on_message(self, message: Message) -> Reply:
        return {"reward": 1.0}  # type: ignore[return-value]


class SyncReplyEnv(DictReplyEnv):
    def on_message(self, message: Message) -> Reply:  # type: ignore[override]
        return Reply(done=True)


@pytest.mark.parametrize(
    ("env_cls", "message"),
    [
        (DictReplyEnv, "DictReplyEnv.on_message must return a Reply, got dict"),
        (SyncReplyEnv, "SyncReplyEnv.on_message must be async (async def) and return a Reply, got Reply"),
    ],
)
def test_a_wrong_on_message_says_so(env_cls: type[ChatEnv], message: str) -> None:
    env = env_cls(QWEN)

    async def go():
        await start(env)
        with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            await env.step(act("5"))

    run(go())


def test_tool_prompt_declares_the_tools_in_the_renderers_format() -> None:
    spec = {"name": "lookup", "description": "Find an item.", "parameters": {"type": "object"}}
    env = DictReplyEnv(QWEN, tools=[spec])
    prompt = env.tool_prompt("Be brief.")
    assert prompt == QWEN.create_conversation_prefix_with_tools([spec], "Be brief.")
    assert DictReplyEnv(QWEN).tool_prompt("Be brief.") == [{"role": "system", "content": "Be brief."}]
    assert env.action_messages() is None


class TurnEndRecordingEnv(ScriptedEnv):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.turn_ends: list[TurnEnd] = []

    def on_turn_end(self, turn: TurnEnd) -> None:
        self.turn_ends.append(turn)


def test_on_turn_end_reports_every_step_with_its_fault_play_and_stop() -> None:
    env = TurnEndRecordingEnv(
        QWEN,
        [user("hi")],
        [Reply([user("go on")]), Reply([user("again")])],
        faults={Fault.TRUNCATED: FaultPolicy(reward=-0.25, end_episode=False)},
    )

    async def go():
        await start(env)
        await env.step(act("one"))  # clean, played
        await env.step(act("cut sh", stop=False), extra={"stop_reason": "length"})  # fault, played
        r = await env.step(act("unterminated", stop=False))  # fault that ends: never played
        assert r.episode_done

    run(go())
    assert env.turn_ends == [
        TurnEnd(fault=None, played=True, stop_reason=None),
        TurnEnd(fault=Fault.TRUNCATED, played=True, stop_reason=None),
        TurnEnd(fault=Fault.MALFORMED, played=False, stop_reason=StopReason.PARSE_ERROR),
    ]


def test_no_env_overrides_chat_env_step() -> None:
    """Games keep their counters through ``on_turn_end``; the base's ``step`` is the only one."""
    import importlib
    import pkgutil

    import envs

    for info in pkgutil.walk_packages(envs.__path__, "envs."):
        if ".env" in info.name:  # every game's module (envs.<game>.env)
            importlib.import_module(info.name)

    def subclasses(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]

    games = [c for c in subclasses(ChatEnv) if c.__module__.startswith("envs.")]
    assert "TwentyQuestionsEnv" in {c.__name__ for c in games}
    assert all(c.step is ChatEnv.step for c in games), [
        c.__name__ for c in games if c.step is not ChatEnv.step
    ]
