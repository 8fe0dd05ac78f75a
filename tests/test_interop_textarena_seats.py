"""Multi-player TextArena games through the multi-seat form (envs.seats): every seat its own
token history, extended turn by turn (the other seats' moves arrive as messages); TextArena's own
rewards and invalid-move rule; a fault in one seat ends the game for every seat with a stop
reason; the conformance checker, gymnasium and the train CLI by id."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
import tinker
from tinker_cookbook.completers import MessageCompleter, StopCondition, TokenCompleter, TokensWithLogprobs
from tinker_cookbook.renderers import Message

from envs.checker import CheckConfig, CheckName, Outcome, check_conformance
from envs.interop.textarena import (
    METRIC_INVALID_MOVE,
    METRIC_RETRIED,
    TextArenaGame,
    TextArenaUnavailable,
    make_game,
    players_of,
    register_textarena,
    textarena_seated,
    textarena_source,
)
from envs.seats import STOP_SEAT_ERROR, STOP_SEAT_FAULT, GameRecord, Seat, SeatedGroupBuilder
from renderers_ext import render_action


class Moves(TokenCompleter):
    """The policy on every seat: the next of ``moves`` (in game order), as the renderer's tokens;
    ``None`` in the list is a truncated sample (cut at max_tokens, no stop token)."""

    def __init__(self, builder: SeatedGroupBuilder, moves: list[str | None]):
        self.renderer = builder.renderer
        self.moves = list(moves)

    async def __call__(self, model_input: tinker.ModelInput, stop: StopCondition) -> TokensWithLogprobs:
        move = self.moves.pop(0)
        if move is None:
            tokens = self.renderer.tokenizer.encode("I think the best", add_special_tokens=False)
            return TokensWithLogprobs(tokens=tokens, maybe_logprobs=None, stop_reason="length")
        tokens = render_action(self.renderer, {"role": "assistant", "content": move})
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=None)


def _self_play(game: str, moves: list[str | None], seed: int = 3) -> tuple[GameRecord, SeatedGroupBuilder]:
    builder = textarena_seated(game, seed=seed)
    assert builder.seats == (Seat.policy(), Seat.policy())  # self-play: both seats train
    (record,) = anyio.run(builder.play, Moves(builder, moves))
    return record, builder


def _direct(game: str, seed: int, moves: list[str]) -> tuple[dict[int, float], dict[int, dict]]:
    """The same moves sent to TextArena directly: its final rewards and game info."""
    env = make_game(game)
    env.reset(num_players=2, seed=seed)
    for move in moves:
        done, _ = env.step(move)
        if done:
            rewards, info = env.close()
            return {k: float(v) for k, v in rewards.items()}, info
    raise AssertionError("the game did not end")


def _texts(builder: SeatedGroupBuilder, record: GameRecord, seat: int) -> str:
    """Seat ``seat``'s whole transcript (its last observation and action), decoded."""
    last = record.seats[seat].trajectory.transitions[-1]
    return str(builder.renderer.tokenizer.decode(last.ob.to_ints() + list(last.ac.tokens)))


def test_two_seats_each_extend_their_own_tokens_and_get_textarenas_rewards() -> None:
    moves = ["[0]", "[3]", "[1]", "[4]", "[2]"]  # player 0 completes the top row
    record, builder = _self_play("TicTacToe-v0", list(moves))
    assert record.ok and record.stop_reason == "completed" and record.moves == 5
    rewards, _ = _direct("TicTacToe-v0", 3, moves)
    assert [s.reward for s in record.seats] == [rewards[0], rewards[1]] == [1.0, -1.0]
    for seat in record.seats:
        transitions = seat.trajectory.transitions
        assert seat.trains and transitions[-1].episode_done
        assert seat.stats.breaks == () and seat.stats.datums == 1  # one datum: every turn extends
        for before, after in itertools.pairwise(transitions):
            prefix = before.ob.to_ints() + list(before.ac.tokens)
            assert after.ob.to_ints()[: len(prefix)] == prefix
    assert [len(s.trajectory.transitions) for s in record.seats] == [3, 2]
    seat0, seat1 = _texts(builder, record, 0), _texts(builder, record, 1)
    assert seat1.count("You are Player 1 in Tic Tac Toe") == 1  # the prompt once: only news rendered
    assert "[Player 0] [0]" in seat1 and "[Player 1] [3]" in seat0  # the other seat's moves, as messages
    assert "You are Player 1" not in seat0  # each seat sees only its own observations


def test_an_invalid_move_follows_textarenas_rule_a_retry_then_the_games_end() -> None:
    moves = ["[4]", "[4]", "[4]"]  # player 1 plays the taken centre twice
    record, builder = _self_play("TicTacToe-v0", list(moves))
    rewards, info = _direct("TicTacToe-v0", 3, moves)
    assert info[1]["invalid_move"] and rewards == {0: 1.0, 1: -1.0}
    assert [s.reward for s in record.seats] == [1.0, -1.0]
    assert record.stop_reason == STOP_SEAT_FAULT and record.stopped_by == 1
    player1 = record.seats[1]
    assert player1.metrics[METRIC_RETRIED] == 1.0 and player1.metrics[METRIC_INVALID_MOVE] == 1.0
    assert len(player1.trajectory.transitions) == 2  # the retry is a turn of its own
    assert "Player 1 attempted an invalid move" in _texts(builder, record, 1)
    assert record.seats[0].metrics[METRIC_INVALID_MOVE] == 0.0


def test_a_faulty_action_in_one_seat_ends_the_game_for_both() -> None:
    record, _ = _self_play("TicTacToe-v0", ["[4]", None])
    assert record.ok and record.stop_reason == STOP_SEAT_FAULT and record.stopped_by == 1
    assert [s.reward for s in record.seats] == [1.0, -1.0]  # as TextArena scores an invalid move
    for seat in record.seats:
        assert seat.trajectory.stop_reason == STOP_SEAT_FAULT
        assert seat.trajectory.transitions[-1].episode_done
        assert seat.metrics[f"seats/stop/{STOP_SEAT_FAULT}"] == 1.0


class Raises(MessageCompleter):
    async def __call__(self, messages: list[Message]) -> Message:
        raise RuntimeError("the opponent crashed")


def test_a_seat_that_raises_ends_the_game_for_every_seat_with_an_error() -> None:
    builder = textarena_seated("TicTacToe-v0", seed=3)
    builder = replace(builder, seats=(Seat.policy(), Seat.pinned("crash", Raises())))
    (record,) = anyio.run(builder.play, Moves(builder, ["[4]"]))
    assert record.stop_reason == STOP_SEAT_ERROR and record.stopped_by == 1
    assert record.error is not None and "the opponent crashed" in record.error.error_message
    assert all(s.trajectory.transitions[-1].episode_done for s in record.seats if s.trajectory.transitions)
    assert record.seats[0].trajectory.stop_reason == STOP_SEAT_ERROR


def test_seats_are_found_from_the_game_and_single_player_games_stay_single() -> None:
    assert players_of("TicTacToe-v0") == 2 and players_of("textarena:KuhnPoker-v0") == 2
    assert players_of("GuessTheNumber-v0") == 1 and players_of("Wordle-v0") is None  # needs nltk data
    with pytest.raises(TextArenaUnavailable, match="single-player game"):
        textarena_seated("GuessTheNumber-v0")
    with pytest.raises(TextArenaUnavailable, match="nltk data 'words'"):
        textarena_seated("Wordle-v0")
    builder = textarena_seated("KuhnPoker-v0", opponent="random", games=2)
    assert [s.name for s in builder.seats] == ["policy", "random"]
    game = builder.make_game(random.Random(0))
    assert isinstance(game, TextArenaGame) and game.roles == ("player_0", "player_1")


@pytest.mark.parametrize("game", ["TicTacToe-v0", "KuhnPoker-v0"])
def test_the_checker_passes_by_id(game: str) -> None:
    from envs.check import load_target

    # the CLI's target (python -m envs.check textarena:TicTacToe-v0) is this factory
    assert load_target(f"textarena:{game}") == textarena_source(f"textarena:{game}")
    source = textarena_source(game, group_size=2)
    report = check_conformance(source, CheckConfig(examples=4), target=game)
    assert report.ok, str(report)
    assert report[CheckName.EXTENSION].outcome == Outcome.PASS
    assert report[CheckName.GROUP_ISOLATION].outcome == Outcome.PASS  # each game its own random state


def test_assert_env_conforms_passes_on_a_seated_game() -> None:
    from envs.testing import assert_env_conforms

    report = assert_env_conforms(textarena_source("ConnectFour-v0", group_size=2), examples=3)
    assert report[CheckName.EXTENSION].outcome == Outcome.PASS


def test_gym_make_by_id_plays_seat_0_against_the_stand_in() -> None:
    import gymnasium as gym

    from envs.gym import TokenEnv
    from envs.testing import well_formed_action

    (env_id,) = register_textarena(["TicTacToe-v0"])
    env = gym.make(env_id)
    inner = env.unwrapped
    assert isinstance(inner, TokenEnv)
    try:
        env.reset(seed=3)
        for cell in range(9):
            action = tuple(well_formed_action(f"[{cell}]", inner.tokenizer, inner.stop_condition))
            _obs, reward, terminated, truncated, _info = env.step(action)
            if terminated or truncated:
                break
        assert terminated and float(reward) in (-1.0, 0.0, 1.0)
    finally:
        env.close()


def test_one_self_play_step_of_the_train_cli_on_the_tiny_model(tmp_path: Path) -> None:
    import training
    from envs.interop.textarena_train import TextArenaTrainConfig
    from training._logging import read_rows

    config = training.parse_config(
        TextArenaTrainConfig,
        [
            "game=TicTacToe-v0",
            "model_name=turngym/tiny-random-llama",
            f"log_path={tmp_path}",
            "max_steps=1",
            "eval_every=1",
            "batch_size=1",
            "group_size=2",
            "eval_games=2",
            "warm_start.episodes=0",
            "progress=False",
        ],
    )
    summary = training.train(config)
    assert summary.end_step == 1
    evals = read_rows(tmp_path / "eval.jsonl")
    assert [r["stage"] for r in evals] == ["untrained", "rl"]
    assert all(r["eval/rollout/groups/requested"] == pytest.approx(2.0) for r in evals)  # two games
    metrics = read_rows(tmp_path / "metrics.jsonl")
    # self-play: both seats of each of the 2 games are trajectories of the step
    assert metrics[-1]["env/all/total_episodes"] == pytest.approx(4.0)


def test_the_warm_start_plays_random_moves_on_seat_0_against_random_players() -> None:
    from envs.interop.textarena_train import TextArenaDatasetBuilder
    from rollout import EngineConfig, run_episode

    async def run() -> list[tuple[float, int, str]]:
        episodes = await TextArenaDatasetBuilder(game="TicTacToe-v0").scripted_episodes(4, seed=0)
        out = []
        for env, policy in episodes:
            trajectory, stats = await run_episode(policy, env, EngineConfig())
            assert trajectory.transitions[-1].episode_done and stats.breaks == ()
            reward = sum(t.reward for t in trajectory.transitions)
            out.append((reward, len(trajectory.transitions), str(trajectory.stop_reason)))
        return out

    played = anyio.run(run)
    assert all(reward in (-1.0, 0.0, 1.0) for reward, _, _ in played), played
    assert max(turns for _, turns, _ in played) > 1  # random moves get past the first turn
