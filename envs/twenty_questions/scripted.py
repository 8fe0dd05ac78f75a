"""Whole scripted games: for tests, baselines, and SFT transcripts (the players: :mod:`.players`).

- :func:`play_game` / :func:`scripted_game`: a whole game as messages (no tokens), e.g. for SFT.
- :func:`play_with_player`: drive a token-level :class:`TwentyQuestionsEnv` with a message-level player.
- :func:`text_to_action`: the tokens a model would sample for a reply (content + stop token).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, Renderer, get_text_content
from tinker_cookbook.rl.types import Action, Metrics, StopReason

from envs.twenty_questions._kb import KnowledgeBase, default_kb
from envs.twenty_questions.answerers import Answerer, KBAnswerer
from envs.twenty_questions.env import TwentyQuestionsConfig, TwentyQuestionsEnv, TwentyQuestionsGame
from envs.twenty_questions.players import KBOptimalPlayer
from renderers_ext import render_action


@dataclass(frozen=True)
class GameRecord:
    """A played game: the conversation, its rewards and its metrics."""

    messages: list[Message]
    """The whole conversation (prompt, then alternating player / answerer turns)."""
    rewards: list[float]
    """Reward of each player turn."""
    won: bool
    """Whether the secret was guessed."""
    stop_reason: StopReason
    """Why the game ended."""
    metrics: Metrics
    """The episode metrics (``Metric`` keys)."""

    @property
    def total_reward(self) -> float:
        """Sum of the turn rewards."""
        return sum(self.rewards)


async def play_game(player: MessageCompleter, game: TwentyQuestionsGame) -> GameRecord:
    """Play a whole game at the message level (no tokens, no renderer)."""
    messages = game.initial_messages()
    rewards: list[float] = []
    while True:
        reply = await player(list(messages))
        messages.append({"role": "assistant", "content": get_text_content(reply)})
        step = await game.play(get_text_content(reply))
        rewards.append(step.reward)
        if step.done:
            game.stats.stop_reason = step.stop_reason
            return GameRecord(messages, rewards, game.stats.won, step.stop_reason, game.stats.metrics())
        messages.extend(step.messages)


def scripted_game(
    word: str,
    candidates: Sequence[str] = (),
    *,
    config: TwentyQuestionsConfig | None = None,
    answerer: Answerer | None = None,
    kb: KnowledgeBase | None = None,
) -> GameRecord:
    """A good transcript for ``word``: :class:`KBOptimalPlayer` against (by default) the KB answerer.

    ``config.candidates`` is ignored here: pass the list to tell the player (and to restrict the
    player's reasoning). Synchronous; from async code use :func:`play_game`.
    """
    config = config or TwentyQuestionsConfig()
    kb = kb or default_kb()
    guess_at = 2 if config.max_guesses is None or config.max_guesses >= 2 else 1
    player = KBOptimalPlayer(tuple(candidates), max_questions=config.max_questions, kb=kb, guess_at=guess_at)
    game = TwentyQuestionsGame(word, answerer or KBAnswerer(kb), config, candidates)
    return asyncio.run(play_game(player, game))


def text_to_action(renderer: Renderer, text: str) -> Action:
    """The tokens of an assistant reply as sampled (``renderers_ext.render_action`` of the text)."""
    return render_action(renderer, {"role": "assistant", "content": text})


async def play_with_player(env: TwentyQuestionsEnv, player: MessageCompleter) -> GameRecord:
    """Run a token-level env to the end with a message-level player (replies become tokens)."""
    start = await env.initial_observation()
    rewards: list[float] = []
    if isinstance(start, tuple):
        while True:
            reply = await player(list(env.messages))
            result = await env.step(
                text_to_action(env.renderer, get_text_content(reply)), extra={"stop_reason": "stop"}
            )
            rewards.append(result.reward)
            if result.episode_done:
                break
    stats = env.stats
    return GameRecord(
        list(env.messages),
        rewards,
        stats.won,
        stats.stop_reason or StopReason.MAX_TOKENS,
        env.episode_metrics(),
    )
