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
  ``textarena/game_turns`` on the last step; the game's reason in the step's logs. A final
  "reward" that is not a number (a game bug) scores 0 with ``textarena/reward_not_a_number``.
- Faults (truncated, unparseable samples...) follow the env's ``FaultPolicy`` like any ChatEnv.
- A game that needs a download at run time (nltk corpora, an API key, config files missing from
  the wheel) fails to build with one line naming what it needs (:class:`TextArenaUnavailable`).
"""

from __future__ import annotations

import importlib
import random
import threading
from collections.abc import Callable, Iterable, Sequence
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
METRIC_BAD_REWARD = "textarena/reward_not_a_number"
"""1.0 when the game's final reward was not a number (some games pass ``set_invalid_move``'s
arguments the wrong way round): the step's reward is then 0."""
GYM_NAMESPACE = "textarena"
"""Gymnasium namespace of registered TextArena games (:func:`register_textarena`)."""
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
    """What a game that failed to build or reset needs, in a few words."""
    text = str(error)
    first = text.strip().splitlines()[0][:120] if text.strip() else ""
    if isinstance(error, LookupError) and "nltk" in text:
        resource = next((line.split("'")[1] for line in text.splitlines() if "nltk.download('" in line), "")
        return f"a download at run time: nltk data {resource!r} (python -m nltk.downloader {resource})"
    if "API key" in text or "OPENROUTER" in text or "OPENAI" in text:
        return f"an online model: {first}"
    if isinstance(error, FileNotFoundError):
        return f"files missing from the textarena wheel: {first}"
    if isinstance(error, SyntaxError):
        return f"a newer Python (its module does not parse here: {first})"
    if isinstance(error, ModuleNotFoundError):
        return f"the module {error.name!r}"
    return f"what {type(error).__name__} says: {first}"


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
        raise TextArenaUnavailable(f"textarena:{name} cannot run here: it needs {_needs(error)}") from None
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
            if "player" not in str(error).lower():
                raise TextArenaUnavailable(
                    f"textarena:{self.name} cannot run here: it needs {_needs(error)}"
                ) from None
            raise TextArenaUnavailable(
                f"textarena:{self.name} is not a single-player game: {error}"
            ) from None
        except Exception as error:  # e.g. configuration files the wheel lacks
            raise TextArenaUnavailable(
                f"textarena:{self.name} cannot run here: it needs {_needs(error)}"
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

    def _play_move(self, action: str) -> tuple[bool, str, float, dict[str, Any]]:
        done, _info = self.game.step(action)
        if not done:
            return False, self._feedback(), 0.0, {}
        rewards, game_info = self.game.close()
        info = dict((game_info or {}).get(0, {}))
        reward = (rewards or {}).get(0, 0.0)
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            # a game that passed set_invalid_move(reward, reason) the wrong way round: its
            # "reward" is the reason text; the step scores 0 and says so
            info["reward_not_a_number"] = True
            info["reason"] = f"{info.get('reason', '')} (game reward {reward!r:.80} is not a number)"
            reward = 0.0
        return True, "", float(reward), info

    async def initial_observation(self):  # type: ignore[override]
        self.prompt = await self._call(self._reset)
        return await super().initial_observation()

    def initial_messages(self) -> list[Message]:
        return [{"role": "user", "content": self.prompt}]

    async def on_message(self, message: Message) -> Reply:
        done, feedback, reward, info = await self._call(self._play_move, get_text_content(message))
        if not done:
            return Reply(messages=[{"role": "user", "content": feedback or NO_FEEDBACK}])
        return Reply(
            done=True,
            reward=reward,
            metrics={
                METRIC_INVALID_MOVE: float(bool(info.get("invalid_move"))),
                METRIC_GAME_TURNS: float(info.get("turn_count", 0)),
                METRIC_BAD_REWARD: float(bool(info.get("reward_not_a_number"))),
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
        from envs.interop._renderer import policy_renderer

        return policy_renderer(self.renderer_name, self.model_name_for_tokenizer)

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


def register_textarena(games: Iterable[str]) -> list[str]:
    """Register TextArena games as gymnasium ids (``textarena/<GameId>``: gymnasium reads a
    colon as ``module:id``; idempotent) so that ``gymnasium.make("textarena/GuessTheNumber-v0")`` gives a TurnGym ``TokenEnv`` over the
    adapter (keyword arguments of ``make`` go to :func:`textarena_source`). Nothing is built
    until ``make``; returns the ids."""
    import gymnasium as gym

    ids: list[str] = []
    for game in games:
        env_id = GYM_NAMESPACE + "/" + game_id(game).removeprefix(GYM_NAMESPACE + "/")
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="envs.gym._registry:make_env",
                kwargs={"source": "envs.interop.textarena:textarena_source", "game": game_id(game)},
            )
        ids.append(env_id)
    return ids
