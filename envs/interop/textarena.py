"""TextArena single-player games as TurnGym ``ChatEnv`` s (ids ``textarena:<GameId>``).

TextArena (``pip install textarena``, the ``textarena`` extra) is a text-level framework: its
env takes an action string and queues observations (``(from_id, text, type)``) per player. This
adapter wraps one single-player game, without TextArena's observation wrappers (those re-send the
whole history each turn): the first user message is the game's prompt, and after each assistant
turn only the game's *new* observations are rendered, so the next observation extends the
previous one token for token (the extension property, where the renderer claims it).

- Actions: the sampled tokens, parsed by the renderer; the assistant text (thinking left out)
  goes through the game's registered action wrappers (``ActionFormattingWrapper`` brackets a
  bare move) and the game parses it its own way (e.g. ``[7]`` in GuessTheNumber).
- Off the event loop: building, ``reset`` and ``step`` of the synchronous game run in a worker
  thread (``anyio.to_thread``). TextArena games draw from the global ``random`` (seeded by
  ``reset``), so each env keeps its own generator state and swaps it in, under one lock, around
  each call: envs run concurrently and stay deterministic for a seed.
- Reward, done, metrics: TextArena's final reward for player 0 (``close()``) on the last step
  (0 before), ``done`` when the game says so; ``textarena/invalid_move`` and
  ``textarena/game_turns`` on the last step; the game's reason in the step's logs.
- Faults (truncated, unparseable samples...) follow the env's ``FaultPolicy`` like any ChatEnv.
- A game that needs a download at run time (nltk corpora, an API key, config files missing from
  the wheel) fails to build with one line naming what it needs (:class:`TextArenaUnavailable`).
"""

from __future__ import annotations

import importlib
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from tinker_cookbook.renderers import Message, Renderer, get_text_content
from tinker_cookbook.rl.types import Env, EnvGroupBuilder

from envs.core import ChatEnv, EnvLimits, Reply

PREFIX = "textarena:"
"""Prefix of the TurnGym ids of TextArena games (``textarena:Wordle-v0``)."""
METRIC_INVALID_MOVE = "textarena/invalid_move"
"""1.0 when the game ended on an invalid move (on the last step)."""
METRIC_GAME_TURNS = "textarena/game_turns"
"""Turns the game counted (invalid moves it let the player retry are not counted), last step."""
NO_FEEDBACK = "(The game has no new message. Make your next move.)"
"""The user message after a turn the game answered with no observation (a turn must follow)."""

_RNG_LOCK = threading.Lock()
_T = TypeVar("_T")


class TextArenaUnavailable(RuntimeError):
    """A TextArena game that cannot run here (not single-player, or it needs a download)."""


def game_id(env_id: str) -> str:
    """The TextArena id behind a TurnGym id (``textarena:Wordle-v0`` -> ``Wordle-v0``)."""
    return env_id[len(PREFIX) :] if env_id.startswith(PREFIX) else env_id


def _needs(error: BaseException) -> str:
    """What a failed game build needs, in a few words."""
    text = str(error)
    if isinstance(error, LookupError) and "nltk" in text:
        resource = next((line.split("'")[1] for line in text.splitlines() if "nltk.download('" in line), "")
        return f"a download at run time: nltk data {resource!r} (python -m nltk.downloader {resource})"
    if "API key" in text or "OPENROUTER" in text or "OPENAI" in text:
        return "an online model: " + text.splitlines()[0][:120]
    if isinstance(error, FileNotFoundError):
        return "files missing from the textarena wheel: " + text.splitlines()[0][:120]
    first = text.strip().splitlines()[0][:120] if text.strip() else ""
    return f"{type(error).__name__}: {first}"


def make_game(name: str) -> Any:
    """A TextArena game by id with its registered *action* wrappers only (they parse actions the
    way the game expects, e.g. ``ActionFormattingWrapper`` adds missing brackets) and none of its
    observation wrappers; :class:`TextArenaUnavailable` (one line) when textarena is missing, the
    id unknown, or the game cannot be built offline."""
    try:
        import textarena as ta
        from textarena.envs.registration import ENV_REGISTRY
    except ImportError as error:
        raise TextArenaUnavailable(
            f"textarena:{name} needs the textarena package (pip install 'turngym[textarena]'): {error}"
        ) from None
    spec = ENV_REGISTRY.get(name)
    if spec is None:
        raise TextArenaUnavailable(
            f"unknown TextArena game {name!r} (see textarena.envs.registration.ENV_REGISTRY)"
        )
    try:
        entry = spec.entry_point
        if isinstance(entry, str):
            module, _, attr = entry.partition(":")
            entry = getattr(importlib.import_module(module), attr)
        game = entry(**spec.kwargs)
    except Exception as error:
        raise TextArenaUnavailable(f"textarena:{name} cannot run offline: it needs {_needs(error)}") from None
    for wrapper in spec.default_wrappers or []:
        if isinstance(wrapper, type) and issubclass(wrapper, ta.ActionWrapper):
            game = wrapper(game)
    return game


class TextArenaEnv(ChatEnv):
    """One episode of a single-player TextArena game (build with :class:`TextArenaGroup`).

    Args:
        game: a raw TextArena env (:func:`make_game`), not reset yet.
        renderer: the policy's renderer.
        seed: the game's seed (its ``reset(seed=...)``).
        limits: TurnGym's budgets (the game's own turn limit usually ends it first).
        name: the TextArena id (for messages).
    """

    def __init__(
        self, game: Any, renderer: Renderer, *, seed: int, limits: EnvLimits | None = None, name: str = ""
    ):
        super().__init__(renderer, limits=limits or EnvLimits(max_turns=64))
        self.game = game
        self.seed = seed
        self.name = name or type(game).__name__
        self.prompt = ""
        self._rng: Any = None

    async def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in a worker thread, with this env's own global-``random`` state."""

        def run() -> _T:
            with _RNG_LOCK:
                outer = random.getstate()
                if self._rng is not None:
                    random.setstate(self._rng)
                try:
                    return fn(*args)
                finally:
                    self._rng = random.getstate()
                    random.setstate(outer)

        return await anyio.to_thread.run_sync(run)

    def _reset(self) -> str:
        import textarena as ta

        try:
            self.game.reset(num_players=1, seed=self.seed)
        except (AssertionError, ValueError) as error:  # "The number of players has to be 2"...
            raise TextArenaUnavailable(
                f"textarena:{self.name} is not a single-player game: {error}"
            ) from None
        if not isinstance(getattr(self.game, "state", None), ta.SinglePlayerState):
            raise TextArenaUnavailable(f"textarena:{self.name} is not a single-player game")
        return self._feedback()

    def _feedback(self) -> str:
        """The game's new observations for player 0, as text (the player's own move left out)."""
        import textarena as ta

        _player, observations = self.game.get_observation()
        lines = [
            str(text)
            for sender, text, kind in observations
            if not (sender == 0 and kind == ta.ObservationType.PLAYER_ACTION)
        ]
        return "\n".join(line for line in lines if line.strip())

    def _step(self, action: str) -> tuple[bool, str, float, dict[str, Any]]:
        done, _info = self.game.step(action)
        if not done:
            return False, self._feedback(), 0.0, {}
        rewards, game_info = self.game.close()
        info = dict((game_info or {}).get(0, {}))
        return True, "", float((rewards or {}).get(0, 0.0)), info

    async def initial_observation(self):  # type: ignore[override]
        self.prompt = await self._call(self._reset)
        return await super().initial_observation()

    def initial_messages(self) -> list[Message]:
        return [{"role": "user", "content": self.prompt}]

    async def on_message(self, message: Message) -> Reply:
        done, feedback, reward, info = await self._call(self._step, get_text_content(message))
        if not done:
            return Reply(messages=[{"role": "user", "content": feedback or NO_FEEDBACK}])
        return Reply(
            done=True,
            reward=reward,
            metrics={
                METRIC_INVALID_MOVE: float(bool(info.get("invalid_move"))),
                METRIC_GAME_TURNS: float(info.get("turn_count", 0)),
            },
            logs={"textarena/reason": str(info.get("reason", ""))[:500]},
        )


@dataclass(frozen=True)
class TextArenaGroup(EnvGroupBuilder):
    """``group_size`` episodes of one TextArena single-player game, all with ``seed`` (picklable:
    the games are built in :meth:`make_envs`, in a worker thread)."""

    game: str
    """The TextArena id (``Wordle-v0``) or the TurnGym id (``textarena:Wordle-v0``)."""
    seed: int = 0
    """The game's seed (same seed, same puzzle across the group)."""
    group_size: int = 1
    """Envs per group."""
    max_turns: int = 64
    """TurnGym's turn budget (the game's own limit usually ends it first)."""
    renderer_name: str | None = None
    """Renderer (default: the model's recommended one)."""
    model_name_for_tokenizer: str | None = None
    """Tokenizer's model (default: the embedded SmolLM2)."""

    def renderer(self) -> Renderer:
        """The policy's renderer."""
        from backend.model import SMOLLM2, register_tokenizers
        from renderers_ext import load_renderer

        register_tokenizers()
        return load_renderer(self.renderer_name, self.model_name_for_tokenizer or SMOLLM2)

    async def make_envs(self) -> Sequence[Env]:
        name = game_id(self.game)
        renderer = self.renderer()
        games = [await anyio.to_thread.run_sync(make_game, name) for _ in range(self.group_size)]
        limits = EnvLimits(max_turns=self.max_turns)
        return [TextArenaEnv(g, renderer, seed=self.seed, limits=limits, name=name) for g in games]

    def logging_tags(self) -> list[str]:
        return ["textarena", game_id(self.game)]


def textarena_source(game: str, group_size: int = 1, **fields: Any) -> Callable[[int], TextArenaGroup]:
    """An env factory for the checker, ``gym.make`` and the train CLIs: the group for an episode
    seed (``fields`` are :class:`TextArenaGroup` fields)."""
    return _Factory(game, group_size, fields)


@dataclass(frozen=True)
class _Factory:
    game: str
    group_size: int
    fields: dict[str, Any]

    def __call__(self, seed: int) -> TextArenaGroup:
        return TextArenaGroup(self.game, seed=seed, group_size=self.group_size, **self.fields)
