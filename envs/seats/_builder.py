"""Groups of games x seats: :class:`SeatedGroupBuilder`, trajectories per seat as the cookbook's
``TrajectoryGroup`` s, one per training role.

A group is ``games`` games of one setting, every seat played as its :class:`Seat` says (a pool
drawn per game). The training seats' trajectories of each role form one ``TrajectoryGroup``
(``group_by_role``, the default): the cookbook's group-centred advantage is then centred within a
seat's role in its group (an X player is compared with X players, not with O players, whose
expected result differs). ``group_by_role=False`` puts every training seat in one group. Seats
that do not train (pinned opponents, partners) are in the :class:`GameRecord` s of :meth:`play`,
never in a group, so they never become datums.

The training loop (``training.sample_batch``) plays such builders through
:meth:`SeatedGroupBuilder.rollout_seated` (``SupportsSeatedRollout`` of ``training._rollouts``) instead of the
rollout engine; each role group comes back as a ``rollout.GroupOutcome`` with the engine's
accounting: ``requested`` games = ``completed`` + ``failed``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import anyio
from tinker_cookbook.completers import TokenCompleter
from tinker_cookbook.renderers import Renderer
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RolloutError, TrajectoryGroup

from backend.seeding import mix_seed
from envs.core import EnvLimits
from envs.seats._game import Game, SeatEnv
from envs.seats._loop import GameRecord, LoopConfig, SeatResult, play_game
from envs.seats._players import Seat, seat_policy
from envs.seats._standalone import GameHost, HostedSeatEnv
from rollout import EngineConfig, GroupOutcome, SampleCall


def game_seed(seed: int, index: int) -> int:
    """The seed of game ``index`` of a group seeded ``seed`` (stable across processes)."""
    return mix_seed(seed, "game", index)


class _Placed:
    """The policy of one seat of one game of a seeded batch: every call carries its place
    (``rollout.SampleCall``: the batch's seed, the group, the seat's slot in the group, the seat's
    turn), as the engine hands it to the envs it steps, so a seeded run samples the same tokens."""

    def __init__(self, policy: TokenCompleter, seed: int, group: int, slot: int) -> None:
        self.policy = policy
        self.seed, self.group, self.slot = seed, group, slot
        self.turn = 0

    async def __call__(self, model_input: Any, stop: Any, **kwargs: Any) -> Any:
        call = SampleCall(self.seed, self.group, self.slot, 0, self.turn)
        self.turn += 1
        return await self.policy(model_input, stop, call=call, **kwargs)  # type: ignore[call-arg]


@dataclass
class SeatedGroupBuilder(EnvGroupBuilder):
    """``games`` games of ``make_game`` with ``seats`` (see the module docstring).

    ``make_game(rng)`` builds one fresh game (draw its deal, its first seat... from ``rng``,
    seeded per game from ``seed``). Our training loop plays the group through
    :meth:`rollout_seated` (the game loop, per-role groups); :meth:`make_envs` gives the same
    games to loops that only know the cookbook's ``Env`` (see ``envs.seats._standalone``).
    """

    make_game: Callable[[random.Random], Game]
    renderer: Renderer
    seats: tuple[Seat, ...]
    games: int = 8
    seed: int = 0
    limits: EnvLimits | None = None
    """Each seat env's budgets (turns, context); default: no turn cap (the loop's ``max_moves`` is)."""
    loop: LoopConfig = field(default_factory=LoopConfig)
    group_by_role: bool = True
    tags: tuple[str, ...] = ()
    """Logging tags of every group (the role groups add ``as_<role>``)."""
    stand_in: Seat | None = None
    """Who holds the policy's other seats when one seat is checked alone (:meth:`alone`, what the
    conformance checker plays): a pinned player that knows the game (tic-tac-toe: a random one)."""
    _hosts: list[GameHost] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.games < 1:
            raise ValueError(f"games must be >= 1, got {self.games}")
        if not self.seats:
            raise ValueError("a seated group needs seats")

    def _setup(self, index: int) -> tuple[Game, list[SeatEnv], list[Seat]]:
        rng = random.Random(game_seed(self.seed, index))
        game = self.make_game(rng)
        if len(game.roles) != len(self.seats):
            raise ValueError(
                f"{type(game).__name__} has {len(game.roles)} seats but {len(self.seats)} were given"
            )
        drawn = [s.draw(rng) for s in self.seats]
        envs = [SeatEnv(game, i, self.renderer, limits=self.limits) for i in range(len(drawn))]
        return game, envs, drawn

    async def make_envs(self) -> Sequence[Env]:
        """Every game's training seats as plain cookbook envs (:class:`HostedSeatEnv`: each game
        runs the game loop in a task of its own when first stepped), for loops that step each
        env of a group concurrently (the cookbook's ``rl.train`` and ``do_group_rollout``).
        Making them starts nothing; :meth:`cleanup` stops the games still running."""
        envs: list[Env] = []
        for index in range(self.games):
            game, seat_envs, drawn = self._setup(index)
            training = [i for i, s in enumerate(drawn) if s.trains]
            if any(s.is_policy and not s.trains for s in drawn):
                raise ValueError(
                    "a policy seat that does not train (Seat.policy(train=False)) needs the game loop "
                    "(SeatedGroupBuilder.play / our training loop), not env-by-env stepping"
                )
            host = GameHost(partial(self._host_play, game, seat_envs, drawn), training)
            self._hosts.append(host)
            for i in training:
                opening = partial(self._opening, game, i)
                envs.append(HostedSeatEnv(host, i, self.renderer, opening))
        return envs

    def alone(self) -> SeatedGroupBuilder:
        """This group with one training seat (the first), the policy's other seats held by
        :attr:`stand_in`: each env then plays a whole game by itself (the opponents act inside
        its game), as the conformance checker steps env 0 of a group. ``self`` when the group
        has one policy seat already; a one-line ``ValueError`` when it has more and no stand-in."""
        policy = [i for i, s in enumerate(self.seats) if s.is_policy or any(c.is_policy for c in s.choices)]
        if len(policy) <= 1:
            return self
        stand_in = self.stand_in
        if stand_in is None:
            raise ValueError(
                f"{len(policy)} seats are played by the policy: give SeatedGroupBuilder.stand_in "
                "(a pinned player of the game) to check one seat alone"
            )
        keep = next((i for i in policy if self.seats[i].is_policy), policy[0])

        def swap(seat: Seat) -> Seat:
            if seat.is_policy:
                return stand_in
            return replace(seat, choices=tuple(stand_in if c.is_policy else c for c in seat.choices))

        return replace(self, seats=tuple(s if i == keep else swap(s) for i, s in enumerate(self.seats)))

    def _opening(self, game: Game, seat: int) -> Any:
        return self.renderer.build_generation_prompt(game.initial_messages(seat))

    async def _host_play(
        self,
        game: Game,
        envs: list[SeatEnv],
        drawn: list[Seat],
        policies: dict[int, TokenCompleter],
        compaction_period: int | None,
    ) -> GameRecord:
        host_loop = replace(self.loop, compaction_period=compaction_period or self.loop.compaction_period)
        players = [
            policies.get(i) or seat_policy(s, e, None)
            for i, (s, e) in enumerate(zip(drawn, envs, strict=True))
        ]
        return await play_game(
            game,
            envs,
            players,
            names=[s.name for s in drawn],
            trains=[s.trains for s in drawn],
            config=host_loop,
        )

    async def cleanup(self) -> None:
        """Stop the hosted games (:meth:`make_envs`) still running."""
        hosts, self._hosts = self._hosts, []
        for host in hosts:
            host.cancel()

    def logging_tags(self) -> list[str]:
        return list(self.tags)

    async def play_one(
        self,
        index: int,
        policy: TokenCompleter | None,
        loop: LoopConfig | None = None,
        place: tuple[int, int] | None = None,
    ) -> GameRecord:
        """Game ``index`` of this group, played to its end. With ``place`` (the batch's seed and
        this group's index in it), every call of the policy carries its ``rollout.SampleCall``."""
        game, envs, drawn = self._setup(index)
        n = len(drawn)

        def placed(seat: int) -> TokenCompleter | None:
            if policy is None or place is None:
                return policy
            return _Placed(policy, place[0], place[1], index * n + seat)  # type: ignore[return-value]

        policies = [seat_policy(s, e, placed(i)) for i, (s, e) in enumerate(zip(drawn, envs, strict=True))]
        return await play_game(
            game,
            envs,
            policies,
            names=[s.name for s in drawn],
            trains=[s.trains for s in drawn],
            config=loop or self.loop,
        )

    async def play(
        self,
        policy: TokenCompleter | None,
        loop: LoopConfig | None = None,
        place: tuple[int, int] | None = None,
    ) -> list[GameRecord]:
        """Every game of the group, concurrently (one task per game), in game order."""
        records: list[GameRecord | None] = [None] * self.games

        async def one(i: int) -> None:
            records[i] = await self.play_one(i, policy, loop, place)

        async with anyio.create_task_group() as tg:
            for i in range(self.games):
                tg.start_soon(one, i)
        return [r for r in records if r is not None]

    def groups(
        self, records: Sequence[GameRecord], index: int = 0, elapsed_s: float = 0.0
    ) -> list[GroupOutcome]:
        """The training seats of ``records`` as one :class:`rollout.GroupOutcome` per training
        role (or one in all, without ``group_by_role``); failed games are counted, not kept."""
        errors = tuple(r.error for r in records if r.error is not None)
        members: dict[str, list[tuple[bool, SeatResult]]] = {}
        for record in records:
            for result in record.seats:
                if result.trains:
                    key = result.role if self.group_by_role else "all"
                    members.setdefault(key, []).append((record.ok, result))
        out = []
        for role, entries in members.items():
            results = [r for ok, r in entries if ok]
            group = (
                TrajectoryGroup(
                    trajectories_G=[s.trajectory for s in results],
                    final_rewards_G=[s.reward for s in results],
                    metrics_G=[{**s.stats.as_metrics(), **s.metrics} for s in results],
                    rollout_errors=list(errors),
                )
                if results
                else None
            )
            requested = len(entries)
            view = _RoleView(self, role)
            failure = None
            if group is None:
                first = errors[0] if errors else None
                failure = RolloutError(
                    error_type=first.error_type if first else "NoGames",
                    error_message=f"every game of the group failed ({first.error_message if first else 'none played'})",
                )
            out.append(
                GroupOutcome(
                    index=index,
                    builder=view,
                    group=group,
                    stats=tuple(s.stats for s in results),
                    errors=errors,
                    failure=failure,
                    requested=requested,
                    completed=len(results),
                    failed=requested - len(results),
                    retries=0,
                    elapsed_s=elapsed_s,
                    tags=tuple(view.logging_tags()),
                )
            )
        return out

    async def rollout_seated(
        self, policy: TokenCompleter, config: EngineConfig | None = None, index: int = 0
    ) -> list[GroupOutcome]:
        """Play the group with ``policy`` on the policy's seats and return its role groups
        (``SupportsSeatedRollout`` of ``training._rollouts``). The engine config's sampling-call
        deadline, step deadline, extension check and compaction period apply to every seat, and
        its ``seed`` places every call of the policy (as the engine does for the envs it steps)."""
        loop = self.loop
        if config is not None:
            loop = LoopConfig(
                call_timeout_s=config.limits.sampling_turn_timeout_seconds or loop.call_timeout_s,
                step_timeout_s=config.step_timeout_s or loop.step_timeout_s,
                max_moves=loop.max_moves,
                extension_check=config.extension_check,
                compaction_period=config.compaction_period or loop.compaction_period,
            )
        t0 = time.monotonic()
        place = (config.seed, index) if config is not None and config.seed is not None else None
        records = await self.play(policy, loop, place)
        return self.groups(records, index, time.monotonic() - t0)


class _RoleView(EnvGroupBuilder):
    """One role's group of a :class:`SeatedGroupBuilder` (what a ``GroupOutcome`` names as its
    builder: the parent's tags plus ``as_<role>``)."""

    def __init__(self, parent: SeatedGroupBuilder, role: str) -> None:
        self.parent = parent
        self.role = role

    async def make_envs(self) -> Sequence[Env]:
        return await self.parent.make_envs()

    def logging_tags(self) -> list[str]:
        return [*self.parent.logging_tags(), f"as_{self.role}"]
