"""The cookbook's own entry points, unchanged, on the embedded backend (``backend.offline``; TINY model).

``rl.train.main`` on our Twenty Questions builder, ``supervised.train.main`` on a chat JSONL and
``preference.train_dpo.main`` (``forward_backward_custom``) from the SL checkpoint, which also
goes through the local REST client (the cookbook checks the checkpoint's renderer there).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import types as pytypes
from pathlib import Path

import pytest
import tinker

from backend import TINY, LocalServiceClient, UnsupportedCallError
from backend.offline import OFFLINE_ENV, main, use_local_backend

RENDERER = "qwen3_instruct"


def readme_block(marker: str) -> str:
    """The python block after ``<!-- marker -->`` in the README or a docs/ page (docs/backend.md)."""
    root = Path(__file__).resolve().parents[1]
    text = "\n".join(p.read_text() for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))])
    match = re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, f"neither README.md nor docs/ has a python block after <!-- {marker} -->"
    return match.group(1)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_block_replaces_and_restores_everything() -> None:
    from tinker_cookbook import tokenizer_utils

    original = tinker.ServiceClient
    user_module = pytypes.ModuleType("turngym_test_user_module")
    user_module.ServiceClient = original  # as after `from tinker import ServiceClient`
    sys.modules[user_module.__name__] = user_module
    env_before = {k: os.environ.get(k) for k in OFFLINE_ENV}
    os.environ.pop("TRANSFORMERS_OFFLINE", None)
    registered_before = tokenizer_utils.is_tokenizer_registered(TINY)
    if registered_before:
        tokenizer_utils.unregister_tokenizer(TINY)
    try:
        with pytest.raises(RuntimeError, match="boom"), use_local_backend() as stand_in:
            assert tinker.ServiceClient is stand_in and user_module.ServiceClient is stand_in
            assert issubclass(stand_in, LocalServiceClient)
            assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
            assert tokenizer_utils.is_tokenizer_registered(TINY)
            with use_local_backend(compute_dtype="bfloat16") as inner:  # nests
                assert tinker.ServiceClient is inner
                assert tinker.ServiceClient().compute_dtype == "bfloat16"
            assert tinker.ServiceClient is stand_in
            raise RuntimeError("boom")
        assert tinker.ServiceClient is original and user_module.ServiceClient is original
        assert "TRANSFORMERS_OFFLINE" not in os.environ
        assert not tokenizer_utils.is_tokenizer_registered(TINY)
    finally:
        del sys.modules[user_module.__name__]
        for k, v in env_before.items():
            if v is not None:
                os.environ[k] = v
        if registered_before:
            from backend.model import register_tokenizers

            register_tokenizers()


def test_stand_in_takes_tinker_arguments_and_bad_options_fail_before_patching(tmp_path: Path) -> None:
    with use_local_backend(root=tmp_path):
        service = tinker.ServiceClient(
            user_metadata={"k": "v"}, base_url="http://example.invalid", api_key="unused", project_id="p"
        )
        assert isinstance(service, LocalServiceClient) and service.root == tmp_path
        with pytest.raises(UnsupportedCallError, match=r"tinker\.ServiceClient\.get_console_url"):
            service.get_console_url()
    original = tinker.ServiceClient
    with pytest.raises(ValueError, match="compute_dtype"), use_local_backend(compute_dtype="float8"):
        pass
    assert tinker.ServiceClient is original


def test_rest_client_reads_local_runs(tmp_path: Path) -> None:
    service = LocalServiceClient(tmp_path)
    trainer = service.create_lora_training_client(
        TINY, rank=2, seed=0, user_metadata={"renderer_name": RENDERER}
    ).result()
    state = trainer.save_state("s1").result().path
    sampler = trainer.save_weights_for_sampler("w1").result().path
    rest = service.create_rest_client()
    run = rest.get_training_run_by_tinker_path(sampler).result()
    assert run.training_run_id == trainer.model_id and run.base_model == TINY and run.lora_rank == 2
    assert run.user_metadata == {"renderer_name": RENDERER}
    assert run.last_checkpoint is not None and run.last_checkpoint.tinker_path == state
    listed = rest.list_checkpoints(trainer.model_id).result().checkpoints
    assert sorted(c.checkpoint_id for c in listed) == ["sampler_weights/w1", "weights/s1"]
    assert rest.get_weights_info_by_tinker_path(state).result().lora_rank == 2
    assert [r.training_run_id for r in rest.list_training_runs().result().training_runs] == [trainer.model_id]
    asyncio.run(rest.delete_checkpoint_from_tinker_path_async(state))
    assert [c.checkpoint_id for c in rest.list_checkpoints(trainer.model_id).result().checkpoints] == [
        "sampler_weights/w1"
    ]
    with pytest.raises(UnsupportedCallError, match=r"RestClient\.get_billing_usage"):
        rest.get_billing_usage()


@pytest.fixture(scope="module")
def cookbook_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RL, then SL, then DPO from the SL checkpoint: the cookbook's trainers inside one block."""
    from tinker_cookbook.preference import train_dpo
    from tinker_cookbook.preference.dpo_datasets import DPODatasetBuilderFromComparisons
    from tinker_cookbook.preference.preference_datasets import ComparisonBuilderFromJsonl
    from tinker_cookbook.rl import train as rl_train
    from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig

    from envs.twenty_questions import TwentyQuestionsDatasetBuilder

    out = tmp_path_factory.mktemp("cookbook")
    chat = out / "chat.jsonl"
    chat.write_text(
        "".join(
            json.dumps(
                {
                    "messages": [
                        {"role": "user", "content": f"{i}+1?"},
                        {"role": "assistant", "content": f"{i + 1}"},
                    ]
                }
            )
            + "\n"
            for i in range(16)
        )
    )
    pairs = out / "pairs.jsonl"
    pair = {
        "comparison": {
            "prompt_conversation": [{"role": "user", "content": "Greet me."}],
            "completion_A": [{"role": "assistant", "content": "Hello, friend!"}],
            "completion_B": [{"role": "assistant", "content": "No."}],
        },
        "label": "A",
    }
    pairs.write_text(json.dumps(pair) + "\n" + json.dumps(pair) + "\n")
    common = ChatDatasetBuilderCommonConfig(
        model_name_for_tokenizer=TINY, renderer_name=RENDERER, max_length=128, batch_size=4
    )
    with use_local_backend(root=out / "sl" / "checkpoints"):  # the README block's root, shared
        rl = rl_train.Config(
            learning_rate=1e-4,
            dataset_builder=TwentyQuestionsDatasetBuilder(
                batch_size=1,
                group_size=2,
                model_name_for_tokenizer=TINY,
                num_batches=2,
                test_batch_size=1,
                test_group_size=1,
            ),
            model_name=TINY,
            renderer_name=RENDERER,
            recipe_name="test",
            max_tokens=4,
            lora_rank=2,
            eval_every=0,
            save_every=0,
            num_groups_to_log=0,
            log_path=str(out / "rl"),
        )
        asyncio.run(rl_train.main(rl))
        # The README's example, verbatim: the cookbook's SL trainer inside its own (nested) block.
        readme: dict = {}
        exec(compile(readme_block("example:cookbook"), "docs/backend.md", "exec"), readme)
        readme["run_sft"](str(chat), str(out / "sl"), model_name=TINY)
        sl_final = rows(out / "sl" / "checkpoints.jsonl")[-1]["state_path"]
        dpo = train_dpo.Config(
            log_path=str(out / "dpo"),
            model_name=TINY,
            renderer_name=RENDERER,
            recipe_name="test",
            load_checkpoint_path=sl_final,
            dataset_builder=DPODatasetBuilderFromComparisons(
                common_config=common.__class__(
                    model_name_for_tokenizer=TINY, renderer_name=RENDERER, max_length=128, batch_size=1
                ),
                comparison_builder=ComparisonBuilderFromJsonl(train_path=str(pairs)),
            ),
            lora_rank=2,
            learning_rate=1e-2,
            eval_every=0,
            save_every=0,
        )
        train_dpo.main(dpo)
    return out


def test_cookbook_rl_train_main_runs_offline(cookbook_runs: Path) -> None:
    metrics = rows(cookbook_runs / "rl" / "metrics.jsonl")
    assert [r["step"] for r in metrics] == [0, 1]
    assert all("env/all/reward/total" in r for r in metrics)
    final = rows(cookbook_runs / "rl" / "checkpoints.jsonl")[-1]
    assert final["sampler_path"].startswith("local://")


def test_cookbook_supervised_train_main_runs_offline(cookbook_runs: Path) -> None:
    metrics = rows(cookbook_runs / "sl" / "metrics.jsonl")
    assert len(metrics) == 2 and all(r["train_mean_nll"] > 0 for r in metrics)


def test_cookbook_dpo_main_runs_offline_from_the_sl_checkpoint(cookbook_runs: Path) -> None:
    metrics = rows(cookbook_runs / "dpo" / "metrics.jsonl")
    assert len(metrics) == 2
    first, last = metrics[0], metrics[-1]
    assert first["dpo_loss"] == pytest.approx(0.6931, abs=1e-3)  # policy == reference at step 0
    assert last["dpo_loss"] < first["dpo_loss"] and last["margin"] > first["margin"]
    assert "surrogate_loss:sum" in last


def test_launcher_runs_a_module_as_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "turngym_probe_main.py").write_text(
        "import sys, tinker, pathlib\n"
        "if __name__ == '__main__':\n"
        "    s = tinker.ServiceClient(base_url='http://example.invalid')\n"
        "    pathlib.Path(sys.argv[1].split('=')[1]).write_text(type(s).__mro__[1].__name__ + ' ' + str(s.root))\n"
        "    raise SystemExit(3)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out.txt"
    assert main(["--root", str(tmp_path / "ck"), "turngym_probe_main", f"out={out}"]) == 3
    assert out.read_text() == f"LocalTinkerServiceClient {tmp_path / 'ck'}"
    assert tinker.ServiceClient.__module__.startswith("tinker")
    assert main(["turngym_no_such_module_xyz"]) == 2
