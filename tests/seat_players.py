"""Token-level tic-tac-toe players for the multi-seat tests: they read the board from the seat's
own observation tokens and answer with the tokens of a cell number, and can be told to be slow,
to raise, to hang, or to emit a faulty action at a given move."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import anyio
import tinker
from tinker_cookbook.completers import StopCondition, TokenCompleter, TokensWithLogprobs
from tinker_cookbook.renderers import Renderer

from envs.tictactoe.env import free_cells, parse_board


@dataclass
class Behaviour:
    """What a player does at its k-th call (calls not listed: a random free cell at once)."""

    delay: float = 0.0
    kind: str = "ok"
    """``ok``, ``raise``, ``hang`` (never returns), ``truncated`` (no stop token, ``length``),
    ``garbage`` (no digit: an illegal move)."""


@dataclass
class TokenRandom(TokenCompleter):
    """A random free cell, as the tokens a sampler would give (logprob -0.5 each)."""

    renderer: Renderer
    seed: int = 0
    script: dict[int, Behaviour] = field(default_factory=dict)
    calls: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        k = self.calls
        self.calls += 1
        b = self.script.get(k, Behaviour())
        if b.delay:
            await anyio.sleep(b.delay)
        if b.kind == "raise":
            raise RuntimeError(f"player crashed at call {k}")
        if b.kind == "hang":
            await anyio.sleep_forever()
        tok = self.renderer.tokenizer
        board = parse_board(str(tok.decode(model_input.to_ints())))
        if board is None:  # not a tic-tac-toe seat (a plain env beside the games): end it
            text = "stop"
        else:
            text = "none" if b.kind == "garbage" else str(self.rng.choice(free_cells(board)))
        tokens = list(tok.encode(text, add_special_tokens=False))
        if b.kind == "truncated":
            return TokensWithLogprobs(
                tokens=tokens, maybe_logprobs=[-0.5] * len(tokens), stop_reason="length"
            )
        assert isinstance(stop[0], int)
        tokens.append(stop[0])
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[-0.5] * len(tokens))
