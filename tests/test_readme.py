"""The README's env example runs verbatim: it is extracted from README.md, not copied here."""

from __future__ import annotations

import pickle
import re
import sys
import types
from pathlib import Path

import anyio
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _block(marker: str) -> str:
    text = README.read_text()
    match = re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, f"README.md has no python block after <!-- {marker} -->"
    return match.group(1)


@pytest.fixture(scope="module")
def example() -> types.ModuleType:
    module = types.ModuleType("readme_example")
    sys.modules[module.__name__] = module  # so its classes pickle like any user module
    exec(compile(_block("example:env"), str(README), "exec"), module.__dict__)
    yield module
    del sys.modules[module.__name__]


def test_example_is_under_55_lines() -> None:
    # 49 lines until its builders took the model and renderer they serve (model-agnostic envs)
    assert len(_block("example:env").strip().splitlines()) < 55


def test_example_env_plays_and_pickles(example: types.ModuleType) -> None:
    async def play() -> list[tuple[float, bool]]:
        train, test = await example.GuessNumberDatasetBuilder()()
        assert len(train) == 50 and len(test) == 1
        assert [g.secret for g in train.get_batch(3)] == [g.secret for g in train.get_batch(3)]
        group = pickle.loads(pickle.dumps(train.get_batch(0)[0]))
        env = (await group.make_envs())[0]
        await env.initial_observation()
        tok = env.renderer.tokenizer
        out = []
        for text in ["hmm", "0", str(group.secret)]:
            result = await env.step(tok.encode(text + "<|im_end|>"), extra={"stop_reason": "stop"})
            out.append((result.reward, result.episode_done))
        return out

    assert anyio.run(play) == [(-0.1, False), (0.0, False), (1.0, True)]


def test_conformance_example_passes(example: types.ModuleType) -> None:
    namespace = dict(example.__dict__)
    exec(compile(_block("example:conform"), str(README), "exec"), namespace)
    namespace["test_guess_number_conforms"]()


def test_train_example_runs_one_step(example: types.ModuleType, tmp_path: Path) -> None:
    import json

    from backend.model import TINY

    namespace = dict(example.__dict__)
    exec(compile(_block("example:train"), str(README), "exec"), namespace)
    config_cls = namespace["GuessNumberConfig"]
    config = config_cls(
        model_name=TINY, backend="local", max_steps=1, log_path=str(tmp_path), eval_every=0, progress=False
    )
    import training

    training.train(config)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0]
    assert (tmp_path / "config.json").is_file()


def _section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def test_scale_out_commands_exist() -> None:
    """The "Scale out" block's commands are Makefile targets whose recipes run files that exist
    (``make integration`` itself is opt-in and slow: its script's ``--help`` and the set-up
    script's syntax are checked in tests/test_integration_bridge.py)."""
    blocks = re.findall(r"```bash\n(.*?)```", _section("Scale out"), re.DOTALL)
    commands = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    commands = [c for c in commands if c]
    assert commands == ["make integration"]
    makefile = (README.parent / "Makefile").read_text()
    for command in commands:
        target = command.split()[1]
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
        assert recipe, f"Makefile has no {target!r} target"
        scripts = re.findall(r"scripts/\S+\.(?:sh|py)", recipe.group(1))
        assert scripts and all((README.parent / s).is_file() for s in scripts), scripts
