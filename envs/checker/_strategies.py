"""Hypothesis strategies for env actions and env configs (re-exported by :mod:`envs.testing`).

Actions are what a sampler can return: random tokens, nothing at all, invalid UTF-8, a
max-length run that never stopped, the stop token alone, and well-formed replies (text followed
by end-of-turn) so that episodes also run long. Like a real sample, an action holds a stop
token only as its last token (sampling stops at the first one).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from enum import StrEnum

from hypothesis import strategies as st
from tinker_cookbook.completers import StopCondition
from tinker_cookbook.tokenizer_utils import Tokenizer

from envs.core import EnvLimits, Fault, FaultPolicy
from renderers_ext.testing import token_actions

WELL_FORMED_TEXTS: tuple[str, ...] = (
    "Is it alive?",
    "Is it bigger than a breadbox?",
    "The answer is 42.",
    "Let me think step by step: 2 + 2 = 4, so the answer is \\boxed{4}.",
    "I am not sure. Could you give me a hint?",
    "Guess: cat",
    "Final answer: 7",
    "",
)
"""Replies that parse cleanly with any chat renderer (questions, answers, guesses, empty)."""

_MULTIBYTE_PROBES = ("😀", "🙂", "🤖", "𝔘", "中文", "é", "€", "👍🏽")


class ActionKind(StrEnum):
    """The kinds of action :func:`env_actions` draws."""

    RANDOM = "random"
    """Random vocabulary ids (lone bytes and special tokens included), sometimes stop-terminated."""
    EMPTY = "empty"
    """No tokens at all."""
    INVALID_UTF8 = "invalid_utf8"
    """Text cut inside a multi-byte character, then end-of-turn: decodes to invalid UTF-8."""
    MAX_LENGTH = "max_length"
    """``max_length`` random tokens without a stop token (a sampler that hit ``max_tokens``)."""
    STOP_ONLY = "stop_only"
    """The end-of-turn token(s) alone: an empty reply."""
    WELL_FORMED = "well_formed"
    """Readable text followed by end-of-turn: a clean reply."""


def stop_tokens(stop: StopCondition, tokenizer: Tokenizer) -> list[int]:
    """The first stop sequence of ``stop`` as tokens (ids as is, strings encoded); [] if none."""
    if not stop:
        return []
    first = stop[0]
    if isinstance(first, int):
        return [first]
    return list(tokenizer.encode(first, add_special_tokens=False))


def invalid_utf8_fragments(tokenizer: Tokenizer) -> list[list[int]]:
    """Token sequences that decode to invalid UTF-8 (a multi-byte character cut short).

    Found by encoding a few multi-byte characters and keeping the prefixes that decode to
    ``U+FFFD``; empty for tokenizers that never split a character.
    """
    out: list[list[int]] = []
    for probe in _MULTIBYTE_PROBES:
        ids = list(tokenizer.encode(probe, add_special_tokens=False))
        for k in range(1, len(ids)):
            if "\ufffd" in tokenizer.decode(ids[:k]):
                out.append(ids[:k])
    return out


def well_formed_action(text: str, tokenizer: Tokenizer, stop: StopCondition) -> list[int]:
    """``text`` as tokens followed by the end-of-turn of ``stop``."""
    return list(tokenizer.encode(text, add_special_tokens=False)) + stop_tokens(stop, tokenizer)


def env_actions(
    tokenizer: Tokenizer,
    stop: StopCondition,
    *,
    max_length: int = 256,
    kinds: Sequence[ActionKind] = tuple(ActionKind),
    texts: st.SearchStrategy[str] | None = None,
) -> st.SearchStrategy[list[int]]:
    """Actions of the given :class:`ActionKind` s for an env whose tokenizer and stop condition
    are given; well-formed ones twice as likely so that episodes get past the first turn.

    Args:
        tokenizer: the policy tokenizer (vocabulary ids are drawn below ``len(tokenizer)``).
        stop: the env's stop condition (its first sequence is the end-of-turn).
        max_length: length of :attr:`ActionKind.MAX_LENGTH` actions (the sampler's max_tokens).
        kinds: which kinds to draw.
        texts: text of well-formed replies (default: :data:`WELL_FORMED_TEXTS` or short text).
    """
    eot = stop_tokens(stop, tokenizer)
    vocab = len(tokenizer)
    stop_ids = {s for s in stop if isinstance(s, int)}

    def sampleable(action: list[int]) -> bool:  # a sampler stops at the first stop token
        body = action[:-1] if action and action[-1] in stop_ids else action
        return not stop_ids.intersection(body)

    def max_length_action(rng: random.Random) -> list[int]:
        out: list[int] = []
        while len(out) < max_length:
            token = rng.randrange(vocab)
            if token not in stop_ids:
                out.append(token)
        return out

    body = texts if texts is not None else st.one_of(st.sampled_from(WELL_FORMED_TEXTS), st.text(max_size=40))
    fragments = invalid_utf8_fragments(tokenizer)
    by_kind: dict[ActionKind, st.SearchStrategy[list[int]]] = {
        ActionKind.RANDOM: token_actions(tokenizer, max_size=min(max_length, 48), stop=eot or None).filter(
            sampleable
        ),
        ActionKind.EMPTY: st.just([]),
        ActionKind.MAX_LENGTH: st.integers(0, 2**32 - 1).map(
            lambda seed: max_length_action(random.Random(seed))
        ),
        ActionKind.STOP_ONLY: st.just(eot),
        ActionKind.WELL_FORMED: body.map(lambda text: well_formed_action(text, tokenizer, stop)),
    }
    if fragments:
        by_kind[ActionKind.INVALID_UTF8] = st.tuples(
            st.sampled_from(WELL_FORMED_TEXTS), st.sampled_from(fragments)
        ).map(lambda t: list(tokenizer.encode(t[0], add_special_tokens=False)) + t[1] + eot)
    chosen = [by_kind[k] for k in kinds if k in by_kind]
    if ActionKind.WELL_FORMED in kinds:
        chosen.append(by_kind[ActionKind.WELL_FORMED])
    if not chosen:
        raise ValueError(f"no action kind available among {list(kinds)}")
    return st.one_of(*chosen)


def env_limits(*, max_turns: int = 12, token_caps: bool = True) -> st.SearchStrategy[EnvLimits]:
    """:class:`~envs.core.EnvLimits`: 1..``max_turns`` turns, sometimes a trajectory token cap
    (small ones included, so that initial prompts overflow)."""
    cap = st.none() | st.integers(16, 4096) if token_caps else st.none()
    return st.builds(EnvLimits, max_turns=st.integers(1, max_turns), max_trajectory_tokens=cap)


def fault_policies() -> st.SearchStrategy[dict[Fault, FaultPolicy]]:
    """Per-fault policies: a (finite) reward and whether the fault ends the episode."""
    policy = st.builds(
        FaultPolicy,
        reward=st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False),
        end_episode=st.booleans(),
    )
    return st.dictionaries(st.sampled_from(list(Fault)), policy)
