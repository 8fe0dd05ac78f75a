"""A small native OpenEnv env (guess the number), written against OpenEnv's own server API.

OpenEnv's package ships no env that runs offline (its envs live in Docker images and Hugging
Face Spaces), so the OpenEnv adapter's tests, the interop bench and the docs serve this one:
``python -m envs.interop.openenv_demo --port 8000`` starts it with OpenEnv's ``create_app``
(HTTP + WebSocket, one env per session). ``reset(seed)`` draws a number in 1..``HIGH``; each
step reads the first integer in ``message`` and answers "higher" / "lower"; the episode ends on
the number (reward 1) or after ``GUESSES`` guesses (reward 0).

For fault tests the server can be told to fail on purpose (environment variables, read per
step): ``TURNGYM_OPENENV_DEMO_DIE_AT=<k>`` kills the server process at the k-th step of any
session; ``TURNGYM_OPENENV_DEMO_STALL_AT=<k>`` makes the k-th step block forever.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import threading
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

HIGH = 16
"""The number is drawn in 1..HIGH."""
GUESSES = 6
"""Guesses before the episode ends with reward 0."""
DIE_AT = "TURNGYM_OPENENV_DEMO_DIE_AT"
"""Environment variable: kill the server at this step (a server that dies mid-episode)."""
STALL_AT = "TURNGYM_OPENENV_DEMO_STALL_AT"
"""Environment variable: block forever at this step (a server that stalls mid-episode)."""


class GuessAction(Action):
    """A guess, as free text (the first integer in it counts)."""

    message: str = Field(..., description="the player's text; its first integer is the guess")


class GuessObservation(Observation):
    """What the player reads."""

    text: str = Field(default="", description="the game's message to the player")


class GuessNumberEnvironment(Environment[GuessAction, GuessObservation, State]):
    """Guess a number in 1..HIGH in at most GUESSES tries (one instance per session)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id="", step_count=0)
        self._target = 1

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        self._target = random.Random(seed).randint(1, HIGH)
        self._state = State(episode_id=episode_id or f"seed-{seed}", step_count=0)
        return GuessObservation(
            text=f"I picked a whole number from 1 to {HIGH}. Guess it in at most {GUESSES} tries: "
            "answer with one number.",
        )

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        step = self._state.step_count
        if os.environ.get(DIE_AT) == str(step):
            os._exit(3)  # the server process dies mid-episode
        if os.environ.get(STALL_AT) == str(step):
            threading.Event().wait()  # blocks this session forever
        found = re.search(r"-?\d+", action.message)
        left = GUESSES - step
        if found is None:
            text = "That is not a number."
        elif int(found.group()) == self._target:
            return GuessObservation(text="Correct!", done=True, reward=1.0, metadata={"guesses": step})
        else:
            text = "Higher." if int(found.group()) < self._target else "Lower."
        if left <= 0:
            return GuessObservation(
                text=f"Out of guesses: it was {self._target}.",
                done=True,
                reward=0.0,
                metadata={"guesses": step},
            )
        return GuessObservation(text=f"{text} {left} guesses left.", done=False, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


def create_demo_app(max_concurrent_envs: int = 64) -> Any:
    """The FastAPI app serving :class:`GuessNumberEnvironment` (OpenEnv's ``create_app``)."""
    from openenv.core.env_server.http_server import create_app

    return create_app(
        GuessNumberEnvironment,
        GuessAction,
        GuessObservation,
        env_name="guess_number",
        max_concurrent_envs=max_concurrent_envs,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-sessions", type=int, default=64, help="concurrent WebSocket sessions")
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(create_demo_app(args.max_sessions), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
