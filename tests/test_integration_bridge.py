"""The integration check's wire bridge (scripts/integration/skyrl_bridge.py) against the real SDK.

The bridge is test code that lets tinker's SDK talk to SkyRL tx 0.3.0 (``make integration``). Its
protobuf translations are checked here against the SDK's own encoders and decoders, and its
request routing against a fake server app, so a wire mistake shows up without the 2 GB server.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import tinker
from tinker.proto.request_conv import forward_backward_request_to_proto
from tinker.proto.response_conv import deserialize_forward_backward_output, deserialize_sample_response
from tinker.types.forward_backward_input import ForwardBackwardInput
from tinker.types.forward_backward_request import ForwardBackwardRequest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts" / "integration"


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"integration_{name}", SCRIPTS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bridge = _load("skyrl_bridge")


def _datum(tokens: list[int], advantage: float) -> tinker.Datum:
    n = len(tokens) - 1
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tinker.TensorData(data=tokens[1:], dtype="int64", shape=[n]),
            "logprobs": tinker.TensorData(data=[-0.5] * n, dtype="float32", shape=[n]),
            "advantages": tinker.TensorData(data=[advantage] * n, dtype="float32", shape=[n]),
        },
    )


@pytest.mark.parametrize("forward_only", [False, True])
def test_forward_backward_request_decodes_to_server_json(forward_only: bool) -> None:
    request = ForwardBackwardRequest(
        forward_backward_input=ForwardBackwardInput(
            data=[_datum([1, 2, 3, 4], 0.25), _datum([5, 6, 7], -1.0)],
            loss_fn="ppo",
            loss_fn_config={"clip_low_threshold": 0.8, "clip_high_threshold": 1.2},
        ),
        model_id="sdk-model",
        seq_id=3,
    )
    proto = forward_backward_request_to_proto(request)
    proto.forward_only = forward_only
    path, body = bridge.forward_backward_json(proto.SerializeToString(), model_id="server-model")
    key = "forward_input" if forward_only else "forward_backward_input"
    assert path == ("/api/v1/forward" if forward_only else "/api/v1/forward_backward")
    assert body["model_id"] == "server-model"
    payload = body[key]
    assert payload["loss_fn"] == "ppo"
    assert payload["loss_fn_config"] == pytest.approx({"clip_low_threshold": 0.8, "clip_high_threshold": 1.2})
    first, second = payload["data"]
    assert first["model_input"] == {"chunks": [{"tokens": [1, 2, 3]}]}
    assert first["loss_fn_inputs"]["target_tokens"]["data"] == [2, 3, 4]
    assert first["loss_fn_inputs"]["advantages"]["data"] == pytest.approx([0.25] * 3)
    assert second["loss_fn_inputs"]["logprobs"]["data"] == pytest.approx([-0.5, -0.5])
    json.dumps(body)  # plain JSON for the server


def test_forward_backward_output_encodes_for_the_sdk() -> None:
    result = {
        "loss_fn_output_type": "scalar",
        "metrics": {"loss:sum": 1.5},
        "loss_fn_outputs": [
            {
                "logprobs": {"data": [-1.0, -2.0, -3.0], "dtype": "float32", "shape": [3]},
                "elementwise_loss": {"data": [0.1, 0.2, 0.3], "dtype": "float32", "shape": [3]},
            },
            {
                "logprobs": {"data": [-4.0], "dtype": "float32", "shape": [1]},
                "elementwise_loss": {"data": [0.4], "dtype": "float32", "shape": [1]},
            },
        ],
    }
    out = deserialize_forward_backward_output(bridge.forward_backward_proto(result))
    assert out.metrics == {"loss:sum": 1.5}
    assert [o["logprobs"].tolist() for o in out.loss_fn_outputs] == [[-1.0, -2.0, -3.0], [-4.0]]
    assert out.loss_fn_outputs[1]["elementwise_loss"].tolist() == pytest.approx([0.4])
    empty = deserialize_forward_backward_output(bridge.forward_backward_proto({"loss_fn_outputs": []}))
    assert empty.loss_fn_outputs == []


def test_sample_output_encodes_for_the_sdk() -> None:
    result = {
        "sequences": [
            {"stop_reason": "stop", "tokens": [5, 6, 2], "logprobs": [-0.1, -0.2, -0.3]},
            {"stop_reason": "length", "tokens": [7, 8], "logprobs": [-1.0, -1.5]},
        ],
        "prompt_logprobs": [-2.0, -3.0],  # the server leaves out the first position
    }
    out = deserialize_sample_response(bridge.sample_proto(result))
    assert [s.stop_reason for s in out.sequences] == ["stop", "length"]
    assert [list(s.tokens) for s in out.sequences] == [[5, 6, 2], [7, 8]]
    assert list(out.sequences[1].logprobs or []) == pytest.approx([-1.0, -1.5])
    prompt = out.prompt_logprobs
    assert prompt is not None and len(prompt) == 3
    assert prompt[0] is None or math.isnan(prompt[0])
    assert prompt[1:] == pytest.approx([-2.0, -3.0])


def test_weights_path_parsing() -> None:
    assert bridge.parse_weights_path("tinker://model_ab12/weights/000001") == "model_ab12"
    for bad in ["tinker://model_ab12/sampler_weights/x", "local://x/weights/y", "tinker:///weights/y"]:
        with pytest.raises(ValueError):
            bridge.parse_weights_path(bad)


class FakeServer:
    """A stand-in for SkyRL tx's app: records requests, answers like the real endpoints."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body) if body else {}
        path = scope["path"]
        self.requests.append((path, request))
        status, reply = 200, {"request_id": str(len(self.requests)), "future_id": "f"}
        if path.startswith("/api/v1/training_runs/"):
            reply = {"training_run_id": path.rsplit("/", 1)[1], "base_model": "/models/m", "lora_rank": 8}
        elif path == "/api/v1/create_model":
            reply = {"model_id": "model_new", "base_model": request["base_model"], "request_id": "7"}
        elif path == "/api/v1/retrieve_future":
            reply = {"sequences": [{"stop_reason": "stop", "tokens": [1], "logprobs": [-0.5]}]}
        elif path == "/api/v1/get_info" and request.get("model_id") != "model_new":
            status, reply = 404, {"detail": "Model not found"}
        payload = json.dumps(reply).encode()
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})


def _call(app: Any, path: str, body: dict[str, Any], accept: str = "application/json") -> tuple[int, str, bytes]:
    return anyio.run(
        app.handle, "POST", path, "", {"content-type": "application/json", "accept": accept}, json.dumps(body).encode()
    )


def test_bridge_answers_what_the_server_lacks() -> None:
    server = FakeServer()
    app = bridge.Bridge(server, base_model="/models/m")
    status, _, payload = _call(app, "/api/v1/client/config", {"sdk_version": "0.38.0"})
    assert status == 200 and json.loads(payload)["use_pyqwest_transport"] is False
    status, _, payload = anyio.run(app.handle, "GET", "/api/v1/samplers/sampling_ab", "", {}, b"")
    assert status == 200 and json.loads(payload) == {"sampler_id": "sampling_ab", "base_model": "/models/m"}
    assert server.requests == []  # answered by the bridge
    status, _, payload = _call(app, "/api/v1/asample", {"num_samples": 3, "prompt": {"chunks": []}})
    assert status == 200 and len(set(json.loads(payload)["sample_sequence_ids"])) == 3
    status, content_type, payload = _call(app, "/api/v1/retrieve_future", {"request_id": "1"}, accept=bridge.PROTO)
    assert content_type == bridge.PROTO
    assert list(deserialize_sample_response(payload).sequences[0].tokens) == [1]


def test_bridge_creates_the_model_of_a_create_via_load_and_maps_its_id() -> None:
    server = FakeServer()
    app = bridge.Bridge(server)
    load = {
        "session_id": "sess",
        "model_seq_id": 2,
        "path": "tinker://model_old/weights/000001",
        "optimizer": True,
        "type": "load_weights",
    }
    status, _, first = _call(app, "/api/v1/load_weights", load)
    assert status == 200
    paths = [p for p, _ in server.requests]
    assert paths == ["/api/v1/training_runs/model_old", "/api/v1/create_model", "/api/v1/load_weights"]
    assert server.requests[1][1] == {"session_id": "sess", "base_model": "/models/m", "lora_config": {"rank": 8}}
    assert server.requests[2][1] == {"model_id": "model_new", "path": load["path"]}
    status, _, again = _call(app, "/api/v1/load_weights", load)  # the SDK retrying the same request
    assert status == 200 and again == first and len(server.requests) == 3
    status, _, _ = _call(app, "/api/v1/get_info", {"model_id": "sess:train:2"})  # the id the SDK derives
    assert status == 200 and server.requests[-1][1]["model_id"] == "model_new"


def test_orchestrator_help_and_setup_script_parse() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / "tinker_server.py"), "--help"], capture_output=True, text=True, check=True
    )
    assert "SIGKILL" in out.stdout and "--layers" in out.stdout
    subprocess.run(["bash", "-n", str(SCRIPTS / "setup_server.sh")], check=True)


def test_model_folder_fixes_for_transformers_4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    orchestrator = _load("tinker_server")
    source = tmp_path / "src"
    source.mkdir()
    (source / "config.json").write_text(
        json.dumps({"num_hidden_layers": 3, "rope_parameters": {"rope_theta": 5.0, "rope_type": "default"}})
    )
    (source / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "TokenizersBackend"}))
    (source / "chat_template.jinja").write_text("{{ x }}")
    import torch
    from safetensors.torch import save_file

    save_file(
        {f"model.layers.{i}.w": torch.full((2,), float(i)) for i in range(3)} | {"model.embed": torch.ones(2)},
        str(source / "model.safetensors"),
    )
    monkeypatch.setattr("backend.model.ensure_converted", lambda: source)
    full = orchestrator.prepare_model(tmp_path / "cache", 0)
    assert json.loads((full / "config.json").read_text())["rope_theta"] == 5.0
    assert json.loads((full / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert (full / "model.safetensors").resolve() == (source / "model.safetensors").resolve()
    assert (full / "chat_template.jinja").is_file()
    cut = orchestrator.prepare_model(tmp_path / "cache", 2)
    from safetensors.numpy import load_file

    assert sorted(load_file(str(cut / "model.safetensors"))) == ["model.embed", "model.layers.0.w", "model.layers.1.w"]
    assert json.loads((cut / "config.json").read_text())["num_hidden_layers"] == 2
    assert np.isclose(json.loads((cut / "config.json").read_text())["rope_theta"], 5.0)


def test_orchestrator_train_keys_parse() -> None:
    """The run's keys are keys of the Twenty Questions CLI (game keys nested under ``env.``)."""
    from envs.twenty_questions.train import TwentyQuestionsTrainConfig
    from training import parse_config

    orchestrator = _load("tinker_server")
    config = parse_config(TwentyQuestionsTrainConfig, orchestrator.TRAIN_KEYS)
    assert config.env.max_questions == 2 and config.env.truncation_penalty == 0.05
    assert config.data.batch_size == 2 and config.data.group_size == 4 and config.eval_every == 0
    # pinned to the smoke test's easy game, whatever make train's defaults are
    assert config.env.candidates == 4 and config.env.question_reward == -0.05
    assert config.warm_start.episodes == 0 and config.max_tokens == 16 and config.learning_rate == 1e-3


def test_compile_report_counts_model_executables_and_padded_shapes() -> None:
    """The check's summary of a server log: SkyRL tx's padded shapes, and persistent-cache hits and
    misses of the model-sized executables only (tiny jits are left out)."""
    orchestrator = _load("tinker_server")
    log = "\n".join(
        [
            "2026-12-03 20:02:19,140 - INFO - tx: JIT compiling for sample seq_len=96 in     ",
            "DEBUG:jax._src.compiler:Persistent compilation cache hit for 'jit__prefill_and_decode' with key 'a'",
            "DEBUG:jax._src.compiler:Persistent compilation cache hit for 'jit_broadcast_in_dim' with key 'b'",
            "2026-12-03 20:03:23,565 - INFO - tx: JIT compiling for sample seq_len=128 in    ",
            "DEBUG:jax._src.compiler:PERSISTENT COMPILATION CACHE MISS for 'jit__prefill_and_decode' with key 'c'",
            "DEBUG:jax._src.compiler:PERSISTENT COMPILATION CACHE MISS for 'jit_add' with key 'd'",
            "2026-12-03 20:04:57,015 - INFO - tx: JIT compiling for train seq_len=128 in     ",
            "DEBUG:jax._src.compiler:Persistent compilation cache hit for 'jit_forward_backward_and_accumulate' "
            "with key 'e'",
        ]
    )
    report = orchestrator.compile_report(log)
    assert report == (
        "padded shapes: sample seq_len 96, 128; train seq_len 128; persistent JAX cache, model-sized "
        "executables: 2 hits, 1 misses (compiled: _prefill_and_decode)"
    )
    assert orchestrator.compile_report("") == (
        "padded shapes: none; persistent JAX cache, model-sized executables: 0 hits, 0 misses"
    )
