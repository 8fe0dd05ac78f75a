"""docs/tinker-docs-map.md stays true: every ``python -m`` command of its ``bash`` blocks resolves
and answers ``--help`` (each is run end to end on the tiny model by the test the page names), each
test it names exists, and the docs' paths it lists as wrong for cookbook 0.5.8 are wrong while
their replacements import."""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "tinker-docs-map.md").read_text()


def commands() -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", PAGE, re.DOTALL)
    return [
        shlex.split(line) for block in blocks for line in block.splitlines() if line.startswith("python -m ")
    ]


def test_page_has_the_commands_of_every_workflow() -> None:
    modules = {c[2] for c in commands()}
    assert {
        "backend.offline",
        "envs.judge.preference",
        "envs.judge.rlhf",
        "envs.distill",
        "training.sweep",
    } <= modules
    for test in set(re.findall(r"`(tests/test_\w+\.py)`", PAGE)):
        assert (ROOT / test).is_file(), test


@pytest.mark.parametrize("command", commands(), ids=lambda c: " ".join(c[2:]))
def test_command_answers_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert command[-1] == "--help"
    module = command[2]
    assert importlib.util.find_spec(module) is not None
    if module == "backend.offline" and len(command) > 4:  # a cookbook module run through it
        assert importlib.util.find_spec(command[3]) is not None
        return
    if module == "envs.distill":
        module = "envs.distill.pipeline"
    main = importlib.import_module(module).main
    try:
        code = main(["--help"])
    except SystemExit as exc:  # argparse's --help
        code = exc.code
    assert code == 0 and "usage" in capsys.readouterr().out.lower()


def test_wrong_paths_are_wrong_and_right_ones_import() -> None:
    for wrong in (
        "tinker_cookbook.recipes.preference.train",
        "tinker_cookbook.recipes.twenty_questions.train",
        "tinker_cookbook.evaluators",
    ):
        assert f"`{wrong}`" in PAGE
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(wrong)
    for right in (
        "tinker_cookbook.recipes.preference.dpo.train",
        "tinker_cookbook.recipes.preference.rlhf.rlhf_pipeline",
        "tinker_cookbook.recipes.multiplayer_rl.twenty_questions.train",
        "tinker_cookbook.eval.evaluators",
    ):
        assert f"`{right}`" in PAGE
        assert importlib.util.find_spec(right) is not None
    assert not hasattr(importlib.import_module("tinker_cookbook.rl.types"), "TokenCompleter")
    assert hasattr(importlib.import_module("tinker_cookbook.completers"), "TokenCompleter")
