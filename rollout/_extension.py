"""Run-time extension check: does each new observation extend the previous observation + action?

Why it is cheap:

- The naive check (``next.to_ints()[:n] == prev.to_ints() + action``) rebuilds both token lists
  with Python-level comprehensions every turn (``ModelInput.to_ints`` is a list comprehension
  over chunks).
- :class:`ExtensionTracker` never calls ``to_ints()`` on the common case of a single text chunk:
  it reads the chunk's own ``tokens`` list (no copy) and keeps a reference to the previous one.
  ``FULL`` mode then does two C-level list comparisons (the action slice, then the previous
  observation's slice), which run at memcmp-like speed on small ints. ``BOUNDARY`` mode compares
  only O(window) tokens (lengths, the action, and windows at the start and at the boundary).
  Multi-chunk or multimodal observations take a general path (flattened like the cookbook's
  ``trajectory_to_data``, image chunks compared as objects).
  ``BOUNDARY`` only pays off on long contexts (thousands of tokens).
- Only on a break does it pay for a diagnosis: the first divergent index and, for *unexpected*
  breaks, the decoded side-by-side from ``renderers_ext.check_extension``. Breaks the renderer
  announced (``renderers_ext.extension_expected(env.renderer, turn, env.messages)`` is False:
  compaction, or a renderer without the extension property) are recorded with their index but
  not decoded; those at a ``CompactingRenderer``'s window start are marked as compactions.

The tracker also predicts what datum assembly will produce: the cookbook's
``trajectory_to_data`` starts a new datum exactly where the observation stops extending the
accumulated sequence, so ``datums`` and ``tokens_trained`` are exact (tested against it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tinker
from tinker_cookbook.renderers import Renderer

from renderers_ext import CompactingRenderer, check_extension, extension_expected, first_divergence
from rollout._config import ExtensionCheck

FlatOb = list[Any]
"""Observation flattened to ints (text tokens) and non-text chunks (images, compared as objects)."""


def flat_tokens(ob: tinker.ModelInput) -> FlatOb:
    """The observation as a flat list, without copying in the single-text-chunk case.

    The returned list may be the chunk's own list: callers must not mutate it.
    """
    return flat_tokens_len(ob)[0]


def flat_tokens_len(ob: tinker.ModelInput) -> tuple[FlatOb, int]:
    """:func:`flat_tokens` and the observation's token length (``ob.length`` without its cost)."""
    chunks = ob.chunks
    if len(chunks) == 1:
        chunk = chunks[0]
        if type(chunk) is tinker.EncodedTextChunk:
            tokens = chunk.tokens
            if type(tokens) is not list:
                tokens = list(tokens)
            return tokens, len(tokens)
    out: FlatOb = []
    for chunk in chunks:
        if isinstance(chunk, tinker.EncodedTextChunk):
            out.extend(chunk.tokens)
        else:
            out.append(chunk)
    return out, ob.length


@dataclass(frozen=True)
class ExtensionBreak:
    """An observation that does not extend the previous observation + action."""

    turn: int
    """Completed policy turns before this observation (the first observation is turn 0)."""
    expected: bool
    """The env's renderer announced this break (compaction window, no extension property)."""
    divergence: int
    """First index where the new observation differs from previous observation + action."""
    expected_len: int
    """Length of previous observation + action."""
    actual_len: int
    """Length of the new observation."""
    expected_token: int | None = None
    """Token id at ``divergence`` in previous observation + action (None past its end)."""
    actual_token: int | None = None
    """Token id at ``divergence`` in the new observation (None past its end)."""
    expected_text: str = ""
    """Decoded tokens around the divergence, expected side (unexpected breaks only)."""
    actual_text: str = ""
    """Decoded tokens around the divergence, observed side (unexpected breaks only)."""
    compaction: bool = False
    """A compaction: the env's ``CompactingRenderer`` stripped earlier thinking at a window start."""

    def __str__(self) -> str:
        if self.compaction:
            return (
                f"compaction after turn {self.turn}: earlier thinking stripped from the history "
                f"(prefix kept up to token {self.divergence}; {self.expected_len} -> {self.actual_len} tokens)"
            )
        kind = "expected" if self.expected else "UNEXPECTED"
        head = (
            f"{kind} extension break after turn {self.turn} at token {self.divergence} "
            f"(expected id {self.expected_token}, got {self.actual_token}; "
            f"prefix {self.expected_len} tokens, observation {self.actual_len})"
        )
        if not self.expected_text and not self.actual_text:
            return head
        return f"{head}\n  expected: {self.expected_text!r}\n  actual:   {self.actual_text!r}"


class ExtensionTracker:
    """Per-rollout extension check and datum/token accounting. One instance per rollout.

    Protocol: :meth:`start` with the first observation; :meth:`acted` each time a transition
    acting on the current observation is recorded; :meth:`observe` with every next observation
    the rollout continues from (:meth:`step` does both); :meth:`close` at the end. Datum accounting mirrors the cookbook's
    ``trajectory_to_data``: a datum is closed when a transition's observation does not extend
    the previous observation + action.
    """

    __slots__ = (
        "_mode",
        "_pending",
        "_prev",
        "_prev_len",
        "_seg",
        "_split",
        "_window",
        "breaks",
        "datums",
        "tokens_per_turn",
        "tokens_trained",
        "tokens_unique",
    )

    def __init__(self, mode: ExtensionCheck = ExtensionCheck.FULL, window: int = 16):
        self._mode = mode
        self._window = window
        self._prev: FlatOb = []
        self._prev_len = 0  # token length of the current observation
        self._seg = 0  # length of the current datum's sequence through the last action
        self._split = False  # the current observation broke: the next transition starts a datum
        self._pending = 0  # unique tokens of the current observation, counted once acted on
        self.breaks: list[ExtensionBreak] = []
        """Every break, in turn order."""
        self.datums = 0
        """Datums ``trajectory_to_data`` makes of the transitions so far (after :meth:`close`)."""
        self.tokens_trained = 0
        """Tokens in those datums' sequences (observation deltas + actions)."""
        self.tokens_unique = 0
        """Tokens in the prefix tree of all contexts (what a prefix-sharing trainer would see)."""
        self.tokens_per_turn = 0
        """Tokens if every turn were its own datum (sum of observation + action lengths)."""

    @property
    def mode(self) -> ExtensionCheck:
        """The check this tracker runs."""
        return self._mode

    def start(self, ob: tinker.ModelInput) -> None:
        """Record the first observation."""
        self._prev, self._prev_len = flat_tokens_len(ob)
        self._pending = self._prev_len

    def acted(self, n_action: int) -> None:
        """A transition acting on the current observation with ``n_action`` tokens was recorded."""
        if self._split:
            if self._seg:
                self.datums += 1
                self.tokens_trained += self._seg
            self._split = False
        self._seg = self._prev_len + n_action
        self.tokens_unique += self._pending + n_action
        self._pending = 0
        self.tokens_per_turn += self._prev_len + n_action

    def step(
        self, action: list[int], next_ob: tinker.ModelInput, turn: int, env: Any
    ) -> ExtensionBreak | None:
        """:meth:`acted` then :meth:`observe`."""
        self.acted(len(action))
        return self.observe(action, next_ob, turn, env)

    def close(self) -> None:
        """End of the trajectory: close the last datum."""
        if self._seg:
            self.datums += 1
            self.tokens_trained += self._seg
            self._seg = 0

    def _extends(self, new: FlatOb, action: list[int]) -> bool:
        prev = self._prev
        n_prev = len(prev)
        n = n_prev + len(action)
        if len(new) < n:
            return False
        mode = self._mode
        if mode is ExtensionCheck.FULL:
            return new[n_prev:n] == action and new[:n_prev] == prev
        if mode is ExtensionCheck.BOUNDARY:
            w = self._window
            lo = max(0, n_prev - w)
            head = min(w, n_prev)
            return new[n_prev:n] == action and new[lo:n_prev] == prev[lo:] and new[:head] == prev[:head]
        return True

    def observe(
        self, action: list[int], next_ob: tinker.ModelInput, turn: int, env: Any
    ) -> ExtensionBreak | None:
        """Check ``next_ob`` against the current observation + ``action``; None when it extends.

        ``turn`` is the number of completed policy turns; ``env.renderer`` (when the env exposes
        one, with its conversation as ``env.messages``) tells expected breaks from unexpected ones.
        """
        new, n_new = flat_tokens_len(next_ob)
        if self._extends(new, action):
            self._pending = n_new - self._prev_len - len(action)
            self._prev, self._prev_len = new, n_new
            return None
        brk = self._diagnose(
            action, new, turn, getattr(env, "renderer", None), getattr(env, "messages", None)
        )
        self.breaks.append(brk)
        self._split = True
        # The new context shares its first ``divergence`` tokens with previous + action.
        self._pending = max(0, n_new - brk.divergence)
        self._prev, self._prev_len = new, n_new
        return brk

    def _diagnose(
        self, action: list[int], new: FlatOb, turn: int, renderer: Any, messages: Any = None
    ) -> ExtensionBreak:
        if not isinstance(renderer, Renderer):
            renderer = None
        if not isinstance(messages, list):
            messages = None
        expected = renderer is not None and not extension_expected(renderer, turn, messages)
        compaction = expected and isinstance(renderer, CompactingRenderer) and renderer.extends_within_windows
        prefix = [*self._prev, *action]
        if expected or renderer is None or not all(isinstance(x, int) for x in [*prefix, *new]):
            div = first_divergence(prefix, new)
            div = len(prefix) if div is None else div
            return ExtensionBreak(
                turn=turn,
                expected=expected,
                divergence=div,
                expected_len=len(prefix),
                actual_len=len(new),
                expected_token=prefix[div] if div < len(prefix) and isinstance(prefix[div], int) else None,
                actual_token=new[div] if div < len(new) and isinstance(new[div], int) else None,
                compaction=compaction,
            )
        report = check_extension(list(self._prev), action, list(new), renderer.tokenizer)
        return ExtensionBreak(
            turn=turn,
            expected=False,
            divergence=report.divergence if report.divergence is not None else len(prefix),
            expected_len=report.expected_len,
            actual_len=report.actual_len,
            expected_token=report.expected_token,
            actual_token=report.actual_token,
            expected_text=report.expected_text,
            actual_text=report.actual_text,
        )
