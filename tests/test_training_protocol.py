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
