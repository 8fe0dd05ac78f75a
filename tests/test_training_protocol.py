"""The training protocol's checks outside the loop proper: the env-tokenizer check cleans up the
envs it makes (it never plays them)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from renderers_ext import UnknownRendererError
from training import ConfigError
from training._loop import check_env_tokenizer


class _Builder:
    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.cleanups = 0

    async def make_envs(self) -> list[Any]:
        if self.fail:
            raise UnknownRendererError("no renderer named 'nope'")
        return [object()]  # an env with no renderer: cannot be checked

    async def cleanup(self) -> None:
        self.cleanups += 1


class _Dataset:
    def __init__(self, builder: _Builder) -> None:
        self.builder = builder

    def get_batch(self, index: int) -> list[_Builder]:
        return [self.builder]


def test_the_env_tokenizer_check_cleans_up_the_envs_it_makes() -> None:
    builder = _Builder(fail=False)
    said = anyio.run(check_env_tokenizer, _Dataset(builder), 0, object())
    assert "not checked" in said and builder.cleanups == 1


def test_the_env_tokenizer_check_cleans_up_when_the_envs_cannot_be_made() -> None:
    builder = _Builder(fail=True)
    with pytest.raises(ConfigError, match="nope"):
        anyio.run(check_env_tokenizer, _Dataset(builder), 0, object())
    assert builder.cleanups == 1


# --- one name per concept: the data keys are the dataset builder's fields ------------------------


@pytest.mark.parametrize(
    ("module", "cls"),
    [
        ("envs.twenty_questions.train", "TwentyQuestionsTrainConfig"),
        ("envs.math.train", "MathTrainConfig"),
        ("envs.code.train", "CodeTrainConfig"),
        ("envs.judge.train", "JudgeTrainConfig"),
    ],
)
def test_every_data_key_reaches_the_dataset_builder_under_its_own_name(module: str, cls: str) -> None:
    import importlib

    import chz

    import training

    config_cls = getattr(importlib.import_module(module), cls)
    config = training.parse_config(config_cls, ["data.batch_size=3", "data.group_size=5"])
    builder = config.dataset_builder()
    for name, value in chz.asdict(config.data).items():
        assert getattr(builder, name) == value, name
    assert (builder.batch_size, builder.group_size) == (3, 5)
    assert builder.model_name_for_tokenizer == config.model_name and builder.seed == config.seed


def test_old_data_keys_still_work_and_say_their_new_name(tmp_path: Any, capsys: Any) -> None:
    from envs.twenty_questions.train import TwentyQuestionsTrainConfig
    from training import parse_config
    from training._cli import upgrade_argv

    old = ["eval_words=3", "eval_seed=2", "eval_group_size=2", "batch_size=2", "scripted_split_noise=0.5"]
    new = [
        "data.test_batch_size=3",
        "data.test_seed=2",
        "data.test_group_size=2",
        "data.batch_size=2",
        "data.scripted_split_noise=0.5",
    ]
    args, notes = upgrade_argv(TwentyQuestionsTrainConfig, [*old, "env.candidates=4", "max_steps=3"])
    assert args == [*new, "env.candidates=4", "max_steps=3"]
    assert notes[0] == "note: key 'eval_words' is now 'data.test_batch_size' (the old name still works)"
    assert parse_config(TwentyQuestionsTrainConfig, old) == parse_config(TwentyQuestionsTrainConfig, new)


def test_a_bad_data_value_is_one_line_naming_the_nested_key() -> None:
    from envs.twenty_questions.train import TwentyQuestionsTrainConfig
    from training import parse_config

    with pytest.raises(ConfigError, match=r"^data\.test_batch_size must be >= 1, got 0$"):
        parse_config(TwentyQuestionsTrainConfig, ["data.test_batch_size=0"])
