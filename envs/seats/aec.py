"""Any :class:`envs.seats.Game` as a PettingZoo AEC env (PettingZoo: gymnasium's multi-agent
standard), for agents and tools outside TurnGym: :class:`SeatsAECEnv` (passes PettingZoo's own
``api_test``). Needs the ``multiagent`` extra (``pip install pettingzoo``).

Agents are the game's roles, in seat order; the agent to move is the game's ``next_seat``. An
action is the text of the agent's message (``gymnasium.spaces.Text``); an observation is what the
agent was told since its last move (its opening first), as UTF-8 bytes zero-padded to
``max_observation_bytes`` (``Box`` of ``uint8``: PettingZoo's checks want a numeric array;
:meth:`SeatsAECEnv.observe_text` gives the string). Rewards are the game's :attr:`Move.rewards`;
when the game ends every agent terminates; past ``max_moves`` every agent is truncated.
Token histories are not kept here: this is the text-level view of the same rules that
:mod:`envs.seats` plays token-exactly.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from typing import Any, ClassVar

import anyio
import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from tinker_cookbook.renderers import Message, get_text_content

from envs.seats._game import Game

ACTION_CHARSET = string.printable
"""Characters an action (the message text) may use."""


class SeatsAECEnv(AECEnv):
    """``make_game(rng)`` as an AEC env (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "turngym_seats_v0",
        "render_modes": ["ansi"],
        "is_parallelizable": False,
    }

    def __init__(
        self,
        make_game: Callable[[random.Random], Game],
        *,
        max_observation_bytes: int = 2048,
        max_action_chars: int = 64,
        max_moves: int = 200,
        render_mode: str | None = None,
    ):
        super().__init__()
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.make_game = make_game
        self.render_mode = render_mode
        self.max_moves = max_moves
        probe = make_game(random.Random(0))
        self.possible_agents = list(probe.roles)
        self._observation_space = spaces.Box(0, 255, (max_observation_bytes,), dtype=np.uint8)
        self._action_space = spaces.Text(max_length=max_action_chars, min_length=1, charset=ACTION_CHARSET)
        self.game = probe
        self._told: dict[str, str] = {}
        self._moves = 0
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self._action_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.game = self.make_game(random.Random(seed))
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self._told = {
            a: "\n".join(get_text_content(m) for m in self.game.initial_messages(i))
            for i, a in enumerate(self.agents)
        }
        self._moves = 0
        self.agent_selection = self.agents[self.game.first_seat]

    def observe_text(self, agent: str) -> str:
        """What ``agent`` was told since its last move (its opening before its first)."""
        return self._told.get(agent, "")

    def observe(self, agent: str) -> np.ndarray:
        data = self.observe_text(agent).encode()[-self._observation_space.shape[0] :]  # type: ignore[index]
        out = np.zeros(self._observation_space.shape, dtype=np.uint8)
        out[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        return out

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        seat = self.possible_agents.index(agent)
        self._cumulative_rewards[agent] = 0.0
        message: Message = {"role": "assistant", "content": str(action)}
        move = anyio.run(self.game.on_move, seat, message)
        self._moves += 1
        self._told[agent] = ""
        for i, messages in move.messages.items():
            told = "\n".join(get_text_content(m) for m in messages)
            role = self.possible_agents[i]
            self._told[role] = f"{self._told[role]}\n{told}" if self._told[role] else told
        self.rewards = {a: float(move.rewards.get(i, 0.0)) for i, a in enumerate(self.possible_agents)}
        for i, metrics in move.metrics.items():
            self.infos[self.possible_agents[i]] = {k: float(v) for k, v in metrics.items()}
        if move.done:
            self.terminations = dict.fromkeys(self.agents, True)
            for a in self.agents:
                self.infos[a] = {**self.infos[a], "stop_reason": move.stop_reason}
        elif self._moves >= self.max_moves:
            self.truncations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()
        if move.done or move.next_seat is None or self._moves >= self.max_moves:
            self.agent_selection = self.possible_agents[(seat + 1) % len(self.possible_agents)]
        else:
            self.agent_selection = self.possible_agents[move.next_seat]
        if self.render_mode == "ansi":
            print(self.render())

    def render(self) -> str:
        """What the agent to move was told (``ansi``)."""
        return f"[{self.agent_selection}] {self.observe_text(self.agent_selection)}"

    def close(self) -> None:
        """Nothing to release."""
