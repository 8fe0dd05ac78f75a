"""A small OpenAI-compatible chat server on 127.0.0.1, backed by the embedded model (local backend).

For the tests of message-level evaluation (``python -m envs.eval ... base_url=...``), and by hand::

    python tests/openai_server.py --port 8000            # then base_url=http://127.0.0.1:8000/v1

``POST /v1/chat/completions`` renders the messages with the model's recommended renderer, samples
(``max_tokens``, ``temperature``, the renderer's stop sequences) and returns the parsed reply as
the first choice; ``GET /v1/models`` lists the one model. Threaded: concurrent requests go to the
local sampler together (it batches them). ``served`` counts the completions, ``peak`` the most
requests in flight at once.
"""

from __future__ import annotations

import argparse
import copy
import json
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tinker import types
from tinker_cookbook.renderers import get_text_content


def _own_tokenizer(renderer: Any) -> Any:
    """A shallow copy of ``renderer`` whose tokenizer has its own Rust tokenizer object."""
    from tokenizers import Tokenizer

    tokenizer = copy.copy(renderer.tokenizer)
    tokenizer._tokenizer = Tokenizer.from_str(renderer.tokenizer._tokenizer.to_str())
    own = copy.copy(renderer)
    own.tokenizer = tokenizer
    return own


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, model: str, port: int = 0) -> None:
        from backend import LocalServiceClient
        from backend.model import register_tokenizers
        from renderers_ext import load_renderer

        register_tokenizers()
        self.model = model
        # A renderer on a tokenizer of its own: the tokenizer is cached per model, and this server
        # runs in a test's process whose event loop (the client's envs) uses the cached one at the
        # same time; a fast tokenizer is not safe to share between threads ("Already borrowed").
        self.renderer = _own_tokenizer(load_renderer(None, model))
        self.client: Any = LocalServiceClient().create_sampling_client(base_model=model).result()
        self.lock = threading.Lock()
        self.tokenizer_lock = threading.Lock()
        self.served = 0
        self.errors: list[str] = []
        """Tracebacks of the requests that failed (answered 500)."""
        self.in_flight = 0
        self.peak = 0
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            messages = [{"role": m["role"], "content": m.get("content") or ""} for m in body["messages"]]
            with self.tokenizer_lock:  # a fast tokenizer is not safe to share between threads
                prompt = self.renderer.build_generation_prompt(messages)  # type: ignore[arg-type]
                stop = self.renderer.get_stop_sequences()
            params = types.SamplingParams(
                max_tokens=int(body.get("max_tokens") or 64),
                temperature=float(body.get("temperature") or 0.0),
                stop=stop,
            )
            seq = self.client.sample(prompt, 1, params).result().sequences[0]
            with self.tokenizer_lock:
                message, _ok = self.renderer.parse_response(list(seq.tokens))
            content = get_text_content(message)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.served += 1
        return {
            "id": f"chatcmpl-{self.served}",
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt.length, "completion_tokens": len(seq.tokens)},
        }


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.server.model, "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            self._send(200, self.server.complete(body))
        except Exception as error:
            traceback.print_exc()
            self.server.errors.append(traceback.format_exc())
            self._send(500, {"error": {"message": f"{type(error).__name__}: {error}"}})


def start(model: str, port: int = 0) -> ChatServer:
    """Start a server in a background thread; ``shutdown()`` and ``server_close()`` stop it."""
    server = ChatServer(model, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    from backend.model import SMOLLM2

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=SMOLLM2)
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    srv = ChatServer(args.model, args.port)
    print(f"serving {args.model} at {srv.base_url}", flush=True)
    srv.serve_forever()
