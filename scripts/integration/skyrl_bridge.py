"""Start SkyRL tx's Tinker API behind a small ASGI bridge for the official tinker SDK (test code only).

Runs in the SkyRL tx virtual environment (``.venv-skyrl``, see ``setup_server.sh``), in place of
``python -m tx.tinker.api`` and with the same arguments. ``skyrl-tx==0.3.0`` predates parts of the
wire protocol that ``tinker>=0.38`` speaks; the bridge translates them and forwards everything
else unchanged to the server's own FastAPI app (same process, same database, same engine):

1. ``POST /api/v1/client/config`` (the SDK's first call; 404 on the server): answered here with
   flags the server supports (plain httpx transport, uncompressed JSON-era endpoints).
2. ``forward_backward`` requests arrive as protobuf: decoded to the server's JSON; a forward-only
   request goes to the server's ``/api/v1/forward``.
3. Results of forward/backward and sampling futures are expected as protobuf
   (``Accept: application/x-protobuf``): the server's JSON is encoded. Prompt logprobs get the
   leading NaN the SDK expects (the server returns one value fewer than the prompt).
4. ``asample`` replies must carry ``sample_sequence_ids`` (one per requested sample): added.
   ``GET /api/v1/samplers/<id>`` (the SDK asks a sampler made from a path for its base model; 404
   on the server): answered with the served base model.
5. Create-via-load (``create_training_client_from_state[_with_optimizer]``: one
   ``load_weights`` with ``session_id`` + ``model_seq_id`` and no ``model_id``): the bridge creates
   the model with the checkpoint's base model and LoRA rank, loads the checkpoint into it (SkyRL
   tx always restores the optimizer state with the weights), and maps the model id the SDK
   derives (``<session>:train:<seq>``) to the server's id in later requests; a retried request
   gets the same model.

Nothing here is product code: TurnGym itself talks to any Tinker service through the SDK alone.
The protobuf helpers import only numpy and tinker's generated messages, so the unit tests run them
in the project's own environment.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from typing import Any
from urllib.parse import urlparse

import numpy as np
from tinker.proto import tinker_public_pb2 as pb

PROTO = "application/x-protobuf"
JSON = "application/json"
CLIENT_CONFIG: dict[str, Any] = {
    "use_pyqwest_transport": False,
    "proto_compress_fwdbwd": False,
    "sample_use_retrieve_futures": False,
    "custom_loss_server_side": False,
    "sample_join_sampling_session": False,
}
_NUMPY = {pb.DTYPE_FLOAT32: np.float32, pb.DTYPE_INT64: np.int64, pb.DTYPE_INT32: np.int32}


# ---------------------------------------------------------------------------------- protobuf <-> JSON
def _tensor_values(tensor: Any) -> list[Any]:
    if tensor.HasField("sparse_csr"):
        raise ValueError("sparse tensors are not bridged (send dense TensorData)")
    dtype = _NUMPY.get(tensor.dtype)
    if dtype is None:
        raise ValueError(f"unsupported tensor dtype {tensor.dtype}")
    return np.frombuffer(tensor.dense, dtype=dtype).tolist()


def forward_backward_json(body: bytes, model_id: str | None = None) -> tuple[str, dict[str, Any]]:
    """A protobuf ``ForwardBackwardRequest`` as (server path, JSON body) for SkyRL tx."""
    msg = pb.ForwardBackwardRequest()
    msg.ParseFromString(body)
    data = []
    for datum in msg.data:
        chunks = []
        for chunk in datum.model_input:
            kind = chunk.WhichOneof("chunk")
            if kind != "encoded_text":
                raise ValueError(f"only token chunks are bridged, got {kind}")
            chunks.append({"tokens": np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32).tolist()})
        inputs = {name: {"data": _tensor_values(t)} for name, t in datum.loss_fn_inputs.items()}
        data.append({"model_input": {"chunks": chunks}, "loss_fn_inputs": inputs})
    config = {k: v.number for k, v in msg.loss_fn_config_v2.items() if v.WhichOneof("value") == "number"}
    config = config or dict(msg.loss_fn_config)
    payload = {"data": data, "loss_fn": msg.loss_fn, "loss_fn_config": config or None}
    if msg.forward_only:
        return "/api/v1/forward", {"model_id": model_id or msg.model_id, "forward_input": payload}
    return "/api/v1/forward_backward", {"model_id": model_id or msg.model_id, "forward_backward_input": payload}


def forward_backward_proto(result: dict[str, Any]) -> bytes:
    """SkyRL tx's JSON ``ForwardBackwardOutput`` as the SDK's protobuf (one batched record)."""
    out = pb.ForwardBackwardOutput(loss_fn_output_type=result.get("loss_fn_output_type") or "ArrayRecord")
    for key, value in (result.get("metrics") or {}).items():
        out.metrics[key] = float(value)
    outputs = result.get("loss_fn_outputs") or []
    if outputs:
        record = out.loss_fn_outputs.add()
        record.num_datums = len(outputs)
        for name in outputs[0]:
            is_int = outputs[0][name].get("dtype") == "int64"
            arrays = [np.asarray(o[name]["data"], dtype=np.int64 if is_int else np.float32) for o in outputs]
            field = record.fields[name]
            field.dtype = pb.DTYPE_INT64 if is_int else pb.DTYPE_FLOAT32
            field.data = b"".join(a.tobytes() for a in arrays)
            field.offsets = np.cumsum([0] + [a.nbytes for a in arrays], dtype=np.int64).tobytes()
    return out.SerializeToString()


def sample_proto(result: dict[str, Any]) -> bytes:
    """SkyRL tx's JSON ``SampleOutput`` as the SDK's protobuf ``SampleResponse``."""
    out = pb.SampleResponse()
    for sequence in result["sequences"]:
        seq = out.sequences.add()
        seq.stop_reason = pb.STOP_REASON_STOP if sequence["stop_reason"] == "stop" else pb.STOP_REASON_LENGTH
        seq.tokens = np.asarray(sequence["tokens"], dtype=np.int32).tobytes()
        if sequence.get("logprobs") is not None:
            seq.logprobs = np.asarray(sequence["logprobs"], dtype=np.float32).tobytes()
    prompt = result.get("prompt_logprobs")
    if prompt is not None:  # the server omits the first position's (undefined) logprob
        out.prompt_logprobs = np.asarray([math.nan, *prompt], dtype=np.float32).tobytes()
    return out.SerializeToString()


def parse_weights_path(path: str) -> str:
    """The training-run id of ``tinker://<run>/weights/<name>``."""
    parsed = urlparse(path)
    parts = parsed.path.strip("/").split("/")
    if parsed.scheme != "tinker" or not parsed.netloc or len(parts) != 2 or parts[0] != "weights":
        raise ValueError(f"not a tinker://<run>/weights/<name> path: {path!r}")
    return parsed.netloc


# ---------------------------------------------------------------------------------- the ASGI bridge
class Bridge:
    """ASGI app: translates the gaps listed in the module docstring, forwards the rest to ``inner``."""

    def __init__(self, inner: Any, base_model: str = "") -> None:
        self.inner = inner
        self.base_model = base_model  # the one model the server serves
        self.aliases: dict[str, str] = {}  # SDK-derived model id -> server model id
        self._loads: dict[str, Any] = {}  # SDK-derived model id -> its create-and-load task
        self._client: Any = None

    @property
    def client(self) -> Any:
        import httpx

        if self._client is None:
            transport = httpx.ASGITransport(app=self.inner)
            self._client = httpx.AsyncClient(transport=transport, base_url="http://skyrl", timeout=None)
        return self._client

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan (starts the engine) and anything else: the server's own
            await self.inner(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            status, content_type, payload = await self.handle(
                scope["method"], scope["path"], scope.get("query_string", b"").decode(), headers, body
            )
        except ValueError as exc:
            status, content_type, payload = 400, JSON, json.dumps({"detail": f"bridge: {exc}"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def _forward(
        self, method: str, path: str, *, json_body: Any = None, content: bytes | None = None, query: str = ""
    ) -> tuple[int, str, bytes]:
        url = f"{path}?{query}" if query else path
        if json_body is not None:
            response = await self.client.request(method, url, json=json_body)
        else:
            response = await self.client.request(
                method, url, content=content or None, headers={"content-type": JSON} if content else None
            )
        return response.status_code, response.headers.get("content-type", JSON), response.content

    async def _json(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        status, _, payload = await self._forward(method, path, json_body=body)
        if status != 200:
            raise ValueError(f"{path} answered {status}: {payload[:300]!r}")
        return json.loads(payload)

    def _real(self, model_id: Any) -> Any:
        return self.aliases.get(model_id, model_id) if isinstance(model_id, str) else model_id

    async def handle(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        """Answer one request (status, content type, body)."""
        if path == "/api/v1/client/config":
            return 200, JSON, json.dumps(CLIENT_CONFIG).encode()
        if method == "GET" and path.startswith("/api/v1/samplers/"):
            sampler = {"sampler_id": path.rsplit("/", 1)[1], "base_model": self.base_model}
            return 200, JSON, json.dumps(sampler).encode()
        if path == "/api/v1/forward_backward" and headers.get("content-type", "").startswith(PROTO):
            if headers.get("content-encoding"):
                raise ValueError("compressed forward_backward bodies are not bridged")
            target, payload = forward_backward_json(body)
            payload["model_id"] = self._real(payload["model_id"])
            return await self._forward("POST", target, json_body=payload)
        request: Any = None
        if body and headers.get("content-type", "").startswith(JSON):
            request = json.loads(body)
        if path == "/api/v1/load_weights" and isinstance(request, dict) and not request.get("model_id"):
            return await self._create_via_load(request)
        if isinstance(request, dict) and "model_id" in request:
            request["model_id"] = self._real(request["model_id"])
        match = re.fullmatch(r"(/api/v1/(?:training_runs|models)/)([^/]+)(.*)", path)
        if match:
            path = match.group(1) + self._real(match.group(2)) + match.group(3)
        if request is not None:
            status, content_type, payload = await self._forward(method, path, json_body=request, query=query)
        else:
            status, content_type, payload = await self._forward(method, path, content=body, query=query)
        if status != 200:
            return status, content_type, payload
        if path == "/api/v1/asample":
            reply = json.loads(payload)
            reply["sample_sequence_ids"] = [uuid.uuid4().hex for _ in range(int(request.get("num_samples", 1)))]
            return status, JSON, json.dumps(reply).encode()
        if path == "/api/v1/retrieve_future" and PROTO in headers.get("accept", ""):
            result = json.loads(payload)
            if isinstance(result, dict) and "sequences" in result:
                return status, PROTO, sample_proto(result)
            if isinstance(result, dict) and "loss_fn_outputs" in result:
                return status, PROTO, forward_backward_proto(result)
        return status, content_type, payload

    async def _create_via_load(self, request: dict[str, Any]) -> tuple[int, str, bytes]:
        # One model per SDK-derived id, however often the SDK retries the request.
        import asyncio

        key = f"{request['session_id']}:train:{request['model_seq_id']}"
        if key not in self._loads:
            self._loads[key] = asyncio.ensure_future(self._create_and_load(request, key))
        try:
            return await asyncio.shield(self._loads[key])
        except Exception:
            self._loads.pop(key, None)  # a failed attempt may be retried
            raise

    async def _create_and_load(self, request: dict[str, Any], key: str) -> tuple[int, str, bytes]:
        source = parse_weights_path(request["path"])
        run = await self._json("GET", f"/api/v1/training_runs/{self._real(source)}")
        created = await self._json(
            "POST",
            "/api/v1/create_model",
            {
                "session_id": request["session_id"],
                "base_model": request.get("base_model") or run["base_model"],
                "lora_config": {"rank": run["lora_rank"]},
            },
        )
        self.aliases[key] = created["model_id"]
        # The engine runs a model's single requests in submission order: the load follows the
        # creation without waiting for it here (waiting made the SDK time out and retry).
        return await self._forward(
            "POST", "/api/v1/load_weights", json_body={"model_id": created["model_id"], "path": request["path"]}
        )


def main() -> None:
    """``python skyrl_bridge.py <tx.tinker.api arguments>``: serve the bridged API with uvicorn."""
    import argparse

    import uvicorn
    from tx.tinker import api
    from tx.tinker.config import EngineConfig, add_model
    from tx.utils.log import get_uvicorn_log_config

    parser = argparse.ArgumentParser(description="SkyRL tx Tinker API behind the tinker-SDK bridge")
    add_model(parser, EngineConfig)
    parser.add_argument("--host", type=str, default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    config = EngineConfig.model_validate({k: v for k, v in vars(args).items() if k in EngineConfig.model_fields})
    api.app.state.engine_config = config
    bridge = Bridge(api.app, base_model=config.base_model)
    uvicorn.run(bridge, host=args.host, port=args.port, log_config=get_uvicorn_log_config())


if __name__ == "__main__":
    main()
