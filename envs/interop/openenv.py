"""OpenEnv env servers as TurnGym ``ChatEnv`` s (ids ``openenv:<server url>``).

OpenEnv (``pip install openenv``, the ``openenv`` extra) serves an env over HTTP and WebSocket:
a client opens one WebSocket session per episode and sends ``reset`` / ``step`` messages whose
answers carry an observation dict, a reward and ``done``. This adapter is such a client (OpenEnv's
own ``GenericEnvClient``, one session per env) wrapped as a ``ChatEnv``:

- Observations: the first user message is the reset observation's text; after each assistant
  turn only the step's new observation text is rendered, so the next observation extends the
  previous one token for token (where the renderer claims the extension property). The text is
  the observation's ``observation_field`` (default: the first of :data:`TEXT_FIELDS` present,
  else its only string field, else the observation as JSON).
- Actions: the sampled tokens, parsed by the renderer; the assistant text (thinking left out) is
  sent as the action's ``action_field`` (default ``message``).
- Reward, done, metrics: the step's ``reward`` (``None`` is 0) and ``done``; numeric
  ``metadata`` entries become metrics ``openenv/<key>`` on the last step.
- Faults: a server that dies, stalls (no answer within ``timeout_s``), refuses a session or
  answers an error raises :class:`OpenEnvError` (one line: the server, the call, what
  happened); the rollout engine records it and the group's strategy decides (the group is
  reported failed, never hung). Sampling faults follow the env's ``FaultPolicy``.
- Sessions are closed when the episode ends, and by the group's ``cleanup`` otherwise.

:func:`running_server` starts a server in a subprocess on a free local port (tests, the bench).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from tinker_cookbook.renderers import Message, Renderer, get_text_content
from tinker_cookbook.rl.types import Env, EnvGroupBuilder

from envs.core import ChatEnv, EnvLimits, Reply

PREFIX = "openenv:"
"""Prefix of the TurnGym ids of OpenEnv servers (``openenv:http://127.0.0.1:8000``)."""
TEXT_FIELDS = ("text", "message", "prompt", "content", "observation", "echoed_message")
"""Observation fields read as the text, in this order, when ``observation_field`` is not given."""
METRIC_PREFIX = "openenv/"
"""Prefix of the metrics made from a final observation's numeric ``metadata``."""
NO_FEEDBACK = "(The environment sent no text. Go on.)"
"""The user message after a step whose observation has no text (a turn must follow)."""


class OpenEnvError(RuntimeError):
    """An OpenEnv server that died, stalled, refused the session or answered an error."""


def server_url(env_id: str) -> str:
    """The server URL behind a TurnGym id (``openenv:http://h:p`` -> ``http://h:p``)."""
    url = env_id[len(PREFIX) :] if env_id.startswith(PREFIX) else env_id
    if not url.startswith(("http://", "https://", "ws://", "wss://")):
        raise ValueError(f"openenv ids name a server URL (openenv:http://host:port), got {env_id!r}")
    return url.rstrip("/")


def observation_text(observation: dict[str, Any], field_name: str | None = None) -> str:
    """The text of an OpenEnv observation dict (see the module docstring)."""
    if field_name is not None:
        if field_name not in observation:
            raise OpenEnvError(f"the observation has no field {field_name!r} (fields: {sorted(observation)})")
        return str(observation[field_name])
    for name in TEXT_FIELDS:
        if isinstance(observation.get(name), str):
            return observation[name]
    strings = [v for k, v in observation.items() if isinstance(v, str) and k != "metadata"]
    if len(strings) == 1:
        return strings[0]
    rest = {k: v for k, v in observation.items() if k != "metadata"}
    return json.dumps(rest, sort_keys=True, default=str)


def _reason(error: BaseException, timeout_s: float) -> str:
    """What went wrong with a server call, in a few words."""
    from websockets.exceptions import ConnectionClosed

    detail = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if isinstance(error, TimeoutError):
        return f"no answer within {timeout_s:g}s (the server stalls)"
    if isinstance(error, ConnectionClosed):
        return f"the server closed the session (it stopped or died; {detail})"
    if isinstance(error, ConnectionError | OSError):
        return f"cannot reach the server ({detail})"
    return detail


class OpenEnvEnv(ChatEnv):
    """One episode on an OpenEnv server (build with :class:`OpenEnvGroup`).

    Args:
        url: the server's base URL.
        renderer: the policy's renderer.
        seed: sent with ``reset``.
        limits: TurnGym's budgets.
        action_field: the action's text field.
        observation_field: the observation's text field (None: guessed, see the module).
        timeout_s: longest wait for one answer (connect, reset, step) before :class:`OpenEnvError`.
        reset_kwargs: more ``reset`` arguments (e.g. a task split and index).
    """

    def __init__(
        self,
        url: str,
        renderer: Renderer,
        *,
        seed: int,
        limits: EnvLimits | None = None,
        action_field: str = "message",
        observation_field: str | None = None,
        timeout_s: float = 60.0,
        reset_kwargs: dict[str, Any] | None = None,
    ):
        super().__init__(renderer, limits=limits or EnvLimits(max_turns=32))
        self.url = url
        self.seed = seed
        self.action_field = action_field
        self.observation_field = observation_field
        self.timeout_s = timeout_s
        self.reset_kwargs = dict(reset_kwargs or {})
        self.prompt = ""
        self._client: Any = None

    async def _call(self, what: str, call: Callable[[], Any]) -> Any:
        """``await call()`` within ``timeout_s``; any failure is one :class:`OpenEnvError` line
        (and the session is dropped)."""
        try:
            with anyio.fail_after(self.timeout_s):
                return await call()
        except Exception as error:
            await self.close()
            reason = _reason(error, self.timeout_s)
            raise OpenEnvError(f"openenv:{self.url} {what} failed at turn {self.turn}: {reason}") from None

    async def initial_observation(self):  # type: ignore[override]
        from openenv.core.generic_client import GenericEnvClient

        self._client = GenericEnvClient(
            base_url=self.url, connect_timeout_s=self.timeout_s, message_timeout_s=self.timeout_s
        )
        result = await self._call("reset", lambda: self._client.reset(seed=self.seed, **self.reset_kwargs))
        self.prompt = observation_text(result.observation, self.observation_field)
        return await super().initial_observation()

    def initial_messages(self) -> list[Message]:
        return [{"role": "user", "content": self.prompt}]

    async def on_message(self, message: Message) -> Reply:
        action = {self.action_field: get_text_content(message)}
        result = await self._call("step", lambda: self._client.step(action))
        text = observation_text(result.observation, self.observation_field)
        reward = float(result.reward or 0.0)
        if not result.done:
            return Reply(messages=[{"role": "user", "content": text or NO_FEEDBACK}], reward=reward)
        await self.close()
        metadata = result.metadata or result.observation.get("metadata") or {}
        metrics = {
            f"{METRIC_PREFIX}{k}": float(v)
            for k, v in metadata.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        return Reply(done=True, reward=reward, metrics=metrics, logs={"openenv/last_observation": text[:500]})

    async def close(self) -> None:
        """Close the session (best effort, bounded: a dead server does not hold it up)."""
        client, self._client = self._client, None
        if client is None:
            return
        with anyio.move_on_after(2.0), contextlib.suppress(Exception):
            await client.close()


@dataclass(frozen=True)
class OpenEnvGroup(EnvGroupBuilder):
    """``group_size`` episodes on one OpenEnv server, all reset with ``seed`` (picklable: the
    sessions open in :meth:`OpenEnvEnv.initial_observation`)."""

    url: str
    """The server's base URL, or the TurnGym id ``openenv:<url>``."""
    seed: int = 0
    """Sent with every ``reset`` of the group."""
    group_size: int = 1
    """Envs per group."""
    max_turns: int = 32
    """TurnGym's turn budget (the server's ``done`` usually ends it first)."""
    action_field: str = "message"
    """The action's text field."""
    observation_field: str | None = None
    """The observation's text field (None: guessed)."""
    timeout_s: float = 60.0
    """Longest wait for one server answer."""
    renderer_name: str | None = None
    """Renderer (default: the model's recommended one)."""
    model_name_for_tokenizer: str | None = None
    """Tokenizer's model (default: the embedded SmolLM2)."""
    _envs: list[OpenEnvEnv] = field(default_factory=list, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_envs": []}

    def renderer(self) -> Renderer:
        """The policy's renderer."""
        from envs.interop._renderer import policy_renderer

        return policy_renderer(self.renderer_name, self.model_name_for_tokenizer)

    async def make_envs(self) -> Sequence[Env]:
        url = server_url(self.url)
        renderer = self.renderer()
        limits = EnvLimits(max_turns=self.max_turns)
        envs = [
            OpenEnvEnv(
                url,
                renderer,
                seed=self.seed,
                limits=limits,
                action_field=self.action_field,
                observation_field=self.observation_field,
                timeout_s=self.timeout_s,
            )
            for _ in range(self.group_size)
        ]
        self._envs.extend(envs)
        return envs

    async def cleanup(self) -> None:
        envs, self._envs[:] = list(self._envs), []
        for env in envs:
            await env.close()

    def logging_tags(self) -> list[str]:
        return ["openenv"]


def openenv_source(server: str, group_size: int = 1, **fields: Any) -> Callable[[int], OpenEnvGroup]:
    """An env factory for the checker, ``gym.make`` and the train CLIs: the group for an episode
    seed (``server``: ``openenv:<url>`` or the URL; ``fields`` are :class:`OpenEnvGroup` fields)."""
    server_url(server)  # a bad id fails here, in one line
    return _Factory(server, group_size, fields)


@dataclass(frozen=True)
class _Factory:
    server: str
    group_size: int
    fields: dict[str, Any]

    def __call__(self, seed: int) -> OpenEnvGroup:
        return OpenEnvGroup(self.server, seed=seed, group_size=self.group_size, **self.fields)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_server(
    argv: Sequence[str], *, env: dict[str, str] | None = None, ready_timeout_s: float = 60.0
) -> Iterator[str]:
    """Run ``python <argv> --port <free port>`` (an OpenEnv server on 127.0.0.1), wait until its
    ``/health`` answers, yield its URL, and stop it after (killed if it does not stop)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, *argv, "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if process.poll() is not None:
                err = (process.stderr.read() if process.stderr else b"").decode(errors="replace")
                tail = err.strip().splitlines()[-1] if err.strip() else ""
                raise OpenEnvError(f"the server {' '.join(argv)} exited with {process.returncode}: {tail}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1.0):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise OpenEnvError(
                        f"the server {' '.join(argv)} did not answer /health in {ready_timeout_s:g}s"
                    ) from None
                time.sleep(0.1)
        yield url
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr:
            process.stderr.close()


GYM_NAMESPACE = "openenv"
"""Gymnasium namespace of registered OpenEnv servers (:func:`register_openenv`)."""


def register_openenv(name: str, url: str, **fields: Any) -> str:
    """Register the server at ``url`` as the gymnasium id ``openenv/<name>`` (idempotent for the
    same URL), so ``gymnasium.make("openenv/<name>")`` gives a TurnGym ``TokenEnv`` over the
    adapter (``fields``: :class:`OpenEnvGroup` fields). Returns the id."""
    import gymnasium as gym

    server_url(url)
    env_id = f"{GYM_NAMESPACE}/{name}"
    kwargs = {"source": "envs.interop.openenv:openenv_source", "server": url, **fields}
    if env_id in gym.registry and gym.registry[env_id].kwargs != kwargs:
        raise ValueError(f"{env_id} is already registered for {gym.registry[env_id].kwargs.get('server')}")
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point="envs.gym._registry:make_env", kwargs=kwargs)
    return env_id
