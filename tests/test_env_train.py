"""``python -m envs.train <id>``: one RL step by id on the tiny model for each kind of id (a
TextArena single-player game, a verifiers env, a real OpenEnv server on 127.0.0.1, an installed
TurnGym id); train and held-out seeds apart; a seated game trains by self-play and is held out
against random players; a bad id is one line, exit 2, nothing written."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from envs.interop.openenv import running_server
from envs.seats import SeatedGroupBuilder
from envs.train import TRAIN_SEED_BASE, EnvDatasetBuilder, main
from training._logging import read_rows

ONE_STEP = [
    "model_name=turngym/tiny-random-llama",
    "backend=local",
    "max_steps=1",
    "eval_every=1",
    "batch_size=1",
    "group_size=2",
    "eval_tasks=1",
    "max_tokens=8",
    "transcripts_per_eval=0",
    "train_transcripts=0",
    "progress=False",
]


@pytest.fixture(scope="module")
def openenv_server() -> Iterator[str]:
    with running_server(["-m", "envs.interop.openenv_demo"]) as url:
        yield url


@pytest.mark.parametrize(
    ("env", "short"),  # short episodes: the test is about the path, not the play
    [
        ("textarena:GuessTheNumber-v0", "max_turns"),
        ("verifiers:arith-retry", "max_turns"),
        ("openenv", "max_turns"),
        ("turngym/TwentyQuestions-v0", "max_questions"),
    ],
)
def test_one_rl_step_by_id(env: str, short: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if env == "openenv":
        env = f"openenv:{request.getfixturevalue('openenv_server')}"
    assert main([env, f"log_path={tmp_path}", f'env_args={{"{short}": 2}}', *ONE_STEP]) == 0
    steps = read_rows(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in steps] == [0]
    assert steps[0]["rollout/rollouts/requested"] == pytest.approx(2.0)  # one group of group_size
    evals = read_rows(tmp_path / "eval.jsonl")
    assert [r["step"] for r in evals] == [0, 1]  # before and after the step
    assert all(r["eval/rollout/rollouts/requested"] == pytest.approx(1.0) for r in evals)


def test_train_and_held_out_seeds_are_apart_and_groups_have_group_size() -> None:
    builder = EnvDatasetBuilder(
        env="textarena:GuessTheNumber-v0", batch_size=2, group_size=3, num_batches=2, eval_tasks=3, seed=1
    )
    train, test = anyio.run(builder)
    groups = [b for i in range(len(train)) for b in train.get_batch(i)]
    assert [b.seed for b in groups] == [2 * TRAIN_SEED_BASE + i for i in range(4)]  # type: ignore[attr-defined]
    assert {b.group_size for b in groups} == {3}  # type: ignore[attr-defined]
    held_out = test.get_batch(0)
    assert [(b.seed, b.group_size) for b in held_out] == [(0, 1), (1, 1), (2, 1)]  # type: ignore[attr-defined]


def test_an_installed_id_holds_out_its_test_split() -> None:
    builder = EnvDatasetBuilder(
        env="turngym/Math-v0", batch_size=1, group_size=3, num_batches=1, eval_tasks=1
    )
    assert builder.source().open(group_size=1, held_out=True).split == "test"
    assert builder.source().open(group_size=3, held_out=False).split == "train"
    train, test = anyio.run(builder)
    assert len(anyio.run(train.get_batch(0)[0].make_envs)) == 3
    assert len(anyio.run(test.get_batch(0)[0].make_envs)) == 1


def test_a_seated_game_trains_by_self_play_and_is_held_out_against_random() -> None:
    builder = EnvDatasetBuilder(
        env="textarena:TicTacToe-v0", batch_size=1, group_size=2, num_batches=1, eval_tasks=1
    )
    train, test = anyio.run(builder)
    (played,) = train.get_batch(0)
    (held_out,) = test.get_batch(0)
    assert isinstance(played, SeatedGroupBuilder) and isinstance(held_out, SeatedGroupBuilder)
    assert played.games == 2 and all(s.is_policy and s.trains for s in played.seats)
    assert held_out.games == 1 and [s.is_policy for s in held_out.seats] == [True, False]
    assert "vs_random" in held_out.tags


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ("turngym/Nope-v0", "unknown env id 'turngym/Nope-v0'"),
        ("textarena:Hangman-v0", "needs a download"),
        ("verifiers:someone/hub-env", "needs a download"),
        ("openenv:not-a-url", "openenv ids name a server URL"),
        ("envs.math:Nope", "has no attribute"),
        ("openenv:http://127.0.0.1:9", "does not answer"),  # nothing listens on port 9 (discard)
    ],
)
def test_a_bad_id_fails_in_one_line_and_writes_nothing(
    env: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main([env, f"log_path={run}", "max_steps=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and err.startswith("envs.train: error:") and "\n" not in err
    assert not run.exists()


@pytest.mark.parametrize("env", ["textarena:GuessTheNumber-v0", "verifiers:arith-retry", "turngym/Math-v0"])
def test_a_key_the_source_does_not_take_fails_in_one_line(
    env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main([env, f"log_path={run}", 'env_args={"nope": 1}']) == 2
    err = capsys.readouterr().err.strip()
    assert "unexpected keyword argument 'nope'" in err and "\n" not in err
    assert not run.exists()


def test_help_lists_the_keys_and_no_env_is_a_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(
        key in out for key in ("env_args", "group_size", "eval_tasks", "learning_rate", "rollout_executor")
    )
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("usage: python -m envs.train <id | module:attr>")


@pytest.mark.parametrize(
    "env",
    [
        "textarena:GuessTheNumber-v0",
        "textarena:TicTacToe-v0",
        "verifiers:arith-retry",
        "openenv:http://127.0.0.1:9",
        "turngym/Math-v0",
    ],
)
def test_groups_pickle_for_the_worker_executors(env: str) -> None:
    """``rollout_executor=process:N`` / ``ray:...`` ship each group builder to a worker."""
    train, test = anyio.run(
        EnvDatasetBuilder(env=env, batch_size=2, group_size=2, num_batches=1, eval_tasks=1)
    )
    for builder in [*train.get_batch(0), *test.get_batch(0)]:
        assert type(pickle.loads(pickle.dumps(builder))) is type(builder)


ONE_ENV_FACTORY = """
from envs.interop.textarena import TextArenaGroup


async def one_env(seed: int):
    (env,) = await TextArenaGroup("GuessTheNumber-v0", seed=seed).make_envs()
    return env
"""


def test_a_factory_of_single_envs_is_called_group_size_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "one_env_factory.py").write_text(ONE_ENV_FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    builder = EnvDatasetBuilder(
        env="one_env_factory:one_env", batch_size=1, group_size=3, num_batches=1, eval_tasks=1
    )
    train, test = anyio.run(builder)
    envs = anyio.run(train.get_batch(0)[0].make_envs)
    assert len(envs) == 3 and len({id(e) for e in envs}) == 3
    assert {e.seed for e in envs} == {TRAIN_SEED_BASE}  # type: ignore[attr-defined]
    assert len(anyio.run(test.get_batch(0)[0].make_envs)) == 1


def test_a_dataset_builder_by_module_attr_holds_out_its_test_split() -> None:
    from envs.math import MathDatasetBuilder

    builder = EnvDatasetBuilder(env="envs.math:MathDatasetBuilder", batch_size=2, num_batches=1, eval_tasks=2)
    train, test = anyio.run(builder)
    own_train, own_test = anyio.run(MathDatasetBuilder())
    assert own_test is not None
    everything = {
        split: [b for i in range(len(data)) for b in data.get_batch(i)]
        for split, data in (("train", own_train), ("test", own_test))
    }
    assert all(b in everything["test"] for b in test.get_batch(0))
    assert all(b in everything["train"] and b not in everything["test"] for b in train.get_batch(0))
    assert test.get_batch(0)[0].group_size == own_test.get_batch(0)[0].group_size  # type: ignore[attr-defined]  # its own groups
