"""A ``MessageCompleter`` over any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, SGLang,
llama.cpp server, OpenAI...), for judges and simulated users.

``httpx`` is imported lazily, and the API key is read from an environment variable at call time,
so configs stay picklable and free of secrets. No retries here: the judge wrapper
(``envs.judge.Judge``) adds the deadline, retries and fallback.
"""

from __future__ import annotations

import os
from typing import Any

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content


class OpenAICompatibleMessageCompleter(MessageCompleter):
    """Calls ``POST {base_url}/chat/completions`` and returns the first choice as an assistant message.

    Args:
        model: the served model name.
        base_url: endpoint root, e.g. ``http://localhost:8000/v1``.
        api_key_env: environment variable holding the key (unset or empty: no auth header).
        max_tokens: ``max_tokens`` of the request.
        temperature: sampling temperature.
        timeout_s: HTTP timeout of one request.
        extra_body: extra JSON fields merged into every request.
        max_connections: the HTTP client's connection pool (and keep-alive) size; callers that
            keep N requests in flight pass N, so none waits on the pool (None: httpx's default, 100).
    """

    def __init__(
        self,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        *,
        api_key_env: str = "OPENAI_API_KEY",
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout_s: float = 60.0,
        extra_body: dict[str, Any] | None = None,
        max_connections: int | None = None,
    ):
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body or {})
        self.max_connections = max_connections
        self._client: Any = None

    def _http(self) -> Any:
        if self._client is None:
            try:
                import httpx
            except ImportError:  # pragma: no cover
                raise RuntimeError("the openai-compatible completer needs httpx: pip install httpx") from None
            limits = (
                httpx.Limits(max_connections=self.max_connections, max_keepalive_connections=self.max_connections)
                if self.max_connections
                else httpx.Limits(max_connections=100, max_keepalive_connections=20)
            )
            self._client = httpx.AsyncClient(timeout=self.timeout_s, limits=limits)
        return self._client

    def request_body(self, messages: list[Message]) -> dict[str, Any]:
        """The JSON body sent for ``messages``."""
        return {
            "model": self.model,
            "messages": [{"role": m["role"], "content": get_text_content(m)} for m in messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            **self.extra_body,
        }

    async def __call__(self, messages: list[Message]) -> Message:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        response = await self._http().post(
            f"{self.base_url}/chat/completions", json=self.request_body(messages), headers=headers
        )
        response.raise_for_status()
        data = response.json()
        try:
            content = data["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ValueError(f"unexpected chat completion response: {str(data)[:200]}") from None
        return {"role": "assistant", "content": content}

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
