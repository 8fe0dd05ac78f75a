"""The README and docs/ work verbatim: every python block and every shell command in them runs here.

Blocks and commands are extracted from README.md and docs/**/*.md (:data:`DOCS`), never copied.
Every fenced block is ``python`` (run), ``bash`` (its commands run) or ``text`` (output shown, not
run). Python blocks run in-process (the env examples as the modules the docs tell the reader to
save them as: ``guess_number``, ``inventory``); shell commands run as written in a subprocess, in a
folder holding those files, except the few that are too slow for CI, which are checked as far as
possible (see ``COMMANDS``):

- ``make train`` / ``make test`` / ``make test-deep`` / ``make setup`` / ``make integration``:
  ``make -n`` shows the recipe (``make test`` is CI itself; ``make integration`` is opt-in and slow),
  and the train entry point parses its command line (``--help``);
- ``python train_guess_number.py learning_rate=3e-4 max_steps=40``: the README's own script with the
  README's keys, one step instead of 40 on the tiny model;
- ``python -m envs.<env>.train`` / ``envs.math.eval`` / ``envs.judge.preference``: ``--help`` (entry
  point and config resolve);
- ``python -m envs.<env>.train env.KEY=...``: the keys parse into the game config; the math command
  as written stops on its missing data file (one line, exit 2, nothing written);
- ``python -m backend.offline my_recipe key=value ...``: as written, with a stand-in ``my_recipe``;
- ``python -m envs.math.eval harness=inspect`` and the ``cookbook`` block: run by their own test
  modules (tests/test_math_inspect.py, tests/test_cookbook_offline.py), which this module checks;
- ``.venv/bin/python bench/training_tokens.py --quick``: as written (every bench's quick mode runs in
  tests/test_benches.py).

Relative links between the pages must resolve.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
"""Every page whose blocks and commands run here."""
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
PYTHON_BLOCKS = {
    "env", "conform", "train", "tool-env", "tool-conform", "tool-script", "gym",
    "textarena", "toolbox", "nim", "protocol-builder", "protocol-scripted", "verifiers",
}  # fmt: skip
"""Every python block of the docs, by its ``<!-- example:NAME -->`` marker; each runs below..."""
PYTHON_BLOCKS_ELSEWHERE = {"cookbook": "tests/test_cookbook_offline.py"}
"""...except these, which the named test module runs (it trains with the cookbook's trainer)."""


def _text() -> str:
    """All pages, one after another."""
    return "\n".join(page.read_text() for page in DOCS)


def _block(marker: str) -> str:
    found = re.findall(rf"<!-- example:{marker} -->\s*```python\n(.*?)```", _text(), re.DOTALL)
    assert len(found) == 1, f"{len(found)} python blocks after <!-- example:{marker} --> (one expected)"
    return found[0]


def _module(name: str, *markers: str) -> Iterator[types.ModuleType]:
    module = types.ModuleType(name)
    sys.modules[name] = module  # so its classes pickle like any user module
    for marker in markers:
        exec(compile(_block(marker), f"<example:{marker}>", "exec"), module.__dict__)
    yield module
    del sys.modules[name]


@pytest.fixture(scope="module")
def example() -> Iterator[types.ModuleType]:
    yield from _module("guess_number", "env")


@pytest.fixture(scope="module")
def inventory() -> Iterator[types.ModuleType]:
    yield from _module("inventory", "tool-env")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the files the README tells the reader to save."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "guess_number.py").write_text(_block("env"))
    (folder / "inventory.py").write_text(_block("tool-env"))
    (folder / "train_guess_number.py").write_text("from guess_number import *\n" + _block("train"))
    return folder


def _run(
    command: str, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = command.split()
    if argv[0] == "python":
        argv[0] = sys.executable
    return subprocess.run(
        argv, cwd=cwd, env={**ENV, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )


# --- python blocks ------------------------------------------------------------------------
def test_every_block_is_python_bash_or_text() -> None:
    for page in DOCS:
        fences = re.findall(r"^```(.*)$", page.read_text(), re.MULTILINE)
        assert len(fences) % 2 == 0, f"{page}: an unclosed code block"
        languages = set(fences[0::2])
        assert languages <= {"python", "bash", "text"}, f"{page}: code blocks in {languages}"


def test_every_python_block_has_a_marker_that_runs_here() -> None:
    text = _text()
    blocks = re.findall(r"```python\n", text)
    markers = re.findall(r"<!-- example:([\w-]+) -->\s*```python\n", text)
    assert len(markers) == len(blocks), "a python block of the docs has no <!-- example:NAME --> marker"
    assert len(markers) == len(set(markers)), "two python blocks share a marker"
    assert set(markers) == PYTHON_BLOCKS | set(PYTHON_BLOCKS_ELSEWHERE)
    for marker, test_file in PYTHON_BLOCKS_ELSEWHERE.items():
        assert f'"example:{marker}"' in (ROOT / test_file).read_text(), f"{test_file} no longer runs {marker}"


def test_example_is_under_55_lines() -> None:
    # 49 lines until its builders took the model and renderer they serve (model-agnostic envs)
    assert len(_block("env").strip().splitlines()) < 55


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
        # "¹" is a digit to str.isdigit() that int() rejects: the example must not crash on it
        for text in ["hmm", "¹", "0", str(group.secret)]:
            result = await env.step(tok.encode(text + "<|im_end|>"), extra={"stop_reason": "stop"})
            out.append((result.reward, result.episode_done))
        return out

    assert anyio.run(play) == [(-0.1, False), (-0.1, False), (0.0, False), (1.0, True)]


def test_conformance_example_passes(example: types.ModuleType) -> None:
    namespace = dict(example.__dict__)
    exec(compile(_block("conform"), "README.md", "exec"), namespace)
    namespace["test_guess_number_conforms"]()


def test_tool_example_conforms_with_tool_turns(inventory: types.ModuleType) -> None:
    namespace = dict(inventory.__dict__)
    exec(compile(_block("tool-conform"), "docs/envs.md", "exec"), namespace)
    namespace["test_inventory_conforms"]()


def test_tool_example_scripted_episode(
    inventory: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace = dict(inventory.__dict__)
    exec(compile(_block("tool-script"), "docs/envs.md", "exec"), namespace)
    assert capsys.readouterr().out.strip() == "[0.0, 1.0]"  # what the README's comment says
    looked_up = [t for t in namespace["group"].trajectories_G if len(t.transitions) == 2]
    assert len(looked_up) == 1 and looked_up[0].transitions[-1].reward == 1.0


def test_gym_block_runs_in_a_fresh_interpreter() -> None:
    """In a fresh interpreter, so that nothing imported ``envs.gym`` before the block does."""
    code = _block("gym") + "\nprint(type(env.unwrapped).__name__, len(obs) > 0)\n"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300
    )
    assert proc.stdout.split() == ["TokenEnv", "True"], proc.stderr[-2000:]


def test_textarena_block_builds_a_group_and_a_source() -> None:
    """docs/interop.md: an EnvGroupBuilder and a seed -> group factory, offline."""
    from tinker_cookbook.rl.types import EnvGroupBuilder

    namespace: dict = {}
    exec(compile(_block("textarena"), "docs/interop.md", "exec"), namespace)
    assert isinstance(namespace["builder"], EnvGroupBuilder)
    assert callable(namespace["source"])


def test_verifiers_block_builds_a_group_and_a_source() -> None:
    namespace: dict = {}
    exec(compile(_block("verifiers"), "docs/interop.md", "exec"), namespace)
    envs = anyio.run(namespace["builder"].make_envs)
    assert len(envs) == 4 and [t["name"] for t in envs[0].tools] == ["add", "multiply"]
    assert namespace["source"](5).index == 5


def test_toolbox_block_answers_a_call() -> None:
    """docs/interop.md: the function becomes a tool spec and its call is answered in the tool role."""
    from tinker_cookbook.renderers import Message, ToolCall

    from envs.tools import Toolbox

    namespace: dict = {}
    exec(compile(_block("toolbox"), "docs/interop.md", "exec"), namespace)
    box = Toolbox([namespace["stock"]])
    assert [spec["name"] for spec in box.specs] == ["stock"]
    call = ToolCall(id="c1", function=ToolCall.FunctionBody(name="stock", arguments='{"item": "pen"}'))
    message: Message = {"role": "assistant", "content": "", "tool_calls": [call]}
    reply = anyio.run(box.answer, message)
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in reply.messages] == [("tool", "c1", "3")]


def test_nim_block_plays() -> None:
    """docs/multi-seat.md: taking the last stones wins; otherwise the other seat is told and moves."""
    namespace: dict = {}
    exec(compile(_block("nim"), "docs/multi-seat.md", "exec"), namespace)
    game = namespace["Nim"](stones=3)
    move = anyio.run(game.on_move, 0, {"role": "assistant", "content": "2"})
    assert move.next_seat == 1 and not move.done and "1 left" in move.messages[1][0]["content"]
    move = anyio.run(game.on_move, 1, {"role": "assistant", "content": "1"})
    assert move.done and move.rewards == {1: 1.0, 0: -1.0}


def test_training_protocol_blocks_define_builders() -> None:
    """docs/training-protocol.md: the names the blocks import exist; the scripted builder
    implements ``training.SupportsScriptedEpisodes``."""
    from tinker_cookbook.rl.types import RLDatasetBuilder

    import training

    namespace: dict = {"__name__": "protocol"}
    exec(compile(_block("protocol-builder"), "docs/training-protocol.md", "exec"), namespace)
    assert issubclass(namespace["MyDatasetBuilder"], RLDatasetBuilder)
    namespace = {"__name__": "protocol"}
    exec(compile(_block("protocol-scripted"), "docs/training-protocol.md", "exec"), namespace)
    assert "scripted_episodes" in vars(namespace["MyDatasetBuilder"])
    assert hasattr(training, "SupportsScriptedEpisodes") and hasattr(training, "ScriptedEpisode")


# --- shell commands -----------------------------------------------------------------------
def _commands() -> set[str]:
    """Every shell command of the docs: lines of ``bash`` blocks and inline ``python …`` /
    ``make …`` / ``.venv/bin/python …`` spans."""
    text = _text()
    found: set[str] = set()
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        for line in block.splitlines():
            line = line.split("#")[0].strip()
            if line:
                found.add(line)
    for span in re.findall(r"`([^`\n]+)`", text):
        if re.match(r"(python|make|\.venv/bin/python) ", span):
            found.add(span.strip())
    return found


def _make_dry_run(target: str, expected: str) -> Callable[[Path], None]:
    def check(cwd: Path) -> None:
        proc = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and expected in proc.stdout, proc.stdout + proc.stderr

    return check


def _help(module: str) -> Callable[[Path], None]:
    def check(cwd: Path) -> None:
        proc = _run(f"python -m {module} --help", ROOT, timeout=120)
        assert proc.returncode == 0 and "key=value" in proc.stdout, proc.stderr[-2000:]

    return check


def _check_guess_number(cwd: Path) -> None:
    proc = _run("python -m envs.check guess_number:GuessNumberDatasetBuilder", cwd)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "guess_number:GuessNumberDatasetBuilder: OK" in proc.stdout


def _check_inventory(cwd: Path) -> None:
    """The goal of the tool section: tool calls drawn > 0 and the extension check run (not skipped)
    over multi-turn episodes, as the command prints it (one run; a wide terminal keeps each row of
    the table on one line)."""
    proc = _run("python -m envs.check inventory:InventoryGroup", cwd, env={"COLUMNS": "240"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert summary.startswith("inventory:InventoryGroup: OK;"), summary
    counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", summary)}
    assert counts["tool_calls"] > 0 and counts["malformed_tool_calls"] > 0, summary
    assert counts["extension_turns"] > 0, summary
    extension = re.search(
        r"extension_property\s*│\s*pass\s*│ held on (\d+) turns .*\((\d+) after tool calls\)", proc.stdout
    )
    assert extension and int(extension.group(2)) > 0, proc.stdout[-3000:]
    longest = re.search(r"episode_budget\s*│\s*pass\s*│ longest episode (\d+) steps", proc.stdout)
    assert longest and int(longest.group(1)) >= 2, proc.stdout[-3000:]  # multi-turn: a tool call, then more


def _check_train_script(cwd: Path) -> None:
    """The README's keys, then one step (not 40) on the tiny model, offline."""
    from backend.model import TINY

    command = (
        "python train_guess_number.py learning_rate=3e-4 max_steps=40".replace("max_steps=40", "max_steps=1")
        + f" backend=local model_name={TINY} eval_every=0 progress=False log_path={cwd / 'run'}"
    )
    proc = _run(command, cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (cwd / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0]
    assert (cwd / "run" / "config.json").is_file()


def _section(page: Path, title: str) -> str:
    text = page.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    assert match, f"{page.name} has no '## {title}' section"
    return match.group(1)


def test_scale_out_commands_exist() -> None:
    """The "Scale out" block's commands are Makefile targets whose recipes run files that exist
    (``make integration`` itself is opt-in and slow: its script's ``--help`` and the set-up
    script's syntax are checked in tests/test_integration_bridge.py)."""
    blocks = re.findall(r"```bash\n(.*?)```", _section(ROOT / "docs" / "backend.md", "Scale out"), re.DOTALL)
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


def _check_offline_module(cwd: Path) -> None:
    """The README's form with a stand-in ``my_recipe`` (written here) that reports what it ran
    on: the module is ``__main__``, gets its own arguments and builds the local service client."""
    (cwd / "my_recipe.py").write_text(
        "import sys\n"
        "import tinker\n"
        "from backend import LocalServiceClient\n"
        "if __name__ == '__main__':\n"
        "    print('recipe', sys.argv[1:], isinstance(tinker.ServiceClient(), LocalServiceClient))\n"
    )
    command = "python -m backend.offline my_recipe key=value ...".replace(" ...", "")
    proc = _run(command, cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "recipe ['key=value'] True" in proc.stdout, proc.stdout[-2000:]


def _check_twenty_questions_keys(cwd: Path) -> None:
    """The README's nested game keys reach the game config (parsed as the CLI parses them; the
    run itself is ``make train``'s job)."""
    from envs.twenty_questions.train import TwentyQuestionsTrainConfig
    from training import parse_config

    command = "python -m envs.twenty_questions.train env.candidates=8 env.max_questions=6"
    config = parse_config(TwentyQuestionsTrainConfig, command.split()[3:])
    assert (config.env.candidates, config.env.max_questions) == (8, 6)


def _check_math_keys(cwd: Path) -> None:
    """The README's keys parse, and the command as written stops on the missing data file in one
    line, exit 2, nothing written (the README's next sentence); with data it would train."""
    from envs.math.train import MathTrainConfig
    from training import parse_config

    command = (
        "python -m envs.math.train env.max_attempts=3 data.source=gsm8k data.path=data/gsm8k_{split}.jsonl"
    )
    config = parse_config(MathTrainConfig, command.split()[3:])
    assert (config.env.max_attempts, config.data.source) == (3, "gsm8k")
    folder = cwd / "math_cli"
    folder.mkdir(exist_ok=True)
    proc = _run(command, folder, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "envs.math.train: error: data/gsm8k_train.jsonl: no such file"
    ]
    assert list(folder.iterdir()) == []


def _elsewhere(test_file: str, needle: str) -> Callable[[Path], None]:
    """A command run by another test module (too slow to run twice): that module must run it."""

    def check(cwd: Path) -> None:
        assert needle in (ROOT / test_file).read_text(), f"{test_file} no longer runs {needle!r}"

    return check


def _check_bench_quick(cwd: Path) -> None:
    """As written (seconds); tests/test_benches.py runs every bench's quick mode."""
    command = ".venv/bin/python bench/training_tokens.py --quick"
    proc = _run(command.replace(".venv/bin/python", "python"), ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1].startswith("ratio_merged_vs_per_turn="), proc.stdout[-2000:]


def _check_make_train_args(cwd: Path) -> None:
    """``ARGS`` reaches the train command."""
    proc = subprocess.run(
        ["make", "-n", "train", "ARGS=seed=1"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "python -m envs.twenty_questions.train seed=1" in proc.stdout, proc.stdout


def _check_every_env_trains(cwd: Path) -> None:
    """``python -m envs.<name>.train``: every env folder with a ``train.py`` has its ``--help`` checked."""
    folders = {p.parent.name for p in (ROOT / "envs").glob("*/train.py")}
    assert folders and all(f"python -m envs.{name}.train" in COMMANDS for name in folders), folders


def _check_thinking_keys(cwd: Path) -> None:
    """The thinking command's keys parse into the math config (the run is the compaction bench's job)."""
    from envs.math.train import MathTrainConfig
    from training import parse_config

    command = (
        "python -m envs.math.train env.thinking=true env.problems_per_episode=6 env.fewshot=false "
        "compaction_period=3 warm_start.episodes=32 warm_start.steps=8 max_tokens=80"
    )
    config = parse_config(MathTrainConfig, command.split()[3:])
    assert (config.env.thinking, config.env.problems_per_episode, config.compaction_period) == (True, 6, 3)


def _usage(module: str) -> Callable[[Path], None]:
    """``--help`` of a command with its own options (argparse): exit 0, its usage line."""

    def check(cwd: Path) -> None:
        proc = _run(f"python -m {module} --help", ROOT, timeout=120)
        assert proc.returncode == 0 and f"python -m {module}" in proc.stdout, proc.stderr[-2000:]

    return check


def _as_written_help(command: str) -> Callable[[Path], None]:
    """A ``--help`` command as written: exit 0 and a usage text."""

    def check(cwd: Path) -> None:
        proc = _run(command, ROOT, timeout=300)
        assert proc.returncode == 0 and "usage" in proc.stdout.lower(), proc.stderr[-2000:]

    return check


def _env_command_config(config_cls: type, command: str) -> Any:
    """``python -m envs.<cli> <env> key=value ...`` parsed into ``config_cls`` as the CLI parses it
    (the env first, bare), every key checked to have landed."""
    from training import parse_config

    args = command.split()[3:]
    config = parse_config(config_cls, [f"env={args[0]}", *args[1:]])
    assert config.env == args[0]
    for key, value in (a.split("=", 1) for a in args[1:]):
        assert str(getattr(config, key)) == value, (key, getattr(config, key))
    return config


def _eval_keys(command: str) -> Callable[[Path], None]:
    """The eval command's env and keys parse into its config as the CLI parses them (the run
    itself, on the tiny model and a local endpoint, is tests/test_eval.py's job)."""

    def check(cwd: Path) -> None:
        from envs.eval import EnvEvalConfig

        _env_command_config(EnvEvalConfig, command)

    return check


def _train_keys(command: str, resolve: bool = True) -> Callable[[Path], None]:
    """``envs.train``'s env and keys parse into its config as the CLI parses them, and (``resolve``)
    the id resolves here (the one-step runs by id are tests/test_env_train.py's job)."""

    def check(cwd: Path) -> None:
        from envs.train import EnvTrainConfig

        config = _env_command_config(EnvTrainConfig, command)
        if resolve:
            config.check_data()

    return check


def _check_env_list(cwd: Path) -> None:
    proc = _run("python -m envs.list", cwd, timeout=120)
    assert proc.returncode == 0 and "turngym/Math-v0" in proc.stdout, proc.stderr[-2000:]


def _check_env_list_json(cwd: Path) -> None:
    proc = _run("python -m envs.list --json", cwd, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert any("turngym/Math-v0" in json.dumps(row) for row in rows), proc.stdout[-2000:]


def _play(command: str, moves: str = "") -> Callable[[Path], None]:
    """An interactive game as written, with ``moves`` as its input: it shows the env and ends
    cleanly when the input does (the games themselves: tests/test_play.py, tests/test_seats_play.py)."""

    def check(cwd: Path) -> None:
        argv = [sys.executable, *command.split()[1:]]
        proc = subprocess.run(
            argv, cwd=cwd, env=ENV, input=moves, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip(), proc.stderr[-2000:]

    return check


def _check_tictactoe_keys(cwd: Path) -> None:
    """The opponents mix parses into the tic-tac-toe config (the run: bench/self_play.py --quick)."""
    from envs.tictactoe.train import TicTacToeTrainConfig
    from training import parse_config

    command = "python -m envs.tictactoe.train train_opponents=self,random"
    config = parse_config(TicTacToeTrainConfig, command.split()[3:])
    assert "random" in str(config.train_opponents), config.train_opponents


def _check_model_opponent_keys(cwd: Path) -> None:
    """The model opponents parse and pass the early check (a run: tests/test_two_seat_model_opponents.py)."""
    from envs.nim.train import NimTrainConfig
    from training import parse_config

    command = "python -m envs.nim.train train_opponents=self,base,random eval_opponents=random,optimal,base"
    config = parse_config(NimTrainConfig, command.split()[3:])
    config.check_data()
    assert config.train_opponents == "self,base,random" and config.eval_opponents.endswith(",base")


def _check_inspect_help(cwd: Path) -> None:
    """As written: the cookbook recipe's chz help, through the offline launcher (chz's ``--help``
    exits 1 after printing it, so the text is what is checked)."""
    command = "python -m backend.offline tinker_cookbook.eval.run_inspect_evals --help"
    proc = _run(command, ROOT, timeout=300)
    out = proc.stdout + proc.stderr
    assert "Entry point: Config" in out and re.search(r"^\s+tasks\s", out, re.MULTILINE), out[-2000:]


def _check_self_play_quick(cwd: Path) -> None:
    """As written, in a scratch folder (seconds on the tiny model): the pipeline ends with its
    result line and no deadlocked game."""
    proc = _run(f"python {ROOT / 'bench' / 'self_play.py'} --quick", cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "deadlocks=0" in proc.stdout.strip().splitlines()[-1], proc.stdout[-2000:]


def _check_textarena_train_keys(cwd: Path) -> None:
    """The keys parse into the recipe's config (a run: tests/test_interop_textarena_train.py)."""
    from envs.interop.textarena_train import TextArenaTrainConfig
    from training import parse_config

    command = next(c for c in COMMANDS if c.startswith("python -m envs.interop.textarena_train log_path="))
    config = parse_config(TextArenaTrainConfig, command.split()[3:])
    assert config.log_path == "/tmp/ta_run2" and config.warm_start.steps == 4 and config.eval_games == 16


COMMANDS: dict[str, Callable[[Path], None]] = {
    "make train": _make_dry_run("train", "python -m envs.twenty_questions.train"),
    'make train ARGS="seed=1"': _check_make_train_args,
    "make test": _make_dry_run("test", "scripts/test.sh"),
    "make test-deep": _make_dry_run("test-deep", "scripts/test.sh"),
    "make setup": _make_dry_run("setup", "scripts/setup.sh"),
    "make integration": _make_dry_run("integration", "scripts/integration/tinker_server.py"),
    "python -m envs.check guess_number:GuessNumberDatasetBuilder": _check_guess_number,
    "python -m envs.check inventory:InventoryGroup": _check_inventory,
    "python train_guess_number.py learning_rate=3e-4 max_steps=40": _check_train_script,
    "python -m envs.twenty_questions.train": _help("envs.twenty_questions.train"),
    "python -m envs.<name>.train": _check_every_env_trains,
    "python -m envs.twenty_questions.train env.candidates=8 env.max_questions=6": _check_twenty_questions_keys,
    "python -m envs.math.train env.max_attempts=3 data.source=gsm8k data.path=data/gsm8k_{split}.jsonl": _check_math_keys,
    "python -m envs.math.train": _help("envs.math.train"),
    "python -m envs.math.train env.thinking=true env.problems_per_episode=6 env.fewshot=false "
    "compaction_period=3 warm_start.episodes=32 warm_start.steps=8 max_tokens=80": _check_thinking_keys,
    "python -m envs.math.eval": _help("envs.math.eval"),
    "python -m envs.code.train": _help("envs.code.train"),
    "python -m envs.judge.train": _help("envs.judge.train"),
    "python -m envs.judge.preference": _help("envs.judge.preference"),
    "python -m envs.math.eval harness=inspect": _elsewhere("tests/test_math_inspect.py", '"harness=inspect"'),
    "python -m backend.offline my_recipe key=value ...": _check_offline_module,
    ".venv/bin/python bench/training_tokens.py --quick": _check_bench_quick,
    # docs/eval.md
    "python -m envs.list": _check_env_list,
    "python -m envs.list --json": _check_env_list_json,
    "python -m envs.eval": _help("envs.eval"),
    "python -m envs.eval --help": _help("envs.eval"),
    "python -m envs.eval <id \\| module:attr> [key=value ...]": _help("envs.eval"),
    "python -m envs.eval turngym/Math-v0 n=64": _eval_keys("python -m envs.eval turngym/Math-v0 n=64"),
    "python -m envs.eval turngym/TwentyQuestions-v0 n=16 repeats=4 temperature=0.7": _eval_keys(
        "python -m envs.eval turngym/TwentyQuestions-v0 n=16 repeats=4 temperature=0.7"
    ),
    "python -m envs.eval my_pkg:EchoBuilder backend=tinker model_name=Qwen/Qwen3-8B": _eval_keys(
        "python -m envs.eval my_pkg:EchoBuilder backend=tinker model_name=Qwen/Qwen3-8B"
    ),
    "python -m envs.eval turngym/Math-v0 base_url=http://127.0.0.1:8000/v1 model_name=served-name": _eval_keys(
        "python -m envs.eval turngym/Math-v0 base_url=http://127.0.0.1:8000/v1 model_name=served-name"
    ),
    "python tests/openai_server.py --port 8000": _elsewhere(
        "tests/test_eval.py", "from tests.openai_server import"
    ),
    "python -m envs.viewer <folder>": _usage("envs.viewer"),
    "python -m envs.viewer <run>": _usage("envs.viewer"),
    "python -m envs.play <id>": _usage("envs.play"),
    "python -m envs.serve <id>": _elsewhere("tests/test_interop_openenv.py", 'SERVED = ["-m", "envs.serve"'),
    "python -m training.sweep": _usage("training.sweep"),
    "python -m envs.viewer <run folder>": _usage("envs.viewer"),
    "make test-browser": _make_dry_run("test-browser", "tests/test_viewer_browser.py"),
    "python -m envs.play <id \\| module:attr>": _usage("envs.play"),
    "python -m envs.play turngym/TwentyQuestions-v0": _play("python -m envs.play turngym/TwentyQuestions-v0"),
    # docs/multi-seat.md, docs/interop.md
    "python -m envs.check": _usage("envs.check"),
    "python -m envs.check textarena:GuessTheNumber-v0": _elsewhere(
        "tests/test_interop_textarena.py", 'OFFLINE_GAMES = ["GuessTheNumber-v0"'
    ),
    "python -m envs.check textarena:TicTacToe-v0": _elsewhere(
        "tests/test_interop_textarena_seats.py", 'load_target(f"textarena:{game}")'
    ),
    "python bench/interop.py --textarena multi --markdown-multi table.md": _elsewhere(
        "tests/test_benches.py", '"interop": (["--quick"]'
    ),
    "python -m envs.interop.textarena_train game=TicTacToe-v0": _elsewhere(
        "tests/test_interop_textarena_seats.py", '"game=TicTacToe-v0"'
    ),
    "python -m envs.interop.textarena_train": _help("envs.interop.textarena_train"),
    "python -m envs.interop.textarena_train log_path=/tmp/ta_run2 progress=False warm_start.episodes=32 "
    "warm_start.steps=4 warm_start.batch_size=8 max_steps=2 eval_every=2 batch_size=2 group_size=4 eval_games=16": (
        _check_textarena_train_keys
    ),
    "python -m envs.interop.openenv_demo --port 8000": _elsewhere(
        "tests/test_interop_openenv.py", 'DEMO = ["-m", "envs.interop.openenv_demo"]'
    ),
    "python -m envs.check openenv:http://127.0.0.1:8000": _elsewhere(
        "tests/test_interop_openenv.py", 'load_target(f"openenv:{server}")'
    ),
    "python -m envs.serve textarena:GuessTheNumber-v0 --port 8000": _elsewhere(
        "tests/test_interop_openenv.py", 'SERVED = ["-m", "envs.serve", "textarena:GuessTheNumber-v0"]'
    ),
    # docs/training.md, docs/interop.md: envs.train
    "python -m envs.train <id> [key=value ...]": _help("envs.train"),
    "python -m envs.train textarena:GuessTheNumber-v0 max_steps=8": _train_keys(
        "python -m envs.train textarena:GuessTheNumber-v0 max_steps=8"
    ),
    "python -m envs.train verifiers:arith-retry group_size=4 max_tokens=32": _train_keys(
        "python -m envs.train verifiers:arith-retry group_size=4 max_tokens=32"
    ),
    "python -m envs.train openenv:http://127.0.0.1:8000 max_steps=8": _train_keys(
        "python -m envs.train openenv:http://127.0.0.1:8000 max_steps=8",
        resolve=False,  # no server at 8000 here
    ),
    "python -m envs.train turngym/TwentyQuestions-v0 max_steps=8 group_size=4": _train_keys(
        "python -m envs.train turngym/TwentyQuestions-v0 max_steps=8 group_size=4"
    ),
    "python -m envs.train my_pkg.envs:EchoBuilder backend=tinker model_name=Qwen/Qwen3-8B": _train_keys(
        "python -m envs.train my_pkg.envs:EchoBuilder backend=tinker model_name=Qwen/Qwen3-8B", resolve=False
    ),
    "python -m envs.check verifiers:arith-retry": _elsewhere(
        "tests/test_interop_verifiers.py", 'load_target("verifiers:arith-retry")'
    ),
    "python -m envs.tictactoe.train": _help("envs.tictactoe.train"),
    "python -m envs.tictactoe.train train_opponents=self,random": _check_tictactoe_keys,
    "python bench/self_play.py --quick": _check_self_play_quick,
    "python -m envs.nim.train": _help("envs.nim.train"),
    "python -m envs.nim.train train_opponents=self,base,random eval_opponents=random,optimal,base": (
        _check_model_opponent_keys
    ),
    "printf '1\\n1\\n1\\n1\\n' | python -m envs.play nim --opponent optimal": _play(
        "python -m envs.play nim --opponent optimal", "1\n1\n1\n1\n"
    ),
    "python -m envs.play tictactoe": _play("python -m envs.play tictactoe"),
    "python -m envs.play tictactoe --seat 1 --opponent optimal": _play(
        "python -m envs.play tictactoe --seat 1 --opponent optimal"
    ),
    "printf '5\\n1\\n9\\n' | python -m envs.play tictactoe --opponent random": _play(
        "python -m envs.play tictactoe --opponent random", "5\n1\n9\n"
    ),
    # docs/code_sandbox.md
    "python bench/code_sandbox.py": _elsewhere("tests/test_benches.py", '"code_sandbox"'),
    # docs/tinker-docs-map.md
    "python -m backend.offline": _usage("backend.offline"),
    "python -m backend.offline --help": _as_written_help("python -m backend.offline --help"),
    "python -m envs.math.train --help": _as_written_help("python -m envs.math.train --help"),
    "python -m envs.judge.train --help": _as_written_help("python -m envs.judge.train --help"),
    "python -m envs.judge.preference --help": _as_written_help("python -m envs.judge.preference --help"),
    "python -m envs.judge.preference dataset=<comparisons.jsonl>": _elsewhere(
        "tests/test_judge_preference.py", "dataset={COMPARISONS_FILE}"
    ),
    "python -m envs.judge.rlhf": _help("envs.judge.rlhf"),
    "python -m envs.judge.rlhf --help": _as_written_help("python -m envs.judge.rlhf --help"),
    "python -m envs.distill": _help("envs.distill"),
    "python -m envs.distill --help": _as_written_help("python -m envs.distill --help"),
    "python -m training.sweep --help": _as_written_help("python -m training.sweep --help"),
    "python -m training.sweep <train module> learning_rate=a,b,c seed=0,1": _elsewhere(
        "tests/test_sweep.py", '"learning_rate=1e-4,1e-2"'
    ),
    "python -m backend.offline tinker_cookbook.eval.run_inspect_evals --help": _check_inspect_help,
    "python -m backend.offline tinker_cookbook.eval.run_inspect_evals ...": _elsewhere(
        "tests/test_workflow_evals.py", '"tinker_cookbook.eval.run_inspect_evals"'
    ),
    "python -m backend.offline tinker_cookbook.eval.run_inspect_evals tasks=envs/evals/inspect_tasks.py@qa "
    "model_name=HuggingFaceTB/SmolLM2-135M-Instruct renderer_name=qwen3_instruct max_tokens=16 temperature=0": (
        _elsewhere("tests/test_workflow_evals.py", "inspect_tasks.py'}@qa")
    ),
}
"""How each command of the docs is checked (verbatim unless its checker says otherwise)."""


def test_every_command_in_the_docs_has_a_check() -> None:
    found = _commands()
    assert found - set(COMMANDS) == set(), "commands of the docs with no check in tests/test_readme.py"
    assert set(COMMANDS) - found == set(), "checks of commands the docs no longer have"


def test_relative_links_resolve() -> None:
    for page in DOCS:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_readme_command(command: str, workdir: Path) -> None:
    COMMANDS[command](workdir)
