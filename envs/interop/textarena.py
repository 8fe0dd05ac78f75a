"""TextArena games as TurnGym envs (ids ``textarena:<GameId>``): single-player games as
``ChatEnv`` s, multi-player games as seated groups of :mod:`envs.seats` (:class:`TextArenaGame`,
:func:`textarena_seated`; at the end of this module).

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
- Multi-player games: each seat is told only its new observations (its own move left out, the
  other players' moves named as TextArena names them), so the extension property holds per seat;
  TextArena's rules decide whose turn it is, invalid moves (a retry, then the end) and the rewards
  per seat; every move runs in a worker thread with the game's own ``random`` state; faults and
  crashes end the game for every seat (the game loop of :mod:`envs.seats`). Building and
  resetting a game (in memory) happen when the group makes its games.
"""

from __future__ import annotations

import importlib
import random
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio
from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, Renderer, get_text_content
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, StopReason

from envs.core import ChatEnv, EnvLimits, Reply
from envs.seats import STOP_SEAT_FAULT, Game, LoopConfig, Move, Seat, SeatedGroupBuilder

PREFIX = "textarena:"
"""Prefix of the TurnGym ids of TextArena games (``textarena:Wordle-v0``)."""
METRIC_INVALID_MOVE = "textarena/invalid_move"
"""1.0 when the game ended on an invalid move (on the last step)."""
METRIC_GAME_TURNS = "textarena/game_turns"
"""Turns the game counted (invalid moves it let the player retry are not counted), last step."""
METRIC_RETRIED = "textarena/retried_move"
"""Moves of a seat that TextArena ruled invalid and let it retry (multi-player games; summed)."""
METRIC_BAD_REWARD = "textarena/reward_not_a_number"
"""1.0 when the game's final reward was not a number (some games pass ``set_invalid_move``'s
arguments the wrong way round): the step's reward is then 0."""
GYM_NAMESPACE = "textarena"
"""Gymnasium namespace of registered TextArena games (:func:`register_textarena`)."""
NO_FEEDBACK = "(The game has no new message. Make your next move.)"
"""The user message after a turn the game answered with no observation (a turn must follow)."""

_RNG_LOCK = threading.Lock()
_T = TypeVar("_T")


def _own_random(owner: Any, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` with ``owner._rng`` as the global ``random`` state (TextArena games draw from
    it), under one lock: concurrent games each keep their own draws."""
    with _RNG_LOCK:
        outer = random.getstate()
        if owner._rng is not None:
            random.setstate(owner._rng)
        try:
            return fn(*args)
        finally:
            owner._rng = random.getstate()
            random.setstate(outer)


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
        return await anyio.to_thread.run_sync(_own_random, self, fn, *args)

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


# --- multi-player games, through the multi-seat form (envs.seats) -----------------------------

MAX_PLAYERS = 8
"""The most players :func:`players_of` tries when it looks for a game's player count."""
OPPONENTS = ("self", "random")
"""Who holds the other seats of a multi-player game: the policy (self-play) or :class:`RandomMove`."""
_PLAYERS: dict[str, int | None] = {}


def players_of(name: str) -> int | None:
    """How many players a TextArena game is played with: 1 for a single-player game, else the
    fewest it accepts; None when the game cannot be built or reset here (the single-player path
    then says why in one line). Cached per id; resets a throw-away game off the caller's
    ``random`` state."""
    name = game_id(name)
    if name not in _PLAYERS:
        _PLAYERS[name] = _probe_players(name)
    return _PLAYERS[name]


def _probe_players(name: str) -> int | None:
    try:
        game = make_game(name)
    except TextArenaUnavailable:
        return None
    holder = _Holder()
    # single-player states refuse 2 players at once (before any costly puzzle generation), so a
    # game that accepts none of 2..MAX_PLAYERS is a single-player game
    for n in range(2, MAX_PLAYERS + 1):
        try:
            _own_random(holder, game.reset, n, 0)
        except (AssertionError, ValueError) as error:
            if "player" in str(error).lower():
                continue
            return None
        except Exception:
            return None
        return n
    return 1


class _Holder:
    _rng: Any = None


def _say(sender: int, text: str, role_mapping: dict[int, str]) -> str:
    """One TextArena observation as a line: the game's own text, another player's prefixed with
    its name (as TextArena's ``LLMObservationWrapper`` writes it)."""
    if sender < 0:
        return text
    return f"[{role_mapping.get(sender, f'Player {sender}')}] {text}"


class TextArenaGame(Game):
    """A multi-player TextArena game as an :class:`envs.seats.Game` (seat ``i`` is TextArena's
    player ``i``): each seat is told only its *new* observations (its own move left out); a move
    is the seat's parsed text through the game's action wrappers, played in a worker thread with
    the game's own ``random`` state. TextArena's rules decide everything else: whose turn, an
    invalid move (a retry message to the same seat while the game's error allowance lasts, then
    the game's end with its rewards), the rewards per seat at the end (``close()``).

    Args:
        game: a raw TextArena env (:func:`make_game`), not reset yet.
        players: how many seats.
        seed: the game's seed (its ``reset``).
        name: the TextArena id (for messages).
    """

    def __init__(self, game: Any, players: int, *, seed: int, name: str = ""):
        self.game = game
        self.name = name or type(game).__name__
        self.roles = tuple(f"player_{i}" for i in range(players))
        self._rng: Any = None
        _own_random(self, game.reset, players, seed)
        self.first_seat = int(game.state.current_player_id)
        self.openings = self._news()
        self._told = [False] * players
        """Whether a seat was told something since its last move (a seat to move is always told)."""
        self._moved: set[int] = set()

    def _news(self) -> dict[int, str]:
        """Every seat's queued observations as text, taken off the game's queues."""
        import textarena as ta

        state = self.game.state
        out: dict[int, str] = {}
        for pid in range(len(self.roles)):
            queued, state.observations[pid] = state.observations[pid], []
            lines = [
                _say(sender, str(text), state.role_mapping)
                for sender, text, kind in queued
                if not (sender == pid and kind == ta.ObservationType.PLAYER_ACTION)
            ]
            text = "\n".join(line for line in lines if line.strip())
            if text:
                out[pid] = text
        return out

    def initial_messages(self, seat: int) -> list[Message]:
        return [{"role": "user", "content": self.openings.get(seat, "")}]

    def _play(self, seat: int, action: str) -> tuple[bool, dict[int, str], Any, int, bool]:
        """Seat ``seat``'s move: (done, news per seat, rewards and info at the end or None, who is
        next, whether the move was invalid and the game lets the seat retry)."""
        state = self.game.state
        if state.current_player_id != seat:
            raise ValueError(
                f"textarena:{self.name}: seat {seat} moved but it is player {state.current_player_id}'s turn"
            )
        done, _info = self.game.step(action)
        news = self._news()
        if done:
            return True, news, self.game.close(), seat, False
        # TextArena's states keep error_count > 0 after a step only for an invalid move retried
        retry = bool(getattr(self.game.state, "error_count", 0))
        return False, news, None, int(self.game.state.current_player_id), retry

    async def on_move(self, seat: int, message: Message) -> Move:
        text = get_text_content(message)
        done, news, closed, nxt, retry = await anyio.to_thread.run_sync(
            _own_random, self, self._play, seat, text
        )
        if done:
            rewards, info = closed
            return self._end(seat, rewards or {}, info or {})
        self._moved.add(seat)
        self._told[seat] = False
        for pid in news:
            self._told[pid] = True
        if nxt in self._moved and not self._told[nxt]:  # a seat to move again is always told something
            news[nxt] = NO_FEEDBACK
            self._told[nxt] = True
        return Move(
            messages={pid: [{"role": "user", "content": t}] for pid, t in news.items()},
            next_seat=nxt,
            metrics={seat: {METRIC_RETRIED: 1.0}} if retry else {},
        )

    def _end(self, seat: int, rewards: dict[int, Any], info: dict[int, Any]) -> Move:
        out: dict[int, float] = {}
        metrics: dict[int, dict[str, float]] = {}
        for pid in range(len(self.roles)):
            r = rewards.get(pid, 0.0)
            bad = isinstance(r, bool) or not isinstance(r, int | float)
            out[pid] = 0.0 if bad else float(r)
            mine = dict(info.get(pid) or {})
            metrics[pid] = {
                METRIC_INVALID_MOVE: float(bool(mine.get("invalid_move"))),
                METRIC_GAME_TURNS: float(mine.get("turn_count", 0)),
                METRIC_BAD_REWARD: float(bad),
            }
        reason = str((info.get(seat) or {}).get("reason", ""))[:500]
        invalid = bool((info.get(seat) or {}).get("invalid_move"))
        return Move(
            rewards=out,
            done=True,
            metrics=metrics,
            logs={"textarena/reason": reason},
            stop_reason=STOP_SEAT_FAULT if invalid else StopReason.COMPLETED,
        )

    def forfeit(self, seat: int, reason: str) -> Move:
        """A faulty action (truncated, unparseable) ends the game as an invalid move TextArena
        allows no retry for: the seat gets -1; in a two-player game the other gets +1 (TextArena's
        two-player rule), in a larger one 0."""
        n = len(self.roles)
        rewards = {pid: -1.0 if pid == seat else (1.0 if n == 2 else 0.0) for pid in range(n)}
        return Move(
            rewards=rewards,
            done=True,
            metrics={seat: {METRIC_INVALID_MOVE: 1.0}},
            logs={"textarena/reason": f"faulty action: {reason}"},
            stop_reason=STOP_SEAT_FAULT,
        )


class RandomMove(MessageCompleter):
    """A random player for any TextArena game: one of the bracketed moves (``[4]``, ``[bet]``,
    ``[col 3]``) its last message offers, else one from its whole conversation (the rules'
    examples); ``[0]`` when there is none. It knows no rules: TextArena judges its moves."""

    _MOVE = re.compile(r"\[[^\[\]\n]{1,24}\]")

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    async def __call__(self, messages: list[Message]) -> Message:
        said = [  # the game's lines (other players' moves left out)
            "\n".join(line for line in get_text_content(m).splitlines() if not line.startswith("[Player "))
            for m in messages
            if m["role"] == "user"
        ]
        for text in (said[-1:], said):
            found = [m for t in text for m in self._MOVE.findall(t)]
            if found:
                return {"role": "assistant", "content": self.rng.choice(found)}
        return {"role": "assistant", "content": "[0]"}


def _random_move(rng: random.Random) -> RandomMove:
    return RandomMove(rng.randrange(2**31))


@dataclass(frozen=True)
class _NewGame:
    """``make_game`` of a seated TextArena group (picklable): every game of the group is reset
    with the group's seed (the same deal), as the games of :class:`TextArenaGroup` are."""

    name: str
    players: int
    seed: int

    def __call__(self, rng: random.Random) -> TextArenaGame:
        return TextArenaGame(make_game(self.name), self.players, seed=self.seed, name=self.name)


def textarena_seated(
    game: str,
    *,
    seed: int = 0,
    games: int = 1,
    opponent: str = "self",
    players: int | None = None,
    max_moves: int = 200,
    max_turns: int = 64,
    renderer_name: str | None = None,
    model_name_for_tokenizer: str | None = None,
    tags: Sequence[str] = (),
) -> SeatedGroupBuilder:
    """A multi-player TextArena game as a seated group (:class:`envs.seats.SeatedGroupBuilder`):
    ``games`` games of one ``seed``, each seat a token-level env of its own.

    ``opponent="self"``: the policy holds every seat and every seat trains (self-play);
    ``"random"``: the policy holds seat 0, :class:`RandomMove` players (seeded per game) the
    others. ``players``: the player count (default: the fewest the game accepts,
    :func:`players_of`). ``max_moves``: moves of all seats before the game ends as it stands;
    ``max_turns``: each seat's own turn budget (the game ends as it stands when one runs out). The conformance checker plays seat 0 against
    random stand-ins (``stand_in``). One-line :class:`TextArenaUnavailable` for a game that
    cannot run here or is single-player (use :class:`TextArenaGroup`)."""
    name = game_id(game)
    if opponent not in OPPONENTS:
        raise ValueError(f"opponent must be one of {', '.join(OPPONENTS)}, got {opponent!r}")
    found = players_of(name)
    if found is None:
        make_game(name)  # raises the one-line reason
        raise TextArenaUnavailable(f"textarena:{name} cannot be reset here with 2 to {MAX_PLAYERS} players")
    if found == 1:
        raise TextArenaUnavailable(f"textarena:{name} is a single-player game (use TextArenaGroup)")
    n = players or found
    from envs.interop._renderer import policy_renderer

    random_seat = Seat.pinned("random", _random_move)
    other = Seat.policy() if opponent == "self" else random_seat
    return SeatedGroupBuilder(
        make_game=_NewGame(name, n, seed),
        renderer=policy_renderer(renderer_name, model_name_for_tokenizer),
        seats=(Seat.policy(), *[other] * (n - 1)),
        games=games,
        seed=seed,
        limits=EnvLimits(max_turns=max_turns),
        loop=LoopConfig(max_moves=max_moves),
        tags=("textarena", name, *tags),
        stand_in=random_seat,
    )


def textarena_source(
    game: str, group_size: int = 1, **fields: Any
) -> Callable[[int], Awaitable[EnvGroupBuilder]]:
    """An env factory for the checker, ``gym.make`` and the train CLIs: the group for an episode
    seed. A single-player game gives a :class:`TextArenaGroup` (``fields`` are its fields), a
    multi-player one a seated group of ``group_size`` games (:func:`textarena_seated`; ``fields``
    are its keywords, ``max_turns`` included)."""
    return _Factory(game, group_size, fields)


@dataclass(frozen=True)
class _Factory:
    game: str
    group_size: int
    fields: dict[str, Any]

    async def __call__(self, seed: int) -> EnvGroupBuilder:
        players = await anyio.to_thread.run_sync(players_of, self.game)
        if players is not None and players > 1:
            return await anyio.to_thread.run_sync(
                partial(textarena_seated, self.game, seed=seed, games=self.group_size, **self.fields)
            )
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
