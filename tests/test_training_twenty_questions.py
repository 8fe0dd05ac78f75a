"""``envs.twenty_questions.train`` on the shared loop: defaults, CLI errors, one step on TINY."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import chz

import envs.twenty_questions.train as train_module
import training
from envs.twenty_questions.config import TwentyQuestionsConfig
from envs.twenty_questions.train import SMOKE_TEST, TwentyQuestionsTrainConfig, main
from envs.twenty_questions.words import split_words
from training._logging import read_rows

REPO = Path(__file__).resolve().parents[1]
_TRAIN_DOC = train_module.__doc__ or ""
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO)}


def test_defaults_are_the_real_game_with_a_weak_warm_start() -> None:
    config = training.parse_config(TwentyQuestionsTrainConfig, [])
    assert config.model_name == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert config.env == TwentyQuestionsConfig()  # the game's one set of defaults, not a copy
    # more candidates than turns: enumeration wins at most 4 of 8; questions are free
    game = config.env
    assert (game.candidates, game.max_questions, config.data.batch_size, config.data.group_size) == (8, 4, 8, 8)
    assert game.question_reward == 0.0 and game.wrong_guess_reward == 0.0
    assert (config.lora_rank, config.max_tokens, config.temperature) == (16, 24, 0.8)
    assert config.remove_constant_reward_groups and config.grad_clip_norm == 1.0
    assert config.log_path == "runs/twenty_questions/default"
    # a short warm start on a halving player that splits at random 3 times in 10 (too short to
    # learn it), then RL, each evaluated greedily on the same held-out games
    assert config.warm_start.episodes > 0 and config.data.scripted_split_noise == 0.3
    # RL's rate decays linearly from 6e-4 to 0 over the 16 steps, scaled by the informative groups
    assert config.learning_rate == 6e-4 and config.lr_schedule == "linear" and config.lr_scale_by_signal
    assert config.lr_at(0) == 6e-4 and config.lr_at(8) == 3e-4
    assert (config.warm_start.steps, config.max_steps, config.eval_temperature) == (11, 16, 0.0)
    # held-out evaluations after the warm start and after RL only (the goals' two figures)
    assert config.eval_every == config.max_steps
    builder = config.dataset_builder()
    assert builder.env is config.env and builder.env.format_penalty == 0.1
    assert builder.env.fault_penalty == 0.1 and builder.env.play_truncated
    assert builder.scripted_split_noise == 0.3
    assert builder.test_batch_size == 64 and builder.test_group_size == 1  # 64 held-out games
    assert builder.model_name_for_tokenizer == config.model_name and builder.renderer_name is None


def test_the_default_evaluation_is_64_distinct_held_out_games() -> None:
    # greedy evaluation plays identical games identically: every held-out game must differ (its
    # 61 words, then words again with other candidate lists), none from the training split
    config = training.parse_config(TwentyQuestionsTrainConfig, [])
    _, test = config.dataset_builder().build()
    batch = test.get_batch(0)
    assert len(test) == 1 and sum(group.group_size for group in batch) == 64
    games = [test.item(i) for i in range(64)]
    assert len(set(games)) == 64
    assert {word for word, _ in games} == set(split_words("test"))
    assert not {word for word, _ in games} & set(split_words("train"))


def test_held_out_games_do_not_depend_on_the_run_seed() -> None:
    # every seed is evaluated on the same games (data.test_seed), while training draws follow the seed
    def splits(*args: str) -> tuple[list[tuple[str, tuple[str, ...]]], list[tuple[str, tuple[str, ...]]]]:
        train, test = training.parse_config(TwentyQuestionsTrainConfig, list(args)).dataset_builder().build()
        return [train.item(i) for i in range(16)], [test.item(i) for i in range(64)]

    train0, test0 = splits("seed=0")
    train5, test5 = splits("seed=5")
    assert test5 == test0 and train5 != train0
    _, other = splits("seed=0", "data.test_seed=1")
    assert other != test0 and {w for w, _ in other} == {w for w, _ in test0}


def test_every_game_field_is_a_nested_key(capsys) -> None:
    config = training.parse_config(
        TwentyQuestionsTrainConfig,
        ["env.candidates=8", "env.max_trajectory_tokens=512", "env.prompt=Guess {max_questions}{candidates}"],
    )
    assert config.env == TwentyQuestionsConfig(
        candidates=8, max_trajectory_tokens=512, prompt="Guess {max_questions}{candidates}"
    )
    assert config.dataset_builder().env.max_trajectory_tokens == 512
    keys = {f"env.{name}" for name in chz.asdict(TwentyQuestionsConfig())}
    assert main(["--help"]) == 0
    help_text = capsys.readouterr().out
    assert all(key in help_text for key in keys)


def test_setting_one_warm_start_key_keeps_the_other_defaults() -> None:
    default = training.parse_config(TwentyQuestionsTrainConfig, []).warm_start
    changed = training.parse_config(TwentyQuestionsTrainConfig, ["warm_start.steps=3"]).warm_start
    assert changed.steps == 3 and (changed.episodes, changed.batch_size) == (
        default.episodes,
        default.batch_size,
    )
    assert (
        training.parse_config(TwentyQuestionsTrainConfig, ["warm_start.episodes=0"]).warm_start.episodes == 0
    )


def test_smoke_test_keys_are_the_easy_setting() -> None:
    config = training.parse_config(TwentyQuestionsTrainConfig, list(SMOKE_TEST))
    assert (config.env.candidates, config.env.max_questions, config.env.question_reward) == (4, 4, -0.05)
    assert config.warm_start.episodes == 0 and config.learning_rate == 1e-3 and config.max_tokens == 16
    assert config.lr_schedule == "constant"  # as measured, whatever the main job's schedule
    assert config.temperature == 1.0  # likewise its sampling temperature
    assert config.lr_scale_by_signal and config.data.batch_size == 4  # the rate follows the informative groups
    assert (config.max_steps, config.eval_every) == (20, 10)
    assert all(key in _TRAIN_DOC for key in SMOKE_TEST)  # the documented command is these keys


def test_unknown_key_exits_2_with_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "envs.twenty_questions.train", "env.candiates=8"],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "envs.twenty_questions.train: error: unknown key 'env.candiates' (run with --help to list the keys)"
    )


def test_one_step_on_the_tiny_model_writes_the_artifacts(tmp_path: Path) -> None:
    config = training.parse_config(
        TwentyQuestionsTrainConfig,
        [
            "model_name=turngym/tiny-random-llama",
            f"log_path={tmp_path}",
            "max_steps=1",
            "eval_every=1",
            "data.batch_size=2",
            "data.group_size=2",
            "data.test_batch_size=2",
            "data.test_group_size=2",
            "progress=False",
        ],
    )
    summary = training.train(config)
    assert summary.end_step == 1
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0]
    assert "env/all/twenty_questions/question_fraction" in rows[0]
    evals = read_rows(tmp_path / "eval.jsonl")
    # the main job's warm start: held-out before any training, after the warm start, after RL
    assert [(r["step"], r["stage"]) for r in evals] == [(0, "untrained"), (0, "warm_start"), (1, "rl")]
    assert all(r["eval/episodes"] == 4.0 for r in evals)  # the same held-out games each time
    # the env's own held-out figure: questions / turns, logged and shown in the summary
    for row in evals:
        questions, turns = (
            row["eval/env/all/twenty_questions/questions"],
            row["eval/env/all/twenty_questions/turns"],
        )
        assert row["eval/question_turn_fraction"] == questions / turns
        before = row["eval/env/all/twenty_questions/turns_before_final_guess"]
        assert row.get("eval/question_fraction_before_guess") == (questions / before if before else None)
    assert f"question_turn_fraction={evals[-1]['eval/question_turn_fraction']:.3f}" in summary.describe()
    assert (tmp_path / "transcripts" / "eval_step0001.html").read_text().count('class="ep"') == 4
    assert (tmp_path / "reward_curve.png").is_file()


def test_eval_figures_are_the_question_fractions() -> None:
    config = training.parse_config(TwentyQuestionsTrainConfig, [])
    assert config.eval_figures(
        {"env/all/twenty_questions/questions": 1.5, "env/all/twenty_questions/turns": 3.0}
    ) == {"question_turn_fraction": 0.5}
    assert config.eval_figures(
        {
            "env/all/twenty_questions/questions": 1.5,
            "env/all/twenty_questions/turns": 3.0,
            "env/all/twenty_questions/turns_before_final_guess": 2.0,
        }
    ) == {"question_turn_fraction": 0.5, "question_fraction_before_guess": 0.75}
    assert config.eval_figures({"env/all/twenty_questions/turns": 0.0}) == {}  # nothing played: no figure
