"""Model opponents of the two-seat games' train CLI (``train_opponents=self,base``,
``checkpoint:<path>``): the opponent seat's moves are sampled by a frozen model, its trajectories
never become datums, held-out games against it get a table of their own, and a bad name or path
fails in one line before anything loads. On the tiny model (one RL step each)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from tinker_cookbook.completers import TokenCompleter

import training
from envs.nim.train import NimTrainConfig
from envs.nim.train import main as nim_main
from envs.seats import BASE, Seat, SeatedGroupBuilder, model_player
from envs.tictactoe.train import TicTacToeTrainConfig
from envs.tictactoe.train import main as tictactoe_main
from training._logging import read_rows

TINY = "turngym/tiny-random-llama"
QUICK = [
    f"model_name={TINY}",
    "max_steps=1",
    "batch_size=1",
    "group_size=2",
    "warm_start.episodes=0",
    "progress=False",
]


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-step Nim run: its folder holds a checkpoint with sampler weights."""
    folder = tmp_path_factory.mktemp("earlier")
    config = training.parse_config(NimTrainConfig, [*QUICK, f"log_path={folder}", "eval_every=0"])
    training.train(config)
    return folder


def _model_moved(seat_trajectory: object) -> bool:
    """Whether a seat's actions were sampled by a model (a scripted player's logprobs are all 0)."""
    transitions = getattr(seat_trajectory, "transitions")  # noqa: B009
    logprobs = [lp for t in transitions for lp in (t.ac.maybe_logprobs or [])]
    return bool(logprobs) and any(lp < 0 for lp in logprobs)


def test_self_base_random_pool_pins_a_frozen_base_model_seat(tmp_path: Path) -> None:
    config = training.parse_config(
        NimTrainConfig,
        [*QUICK, f"log_path={tmp_path}", "max_steps=2", "group_size=12", "train_opponents=self,base,random"],
    )
    builder = config.dataset_builder()

    async def play() -> list:
        train, _ = await builder()
        policy = await model_player(BASE, model=TINY, max_tokens=4, temperature=1.0)
        group = train.get_batch(1)[0]  # group 1: the opponent moves first
        assert isinstance(group, SeatedGroupBuilder)
        return await group.play(policy)

    records = anyio.run(play)
    others = [seat for record in records for seat in record.seats if seat.player != "policy"]
    policies = [seat for record in records for seat in record.seats if seat.player == "policy"]
    assert {seat.player for seat in others} == {BASE, "random"}  # the pool drew both ...
    assert len(policies) > len(records)  # ... and the policy (self-play) for some games
    assert all(not seat.trains for seat in others) and all(seat.trains for seat in policies)
    moved = {seat.player: _model_moved(seat.trajectory) for seat in others if seat.trajectory.transitions}
    assert moved == {BASE: True, "random": False}  # the base seat's moves are sampled by a model


def test_one_step_against_a_checkpoint_trains_only_the_policy_seat(earlier_run: Path, tmp_path: Path) -> None:
    opponent = f"checkpoint:{earlier_run}"
    config = training.parse_config(
        NimTrainConfig,
        [
            *QUICK,
            f"log_path={tmp_path}",
            "eval_every=1",
            "eval_games=2",
            f"train_opponents={opponent}",
            f"eval_opponents=random,{opponent}",
        ],
    )
    summary = training.train(config)
    assert summary.end_step == 1
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert rows[0]["rollout/rollouts/requested"] == 2.0  # 2 games, the policy's seat only
    evals = read_rows(tmp_path / "eval.jsonl")
    tag = "checkpoint_" + str(earlier_run).strip("/").replace("/", "_")
    for row in evals:
        table = [row[f"eval/env/vs_{tag}/nim/{k}"] for k in ("win", "loss")]
        assert sum(table) == pytest.approx(1.0)
        assert row[f"eval/score_vs_{tag}"] == pytest.approx(table[0])


def test_a_sampler_path_of_an_earlier_run_is_a_pool_member(earlier_run: Path, tmp_path: Path) -> None:
    sampler = read_rows(earlier_run / "checkpoints.jsonl")[-1]["sampler_path"]
    absolute = f"checkpoint:{earlier_run / 'checkpoints' / sampler.removeprefix('local://')}"
    config = training.parse_config(
        TicTacToeTrainConfig,
        [
            *QUICK,
            f"log_path={tmp_path}",
            "group_size=6",
            f"train_opponents={absolute},checkpoint:{earlier_run}",
        ],
    )

    async def pool() -> Seat:
        train, _ = await config.dataset_builder()()
        group = train.get_batch(0)[0]
        assert isinstance(group, SeatedGroupBuilder)
        return next(seat for seat in group.seats if not seat.is_policy)

    drawn = anyio.run(pool)  # two checkpoints: a pool drawn per game, each a frozen model
    assert {c.name for c in drawn.choices} == {absolute, f"checkpoint:{earlier_run}"}
    assert all(isinstance(c.player, TokenCompleter) and not c.trains for c in drawn.choices)


@pytest.mark.parametrize(
    ("main", "arg", "message"),
    [
        (nim_main, "train_opponents=self,checkpoint:/no/such/run", "no checkpoint with sampler weights"),
        (nim_main, "eval_opponents=random,checkpoint:tinker://x/sampler_weights/1", "needs backend=tinker"),
        (tictactoe_main, "train_opponents=self,bsae", "unknown tictactoe opponent 'bsae'"),
        (tictactoe_main, "train_opponents=checkpoint:", "checkpoint: needs a path"),
    ],
)
def test_bad_opponents_fail_in_one_line(
    main, arg: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([f"log_path={tmp_path / 'run'}", "backend=local", arg]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "run").exists()
