"""Serve any TurnGym env as an OpenEnv env server (so TRL, SkyRL, verifiers and other OpenEnv
clients can use it)::

    python -m envs.serve <env id> [--port 8000] [--host 127.0.0.1] [--max-sessions 64]

``<env id>`` is anything :func:`envs.gym.env_source` takes (``turngym/TwentyQuestions-v0``,
``textarena:GuessTheNumber-v0``, ...). The server is OpenEnv's own ``create_app`` (HTTP and
WebSocket, one env per WebSocket session) over :class:`TurnGymEnvironment`:

- ``reset(seed=s)`` builds the group the source gives for episode seed ``s`` and plays its first
  env (``index=`` picks another); the observation's ``text`` is the conversation so far (the
  non-assistant messages' text) and ``messages`` the messages themselves.
- ``step({"message": text})`` renders the text as the assistant turn with the env's renderer
  (an OpenEnv client speaks text: the served env re-tokenises it, so this direction is text-
  exact, not token-exact), steps the env, and answers only the *new* messages (``text``,
  ``messages``), the step's ``reward`` and ``done``, and the step's metrics as ``metadata``.
- Group-level rewards (``compute_group_rewards``, e.g. pairwise judges) are not served: an
  OpenEnv session is one episode.

Only ``ChatEnv`` s can be served (their renderer turns the client's text into tokens).
"""

from __future__ import annotations

import argparse
import functools
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field
from tinker_cookbook.renderers import Message, get_text_content
from tinker_cookbook.rl.types import InitialObservationOverflow

from envs.core import ChatEnv


class ChatAction(Action):
    """One assistant turn, as text."""

    message: str = Field(..., description="the assistant's reply")


class ChatObservation(Observation):
    """What the env says: its new messages."""

    text: str = Field(default="", description="the new messages' text, one per line")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="the new messages")


def _public(message: Message) -> dict[str, Any]:
    return {"role": message["role"], "content": get_text_content(message)}


def _text(messages: list[Message]) -> str:
    return "\n".join(get_text_content(m) for m in messages if m["role"] != "assistant")


class TurnGymEnvironment(Environment[ChatAction, ChatObservation, State]):
    """One TurnGym env per OpenEnv session (see the module docstring).

    Args:
        env_id: a TurnGym env id (:func:`envs.gym.env_source`).
        config: keyword arguments of the id's source.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, config: dict[str, Any] | None = None):
        super().__init__()
        self.env_id = env_id
        self.config = dict(config or {})
        self._env: ChatEnv | None = None
        self._state = State(episode_id="", step_count=0)

    async def reset_async(  # type: ignore[override]
        self, seed: int | None = None, episode_id: str | None = None, index: int = 0, **kwargs: Any
    ) -> ChatObservation:
        from envs.gym import env_source
        from envs.gym._adapter import make_env_group, resolve_builder

        source = env_source(self.env_id, **self.config)
        envs = await make_env_group(await resolve_builder(source, seed or 0))
        env = envs[index % len(envs)]
        if not isinstance(env, ChatEnv):
            raise TypeError(f"{self.env_id}: only ChatEnvs can be served, got {type(env).__name__}")
        self._env = env
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        first = await env.initial_observation()
        if isinstance(first, InitialObservationOverflow):
            return ChatObservation(done=True, reward=first.reward, metadata=dict(first.metrics))
        return ChatObservation(text=_text(env.messages), messages=[_public(m) for m in env.messages])

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ChatObservation:
        raise NotImplementedError("served asynchronously (reset_async)")

    async def step_async(  # type: ignore[override]
        self, action: ChatAction, timeout_s: float | None = None, **kwargs: Any
    ) -> ChatObservation:
        from renderers_ext import render_action

        env = self._env
        if env is None:
            raise RuntimeError("step before reset")
        self._state.step_count += 1
        before = len(env.messages)
        tokens = render_action(env.renderer, {"role": "assistant", "content": action.message})
        result = await env.step(list(tokens))
        new = env.messages[before + 1 :] if not result.episode_done else []
        metadata = {k: float(v) for k, v in result.metrics.items()}
        return ChatObservation(
            text=_text(new),
            messages=[_public(m) for m in new],
            done=result.episode_done,
            reward=float(result.reward),
            metadata=metadata,
        )

    def step(self, action: ChatAction, timeout_s: float | None = None, **kwargs: Any) -> ChatObservation:
        raise NotImplementedError("served asynchronously (step_async)")

    @property
    def state(self) -> State:
        return self._state


def create_turngym_app(env_id: str, max_concurrent_envs: int = 64, **config: Any) -> Any:
    """OpenEnv's FastAPI app serving ``env_id`` (``config``: the id's source arguments)."""
    from openenv.core.env_server.http_server import create_app

    return create_app(
        functools.partial(TurnGymEnvironment, env_id, config),
        ChatAction,
        ChatObservation,
        env_name=env_id.replace("/", "_").replace(":", "_"),
        max_concurrent_envs=max_concurrent_envs,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("env_id", help="a TurnGym env id (turngym/..., textarena:...)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-sessions", type=int, default=64, help="concurrent WebSocket sessions")
    args = parser.parse_args(argv)
    import uvicorn

    from envs.gym import env_source

    try:
        env_source(args.env_id)
    except Exception as error:  # an unknown id or a missing package: one line, before serving
        parser.error(f"{args.env_id}: {error}")
    uvicorn.run(
        create_turngym_app(args.env_id, args.max_sessions),
        host=args.host,
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
