"""Multi-seat compatibility both ways: the cookbook's own multiplayer envs (its TextArena
tic-tac-toe with ``TwoPlayerCoordinator``, its guess-the-number) run unchanged in our engine and
training loop, and our seated builders run in the cookbook's ``do_group_rollout`` and ``rl.train``
on our backend (the hosted seats of ``SeatedGroupBuilder.make_envs``)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
import tinker
from tinker_cookbook.completers import StopCondition, TokenCompleter, TokensWithLogprobs
from tinker_cookbook.rl.rollouts import do_group_rollout

import training
from backend.model import SMOLLM2, TINY
from envs.seats import Seat, SeatedGroupBuilder
from envs.tictactoe.env import Metric, TicTacToeGame
from envs.tictactoe.players import RandomPlayer
from renderers_ext import load_renderer
from rollout import RolloutEngine
from tests.seat_players import TokenRandom

R = load_renderer("qwen3_instruct", SMOLLM2)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class FirstFreeTextArena(TokenCompleter):
    """TextArena tic-tac-toe: the first of the ``Available Moves`` of the last board, as tokens."""

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, **_: Any
    ) -> TokensWithLogprobs:
        text = str(R.tokenizer.decode(model_input.to_ints()))
        moves = re.findall(r"'(\[\d+\])'", text.rsplit("Available Moves", 1)[-1])
        tokens = list(R.tokenizer.encode(moves[0] + "\n", add_special_tokens=False))
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[0.0] * len(tokens))


def test_the_cookbooks_textarena_self_play_runs_in_our_engine() -> None:
    from tinker_cookbook.recipes.multiplayer_rl.text_arena.env import TwoPlayerEnvGroupBuilder

    builder = TwoPlayerEnvGroupBuilder(game_name="TicTacToe-v0", renderer=R, num_envs=2, self_play=True)
    outcome = anyio.run(RolloutEngine(FirstFreeTextArena()).run_group, builder)
    assert outcome.failure is None and outcome.group is not None
    assert (outcome.requested, outcome.completed) == (2, 2)
    # both players' whole games: first-free play ends with a line for player 0 on the diagonal
    assert sorted(outcome.group.get_total_rewards()) == [-1.0, 1.0]
    assert sorted(len(t.transitions) for t in outcome.group.trajectories_G) == [3, 4]
    # the recipe renders each turn's whole observation anew: our engine counts the breaks
    assert all(s.breaks for s in outcome.stats)


def _textarena() -> Any:
    from tinker_cookbook.recipes.multiplayer_rl.text_arena.env import TwoPlayerTextArenaDatasetBuilder

    return TwoPlayerTextArenaDatasetBuilder(
        batch_size=4,
        num_train_datapoints=8,
        num_test_datapoints=4,
        model_name=TINY,
        game_name="TicTacToe-v0",
        renderer_name="qwen3_instruct",
        test_opponent="random",
    )


def _guess_number() -> Any:
    from tinker_cookbook.recipes.multiplayer_rl.guess_number.env import GuessNumberDatasetBuilder

    return GuessNumberDatasetBuilder(
        batch_size=2, renderer_name="qwen3_instruct", train_group_size=2, model_name=TINY, test_group_size=2
    )


@pytest.mark.parametrize("make", [_textarena, _guess_number], ids=["textarena_tictactoe", "guess_number"])
def test_the_cookbooks_multiplayer_builders_train_in_our_loop(make: Any, tmp_path: Path) -> None:
    config = training.Config(
        model_name=TINY,
        backend="local",
        log_path=str(tmp_path),
        max_steps=1,
        eval_every=0,
        max_tokens=8,
        lora_rank=2,
        progress=False,
    )
    training.train(config, dataset_builder=make())
    (row,) = _rows(tmp_path / "metrics.jsonl")
    assert row["rollout/rollouts/requested"] == row["rollout/rollouts/completed"] >= 4
    assert row["rollout/groups/failed"] == 0
    assert _rows(tmp_path / "checkpoints.jsonl")[-1]["sampler_path"].startswith("local://")


def _prefixes_intact(trajectory: Any) -> bool:
    for a, b in zip(trajectory.transitions, trajectory.transitions[1:], strict=False):
        before = a.ob.to_ints() + list(a.ac.tokens)
        if b.ob.to_ints()[: len(before)] != before:
            return False
    return True


def test_our_seated_builder_plays_in_the_cookbooks_do_group_rollout() -> None:
    random_o = Seat.pinned("random", lambda rng: RandomPlayer(rng.randrange(1000)))
    self_play = SeatedGroupBuilder(
        make_game=lambda rng: TicTacToeGame(), renderer=R, seats=(Seat.policy(), Seat.policy()), games=6
    )
    group = anyio.run(do_group_rollout, self_play, TokenRandom(R, 0))
    rewards = group.get_total_rewards()
    assert len(rewards) == 12  # X and O of every game, in game order
    assert [rewards[i] + rewards[i + 1] for i in range(0, 12, 2)] == [0.0] * 6
    assert all(_prefixes_intact(t) for t in group.trajectories_G)
    for trajectory, reward in zip(group.trajectories_G, rewards, strict=True):
        last = trajectory.transitions[-1]
        assert last.episode_done and (last.metrics.get(str(Metric.WIN)) == 1.0) == (reward == 1.0)
    # a pinned opponent plays inside the hosted game: only the policy's seat is an env
    pinned = SeatedGroupBuilder(
        make_game=lambda rng: TicTacToeGame(), renderer=R, seats=(Seat.policy(), random_o), games=4
    )
    group = anyio.run(do_group_rollout, pinned, TokenRandom(R, 1))
    assert len(group.trajectories_G) == 4 and all(_prefixes_intact(t) for t in group.trajectories_G)
    assert {t.transitions[-1].logs["game_stop"] for t in group.trajectories_G} <= {"completed", "seat_fault"}


def test_a_hosted_game_left_behind_is_stopped_by_cleanup() -> None:
    b = SeatedGroupBuilder(
        make_game=lambda rng: TicTacToeGame(), renderer=R, seats=(Seat.policy(), Seat.policy()), games=1
    )

    async def main() -> bool:
        x, _o = await b.make_envs()
        await x.initial_observation()  # the game task now waits for X's action
        host = b._hosts[0]
        await b.cleanup()
        await asyncio.sleep(0)
        return host.task is not None and host.task.cancelled()

    assert anyio.run(main)


def test_our_tictactoe_builder_trains_in_the_cookbooks_rl_train_on_our_backend(tmp_path: Path) -> None:
    from tinker_cookbook.rl import train as rl_train

    from backend import use_local_backend
    from envs.tictactoe.builders import TicTacToeDatasetBuilder

    builder = TicTacToeDatasetBuilder(
        batch_size=1, group_size=2, num_batches=2, model_name_for_tokenizer=TINY, eval_games=2
    )
    with use_local_backend(root=tmp_path / "checkpoints"):
        config = rl_train.Config(
            learning_rate=1e-4,
            dataset_builder=builder,
            model_name=TINY,
            renderer_name="qwen3_instruct",
            recipe_name="test",
            max_tokens=4,
            lora_rank=2,
            eval_every=0,
            save_every=0,
            num_groups_to_log=0,
            log_path=str(tmp_path / "rl"),
            remove_constant_reward_groups=False,
        )
        asyncio.run(rl_train.main(config))
    rows = _rows(tmp_path / "rl" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1]
    assert all("env/all/reward/total" in r for r in rows)
