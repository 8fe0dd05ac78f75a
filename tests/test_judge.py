"""Judge envs: the guarded judge wrapper, rubric parsing, pairwise tournaments, the envs and builders.

Everything runs on scripted judges (no model): fast and deterministic.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Sequence

import anyio
import chz
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tinker_cookbook.completers import TokensWithLogprobs
from tinker_cookbook.rl.types import Trajectory, Transition

from envs.judge import (
    Criterion,
    GradingMode,
    Judge,
    JudgeCache,
    JudgeConfig,
    JudgeDatasetBuilder,
    JudgeEnvConfig,
    JudgeEnvKind,
    JudgeStatus,
    JudgeTask,
    PairingScheme,
    PairwiseGroupBuilder,
    Rubric,
    RubricGroupBuilder,
    UserConfig,
    clear_judges,
    get_judge,
    grade,
    load_rubrics,
    make_completer,
    parse_preference,
    parse_score,
    register_completer,
    run_tournament,
    tournament_pairs,
    win_rates,
)
from envs.judge.config import DATA_DIR
from envs.judge.testing import ConstantJudge, ScriptedJudge, make_scripted

TASK = JudgeTask("capital", ({"role": "user", "content": "What is the capital of France?"},))
RUBRIC = Rubric("r", (Criterion("correct", "Correct answer.", 2.0), Criterion("short", "Short answer.", 1.0)))


def fast(spec: str, **kw: object) -> JudgeConfig:
    """A scripted judge config with short deadlines and backoff (fast fallbacks)."""
    defaults: dict[str, object] = {"timeout_s": 0.2, "max_attempts": 2, "backoff_s": 0.01}
    return JudgeConfig(spec, **{**defaults, **kw})  # type: ignore[arg-type]


def scripted(judge: Judge) -> ScriptedJudge:
    completer = judge.completer
    assert isinstance(completer, ScriptedJudge)
    return completer


def action(renderer, text: str) -> list[int]:
    """The tokens of an assistant reply ``text`` ended by the renderer's stop token."""
    return renderer.tokenizer.encode(text, add_special_tokens=False) + list(renderer.get_stop_sequences())


async def play(builder, renderer, replies: Sequence[Sequence[str]]) -> tuple[list, list[Trajectory]]:
    """Run a group: env ``i`` answers ``replies[i]`` turn after turn. Returns (envs, trajectories)."""
    envs = list(await builder.make_envs())
    trajectories: list[Trajectory | None] = [None] * len(envs)

    async def one(i: int) -> None:
        env = envs[i]
        ob, _ = await env.initial_observation()
        transitions = []
        for text in replies[i]:
            ac = action(renderer, text) if text else []
            step = await env.step(ac)
            transitions.append(
                Transition(
                    ob, TokensWithLogprobs(ac, [0.0] * len(ac)), step.reward, step.episode_done, step.metrics
                )
            )
            ob = step.next_observation
            if step.episode_done:
                break
        trajectories[i] = Trajectory(transitions, ob)

    async with anyio.create_task_group() as tg:
        for i in range(len(envs)):
            tg.start_soon(one, i)
    return envs, [t for t in trajectories if t is not None]


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Score: 7/10", 0.7),
        ("The answer is fine.\n**Score:** 3/5", 0.6),
        ("Score: 4", 0.4),
        ("score = 9 out of 10", 0.9),
        ("<score>8</score>", 0.8),
        ('{"score": 5}', 0.5),
        ('Reasoning... {"score": "2/4"}', 0.5),
        ("10/10", 1.0),
        ("  6 ", 0.6),
        ("Score: 2/10 at first, but on reflection Score: 9/10", 0.9),
        ("Score: 11/10", None),
        ("Score: -1/10", None),
        ("I like it.", None),
        ("", None),
        ('{"verdict": "good"}', None),
    ],
)
def test_parse_score(text: str, expected: float | None) -> None:
    got = parse_score(text, 10)
    assert got == pytest.approx(expected) if expected is not None else got is None


@given(
    score=st.integers(0, 100),
    scale=st.integers(1, 100),
    form=st.sampled_from(["Score: {s}/{n}", "<score>{s}/{n}</score>", '{{"score": "{s}/{n}"}}', "{s}/{n}"]),
)
def test_parse_score_round_trip(score: int, scale: int, form: str) -> None:
    text = form.format(s=score, n=scale)
    got = parse_score(text, 10)
    if score <= scale:
        assert got == pytest.approx(score / scale)
    else:
        assert got is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Preferred: A", 0.0),
        ("Both fine. Preferred: B", 1.0),
        ("preferred: tie", 0.5),
        ("[[B]]", 1.0),
        ('{"preferred": "A"}', 0.0),
        ("B", 1.0),
        ("Winner: **A**", 0.0),
        ("Preferred: Response B", 1.0),
        ("Preferred: response_A", 0.0),
        ("Preferred: (A) is clearer", 0.0),
        ("Preferred: Apple", None),
        ("A is nice but B is nicer", None),
        ("Preferred: C", None),
        ('{"preferred": "B", "p_b": 0.73}', 0.73),  # a graded judge (a reward model)
        ('{"preferred": "A", "p_b": 1.5}', 0.0),  # out of [0, 1]: the verdict
        ('{"p_b": true}', None),
    ],
)
def test_parse_preference(text: str, expected: float | None) -> None:
    assert parse_preference(text) == expected


def test_rubric_json_reply_is_weighted_mean() -> None:
    assert RUBRIC.parse('{"scores": {"correct": 10, "short": 4}}') == pytest.approx((2 * 1.0 + 0.4) / 3)
    assert RUBRIC.parse('{"scores": {"correct": 10}}') is None  # a criterion is missing


def test_rubric_data_round_trip_and_errors(tmp_path) -> None:
    shipped = load_rubrics(DATA_DIR / "rubrics.json")
    assert {"default", "conversation"} <= set(shipped)
    for rubric in shipped.values():
        assert Rubric.from_dict(rubric.to_dict()) == rubric
    with pytest.raises(ValueError, match="no criteria"):
        Rubric.from_dict({"name": "x", "criteria": []})
    with pytest.raises(ValueError, match="weight must be finite and > 0"):
        Rubric.from_dict({"name": "x", "criteria": [{"name": "a", "description": "d", "weight": -1}]})
    with pytest.raises(ValueError, match="unknown key"):
        Rubric.from_dict({"name": "x", "criteria": [{"name": "a", "description": "d"}], "weights": 1})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_rubrics(bad)


# --------------------------------------------------------------------------------------------
# Tournaments
# --------------------------------------------------------------------------------------------
@given(n=st.integers(2, 9), data=st.data())
def test_tournament_pairs_counts_and_position_balance(n: int, data: st.DataObject) -> None:
    assert len(tournament_pairs(n, PairingScheme.ALL_PAIRS)) == n * (n - 1) // 2
    both = tournament_pairs(n, PairingScheme.BOTH_ORDERS)
    assert len(both) == n * (n - 1) and len(set(both)) == len(both)
    rounds = data.draw(st.integers(1, n - 1))
    ring = tournament_pairs(n, PairingScheme.ROUND_ROBIN, rounds)
    assert len(set(ring)) == len(ring) and all(a != b for a, b in ring)
    for i in range(n):  # every response shown as A exactly as often as as B
        assert sum(a == i for a, _ in ring) == sum(b == i for _, b in ring) >= 1


def test_round_robin_rounds_are_validated() -> None:
    with pytest.raises(ValueError, match="rounds must be in"):
        tournament_pairs(4, PairingScheme.ROUND_ROBIN, 4)


@given(
    n=st.integers(2, 7),
    outcomes=st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 6), st.sampled_from([0.0, 0.5, 1.0, None]))
    ),
)
def test_win_rates_are_zero_sum(n: int, outcomes: list) -> None:
    outcomes = [(a % n, b % n, p) for a, b, p in outcomes if a % n != b % n]
    rates = win_rates(n, outcomes, fallback=-1.0)
    games = [sum(p is not None and i in (a, b) for a, b, p in outcomes) for i in range(n)]
    decided = sum(p is not None for _, _, p in outcomes)
    assert sum(r * g for r, g in zip(rates, games, strict=True)) == pytest.approx(decided)
    for r, g in zip(rates, games, strict=True):
        assert r == -1.0 if g == 0 else 0.0 <= r <= 1.0


# --------------------------------------------------------------------------------------------
# The judge wrapper
# --------------------------------------------------------------------------------------------
def test_judge_ok_then_cached() -> None:
    judge = Judge(fast("scripted:score:7"))
    prompt = RUBRIC.prompt([*TASK.messages, {"role": "assistant", "content": "Paris"}])

    async def main():
        return await judge.ask(prompt, RUBRIC.parse, namespace="n"), await judge.ask(
            prompt, RUBRIC.parse, namespace="n"
        )

    first, second = anyio.run(main)
    assert (first.status, first.value, first.attempts) == (JudgeStatus.OK, pytest.approx(0.7), 1)
    assert (second.status, second.value, second.attempts) == (JudgeStatus.CACHED, pytest.approx(0.7), 0)
    assert scripted(judge).calls == 1
    assert judge.stats.cache_hits == 1


@pytest.mark.parametrize(
    ("spec", "counter"),
    [("scripted:garbage", "unparseable"), ("scripted:raises", "errors"), ("scripted:hangs", "timeouts")],
)
def test_failing_judge_falls_back_and_counts(spec: str, counter: str) -> None:
    judge = Judge(fast(spec, fallback_reward=-0.5, max_attempts=3))

    async def main():
        with anyio.fail_after(5):  # a hanging judge must not hang the caller
            return [await judge.ask([{"role": "user", "content": "grade"}], parse_score) for _ in range(2)]

    results = anyio.run(main)
    for result in results:
        assert result.status is JudgeStatus.FALLBACK and not result.ok
        assert result.value == -0.5
        assert getattr(result, counter) == 3 and result.retries == 2
        assert result.metrics()["judge/fallback"] == 1.0 and result.error
    assert scripted(judge).calls == 6  # fallbacks are not cached
    assert judge.stats.fallbacks == 2 and getattr(judge.stats, counter) == 6


def test_identical_concurrent_calls_share_one_judge_call() -> None:
    ok, bad = Judge(fast("scripted:sleep:20:score:7")), Judge(fast("scripted:garbage", max_attempts=3))
    results: list = []

    async def main():
        async with anyio.create_task_group() as tg:
            for judge in (ok, bad):
                for _ in range(4):

                    async def go(judge=judge):
                        results.append(await judge.ask([{"role": "user", "content": "same"}], parse_score))

                    tg.start_soon(go)

    anyio.run(main)
    assert scripted(ok).calls == 1 and ok.stats.cache_hits == 3
    assert scripted(bad).calls == 3 and bad.stats.fallbacks == 4  # one call's 3 attempts, shared


def test_flaky_judge_succeeds_after_retries() -> None:
    judge = Judge(fast("scripted:flaky:2:score:9", max_attempts=3))
    result = anyio.run(judge.ask, [{"role": "user", "content": "x"}], parse_score)
    assert result.status is JudgeStatus.OK and result.value == pytest.approx(0.9)
    assert (result.attempts, result.errors, result.retries) == (3, 2, 2)


def test_concurrency_cap_is_respected() -> None:
    judge = Judge(fast("scripted:sleep:20:score:5", max_concurrency=3, cache=False))

    async def main():
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(judge.ask, [{"role": "user", "content": str(i)}], parse_score)

    anyio.run(main)
    assert scripted(judge).calls == 10
    assert scripted(judge).peak_in_flight == 3 == judge.stats.peak_in_flight


def test_disk_cache_is_shared_and_thread_safe(tmp_path) -> None:
    path = tmp_path / "judge.sqlite"
    first, second = JudgeCache(path), JudgeCache(path)  # as two processes would open it

    def writer(offset: int) -> None:
        for i in range(50):
            first.put(f"k{offset + i}", float(i), "r")

    threads = [threading.Thread(target=writer, args=(k * 50,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert second.get("k199") == (49.0, "r") and len(second) == 200

    config = fast("scripted:score:7", cache_path=str(path))
    prompt = [{"role": "user", "content": "grade me"}]
    assert anyio.run(Judge(config).ask, prompt, parse_score).status is JudgeStatus.OK
    again = Judge(config, cache=JudgeCache(path))  # a fresh process: empty memory, same file
    assert anyio.run(again.ask, prompt, parse_score).status is JudgeStatus.CACHED


def test_registry_and_config_errors() -> None:
    with pytest.raises(ValueError, match="unknown completer kind 'nope'"):
        make_completer(JudgeConfig("nope:x"))
    with pytest.raises(ValueError, match="unknown scripted judge"):
        make_completer(JudgeConfig("scripted:bogus"))
    with pytest.raises(ValueError, match="max_concurrency must be >= 1"):
        JudgeConfig("scripted:garbage", max_concurrency=0)
    with pytest.raises(ValueError, match="already registered"):
        register_completer("scripted", lambda config, arg: ConstantJudge("x"))
    register_completer("test_fixed", lambda config, arg: ConstantJudge(f"Score: {arg}/10"), replace=True)
    clear_judges()
    judge = get_judge(JudgeConfig("test_fixed:3"))
    assert get_judge(JudgeConfig("test_fixed:3")) is judge
    assert anyio.run(judge.ask, [{"role": "user", "content": "x"}], parse_score).value == pytest.approx(0.3)


def test_per_criterion_grading_and_partial_failure() -> None:
    rubric = Rubric("pc", RUBRIC.criteria, mode=GradingMode.PER_CRITERION)
    transcript = [*TASK.messages, {"role": "assistant", "content": "Paris"}]
    ok = anyio.run(grade, Judge(fast("scripted:score:6")), rubric, transcript)
    assert ok.ok and ok.score == pytest.approx(0.6) and len(ok.results) == 2
    failed = anyio.run(
        grade,
        Judge(fast("scripted:flaky:1:score:6", max_attempts=1, fallback_reward=-1.0)),
        rubric,
        transcript,
    )
    assert not failed.ok and failed.score == -1.0 and failed.metrics["judge/fallback"] == 1.0


# --------------------------------------------------------------------------------------------
# Envs and builders
# --------------------------------------------------------------------------------------------
def test_rubric_group_rewards_and_metrics(renderer) -> None:
    clear_judges()
    builder = RubricGroupBuilder(TASK, RUBRIC, fast("scripted:score:7"), group_size=3)
    _, trajectories = anyio.run(play, builder, renderer, [["Paris."], ["Paris."], ["Lyon."]])
    for t in trajectories:
        last = t.transitions[-1]
        assert last.episode_done and last.reward == pytest.approx(0.7)
        assert last.metrics["judge/score"] == pytest.approx(0.7)
    assert sum(t.transitions[-1].metrics["judge/cache_hit"] for t in trajectories) == 1  # "Paris." twice


@pytest.mark.parametrize("spec", ["scripted:garbage", "scripted:raises", "scripted:hangs"])
def test_failing_judge_never_deadlocks_a_batch(renderer, spec: str) -> None:
    clear_judges()
    config = fast(spec, fallback_reward=-1.0, max_concurrency=2)
    builders = [RubricGroupBuilder(TASK, RUBRIC, config, group_size=4) for _ in range(4)]
    results: list = []

    async def main():
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for i, b in enumerate(builders):

                    async def go(b=b, i=i):
                        results.append(await play(b, renderer, [[f"answer {i}.{k}"] for k in range(4)]))

                    tg.start_soon(go)

    anyio.run(main)
    finals = [t.transitions[-1] for _, trajectories in results for t in trajectories]
    assert len(finals) == 16
    assert all(f.episode_done and f.reward == -1.0 and f.metrics["judge/fallback"] == 1.0 for f in finals)
    assert get_judge(config).stats.fallbacks == 16


def test_multi_turn_with_simulated_user(renderer) -> None:
    clear_judges()
    task = JudgeTask("chat", TASK.messages, persona="A curious child.", turns=2)
    user = UserConfig(model=fast("scripted:reply:Why is it the capital?"))
    builder = RubricGroupBuilder(task, RUBRIC, fast("scripted:score:8"), group_size=1, user=user)
    envs, (trajectory,) = anyio.run(play, builder, renderer, [["Paris.", "Because of history."]])
    first, second = trajectory.transitions
    assert not first.episode_done and first.reward == 0.0 and first.metrics["user/calls"] == 1.0
    assert second.episode_done and second.reward == pytest.approx(0.8)
    # token-in/token-out: the second observation extends the first observation + the sampled action
    assert (
        second.ob.to_ints()[: first.ob.length + len(first.ac.tokens)] == first.ob.to_ints() + first.ac.tokens
    )
    roles = [m["role"] for m in envs[0].final_transcript]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert envs[0].final_transcript[2]["content"] == "Why is it the capital?"
    # the simulated user sees the chat with roles swapped, under its persona
    prompt = envs[0].user.prompt(envs[0].final_transcript[:2])
    assert prompt[0]["role"] == "system" and "A curious child." in prompt[0]["content"]
    assert [m["role"] for m in prompt[1:]] == ["assistant", "user"]


def test_simulated_user_can_end_the_chat(renderer) -> None:
    clear_judges()
    task = JudgeTask("chat", TASK.messages, turns=3)
    user = UserConfig(model=fast("scripted:reply:Thanks! <END>"))
    builder = RubricGroupBuilder(task, RUBRIC, fast("scripted:score:5"), group_size=1, user=user)
    _, (trajectory,) = anyio.run(play, builder, renderer, [["Paris.", "unused", "unused"]])
    (only,) = trajectory.transitions
    assert only.episode_done and only.reward == pytest.approx(0.5) and only.metrics["user/ended_early"] == 1.0


def test_multi_turn_task_without_user_is_rejected(renderer) -> None:
    builder = RubricGroupBuilder(JudgeTask("t", TASK.messages, turns=2), RUBRIC, fast("scripted:score:5"), 1)
    with pytest.raises(ValueError, match="no simulated user"):
        anyio.run(builder.make_envs)


def pairwise(spec: str, pattern: PairingScheme, group_size: int = 4, **kw) -> PairwiseGroupBuilder:
    return PairwiseGroupBuilder(TASK, fast(spec, **kw), group_size=group_size, pattern=pattern)


async def pairwise_rewards(builder: PairwiseGroupBuilder, renderer, texts: list[str]):
    envs, trajectories = await play(builder, renderer, [[t] for t in texts])
    return await builder.compute_group_rewards(trajectories, envs)


@pytest.mark.parametrize("pattern", [PairingScheme.BOTH_ORDERS, PairingScheme.ROUND_ROBIN])
def test_position_bias_cancels(renderer, pattern: PairingScheme) -> None:
    clear_judges()
    rewards = anyio.run(
        pairwise_rewards, pairwise("scripted:prefers_a", pattern), renderer, ["a", "bb", "ccc", "dddd"]
    )
    assert [r for r, _ in rewards] == [0.5, 0.5, 0.5, 0.5]


def test_position_bias_shows_without_both_orders(renderer) -> None:
    clear_judges()
    builder = pairwise("scripted:prefers_a", PairingScheme.ALL_PAIRS)
    rewards = [r for r, _ in anyio.run(pairwise_rewards, builder, renderer, ["a", "bb", "ccc", "dddd"])]
    assert rewards == [1.0, 2 / 3, 1 / 3, 0.0]


def test_pairwise_win_rate_follows_the_judge(renderer) -> None:
    clear_judges()
    builder = pairwise("scripted:longer", PairingScheme.BOTH_ORDERS)
    rewards = anyio.run(pairwise_rewards, builder, renderer, ["Paris", "Paris, France", "P", "It is Paris."])
    win = [r for r, _ in rewards]
    assert win == [pytest.approx(x) for x in (1 / 3, 1.0, 0.0, 2 / 3)]
    assert rewards[0][1]["pairwise/comparisons"] == 12 and rewards[0][1]["pairwise/win_rate"] == win[0]


def test_pairwise_comparisons_run_concurrently(renderer) -> None:
    """G=4, BOTH_ORDERS: 12 comparisons of a 50 ms judge; sequential would take >= 0.6 s."""
    clear_judges()
    builder = pairwise("scripted:sleep:50:prefers_a", PairingScheme.BOTH_ORDERS, cache=False)

    async def main():
        envs, trajectories = await play(builder, renderer, [[t] for t in ["a", "b", "c", "d"]])
        start = time.monotonic()
        rewards = await builder.compute_group_rewards(trajectories, envs)
        return rewards, time.monotonic() - start

    rewards, elapsed = anyio.run(main)
    judge = scripted(get_judge(builder.judge))
    assert judge.calls == 12 and judge.peak_in_flight == 12
    assert elapsed < 0.35, f"12 comparisons of 50 ms took {elapsed:.3f}s: not concurrent"
    assert [r for r, _ in rewards] == [0.5] * 4


def test_pairwise_failing_judge_gives_fallback(renderer) -> None:
    clear_judges()
    builder = pairwise("scripted:hangs", PairingScheme.BOTH_ORDERS, fallback_reward=0.25, max_attempts=1)

    async def main():
        with anyio.fail_after(10):
            return await pairwise_rewards(builder, renderer, ["a", "b", "c", "d"])

    rewards = anyio.run(main)
    assert [r for r, _ in rewards] == [0.25] * 4
    metrics = rewards[0][1]
    assert (
        metrics["judge/timeouts"] == 12
        and metrics["judge/fallback"] == 12
        and metrics["pairwise/undecided"] == 12
    )


def test_pairwise_forfeit_loses_without_a_judge_call(renderer) -> None:
    clear_judges()
    builder = pairwise("scripted:prefers_a", PairingScheme.BOTH_ORDERS, group_size=3)
    rewards = anyio.run(pairwise_rewards, builder, renderer, ["x", "", "y"])  # "" = empty action: a fault
    win = [r for r, _ in rewards]
    assert win[1] == 0.0 and win[0] == win[2] == pytest.approx(0.75)
    assert scripted(get_judge(builder.judge)).calls == 2  # only x vs y, both orders
    assert rewards[0][1]["pairwise/forfeits"] == 4


def test_tournament_sequential_matches_concurrent() -> None:
    responses = [[{"role": "assistant", "content": "x" * k}] for k in (3, 1, 2)]

    async def main(concurrent: bool):
        return await run_tournament(
            Judge(fast("scripted:longer")), list(TASK.messages), responses, concurrent=concurrent
        )

    assert anyio.run(main, True).rewards == anyio.run(main, False).rewards == (1.0, 0.0, 0.5)


def test_builders_pickle_and_dataset_builds() -> None:
    user = UserConfig(model=fast("scripted:reply:ok"))
    for builder in (
        RubricGroupBuilder(TASK, RUBRIC, fast("scripted:score:7"), 2, user=user),
        pairwise("scripted:prefers_a", PairingScheme.ROUND_ROBIN),
    ):
        assert pickle.loads(pickle.dumps(builder)) == builder
    dataset_builder = chz.entrypoint(
        JudgeDatasetBuilder,
        argv=[
            "env.kind=pairwise",
            "judge.completer=scripted:prefers_a",
            "batch_size=3",
            "n_test=2",
            "epochs=2",
        ],
    )
    assert dataset_builder.env.kind is JudgeEnvKind.PAIRWISE
    train, test = anyio.run(dataset_builder)
    n_tasks = len(dataset_builder.tasks())
    assert sum(len(train.get_batch(i)) for i in range(len(train))) == 2 * (n_tasks - 2)
    assert test is not None and len(test.get_batch(0)) == 2
    group = train.get_batch(0)[0]
    assert isinstance(group, PairwiseGroupBuilder) and pickle.loads(pickle.dumps(group)) == group
    with pytest.raises(IndexError):
        train.get_batch(len(train))


def test_task_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="exactly one of 'prompt' or 'messages'"):
        JudgeTask.from_dict({"id": "x"})
    with pytest.raises(ValueError, match="unknown key"):
        JudgeTask.from_dict({"prompt": "p", "rubrc": "default"})
    with pytest.raises(ValueError, match="turns must be >= 1"):
        JudgeTask.from_dict({"prompt": "p", "turns": 0})
    bad = tmp_path / "tasks.jsonl"
    bad.write_text('{"prompt": "ok"}\n{oops\n')
    builder = JudgeDatasetBuilder(env=JudgeEnvConfig(tasks_path=str(bad)), judge=fast("scripted:score:1"))
    with pytest.raises(ValueError, match=r"tasks\.jsonl:2: invalid JSON"):
        anyio.run(builder)


def test_scripted_specs() -> None:
    assert isinstance(make_scripted("sleep:5:prefers_b"), ScriptedJudge)
    with pytest.raises(ValueError, match="bad scripted judge spec"):
        make_scripted("sleep:soon")


def test_prefilled_sampling_completer_prefixes_the_prompt_and_reply(renderer) -> None:
    from types import SimpleNamespace

    from envs.judge.registry import PrefilledSamplingCompleter

    seen: list[list[int]] = []

    class FakeSampler:
        async def sample_async(self, prompt, num_samples, sampling_params):
            seen.append(prompt.to_ints())
            return SimpleNamespace(sequences=[SimpleNamespace(tokens=action(renderer, " 7/10"))])

    completer = PrefilledSamplingCompleter(
        FakeSampler(), renderer, max_tokens=4, temperature=0.0, prefix="Score:"
    )
    judge = Judge(fast("scripted:unused"), completer)
    result = anyio.run(judge.ask, [{"role": "user", "content": "grade"}], parse_score)
    assert result.reply == "Score: 7/10" and result.value == pytest.approx(0.7)
    prefix = renderer.tokenizer.encode("Score:", add_special_tokens=False)
    assert seen[0][-len(prefix) :] == prefix


def test_openai_compatible_completer_request_and_reply(monkeypatch) -> None:
    """Against an in-process mock transport (no network): body, auth header, reply parsing."""
    import json

    from completers.openai_compat import OpenAICompatibleMessageCompleter

    httpx = pytest.importorskip("httpx")  # a dependency of tinker
    seen: list = []

    def handler(request):
        seen.append(request)
        return httpx.Response(
            200, json={"choices": [{"message": {"role": "assistant", "content": "Score: 8/10"}}]}
        )

    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-test")
    config = fast("openai:judge-model", base_url="http://judge.invalid/v1", api_key_env="TEST_JUDGE_KEY")
    completer = make_completer(config)
    assert isinstance(completer, OpenAICompatibleMessageCompleter)
    completer._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    result = anyio.run(Judge(config, completer).ask, [{"role": "user", "content": "grade"}], parse_score)
    assert result.value == pytest.approx(0.8)
    (request,) = seen
    assert str(request.url) == "http://judge.invalid/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer sk-test"
    body = json.loads(request.content)
    assert body["model"] == "judge-model" and body["messages"] == [{"role": "user", "content": "grade"}]


def test_truncated_turn_ends_the_chat_and_is_judged(renderer) -> None:
    clear_judges()
    task = JudgeTask("chat", TASK.messages, turns=3)
    user = UserConfig(model=fast("scripted:reply:More please."))
    builder = RubricGroupBuilder(task, RUBRIC, fast("scripted:score:4"), group_size=1, user=user)

    async def main():
        (env,) = await builder.make_envs()
        await env.initial_observation()
        cut = renderer.tokenizer.encode("Paris is the capital and", add_special_tokens=False)  # no stop token
        return env, await env.step(cut, extra={"stop_reason": "length"})

    env, step = anyio.run(main)
    assert step.episode_done and step.reward == pytest.approx(0.4)
    assert step.metrics["turngym/fault/truncated"] == 1.0 and "user/calls" not in step.metrics
    assert env.response_messages is not None and len(env.response_messages) == 1


@given(text=st.text(max_size=200), scale=st.integers(1, 100))
def test_parsers_never_raise_and_stay_in_range(text: str, scale: int) -> None:
    score = parse_score(text, scale)
    assert score is None or 0.0 <= score <= 1.0
    preference = parse_preference(text)
    assert preference is None or 0.0 <= preference <= 1.0


class _Script(ScriptedJudge):
    """Behaves per call as told: "ok", "garbage", "raise" or "hang"."""

    def __init__(self, plan: list[str]) -> None:
        super().__init__()
        self.plan = plan

    async def reply(self, messages) -> str:
        step = self.plan[self.calls - 1] if self.calls <= len(self.plan) else "ok"
        if step == "raise":
            raise OSError("down")
        if step == "hang":
            await anyio.sleep_forever()
        return "Score: 5/10" if step == "ok" else "no idea"


@given(
    plan=st.lists(st.sampled_from(["ok", "garbage", "raise", "hang"]), max_size=5), attempts=st.integers(1, 4)
)
def test_judge_outcome_matches_the_first_success_within_the_attempts(plan: list[str], attempts: int) -> None:
    judge = Judge(
        JudgeConfig(
            "scripted:unused", timeout_s=0.01, max_attempts=attempts, backoff_s=0.0, fallback_reward=-1.0
        ),
        _Script(plan),
    )
    result = anyio.run(judge.ask, [{"role": "user", "content": "x"}], parse_score)
    tried = (plan + ["ok"] * attempts)[:attempts]
    first_ok = tried.index("ok") if "ok" in tried else None
    if first_ok is None:
        assert result.status is JudgeStatus.FALLBACK and result.value == -1.0 and result.attempts == attempts
    else:
        assert result.status is JudgeStatus.OK and result.value == 0.5 and result.attempts == first_ok + 1
    failed = tried[: result.attempts]
    assert (result.unparseable, result.errors, result.timeouts) == tuple(
        failed.count(k) for k in ("garbage", "raise", "hang")
    )
    assert judge.stats.in_flight == 0


def test_readme_example_runs() -> None:
    import re

    text = (DATA_DIR.parent / "README.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    clear_judges()
    exec(compile(code, "envs/judge/README.md", "exec"), {})


def test_samples_are_averaged_and_failed_samples_counted() -> None:
    class Cycle(ScriptedJudge):
        async def reply(self, messages) -> str:
            return ["Score: 2/10", "Score: 6/10", "nonsense"][(self.calls - 1) % 3]

    judge = Judge(JudgeConfig("scripted:unused", samples=3, max_concurrency=1), Cycle())
    result = anyio.run(judge.ask, [{"role": "user", "content": "x"}], parse_score)
    assert result.status is JudgeStatus.OK and result.value == pytest.approx(0.4)
    assert (result.attempts, result.unparseable) == (1, 1) and judge.stats.peak_in_flight == 1
    with pytest.raises(ValueError, match="samples must be >= 1"):
        JudgeConfig("scripted:garbage", samples=0)


def test_truncated_turn_can_continue_the_chat(renderer) -> None:
    from envs.judge import OnTruncation

    clear_judges()
    task = JudgeTask("chat", TASK.messages, turns=2)
    user = UserConfig(model=fast("scripted:reply:Go on."))
    builder = RubricGroupBuilder(
        task, RUBRIC, fast("scripted:score:4"), group_size=1, user=user, on_truncation=OnTruncation.CONTINUE
    )

    async def main():
        (env,) = await builder.make_envs()
        await env.initial_observation()
        cut = renderer.tokenizer.encode("Paris is the capital and", add_special_tokens=False)
        first = await env.step(cut, extra={"stop_reason": "length"})
        second = await env.step(action(renderer, "It is on the Seine."))
        return env, first, second

    env, first, second = anyio.run(main)
    # the cut turn is closed with the end-of-turn token: the history still extends, no re-render
    assert not first.episode_done and env.rerenders == 0
    ob = first.next_observation.to_ints()
    assert renderer.tokenizer.decode(ob).count("Paris is the capital and<|im_end|>") == 1
    assert second.episode_done and second.reward == pytest.approx(0.4)
    assert [m["role"] for m in env.final_transcript] == ["user", "assistant", "user", "assistant"]


def test_scripted_judges_are_test_doubles_not_a_production_kind() -> None:
    """Without ``envs.judge.testing`` a ``scripted:`` spec is unknown (with a hint); the judge's
    production modules never import the test doubles."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from envs.judge import JudgeConfig, make_completer\n"
        "try:\n"
        "    make_completer(JudgeConfig('scripted:score:7'))\n"
        "except ValueError as e:\n"
        "    print('ERR', e)\n"
        "print('testing' if 'envs.judge.testing' in sys.modules else 'clean')\n"
        "import envs.judge.testing\n"
        "print(type(make_completer(JudgeConfig('scripted:score:7'))).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert lines[0].startswith("ERR unknown completer kind 'scripted'") and "envs.judge.testing" in lines[0]
    assert lines[1] == "clean"
    assert lines[2] == "ConstantJudge"
