"""OpenEnv env servers through the adapter (envs.interop.openenv), against a real OpenEnv server
(OpenEnv's own ``create_app`` serving envs.interop.openenv_demo) on 127.0.0.1: the checker
passes, 16 sessions run concurrently through the rollout engine with the rewards and turns the
game implies, and a server that dies or stalls mid-episode fails its groups with one clear
line, in bounded time, never a hang."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import anyio
import pytest
import tinker
from tinker_cookbook.completers import StopCondition, TokenCompleter, TokensWithLogprobs

from envs.checker import CheckConfig, CheckName, Outcome, check_conformance
from envs.interop.openenv import OpenEnvEnv, OpenEnvError, OpenEnvGroup, openenv_source, running_server
from envs.interop.openenv_demo import DIE_AT, GUESSES, HIGH, STALL_AT
from renderers_ext import render_action
from rollout import EngineConfig, RolloutEngine, Strategy

DEMO = ["-m", "envs.interop.openenv_demo"]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(DEMO) as url:
        yield url


class BinarySearch(TokenCompleter):
    """A policy that reads the conversation (decoded prompt) and bisects 1..HIGH from the
    game's "Higher."/"Lower." answers; counts calls in flight."""

    def __init__(self, renderer, delay: float = 0.05):
        self.renderer = renderer
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, model_input: tinker.ModelInput, stop: StopCondition) -> TokensWithLogprobs:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await anyio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        text = self.renderer.tokenizer.decode(model_input.to_ints())
        low, high = 1, HIGH
        for guess, answer in re.findall(r"assistant\n(\d+).*?\n.*?(Higher|Lower)", text, flags=re.S):
            if answer == "Higher":
                low = max(low, int(guess) + 1)
            else:
                high = min(high, int(guess) - 1)
        tokens = render_action(self.renderer, {"role": "assistant", "content": str((low + high) // 2)})
        return TokensWithLogprobs(tokens=list(tokens), maybe_logprobs=[-1.0] * len(tokens))


def bisect_turns(seed: int) -> int:
    """Guesses the bisecting policy needs for the demo's number of ``seed``."""
    target = random.Random(seed).randint(1, HIGH)
    low, high, turns = 1, HIGH, 0
    while True:
        turns += 1
        guess = (low + high) // 2
        if guess == target:
            return turns
        low, high = (guess + 1, high) if guess < target else (low, guess - 1)


def test_the_checker_passes_on_an_openenv_server(server: str) -> None:
    from envs.check import load_target

    assert load_target(f"openenv:{server}")(3) == OpenEnvGroup(f"openenv:{server}", seed=3)  # the CLI's path
    report = check_conformance(openenv_source(f"openenv:{server}", group_size=2), CheckConfig(examples=4))
    assert report.ok, str(report)
    assert report[CheckName.EXTENSION].outcome == Outcome.PASS  # only the new observation is rendered
    assert report[CheckName.GROUP_ISOLATION].outcome == Outcome.PASS  # one server session per env


def test_sixteen_concurrent_sessions_through_the_engine(server: str) -> None:
    builders = [OpenEnvGroup(server, seed=seed, group_size=4) for seed in range(4)]
    policy = BinarySearch(builders[0].renderer())

    async def run():
        with anyio.fail_after(120):
            return await RolloutEngine(policy, EngineConfig()).run_batch(builders)

    result = anyio.run(run)
    assert [o.ok for o in result.outcomes] == [True] * 4, [o.failure for o in result.outcomes]
    assert policy.max_in_flight == 16  # all 16 sessions open at once
    for seed, outcome in enumerate(result.outcomes):
        assert outcome.group is not None
        assert outcome.group.get_total_rewards() == [1.0] * 4
        for trajectory in outcome.group.trajectories_G:
            assert len(trajectory.transitions) == bisect_turns(seed) <= GUESSES
            # token-in/token-out: each observation starts with the previous one and its action
            for a, b in zip(trajectory.transitions, trajectory.transitions[1:], strict=False):
                before = a.ob.to_ints() + list(a.ac.tokens)
                assert b.ob.to_ints()[: len(before)] == before


def test_adapter_matches_openenv_client_driven_directly(server: str) -> None:
    from openenv.core.generic_client import GenericEnvClient

    moves = ["3", "12", "nope", "7", "9", "1"]
    env = anyio.run(OpenEnvGroup(server, seed=5).make_envs)[0]
    assert isinstance(env, OpenEnvEnv)

    async def ours() -> list[tuple[bool, float, str]]:
        await env.initial_observation()
        out = []
        for move in moves:
            result = await env.step(render_action(env.renderer, {"role": "assistant", "content": move}))
            text = "" if result.episode_done else str(env.messages[-1]["content"])
            out.append((result.episode_done, result.reward, text))
            if result.episode_done:
                break
        return out

    direct = []
    with GenericEnvClient(base_url=server).sync() as client:
        first = client.reset(seed=5)
        assert first.observation["text"] == env.prompt or not env.prompt
        for move in moves:
            step = client.step({"message": move})
            direct.append(
                (step.done, float(step.reward or 0.0), "" if step.done else step.observation["text"])
            )
            if step.done:
                break
    assert anyio.run(ours) == direct
    assert direct[-1][0]


@pytest.mark.parametrize(
    ("variable", "timeout_s", "expected"),
    [
        (DIE_AT, 30.0, "(stopped or died|cannot reach)"),
        (STALL_AT, 1.5, "step failed at turn 2: no answer within 1.5s"),
    ],
)
def test_a_server_that_dies_or_stalls_mid_episode_fails_its_groups_clearly(
    variable: str, timeout_s: float, expected: str
) -> None:
    with running_server(DEMO, env={variable: "2"}) as url:
        builders = [OpenEnvGroup(url, seed=seed, group_size=2, timeout_s=timeout_s) for seed in range(2)]
        policy = BinarySearch(builders[0].renderer(), delay=0.0)
        config = EngineConfig(strategy=Strategy())  # fail fast: a failed rollout fails its group

        async def run():
            with anyio.fail_after(60):  # never a hang
                return await RolloutEngine(policy, config).run_batch(builders)

        result = anyio.run(run)
    assert len(result.outcomes) == 2 and not any(o.ok for o in result.outcomes)
    for outcome in result.outcomes:
        assert outcome.failure is not None
        assert outcome.failure.error_type == OpenEnvError.__name__
        message = outcome.failure.error_message
        assert "\n" not in message and url in message and re.search(expected, message), message


def test_bad_ids_fail_in_one_line() -> None:
    with pytest.raises(ValueError, match="openenv ids name a server URL"):
        openenv_source("openenv:echo")


# --- the reverse: a TurnGym env served as an OpenEnv server ---------------------------------
SERVED = ["-m", "envs.serve", "textarena:GuessTheNumber-v0"]


def test_a_served_turngym_env_answers_openenv_s_own_client() -> None:
    from openenv.core.generic_client import GenericEnvClient

    from envs.interop.textarena import TextArenaEnv, TextArenaGroup

    moves = ["[10]", "[5]", "[15]", "[3]", "[18]", "[1]", "[20]", "[7]", "[12]", "[2]", "[4]"]
    env = anyio.run(TextArenaGroup("GuessTheNumber-v0", seed=4).make_envs)[0]
    assert isinstance(env, TextArenaEnv)

    async def direct() -> list[tuple[bool, float, str]]:
        await env.initial_observation()
        out = []
        for move in moves:
            n = len(env.messages)
            result = await env.step(render_action(env.renderer, {"role": "assistant", "content": move}))
            text = "" if result.episode_done else str(env.messages[n + 1]["content"])
            out.append((result.episode_done, result.reward, text))
            if result.episode_done:
                break
        return out

    expected = anyio.run(direct)
    with running_server(SERVED) as url, GenericEnvClient(base_url=url).sync() as client:
        first = client.reset(seed=4)
        assert first.observation["text"] == env.prompt and not first.done
        assert first.observation["messages"] == [{"role": "user", "content": env.prompt}]
        served = []
        for move in moves:
            step = client.step({"message": move})
            served.append((step.done, float(step.reward or 0.0), step.observation["text"]))
            if step.done:
                assert step.observation["metadata"]["textarena/invalid_move"] in (0.0, 1.0)
                break
    assert served == expected and expected[-1][0]


def test_a_served_turngym_env_runs_back_through_the_openenv_adapter() -> None:
    with running_server(SERVED) as url:
        report = check_conformance(openenv_source(f"openenv:{url}", group_size=2), CheckConfig(examples=3))
    assert report.ok, str(report)
    assert report[CheckName.EXTENSION].outcome == Outcome.PASS


def test_serving_an_unknown_id_fails_in_one_line() -> None:
    bad = running_server(["-m", "envs.serve", "turngym/Nope-v0"])
    with pytest.raises(OpenEnvError, match="unknown env id 'turngym/Nope-v0'"), bad:
        pass


def test_gym_make_by_id_and_gymnasium_check_env_through_the_adapter(server: str) -> None:
    import warnings

    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    from envs.gym import TokenEnv
    from envs.interop.openenv import register_openenv

    env_id = register_openenv("GuessNumber", server)
    assert env_id == "openenv/GuessNumber" and register_openenv("GuessNumber", server) == env_id
    env = gym.make(env_id, render_mode="ansi")
    try:
        assert isinstance(env.unwrapped, TokenEnv)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        messages = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]
        assert not messages, messages
    finally:
        env.close()
