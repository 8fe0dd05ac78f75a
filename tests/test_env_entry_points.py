"""Envs by name: a separately built and installed package's ``turngym.envs`` entry point makes its
id usable in ``envs.list``, ``envs.check`` and ``gymnasium.make``, with no import of the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_MODULE = '''
"""A one-package env for the entry-point test."""
from dataclasses import dataclass

from tinker_cookbook.renderers import get_text_content
from tinker_cookbook.rl.types import EnvGroupBuilder

from backend.model import SMOLLM2
from envs import ChatEnv, EnvLimits, Reply
from renderers_ext import load_renderer


class Shout(ChatEnv):
    def __init__(self):
        super().__init__(load_renderer("qwen3_instruct", SMOLLM2), limits=EnvLimits(max_turns=3))

    def initial_messages(self):
        return [{"role": "user", "content": "Shout something."}]

    async def on_message(self, message):
        if get_text_content(message).isupper():
            return Reply(reward=1.0, done=True)
        return Reply(messages=[{"role": "user", "content": "Louder!"}])


@dataclass(frozen=True)
class ShoutGroup(EnvGroupBuilder):
    size: int = 1

    async def make_envs(self):
        return [Shout() for _ in range(self.size)]


def shout_source(group_size: int = 1):
    """Shout: reward 1 for an all-caps reply, three tries."""
    return lambda seed: ShoutGroup(group_size)
'''


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The tiny package built and installed (``pip --target``) into a temp folder; the env of a
    process that sees it."""
    src = tmp_path_factory.mktemp("tiny_src")
    (src / "tiny_shout").mkdir()
    (src / "tiny_shout" / "__init__.py").write_text(_MODULE)
    (src / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "tiny-shout"
            version = "0.0.1"
            [project.entry-points."turngym.envs"]
            "tiny/Shout-v0" = "tiny_shout:shout_source"
            [tool.setuptools]
            packages = ["tiny_shout"]
            """
        )
    )
    target = tmp_path_factory.mktemp("tiny_site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target), str(src)],
        check=True,
        capture_output=True,
    )
    assert list(target.glob("tiny_shout-0.0.1.dist-info"))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(target)]), "HF_HUB_OFFLINE": "1"}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_installed_package_is_listed(installed: dict[str, str]) -> None:
    out = _run(installed, "-m", "envs.list", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert rows["tiny/Shout-v0"]["package"] == "tiny-shout"
    assert rows["tiny/Shout-v0"]["description"].startswith("Shout: reward 1")
    assert "turngym/Math-v0" in rows
    plain = _run(installed, "-m", "envs.list")
    assert sum("tiny/Shout-v0" in line for line in plain.stdout.splitlines()) == 1


def test_installed_package_passes_the_checker_by_id(installed: dict[str, str]) -> None:
    out = _run(installed, "-m", "envs.check", "tiny/Shout-v0", "--examples", "4", "--json")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert json.loads(out.stdout)["ok"] is True


def test_gym_make_needs_no_import_of_the_package(installed: dict[str, str]) -> None:
    code = (
        "import sys, gymnasium as gym, envs.gym\n"
        "assert 'tiny_shout' not in sys.modules\n"
        "env = gym.make('tiny/Shout-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "print(len(obs) > 0)\n"
    )
    out = _run(installed, "-c", code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True"


def test_unknown_id_is_one_line_error() -> None:
    out = _run({**os.environ, "PYTHONPATH": str(ROOT)}, "-m", "envs.check", "nope/Missing-v0")
    assert out.returncode == 2
    assert out.stderr.startswith("error: unknown id 'nope/Missing-v0'")


def test_included_ids_are_declared_as_entry_points() -> None:
    """pyproject.toml declares exactly the included ids, with the same sources as ENTRIES."""
    from envs.gym._registry import ENTRIES, ENTRY_POINT_GROUP

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert declared == {e.id: e.source for e in ENTRIES}
