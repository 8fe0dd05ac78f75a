"""Run-time extension check, compaction, and the cookbook's own Twenty Questions env, through the
engine on the embedded tokenizer (offline)."""

from __future__ import annotations

import anyio
import pytest
from tinker_cookbook.completers import MessageCompleter, TokenCompleter
from tinker_cookbook.recipes.multiplayer_rl.twenty_questions.env import (
    TwentyQuestionsEnv,
    TwentyQuestionsEnvGroupBuilder,
)
from tinker_cookbook.renderers import Message, get_text_content
from tinker_cookbook.rl.data_processing import trajectory_to_data
from tinker_cookbook.rl.types import StopReason

from backend.model import SMOLLM2
from completers import ScriptedGroupCompleter, ScriptedTokenCompleter
from envs.core import ChatEnv, Reply
from renderers_ext import CompactingRenderer, load_renderer
from rollout import (
    METRIC_COMPACTION,
    METRIC_COMPACTION_UNSUPPORTED,
    CompactionUnsupported,
    EngineConfig,
    ExtensionCheck,
    RolloutEngine,
    SupportsCompaction,
    run_episode,
)
from rollout._compaction import LOG_COMPACTION

THINK = "<think>\nhmm\n</think>\n\n"


class ScriptedAnswerer(MessageCompleter):
    """Answers 'yes' when the secret word is in the question, else 'no'."""

    def __init__(self, answer: str):
        self.answer = answer
        self.calls = 0

    async def __call__(self, messages: list[Message]) -> Message:
        self.calls += 1
        return {
            "role": "assistant",
            "content": "yes" if self.answer in get_text_content(messages[-1]).lower() else "no",
        }


def actions(renderer, texts: list[str]) -> list[list[int]]:
    """What a model would sample: the text's tokens, then the renderer's stop token."""
    stop = renderer.get_stop_sequences()[0]
    assert isinstance(stop, int)
    return [[*renderer.tokenizer.encode(t, add_special_tokens=False), stop] for t in texts]


def twenty_questions_batch(
    renderer, texts: list[str], num_envs: int = 2, config: EngineConfig | None = None
):
    answerer = ScriptedAnswerer("apple")
    builder = TwentyQuestionsEnvGroupBuilder(
        answerer=answerer, answer="apple", renderer=renderer, num_envs=num_envs
    )
    # Each env plays the whole script: the envs' turns interleave, so a group of envs needs a
    # script per env (routed by conversation: for renderers that extend their prompts).
    acts = actions(renderer, texts)
    if num_envs == 1:
        policy: TokenCompleter = ScriptedTokenCompleter(acts, cycle=True)
    else:
        policy = ScriptedGroupCompleter([ScriptedTokenCompleter(acts, cycle=True) for _ in range(num_envs)])
    engine = RolloutEngine(policy, config)
    return anyio.run(engine.run_batch, [builder]), answerer


def test_cookbook_twenty_questions_runs_unchanged():
    renderer = load_renderer("qwen3_instruct", SMOLLM2)
    result, answerer = twenty_questions_batch(
        renderer, ["Is it a fruit?", "Is it red?", "Guess: apple"], num_envs=3
    )
    (o,) = result.outcomes
    assert o.ok and o.completed == 3
    assert o.group is not None
    assert o.group.get_total_rewards() == [1.0, 1.0, 1.0]  # the guess on turn 3 wins
    assert all(len(t.transitions) == 3 for t in o.group.trajectories_G)
    assert answerer.calls == 9
    assert all(s.stop_reason == StopReason.COMPLETED for s in o.stats)
    # the observation the env returns is the cookbook's own rendering of the conversation
    last = o.group.trajectories_G[0].transitions[-1].ob.to_ints()
    assert renderer.tokenizer.decode(last).rstrip().endswith("<|im_start|>assistant")
    assert result.metrics["traj/ext_breaks"] == 0 and result.metrics["traj/datums_per_traj"] == 1


@pytest.mark.parametrize(
    ("name", "prefix"),
    [("qwen3_instruct", ""), ("turngym/qwen3_preserve_thinking", THINK)],
)
@pytest.mark.parametrize("mode", [ExtensionCheck.FULL, ExtensionCheck.BOUNDARY])
def test_checker_passes_renderers_with_the_extension_property(name, prefix, mode):
    renderer = load_renderer(name, SMOLLM2)
    texts = [prefix + t for t in ["Is it a fruit?", "Is it red?", "Is it a tree?", "Guess: apple"]]
    result, _ = twenty_questions_batch(renderer, texts, config=EngineConfig(extension_check=mode))
    assert result.metrics["traj/ext_breaks"] == 0
    assert result.metrics["tokens/trained"] == result.metrics["tokens/unique"]


def test_checker_marks_announced_breaks_as_expected():
    # qwen3 strips thinking from history: it announces no extension property, so breaks are expected
    renderer = load_renderer("qwen3", SMOLLM2)
    assert not renderer.has_extension_property
    result, _ = twenty_questions_batch(
        renderer, [THINK + "Is it a fruit?", THINK + "Is it red?", THINK + "Guess: apple"], num_envs=1
    )
    (o,) = result.outcomes
    assert result.metrics["traj/ext_breaks"] == 2 and result.metrics["traj/ext_breaks_unexpected"] == 0
    assert all(s.datums == 3 for s in o.stats)  # one datum per turn
    assert result.metrics["tokens/trained"] > result.metrics["tokens/unique"]


class TurnCountingRenderer(type(load_renderer("qwen3_instruct", SMOLLM2))):  # type: ignore[misc]
    """Deliberately broken: claims the extension property but rewrites the system prompt with
    the number of messages so far, so every observation changes its early tokens."""

    def build_generation_prompt(self, messages, role="assistant", prefill=None):
        messages = [dict(m) for m in messages]
        messages[0]["content"] = f"[{len(messages)} messages] " + get_text_content(messages[0])
        return super().build_generation_prompt(messages, role, prefill)


def test_checker_flags_a_deliberately_broken_renderer_with_a_decoded_diff():
    base = load_renderer("qwen3_instruct", SMOLLM2)
    broken = TurnCountingRenderer(base.tokenizer)
    assert broken.has_extension_property
    result, _ = twenty_questions_batch(broken, ["Is it a fruit?", "Is it red?", "Guess: apple"], num_envs=1)
    (o,) = result.outcomes
    (stats,) = o.stats
    assert len(stats.breaks) == 2 and stats.unexpected_breaks == 2
    first = stats.breaks[0]
    assert first.turn == 1 and not first.expected
    # the divergence is inside the system prompt: "[1 messages]" became "[3 messages]"
    assert "[⟦1 messages]" in first.expected_text and "[⟦3 messages]" in first.actual_text
    assert first.expected_token != first.actual_token
    ids = o.group.trajectories_G[0].transitions[0].ob.to_ints()  # type: ignore[union-attr]
    assert base.tokenizer.decode(ids[first.divergence : first.divergence + 1]) == "1"
    # the break is also on the transition, for loggers
    t0 = o.group.trajectories_G[0].transitions[0]  # type: ignore[union-attr]
    assert t0.metrics["rollout/ext_break"] == 1.0 and "UNEXPECTED" in str(t0.logs["ext_break"])
    assert stats.datums == 3


def test_boundary_mode_also_flags_the_broken_renderer():
    base = load_renderer("qwen3_instruct", SMOLLM2)
    result, _ = twenty_questions_batch(
        TurnCountingRenderer(base.tokenizer),
        ["Is it a fruit?", "Guess: apple"],
        num_envs=1,
        config=EngineConfig(extension_check=ExtensionCheck.BOUNDARY, boundary_window=200),
    )
    assert result.metrics["traj/ext_breaks_unexpected"] == 1


# --- ChatEnv and periodic compaction --------------------------------------------------------------


class Guess(ChatEnv):
    """A tiny ChatEnv game: four assistant turns, 'ok' after each."""

    def initial_messages(self) -> list[Message]:
        return [{"role": "system", "content": "Play."}, {"role": "user", "content": "Go."}]

    async def on_message(self, message: Message) -> Reply:
        done = self.turn >= 4
        return Reply(messages=[{"role": "user", "content": "ok"}], reward=float(self.turn), done=done)


def test_compaction_is_applied_to_chat_envs_and_breaks_are_expected():
    renderer = load_renderer("qwen3", SMOLLM2)
    policy = ScriptedTokenCompleter(actions(renderer, [THINK + f"move {i}" for i in range(4)]), cycle=True)

    async def main():
        env = Guess(renderer)
        traj, stats = await run_episode(policy, env, EngineConfig(compaction_period=2))
        assert isinstance(env.renderer, CompactingRenderer) and env.renderer.period == 2
        assert traj.stop_reason == StopReason.COMPLETED and stats.turns == 4
        # windows of 2 turns: the observation after turn 2 strips earlier thinking (one break)
        assert [(b.turn, b.expected, b.compaction) for b in stats.breaks] == [(2, True, True)]
        assert stats.datums == 2 and stats.compactions == 1
        assert traj.transitions[1].metrics[METRIC_COMPACTION] == 1.0
        data = trajectory_to_data(traj, 1.0)
        assert len(data) == stats.datums
        assert sum(d.model_input.length + 1 for d in data) == stats.tokens_trained
        # without compaction, qwen3 re-renders every turn: a break per turn
        env2 = Guess(renderer)
        _, stats2 = await run_episode(policy, env2, EngineConfig())
        assert not isinstance(env2.renderer, CompactingRenderer)
        assert [b.turn for b in stats2.breaks] == [1, 2, 3] and stats2.datums == 4
        assert stats.tokens_trained < stats2.tokens_trained

    anyio.run(main)


class CompactingTwentyQuestions(TwentyQuestionsEnv):
    """The cookbook's own env, opted in to compaction through the contract (three lines): it
    re-renders its conversation with ``self.renderer`` every turn."""

    def set_compaction_period(self, period: int) -> None:
        self.renderer = CompactingRenderer(self.renderer, period)


def test_a_cookbook_env_that_opts_in_compacts():
    renderer = load_renderer("qwen3", SMOLLM2)  # thinking, stripped from history every turn by default
    texts = [THINK + t for t in ["Is it a fruit?", "Is it red?", "Is it round?", "Is it big?", "Guess: apple"]]

    async def main(config: EngineConfig, env_type: type[TwentyQuestionsEnv]):
        env = env_type(ScriptedAnswerer("apple"), "apple", renderer)
        traj, stats = await run_episode(ScriptedTokenCompleter(actions(renderer, texts), cycle=True), env, config)
        return env, traj, stats

    env, traj, stats = anyio.run(main, EngineConfig(compaction_period=2), CompactingTwentyQuestions)
    assert isinstance(env.renderer, CompactingRenderer) and env.renderer.period == 2
    assert traj.stop_reason == StopReason.COMPLETED and stats.turns == 5
    # windows of two turns: one compaction at each window start (turns 2 and 4), all expected
    assert [(b.turn, b.expected, b.compaction) for b in stats.breaks] == [(2, True, True), (4, True, True)]
    assert stats.compactions == 2 and stats.datums == 3
    marked = [i for i, t in enumerate(traj.transitions) if t.metrics.get(METRIC_COMPACTION)]
    assert marked == [1, 3]  # the transition whose next observation was compacted
    assert "compaction after turn 2" in str(traj.transitions[1].logs[LOG_COMPACTION])
    assert len(trajectory_to_data(traj, 1.0)) == stats.datums
    # the same env without compaction breaks every turn (qwen3 strips history thinking)
    _, _, plain = anyio.run(main, EngineConfig(), TwentyQuestionsEnv)
    assert plain.datums == 5 and plain.compactions == 0
    assert stats.tokens_trained < plain.tokens_trained


def test_an_env_that_cannot_compact_gets_a_clear_refusal():
    renderer = load_renderer("qwen3_instruct", SMOLLM2)
    policy = ScriptedTokenCompleter(actions(renderer, ["Guess: apple"]), cycle=True)

    async def main():
        env = TwentyQuestionsEnv(ScriptedAnswerer("apple"), "apple", renderer)
        with pytest.raises(CompactionUnsupported, match="TwentyQuestionsEnv cannot compact"):
            await run_episode(policy, env, EngineConfig(compaction_period=2))
        assert policy.calls == [] and env.renderer is renderer  # refused before the first sample

    anyio.run(main)


def test_a_refused_compaction_fails_the_group_with_its_reason():
    renderer = load_renderer("qwen3_instruct", SMOLLM2)
    result, answerer = twenty_questions_batch(
        renderer, ["Guess: apple"], num_envs=2, config=EngineConfig(compaction_period=2)
    )
    (o,) = result.outcomes
    assert not o.ok and o.failure is not None and answerer.calls == 0
    assert o.failure.error_type == "CompactionUnsupported"
    assert "compaction_period=2" in o.failure.error_message
    assert result.metrics["failures/CompactionUnsupported"] >= 1


def test_an_optional_compaction_warns_once_and_counts(caplog):
    renderer = load_renderer("qwen3_instruct", SMOLLM2)
    config = EngineConfig(compaction_period=2, compaction_required=False)
    with caplog.at_level("WARNING", logger="rollout._compaction"):
        result, _ = twenty_questions_batch(renderer, ["Guess: apple"], num_envs=3, config=config)
    (o,) = result.outcomes
    assert o.ok and result.metrics["traj/compaction_unsupported"] == 3
    assert all(s.compaction_unsupported for s in o.stats)
    assert all(t.transitions[-1].metrics[METRIC_COMPACTION_UNSUPPORTED] == 1.0 for t in o.group.trajectories_G)  # type: ignore[union-attr]
    warnings = [r for r in caplog.records if "cannot compact" in r.getMessage()]
    assert len(warnings) <= 1  # once per env type and process (0 if an earlier test warned)


def test_chat_env_compaction_seam_is_idempotent_and_only_before_the_episode():
    renderer = load_renderer("qwen3", SMOLLM2)
    env = Guess(renderer)
    assert isinstance(env, SupportsCompaction)
    env.set_compaction_period(3)
    first = env.renderer
    env.set_compaction_period(3)
    assert env.renderer is first and isinstance(first, CompactingRenderer) and first.base is renderer
    env.set_compaction_period(2)
    assert isinstance(env.renderer, CompactingRenderer) and env.renderer.period == 2
    assert env.renderer.base is renderer  # re-wrapped, not nested
    anyio.run(env.initial_observation)
    with pytest.raises(RuntimeError, match="before the episode starts"):
        env.set_compaction_period(4)


class FewShotGuess(Guess):
    """``Guess`` with a solved example: one assistant message before the first turn."""

    def initial_messages(self) -> list[Message]:
        return [
            {"role": "user", "content": "Example?"},
            {"role": "assistant", "content": THINK + "example"},
            {"role": "user", "content": "Go."},
        ]


def test_compaction_windows_count_few_shot_assistant_messages_so_no_break_is_unexpected():
    renderer = load_renderer("qwen3", SMOLLM2)
    policy = ScriptedTokenCompleter(actions(renderer, [THINK + f"move {i}" for i in range(4)]), cycle=True)

    async def main():
        env = FewShotGuess(renderer)
        return await run_episode(policy, env, EngineConfig(compaction_period=2))

    _, stats = anyio.run(main)
    # the conversation's assistant messages are the example + the turns: windows close after
    # turns 1 and 3 (2 and 4 assistant messages)
    assert [(b.turn, b.expected, b.compaction) for b in stats.breaks] == [(1, True, True), (3, True, True)]
    assert stats.unexpected_breaks == 0 and stats.datums == 3


def test_cookbook_guess_number_runs_and_its_role_bug_is_flagged():
    from tinker_cookbook.recipes.multiplayer_rl.guess_number.env import GuessNumberEnvGroupBuilder

    renderer = load_renderer("qwen3_instruct", SMOLLM2)
    policy = ScriptedTokenCompleter(actions(renderer, ["Guess: 512", "Guess: 256", "Guess: 300"]), cycle=True)
    builder = GuessNumberEnvGroupBuilder(answer=300, renderer=renderer, num_envs=1)
    result = anyio.run(RolloutEngine(policy).run_batch, [builder])
    (o,) = result.outcomes
    assert o.ok and o.group is not None and o.group.get_total_rewards() == [1.0]
    # The recipe stores the model's turns with role "player", so its history renders
    # "<|im_start|>player" where the model sampled after "<|im_start|>assistant": every turn breaks.
    for stats in o.stats:
        assert [b.turn for b in stats.breaks] == [1, 2] and stats.unexpected_breaks == 2
        assert "⟦assistant" in stats.breaks[0].expected_text and "⟦player" in stats.breaks[0].actual_text
        assert stats.datums == 3


def test_transcripts_show_where_a_compaction_happened():
    from tinker_cookbook.rl.types import EnvGroupBuilder, TrajectoryGroup

    from rollout._logs import decoded_turns, render_html
    from training._transcripts import episode_html

    renderer = load_renderer("qwen3", SMOLLM2)
    script = actions(renderer, [THINK + f"move {i}" for i in range(4)])
    policy = ScriptedTokenCompleter(script, cycle=True)

    async def main():
        return await run_episode(policy, Guess(renderer), EngineConfig(compaction_period=2))

    traj, _ = anyio.run(main)
    turns = decoded_turns(traj, renderer.tokenizer)
    assert [t["compacted"] for t in turns] == [False, False, True, False]
    assert [t["rerendered"] for t in turns] == [False, False, True, False]
    group = TrajectoryGroup(trajectories_G=[traj], final_rewards_G=[0.0], metrics_G=[{}])
    page = episode_html(renderer.tokenizer, group, 0)
    assert page.count("[compacted: earlier thinking stripped]") == 1
    assert "re-rendered: not an extension" not in page
    # the engine's HTML too (a group outcome around the trajectory)
    engine = RolloutEngine(ScriptedTokenCompleter(script, cycle=True), EngineConfig(compaction_period=2))

    class OneGuess(EnvGroupBuilder):
        async def make_envs(self):
            return [Guess(renderer)]

    result = anyio.run(engine.run_batch, [OneGuess()])
    assert render_html(result, renderer.tokenizer).count("compacted: earlier thinking stripped") == 1
