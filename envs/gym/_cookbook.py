"""The cookbook's own Twenty Questions env, offline: its answerer is a scripted ``MessageCompleter``.

Shows that the gym adapter and the conformance checker take any cookbook-style env:
``python -m envs.check envs.testing:cookbook_twenty_questions``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

if TYPE_CHECKING:
    from tinker_cookbook.rl.types import EnvGroupBuilder

_SECRET_RE = re.compile(r"Your secret word is (\S+?)\.")
_GUESS_RE = re.compile(r"Guess:\s*(.*)", re.IGNORECASE)


@dataclass(frozen=True)
class ScriptedAnswerer(MessageCompleter):
    """Answers ``yes`` to the exact guess of the secret (read from the answerer's system prompt),
    ``no`` to everything else. Deterministic and picklable."""

    async def __call__(self, messages: list[Message]) -> Message:
        system = next((get_text_content(m) for m in messages if m["role"] == "system"), "")
        secret = _SECRET_RE.search(system)
        last = get_text_content(messages[-1]) if messages else ""
        guess = _GUESS_RE.search(last)
        hit = (
            secret is not None
            and guess is not None
            and guess.group(1).strip().lower() == secret.group(1).lower()
        )
        return {"role": "assistant", "content": "yes" if hit else "no"}


def cookbook_twenty_questions(seed: int = 0, group_size: int = 2) -> EnvGroupBuilder:
    """The cookbook's ``TwentyQuestionsEnvGroupBuilder`` for word ``seed`` (mod the word list),
    with the ``qwen3_instruct`` renderer on the embedded tokenizer and a :class:`ScriptedAnswerer`."""
    from tinker_cookbook.recipes.multiplayer_rl.twenty_questions.env import (
        TwentyQuestionsEnvGroupBuilder,
        _load_words_from_file,
    )

    from backend.model import SMOLLM2, register_tokenizers
    from renderers_ext import load_renderer

    register_tokenizers()  # its renderer is built here and unpickled by name
    words = _load_words_from_file()
    return TwentyQuestionsEnvGroupBuilder(
        answerer=ScriptedAnswerer(),
        answer=words[seed % len(words)],
        renderer=load_renderer("qwen3_instruct", SMOLLM2),
        num_envs=group_size,
    )
