"""TextArena single-player games through the adapter: the checker passes on games that run
offline, the adapter's rewards, done flags and feedback match TextArena driving the same game
directly, and a game that needs a download fails with one line naming it."""

from __future__ import annotations

import anyio
import pytest
from tinker_cookbook.renderers import Message

from envs.checker import CheckConfig, CheckName, Outcome, check_conformance
from envs.interop.textarena import (
    METRIC_BAD_REWARD,
    METRIC_INVALID_MOVE,
    TextArenaEnv,
    TextArenaGroup,
    TextArenaUnavailable,
    make_game,
    register_textarena,
    textarena_source,
)
from renderers_ext import render_action

OFFLINE_GAMES = ["GuessTheNumber-v0", "TowerOfHanoi-v0", "Mastermind-v0", "Minesweeper-v0-small"]


@pytest.mark.parametrize("game", OFFLINE_GAMES)
def test_checker_passes_on_offline_single_player_games(game: str) -> None:
    report = check_conformance(textarena_source(game, group_size=2), CheckConfig(examples=6), target=game)
    assert report.ok, str(report)
    assert report[CheckName.EXTENSION].outcome == Outcome.PASS  # only the new feedback is rendered
    assert report[CheckName.GROUP_ISOLATION].outcome == Outcome.PASS  # per-env random state


def _play(env: TextArenaEnv, moves: list[str]) -> list[tuple[bool, float, str]]:
    """(done, reward, new user text) per move, through tokens."""

    async def run() -> list[tuple[bool, float, str]]:
        first = await env.initial_observation()
        assert not isinstance(first, Exception)
        out: list[tuple[bool, float, str]] = []
        for move in moves:
            message: Message = {"role": "assistant", "content": move}
            before = env.observation_tokens
            n_messages = len(env.messages)
            result = await env.step(render_action(env.renderer, message))
            text = "" if result.episode_done else str(env.messages[n_messages + 1]["content"])
            if not result.episode_done:  # token-in/token-out: the old observation is a prefix
                assert result.next_observation.to_ints()[: len(before)] == before
            out.append((result.episode_done, result.reward, text))
            if result.episode_done:
                assert METRIC_INVALID_MOVE in result.metrics
                break
        return out

    return anyio.run(run)


def _direct(name: str, seed: int, moves: list[str]) -> list[tuple[bool, float, str]]:
    """The same moves sent to TextArena directly (raw game + its action wrappers)."""
    game = make_game(name)
    game.reset(num_players=1, seed=seed)
    game.get_observation()
    out: list[tuple[bool, float, str]] = []
    for move in moves:
        done, _ = game.step(move)
        if done:
            rewards, _info = game.close()
            out.append((True, float(rewards[0]), ""))
            break
        _, observations = game.get_observation()
        out.append((False, 0.0, "\n".join(t for sender, t, _k in observations if sender != 0)))
    return out


@pytest.mark.parametrize(
    ("game", "moves"),
    [
        ("GuessTheNumber-v0", [f"[{n}]" for n in range(1, 21)]),
        ("TowerOfHanoi-v0", ["[A C]", "[A B]", "oops", "nope"]),
    ],
)
def test_adapter_matches_textarena_driven_directly(game: str, moves: list[str]) -> None:
    env = anyio.run(TextArenaGroup(game, seed=3).make_envs)[0]
    assert isinstance(env, TextArenaEnv)
    ours = _play(env, moves)
    assert ours == _direct(game, 3, moves)
    assert ours[-1][0], "the game should have ended"
    assert all(env.prompt not in text for _, _, text in ours)  # the prompt is never re-sent


def test_a_game_reward_that_is_not_a_number_scores_zero_and_says_so() -> None:
    # ThreeCardMonte calls set_invalid_move(reward, reason) the wrong way round: its final
    # "reward" for a bad move is the reason text
    env = anyio.run(TextArenaGroup("ThreeCardMonte-v0").make_envs)[0]
    assert isinstance(env, TextArenaEnv)

    async def run() -> tuple[float, dict[str, float]]:
        await env.initial_observation()
        for _ in range(5):
            result = await env.step(render_action(env.renderer, {"role": "assistant", "content": "no idea"}))
            if result.episode_done:
                return result.reward, result.metrics
        raise AssertionError("the game did not end on repeated bad moves")

    reward, metrics = anyio.run(run)
    assert reward == 0.0 and metrics[METRIC_BAD_REWARD] == 1.0


def test_a_game_needing_a_download_fails_with_one_line_naming_it() -> None:
    with pytest.raises(TextArenaUnavailable) as error:
        make_game("Wordle-v0")
    message = str(error.value)
    assert "\n" not in message and "textarena:Wordle-v0" in message and "nltk data 'words'" in message
    report = check_conformance(textarena_source("Wordle-v0"), CheckConfig(examples=1))
    assert [r.check for r in report.failures] == [CheckName.MAKE_ENVS]
    assert "nltk data 'words'" in report[CheckName.MAKE_ENVS].detail


def test_multi_player_and_unknown_games_fail_clearly() -> None:
    env = anyio.run(TextArenaGroup("ConnectFour-v0").make_envs)[0]
    with pytest.raises(TextArenaUnavailable, match="textarena:ConnectFour-v0 is not a single-player game"):
        anyio.run(env.initial_observation)
    with pytest.raises(TextArenaUnavailable, match="unknown TextArena game 'Nope-v0'"):
        make_game("Nope-v0")


def test_gym_make_by_id_plays_an_episode() -> None:
    import gymnasium as gym

    from envs.gym import TokenEnv
    from envs.testing import well_formed_action

    (env_id,) = register_textarena(["GuessTheNumber-v0"])
    assert env_id == "textarena/GuessTheNumber-v0" and register_textarena([env_id]) == [env_id]
    env = gym.make(env_id)
    inner = env.unwrapped
    assert isinstance(inner, TokenEnv)
    try:
        obs, _ = env.reset(seed=3)
        assert obs in env.observation_space
        for n in range(1, 21):
            action = tuple(well_formed_action(f"[{n}]", inner.tokenizer, inner.stop_condition))
            obs, reward, terminated, truncated, _info = env.step(action)
            if terminated or truncated:
                break
        assert terminated and not truncated  # the game's own limit (10 guesses) ended it
        assert 0.0 < float(reward) <= 1.0  # 1 for the number, else the game's closeness score
    finally:
        env.close()


@pytest.mark.parametrize("game", ["GuessTheNumber-v0", "Mastermind-v0"])
def test_gymnasium_check_env_passes_through_the_adapter(game: str) -> None:
    import warnings

    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    (env_id,) = register_textarena([game])
    env = gym.make(env_id, render_mode="ansi")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        messages = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]
        assert not messages, messages
    finally:
        env.close()
