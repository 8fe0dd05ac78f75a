"""The word list, its fixed train/test split, and deterministic candidate lists (curricula).

- :data:`ALL_WORDS`: every word of the knowledge base (common nouns in varied kinds), sorted.
- :data:`TRAIN_WORDS` / :data:`TEST_WORDS`: a fixed, disjoint split. A word is a test word when
  the first byte of its SHA-256 is divisible by 5 (about 20%); stable across machines and Python
  versions, and adding a word never moves another.
- :func:`pick_candidates`: the secret plus ``k - 1`` distractors, chosen and ordered from a seed.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from envs.twenty_questions._kb import default_kb


def is_test_word(word: str) -> bool:
    """Whether ``word`` belongs to the held-out test split."""
    return hashlib.sha256(word.encode()).digest()[0] % 5 == 0


ALL_WORDS: tuple[str, ...] = default_kb().words
"""All words, sorted."""
TRAIN_WORDS: tuple[str, ...] = tuple(w for w in ALL_WORDS if not is_test_word(w))
"""Training split, sorted."""
TEST_WORDS: tuple[str, ...] = tuple(w for w in ALL_WORDS if is_test_word(w))
"""Held-out test split, sorted (disjoint from :data:`TRAIN_WORDS`)."""


def split_words(split: str) -> tuple[str, ...]:
    """The words of a split by name: ``"train"``, ``"test"`` or ``"all"``."""
    splits = {"train": TRAIN_WORDS, "test": TEST_WORDS, "all": ALL_WORDS}
    if split not in splits:
        raise ValueError(f"unknown word split {split!r}; expected one of: {', '.join(splits)}")
    return splits[split]


def pick_candidates(word: str, k: int, pool: Sequence[str], seed: int | str = 0) -> tuple[str, ...]:
    """``k`` candidate words including ``word``, in a seeded order (empty when ``k == 0``).

    The ``k - 1`` distractors are drawn without replacement from ``pool`` (minus ``word``); the
    same (word, k, pool, seed) always gives the same list.
    """
    if k < 0:
        raise ValueError(f"candidates must be >= 0, got {k}")
    if k == 0:
        return ()
    others = sorted(set(pool) - {word})
    if k - 1 > len(others):
        raise ValueError(
            f"candidates={k} needs {k - 1} distractors but the pool has only {len(others)} other words"
        )
    rng = random.Random(f"twenty_questions/{seed}/{word}/{k}")
    chosen = rng.sample(others, k - 1)
    chosen.insert(rng.randrange(k), word)
    return tuple(chosen)
