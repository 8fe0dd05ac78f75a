"""Every included env, and the README's example, builds and plays for a model that is not bundled.

The model's tokenizer is served offline from a local Hugging Face cache folder this module
prepares (SmolLM2's tokenizer files under a made-up name, in the hub-cache layout), the way a
user's ``~/.cache/huggingface`` serves a model they downloaded once. Nothing here is registered
for that name: it resolves through tinker-cookbook's ``tokenizer_utils`` like any hub model, and
its renderer is the one the cookbook would recommend (for a model it does not list: the renderer
that reproduces the model's own chat template).
"""

from __future__ import annotations

import math
import pickle
import re
import shutil
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import huggingface_hub.constants
import pytest
from tinker_cookbook import tokenizer_utils
from tinker_cookbook.rl.rollouts import do_group_rollout
from tinker_cookbook.rl.types import EnvGroupBuilder

from backend.model import converted_dir
from completers import ScriptedTokenCompleter

MODEL = "acme-research/ChatML-Tiny-Instruct"
"""Neither bundled nor listed by the cookbook's ``model_info``."""
REVISION = "0123456789abcdef0123456789abcdef01234567"
REPO = Path(__file__).resolve().parents[1]
ENVS = REPO / "envs"


@pytest.fixture(scope="module")
def hf_hub_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hub cache holding ``MODEL``'s tokenizer (and config) files, nothing else."""
    hub = tmp_path_factory.mktemp("hf_home") / "hub"
    repo = hub / f"models--{MODEL.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    source = converted_dir()
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
        "config.json",
    ):
        if (source / name).is_file():
            shutil.copy(source / name, snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return hub


@pytest.fixture(autouse=True)
def offline_cache(hf_hub_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(hf_hub_cache.parent))
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_hub_cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hf_hub_cache))  # read at call time
    assert not tokenizer_utils.is_tokenizer_registered(MODEL)


def _readme_example() -> types.ModuleType:
    text = (REPO / "README.md").read_text()
    match = re.search(r"<!-- example:env -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, "README.md has no env example"
    module = types.ModuleType("readme_example_any_model")
    sys.modules[module.__name__] = module  # its classes pickle like a user module's
    exec(compile(match.group(1), "README.md", "exec"), module.__dict__)
    return module


def _twenty_questions() -> Any:
    from envs.twenty_questions import TwentyQuestionsDatasetBuilder

    return TwentyQuestionsDatasetBuilder(batch_size=1, group_size=2, model_name_for_tokenizer=MODEL)


def _math(preset: str) -> Callable[[], Any]:
    def build() -> Any:
        from envs.math import MathDatasetBuilder, MathEnvConfig

        return MathDatasetBuilder(
            batch_size=1,
            group_size=2,
            n_train=2,
            n_test=0,
            env=MathEnvConfig.preset(preset),
            model_name_for_tokenizer=MODEL,
        )

    return build


def _code() -> Any:
    from envs.code import CodeDatasetBuilder

    return CodeDatasetBuilder(batch_size=1, group_size=2, n_train=2, n_test=0, model_name_for_tokenizer=MODEL)


def _judge(kind: str) -> Callable[[], Any]:
    def build() -> Any:
        import envs.judge.testing  # noqa: F401  (registers the scripted: judge specs)
        from envs.judge import JudgeConfig, JudgeDatasetBuilder, JudgeEnvConfig, JudgeEnvKind

        return JudgeDatasetBuilder(
            env=JudgeEnvConfig(kind=JudgeEnvKind(kind)),
            judge=JudgeConfig("scripted:score:7"),
            batch_size=1,
            group_size=2,
            model_name_for_tokenizer=MODEL,
        )

    return build


def _tictactoe() -> Any:
    from envs.tictactoe.builders import TicTacToeDatasetBuilder

    return TicTacToeDatasetBuilder(batch_size=1, group_size=2, num_batches=1, model_name_for_tokenizer=MODEL)


def _nim() -> Any:
    from envs.nim.builders import NimDatasetBuilder

    return NimDatasetBuilder(batch_size=1, group_size=2, num_batches=1, model_name_for_tokenizer=MODEL)


def _readme() -> Any:
    return _readme_example().GuessNumberDatasetBuilder(model_name_for_tokenizer=MODEL)


BUILDERS: dict[str, Callable[[], Any]] = {
    "twenty_questions": _twenty_questions,
    "math:single": _math("single"),
    "math:feedback": _math("feedback"),
    "math:calculator": _math("calculator"),
    "code": _code,
    "judge:rubric": _judge("rubric"),
    "judge:pairwise": _judge("pairwise"),
    "README:example": _readme,
    "tictactoe": _tictactoe,
    "nim": _nim,
}
"""``<env package>[:<variant>]`` -> a dataset builder for :data:`MODEL`."""


def test_every_included_env_is_covered() -> None:
    included = {p.parent.name for p in ENVS.glob("*/train.py")}
    covered = {name.split(":")[0] for name in BUILDERS}
    assert included <= covered, f"add a builder for {sorted(included - covered)} to BUILDERS"


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_env_builds_and_plays_for_a_model_that_is_not_bundled(name: str) -> None:
    from renderers_ext import load_renderer

    renderer = load_renderer(None, MODEL)
    assert renderer._renderer_name == "qwen3_instruct"  # matches the model's ChatML template
    tokenizer = renderer.tokenizer
    assert tokenizer.name_or_path == MODEL  # from the cache folder, not the embedded model's loader

    async def play() -> tuple[EnvGroupBuilder, Any, list[Any]]:
        train, _ = await BUILDERS[name]()()
        builder = pickle.loads(pickle.dumps(train.get_batch(0)[0]))  # builders ship by pickle
        envs = await builder.make_envs()
        stop = renderer.get_stop_sequences()[0]
        assert isinstance(stop, int)  # ChatML's end-of-turn token
        policy = ScriptedTokenCompleter(["42"], tokenizer, stop_token=stop, cycle=True)
        group = await do_group_rollout(builder, policy)
        return builder, group, list(envs)

    builder, group, envs = anyio.run(play)
    if name in ("tictactoe", "nim"):  # a seated group (its games' training seats, hosted): its renderer's
        assert builder.renderer._model_name == MODEL  # type: ignore[attr-defined]
    else:
        assert builder.model_name_for_tokenizer == MODEL  # type: ignore[attr-defined]
    for env in envs:
        assert env.renderer.tokenizer is tokenizer and env.renderer._model_name == MODEL
    assert len(group.trajectories_G) == len(envs) >= 2
    for trajectory in group.trajectories_G:
        assert trajectory.transitions and trajectory.transitions[-1].episode_done
        first = trajectory.transitions[0].ob.to_ints()
        assert str(tokenizer.decode(first)).startswith("<|im_start|>")  # rendered by the model's renderer
    assert all(math.isfinite(r) for r in group.get_total_rewards())


OTHER_VOCAB = "acme-research/Other-Vocab-Instruct"
"""A model whose tokenizer is SmolLM2's plus one added token: not the embedded policy's."""


@pytest.fixture(scope="module")
def other_vocab(hf_hub_cache: Path) -> str:
    from transformers import PreTrainedTokenizerFast

    repo = hf_hub_cache / f"models--{OTHER_VOCAB.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(converted_dir()))
    tokenizer.add_tokens(["<|acme_extra|>"])
    tokenizer.save_pretrained(str(snapshot))
    shutil.copy(converted_dir() / "config.json", snapshot / "config.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return OTHER_VOCAB


def test_the_loop_refuses_an_env_whose_tokenizer_is_not_the_policys(
    other_vocab: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import chz

    import training
    from backend.model import TINY
    from envs.twenty_questions.train import TwentyQuestionsTrainConfig

    @chz.chz
    class Mismatched(TwentyQuestionsTrainConfig):
        def dataset_builder(self) -> Any:  # an env built for another model than the policy's
            return chz.replace(super().dataset_builder(), model_name_for_tokenizer=other_vocab)

    args = [f"model_name={TINY}", "backend=local", f"log_path={tmp_path}", "max_steps=1", "progress=False"]
    assert training.run_cli(Mismatched, args, prog="mismatch") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mismatch: error: the env's tokenizer"), err
    assert OTHER_VOCAB in err[0] and "is not the policy's" in err[0]
    assert (
        not (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "eval.jsonl").exists()
    )  # nothing sampled


def test_recommended_renderer_is_the_cookbooks_else_the_one_matching_the_chat_template(
    hf_hub_cache: Path,
) -> None:
    from backend.model import SMOLLM2
    from renderers_ext import UnknownRendererError, recommended_renderer_name

    assert recommended_renderer_name("Qwen/Qwen3-4B-Instruct-2507") == "qwen3_instruct"  # model_info
    assert recommended_renderer_name("meta-llama/Llama-3.1-8B-Instruct") == "llama3"
    assert recommended_renderer_name(SMOLLM2) == "qwen3_instruct"  # unlisted: its ChatML template
    assert recommended_renderer_name(MODEL) == "qwen3_instruct"
    repo = hf_hub_cache / "models--acme-research--No-Template"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    for name in ("tokenizer.json", "config.json"):
        shutil.copy(converted_dir() / name, snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    with pytest.raises(
        UnknownRendererError, match=r"no renderer known for model 'acme-research/No-Template'.*renderer_name="
    ):
        recommended_renderer_name("acme-research/No-Template")


_FRESH_PROCESS = """
import pickle, sys
import anyio
from renderers_ext import TokenizerNotFoundError

builder, renderer_blob = pickle.loads(sys.stdin.buffer.read())
try:
    anyio.run(builder.make_envs)
except TokenizerNotFoundError as exc:
    print("unregistered:", str(exc).splitlines()[0][:60])
from backend import register_tokenizers

register_tokenizers()  # what a rollout worker runs first (e.g. its ProcessPoolExecutor initializer)
env = anyio.run(builder.make_envs)[0]
ob, _ = anyio.run(env.initial_observation)
renderer = pickle.loads(renderer_blob)
print("played:", type(env).__name__, ob.length > 0, type(renderer).__name__)
"""


def test_builders_and_renderers_unpickle_in_a_fresh_process(tmp_path: Path) -> None:
    import os
    import subprocess

    from backend.model import SMOLLM2
    from envs.twenty_questions import KBAnswerer, TwentyQuestionsGroupBuilder
    from renderers_ext import QWEN3_PRESERVE_THINKING, load_renderer

    builder = TwentyQuestionsGroupBuilder(word="dog", group_size=1, answerer=KBAnswerer())
    blob = pickle.dumps((builder, pickle.dumps(load_renderer(QWEN3_PRESERVE_THINKING, SMOLLM2))))
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS],
        input=blob,
        cwd=REPO,
        env={
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(tmp_path),  # an empty cache: SmolLM2 resolves only once registered
            "HF_HUB_CACHE": str(tmp_path / "hub"),
            "PYTHONPATH": str(REPO),
        },
        capture_output=True,
        timeout=300,
    )
    out = proc.stdout.decode().strip().splitlines()
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert out[0].startswith("unregistered: cannot load the tokenizer of 'HuggingFaceTB/SmolLM2"), out
    assert out[1] == "played: TwentyQuestionsEnv True _Qwen3PreserveThinkingRenderer", out
