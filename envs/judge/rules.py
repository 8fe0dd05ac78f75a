"""A programmatic pairwise judge: deterministic checks instead of a model (offline, instant, reproducible).

The spec ``rules`` (or ``rules:<check>,<check>,...``, a built-in completer kind) names a
:class:`RuleJudge`. It reads a pairwise comparison prompt (:func:`~envs.judge.pairwise.comparison_prompt`),
scores both responses on each check and prefers the one that wins the first check on which they
differ (lexicographic order); equal on every check, it answers a tie. The checks:

``correct``   mentions one of the task's accepted answers (the prompt's ``<reference>`` block, from
              the task's ``reference``): whole words, case-insensitive, an optional plural ``s`` /
              ``es``. Neutral (a tie) when the task has no reference.
``complete``  the reply ends a sentence (``.``, ``!`` or ``?``, maybe inside quotes or brackets): an
              answer cut by the token budget rarely does.
``concise``   fewer words.

The default order, ``correct,complete,concise``, follows the shipped ``default`` rubric: a correct
answer first, then a finished, short one. The reply names each check's values and ends with
``Preferred: A``, ``Preferred: B`` or ``Preferred: tie`` (:func:`~envs.judge.pairwise.parse_preference`).

It only compares: a prompt without both response blocks (e.g. a rubric grading prompt) raises
``ValueError``, which the :class:`~envs.judge.judge.Judge` wrapper counts as an error and, after its
attempts, answers with the fallback value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.judge.text import REFERENCE_TAG, RESPONSE_A_TAG, RESPONSE_B_TAG, ROLE_NAMES

__all__ = ["CHECKS", "DEFAULT_CHECKS", "RuleJudge", "complete", "concise", "correct", "reply_text"]

_ROLE_RE = re.compile(r"^({}): ".format("|".join(map(re.escape, ROLE_NAMES.values()))), re.MULTILINE)
_END_RE = re.compile(r"[.!?][\"'”’)\]]*$")
_WORD_RE = re.compile(r"\w+")


def reply_text(block: str) -> str:
    """The assistant's text in a transcript block (:func:`~envs.judge.text.format_transcript`);
    a block without role labels is taken whole."""
    parts = _ROLE_RE.split(block)
    if len(parts) == 1:
        return block.strip()
    # parts = [before, role, text, role, text, ...]
    texts = [text.strip() for role, text in zip(parts[1::2], parts[2::2], strict=True) if role == "Assistant"]
    return "\n\n".join(texts)


def correct(text: str, reference: Sequence[str]) -> float:
    """1 when ``text`` mentions an accepted answer (whole words, any case, optional plural), else 0;
    0 for every text when there is no reference."""
    for answer in reference:
        if re.search(rf"(?<!\w){re.escape(answer)}(?:s|es)?(?!\w)", text, re.IGNORECASE):
            return 1.0
    return 0.0


def complete(text: str, reference: Sequence[str]) -> float:
    """1 when ``text`` ends a sentence, else 0."""
    return float(bool(_END_RE.search(text.strip())))


def concise(text: str, reference: Sequence[str]) -> float:
    """Minus the number of words (higher is better)."""
    return -float(len(_WORD_RE.findall(text)))


CHECKS: dict[str, Callable[[str, Sequence[str]], float]] = {
    "correct": correct,
    "complete": complete,
    "concise": concise,
}
"""The checks by name: ``(reply text, accepted answers) -> value`` (higher is better)."""
DEFAULT_CHECKS = ("correct", "complete", "concise")
"""The order of the spec ``rules``."""


def _block(text: str, tag: str) -> str | None:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return match.group(1) if match else None


class RuleJudge(MessageCompleter):
    """Prefers, of a comparison prompt's two responses, the one that wins the first differing check.

    Args:
        checks: names in :data:`CHECKS`, most important first.
    """

    def __init__(self, checks: Sequence[str] = DEFAULT_CHECKS) -> None:
        unknown = [c for c in checks if c not in CHECKS]
        if not checks or unknown:
            raise ValueError(
                f"rules judge: unknown or no checks {list(unknown) or list(checks)}; known: {', '.join(CHECKS)}"
            )
        self.checks = tuple(checks)

    @classmethod
    def from_spec(cls, arg: str) -> RuleJudge:
        """From the part after ``"rules:"`` (empty: :data:`DEFAULT_CHECKS`)."""
        names = [name.strip() for name in arg.split(",") if name.strip()]
        return cls(names or DEFAULT_CHECKS)

    def verdict(self, response_a: str, response_b: str, reference: Sequence[str]) -> tuple[str, str]:
        """``("A" | "B" | "tie", one line per check)`` for two reply texts."""
        lines = []
        for name in self.checks:
            a, b = CHECKS[name](response_a, reference), CHECKS[name](response_b, reference)
            lines.append(f"{name}: A={a:g} B={b:g}")
            if a != b:
                return ("A" if a > b else "B"), "\n".join(lines)
        return "tie", "\n".join(lines)

    async def __call__(self, messages: list[Message]) -> Message:
        text = "\n".join(get_text_content(m) for m in messages)
        block_a, block_b = _block(text, RESPONSE_A_TAG), _block(text, RESPONSE_B_TAG)
        if block_a is None or block_b is None:
            raise ValueError("the rules judge compares two responses; the prompt has no response blocks")
        reference_block = _block(text, REFERENCE_TAG) or ""
        reference = [line.strip() for line in reference_block.splitlines() if line.strip()]
        choice, reasons = self.verdict(reply_text(block_a), reply_text(block_b), reference)
        return {"role": "assistant", "content": f"{reasons}\nPreferred: {choice}"}
