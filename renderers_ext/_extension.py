"""The extension property, checked on concrete tokens, with a readable diagnosis of a break.

A renderer has the *extension property* when every observation equals the previous
observation + the previous action + some new tokens. Then a whole episode trains as one
sequence (O(T) tokens) instead of one datum per turn (O(T^2)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import tinker
from tinker_cookbook.tokenizer_utils import Tokenizer

_CONTEXT = 8  # tokens shown on each side of a divergence


def _ints(x: tinker.ModelInput | Sequence[int]) -> list[int]:
    return x.to_ints() if isinstance(x, tinker.ModelInput) else list(x)


def first_divergence(expected: Sequence[int], actual: Sequence[int]) -> int | None:
    """Index of the first token where ``actual`` stops extending ``expected``; None if it extends it."""
    n = len(expected)
    if len(actual) >= n and list(actual[:n]) == list(expected):
        return None
    # Binary search on prefix equality keeps this cheap for long sequences.
    lo, hi = 0, min(n, len(actual))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if list(actual[:mid]) == list(expected[:mid]):
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True)
class ExtensionReport:
    """Whether ``next_observation`` extends ``prev_observation + prev_action``, and if not, where."""

    ok: bool
    """True when the prefix holds."""
    expected_len: int
    """Length of ``prev_observation + prev_action``."""
    actual_len: int
    """Length of ``next_observation``."""
    divergence: int | None = None
    """First token index where the two differ (None when ``ok``)."""
    expected_token: int | None = None
    """Token at ``divergence`` in the expected prefix (None past its end)."""
    actual_token: int | None = None
    """Token at ``divergence`` in the next observation (None past its end)."""
    expected_text: str = ""
    """Decoded expected tokens around the divergence."""
    actual_text: str = ""
    """Decoded observed tokens around the divergence."""

    def __str__(self) -> str:
        if self.ok:
            return f"extension holds ({self.expected_len} -> {self.actual_len} tokens)"
        return (
            f"extension breaks at token {self.divergence} "
            f"(expected id {self.expected_token}, got {self.actual_token}; "
            f"prefix {self.expected_len} tokens, next observation {self.actual_len}):\n"
            f"  expected: {self.expected_text!r}\n"
            f"  actual:   {self.actual_text!r}"
        )


def check_extension(
    prev_observation: tinker.ModelInput | Sequence[int],
    prev_action: Sequence[int],
    next_observation: tinker.ModelInput | Sequence[int],
    tokenizer: Tokenizer | None = None,
) -> ExtensionReport:
    """Check that ``next_observation`` starts with ``prev_observation + prev_action``.

    On a break, the report carries the first divergent index and a decoded side-by-side of the
    two sequences around it (``tokenizer`` needed for the text; ids are always reported).
    """
    expected = _ints(prev_observation) + list(prev_action)
    actual = _ints(next_observation)
    div = first_divergence(expected, actual)
    if div is None:
        return ExtensionReport(ok=True, expected_len=len(expected), actual_len=len(actual))
    lo, hi = max(0, div - _CONTEXT), div + _CONTEXT

    def text(tokens: list[int]) -> str:
        if tokenizer is None:
            return " ".join(map(str, tokens))
        before = tokenizer.decode(tokens[lo:div])
        after = tokenizer.decode(tokens[div:hi])
        return f"{before}⟦{after}" if after else f"{before}⟦<end>"

    return ExtensionReport(
        ok=False,
        expected_len=len(expected),
        actual_len=len(actual),
        divergence=div,
        expected_token=expected[div] if div < len(expected) else None,
        actual_token=actual[div] if div < len(actual) else None,
        expected_text=text(expected),
        actual_text=text(actual),
    )
