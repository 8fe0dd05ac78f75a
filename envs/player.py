"""A scripted message-level player as the token-level policy of one :class:`~envs.core.ChatEnv`.

Scripted players (``MessageCompleter`` s such as Twenty Questions' ``HalvingPlayer`` or the math
env's thinking solver) read the conversation and answer with a message; the rollout engine and
the cookbook's trainers talk to policies in tokens. :class:`PlayerPolicy` bridges the two for
one env: each call asks the player for the next assistant message given ``env.messages`` and
returns the tokens a sampler would have produced for it with the env's current renderer
(``renderers_ext.render_action``; a compacting renderer included: the produced turn keeps its
thinking). It is how a dataset builder
scripts the episodes of a supervised warm start (``training.SupportsScriptedEpisodes``)::

    env = MyEnv(renderer, ...)
    episodes.append((env, PlayerPolicy(env, MyScriptedPlayer(...))))
"""

from __future__ import annotations

import tinker
from tinker_cookbook.completers import MessageCompleter, StopCondition, TokenCompleter, TokensWithLogprobs

from envs.core import ChatEnv
from renderers_ext import render_action

__all__ = ["PlayerPolicy"]


class PlayerPolicy(TokenCompleter):
    """Plays ``env`` with the message-level ``player`` (see the module docstring).

    A reply longer than the call's ``max_tokens`` is cut there and reported as ``"length"``, as a
    sampler would; logprobs are 0 (the scripted tokens are certain). ``calls`` counts the turns.
    """

    def __init__(self, env: ChatEnv, player: MessageCompleter):
        self.env = env
        self.player = player
        self.calls = 0

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        """The player's next message, as the tokens the env's renderer gives it."""
        self.calls += 1
        history = list(self.env.messages)
        message = await self.player(history)
        if message.get("role") != "assistant":
            raise ValueError(f"a scripted player must answer with an assistant message, got {message.get('role')!r}")
        tokens = render_action(self.env.renderer, message, history)
        reason = "stop"
        if max_tokens is not None and len(tokens) > max_tokens:
            tokens, reason = tokens[:max_tokens], "length"
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[0.0] * len(tokens), stop_reason=reason)  # type: ignore[arg-type]
