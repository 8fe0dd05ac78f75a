"""One seat of a game as a plain single-player env, the other seats played inline by scripted
players: :class:`SoloSeatEnv`.

When every other seat is a message-level scripted player (random, rule-based optimal), there is
nothing to wait for: the env applies the seat's move, lets the scripted seats answer at once, and
returns what the seat is told, like any ``ChatEnv``. Its token history is the same as the
seat's :class:`SeatEnv` under the game loop. It is how scripted episodes for a supervised warm
start are played (``training.SupportsScriptedEpisodes``), and how a pinned-opponent game runs in
any engine (the cookbook's ``rl.train`` included). A seat played by a model does not belong
here: its calls would count as step time; use :class:`SeatedGroupBuilder`.
"""

from __future__ import annotations

from collections.abc import Mapping

from tinker_cookbook.completers import MessageCompleter, StopCondition
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.rl.types import InitialObservationOverflow, Metrics, Observation

from envs.core import EnvLimits, Fault, Reply
from envs.seats._game import Game, Move, SeatEnv


class SoloSeatEnv(SeatEnv):
    """Seat ``seat`` of ``game``; every other seat is played by its scripted player in ``others``."""

    def __init__(
        self,
        game: Game,
        seat: int,
        renderer: Renderer,
        others: Mapping[int, MessageCompleter],
        *,
        limits: EnvLimits | None = None,
    ):
        super().__init__(game, seat, renderer, limits=limits)
        missing = set(range(len(game.roles))) - {seat} - set(others)
        if missing:
            raise ValueError(f"seats {sorted(missing)} have no scripted player")
        self.in_loop = True  # a plain env: the other seats are played inside its step
        self.others = dict(others)
        self.histories: dict[int, list[Message]] = {}
        self.reward = 0.0
        """This seat's game reward so far."""
        self.game_metrics: dict[str, float] = {}
        """This seat's game metrics so far."""

    def _take(self, move: Move) -> None:
        for i, messages in move.messages.items():
            if i == self.seat:
                self.tell(messages)
            else:
                self.histories[i].extend(messages)
        self.reward += float(move.rewards.get(self.seat, 0.0))
        for k, v in move.metrics.get(self.seat, {}).items():
            self.game_metrics[k] = self.game_metrics.get(k, 0.0) + float(v)

    async def _until_my_turn(self, move: Move) -> Move:
        """Let the scripted seats play until it is this seat's turn or the game ends."""
        while not move.done and move.next_seat is not None and move.next_seat != self.seat:
            other = move.next_seat
            reply = await self.others[other](list(self.histories[other]))
            self.histories[other].append(reply)
            move = await self.game.on_move(other, reply)
            self._take(move)
        return move

    async def initial_observation(self) -> tuple[Observation, StopCondition] | InitialObservationOverflow:
        self.histories = {i: list(self.game.initial_messages(i)) for i in self.others}
        self.reward, self.game_metrics = 0.0, {}
        if (
            self.game.first_seat != self.seat
        ):  # the scripted seats open; the seat is told before its first turn
            move = await self._until_my_turn(Move(next_seat=self.game.first_seat))
            if move.done:
                self.finish(move.stop_reason)
        return await super().initial_observation()

    async def on_message(self, message: Message) -> Reply:
        move = await self.game.on_move(self.seat, message)
        self._take(move)
        move = await self._until_my_turn(move)
        if move.done:
            self.finish(move.stop_reason)
        reply = await super().on_message(message)
        return Reply(
            messages=reply.messages,
            reward=self._final_reward(reply.done),
            done=reply.done,
            metrics=self._final_metrics(reply.done),
            logs=reply.logs,
        )

    async def on_fault(self, fault: Fault, message: Message | None) -> Reply:
        move = self.game.forfeit(self.seat, str(fault))
        self._take(move)
        self.finish(move.stop_reason)
        return Reply(done=True, reward=self._final_reward(True), metrics=self._final_metrics(True))

    def _final_reward(self, done: bool) -> float:
        return self.reward if done else 0.0

    def _final_metrics(self, done: bool) -> Metrics:
        return dict(self.game_metrics) if done else {}
