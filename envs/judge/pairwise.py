"""Pairwise preference: tournament patterns, the comparison prompt, concurrent tournaments, win rates.

The G responses of a group (to the same prompt) meet in pairs chosen by a
:class:`PairingScheme`; a :class:`~envs.judge.judge.Judge` says which of each pair is better;
each response's reward is its win rate (a tie is half a win). All comparisons of a tournament
run concurrently (one anyio task group; the judge's limiter caps what is in flight).

A comparison that falls back (the judge failed) is left out of the win rates; a response left
with no comparison gets the judge's ``fallback_reward``. A response that *forfeits* (its episode
ended without a final answer, e.g. an unparseable action) loses to every non-forfeit response
without a judge call and ties with other forfeits.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
from tinker_cookbook.renderers import Message

from envs.judge.config import PairingScheme
from envs.judge.judge import Judge, JudgeResult, sum_metrics
from envs.judge.text import REFERENCE_TAG, RESPONSE_A_TAG, RESPONSE_B_TAG, format_transcript, json_objects

_PREFERRED_RE = re.compile(
    r"(?:preferred|winner|better(?:\s+response)?|answer|verdict)\s*[:=]\s*[\*\[\(\"']*\s*"
    r"(?:response[\s_]*|answer\s*|option\s*)?(A|B|tie)\b",
    re.IGNORECASE,
)
_BRACKET_RE = re.compile(r"\[\[\s*(A|B|tie)\s*\]\]", re.IGNORECASE)
_BARE_RE = re.compile(r"^\s*(?:response\s+)?(A|B|tie)\s*\.?\s*$", re.IGNORECASE)

DEFAULT_COMPARISON_SYSTEM = "You are an impartial judge. You compare two responses to the same conversation."


def tournament_pairs(n: int, pattern: PairingScheme | str, rounds: int = 1) -> list[tuple[int, int]]:
    """The ``(A index, B index)`` comparisons of a group of ``n`` responses."""
    pattern = PairingScheme(pattern)
    if n < 0:
        raise ValueError(f"group size must be >= 0, got {n}")
    if pattern is PairingScheme.ALL_PAIRS:
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    if pattern is PairingScheme.BOTH_ORDERS:
        return [(i, j) for i in range(n) for j in range(n) if i != j]
    if n < 2:
        return []
    if not 1 <= rounds <= n - 1:
        raise ValueError(f"round_robin rounds must be in [1, {n - 1}] for a group of {n}, got {rounds}")
    pairs = [(i, (i + r) % n) for r in range(1, rounds + 1) for i in range(n)]
    return list(dict.fromkeys(pairs))  # n == 2: (0,1),(1,0) once each


def parse_preference(text: str) -> float | None:
    """The probability that B is better from a judge reply: 0.0 (A), 1.0 (B), 0.5 (tie); None if absent.

    Accepted (the last statement wins): ``Preferred: A``, ``Preferred: Response B``, ``Winner: (A)``,
    ``[[A]]``, ``{"preferred": "B"}``,
    and a reply that is only ``A``, ``B`` or ``tie``. A graded judge (a reward model's probability)
    writes ``{"p_b": 0.73}``: that probability, when it is a number in [0, 1], is the value.
    """
    values = {"a": 0.0, "b": 1.0, "tie": 0.5}
    for obj in reversed(json_objects(text)):
        p_b = obj.get("p_b")
        if isinstance(p_b, int | float) and not isinstance(p_b, bool) and 0.0 <= p_b <= 1.0:
            return float(p_b)
        for key in ("preferred", "winner", "better"):
            choice = obj.get(key)
            if isinstance(choice, str) and choice.strip().lower() in values:
                return values[choice.strip().lower()]
    for pattern in (_PREFERRED_RE, _BRACKET_RE):
        matches = list(pattern.finditer(text))
        if matches:
            return values[matches[-1].group(1).lower()]
    bare = _BARE_RE.match(text)
    return values[bare.group(1).lower()] if bare else None


def comparison_prompt(
    conversation: Sequence[Message],
    response_a: Sequence[Message],
    response_b: Sequence[Message],
    *,
    criteria: str = "",
    reference: Sequence[str] = (),
    system_prompt: str = DEFAULT_COMPARISON_SYSTEM,
) -> list[Message]:
    """The judge prompt comparing two continuations of ``conversation`` (with the task's accepted
    answers, when it has any, in a ``<reference>`` block, one per line)."""
    reference_block = (
        [
            "Accepted answers (a correct response gives one of them):",
            f"<{REFERENCE_TAG}>",
            *reference,
            f"</{REFERENCE_TAG}>",
            "",
        ]
        if reference
        else []
    )
    body = "\n".join(
        [
            "<conversation>",
            format_transcript(conversation) or "(empty)",
            "</conversation>",
            "",
            *reference_block,
            f"<{RESPONSE_A_TAG}>",
            format_transcript(response_a),
            f"</{RESPONSE_A_TAG}>",
            "",
            f"<{RESPONSE_B_TAG}>",
            format_transcript(response_b),
            f"</{RESPONSE_B_TAG}>",
            "",
            *([f"Judge them on: {criteria}"] if criteria else []),
            "Which response continues the conversation better? End your answer with one line: "
            "Preferred: A, Preferred: B or Preferred: tie",
        ]
    )
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": body}]


def win_rates(n: int, outcomes: Sequence[tuple[int, int, float | None]], fallback: float) -> list[float]:
    """Each response's share of wins (tie = half) over its decided comparisons.

    ``outcomes`` holds ``(a, b, p)`` with ``p`` the probability that ``b`` beat ``a`` (None when
    undecided). A response with no decided comparison gets ``fallback``.
    """
    wins = [0.0] * n
    games = [0] * n
    for a, b, p in outcomes:
        if p is None:
            continue
        wins[a] += 1.0 - p
        wins[b] += p
        games[a] += 1
        games[b] += 1
    return [w / g if g else fallback for w, g in zip(wins, games, strict=True)]


@dataclass(frozen=True)
class TournamentMatch:
    """One decided (or failed) comparison of a tournament."""

    a: int
    """Index of the response shown as A."""
    b: int
    """Index of the response shown as B."""
    p_b: float | None
    """Probability that B is better (0, 0.5, 1), or None when the judge fell back."""
    result: JudgeResult | None
    """The judge call (None for a forfeit decided without the judge)."""


@dataclass(frozen=True)
class TournamentResult:
    """Win rates of a group and the comparisons behind them."""

    rewards: tuple[float, ...]
    """Win rate per response (fallback value for a response with no decided comparison)."""
    comparisons: tuple[TournamentMatch, ...]
    """Every comparison, in pattern order."""
    wall_s: float
    """Wall time of the tournament."""

    @property
    def judge_results(self) -> tuple[JudgeResult, ...]:
        """The judge calls made (forfeits excluded)."""
        return tuple(c.result for c in self.comparisons if c.result is not None)

    def metrics(self) -> dict[str, float]:
        """Group-level counters: judge calls summed, comparisons, forfeits, wall time."""
        metrics = sum_metrics(self.judge_results)
        metrics["pairwise/comparisons"] = float(len(self.comparisons))
        metrics["pairwise/undecided"] = float(sum(c.p_b is None for c in self.comparisons))
        metrics["pairwise/forfeits"] = float(sum(c.result is None for c in self.comparisons))
        metrics["pairwise/wall_s"] = self.wall_s
        return metrics


def _namespace(criteria: str) -> str:
    return "pairwise:v1:" + hashlib.sha256(json.dumps(criteria).encode()).hexdigest()[:16]


async def run_tournament(
    judge: Judge,
    conversation: Sequence[Message],
    responses: Sequence[Sequence[Message]],
    *,
    pattern: PairingScheme | str = PairingScheme.BOTH_ORDERS,
    rounds: int = 1,
    forfeits: Sequence[bool] | None = None,
    criteria: str = "",
    reference: Sequence[str] = (),
    concurrent: bool = True,
) -> TournamentResult:
    """Compare ``responses`` (continuations of ``conversation``) in pairs and return win rates.

    Args:
        judge: the guarded judge.
        conversation: the shared prompt.
        responses: one message list per group member.
        pattern / rounds: which pairs meet (:func:`tournament_pairs`).
        forfeits: per response, True when it has no answer to judge (loses without a judge call).
        criteria: what "better" means, appended to the comparison prompt.
        reference: the task's accepted answers, shown to the judge (:func:`comparison_prompt`).
        concurrent: run the comparisons concurrently (False: one after another, for baselines).
    """
    start = time.monotonic()
    n = len(responses)
    forfeit = list(forfeits) if forfeits is not None else [False] * n
    if len(forfeit) != n:
        raise ValueError(f"forfeits has {len(forfeit)} entries for {n} responses")
    pairs = tournament_pairs(n, pattern, rounds)
    comparisons: list[TournamentMatch | None] = [None] * len(pairs)
    namespace = _namespace(criteria)

    async def compare(index: int, a: int, b: int) -> None:
        if forfeit[a] or forfeit[b]:
            p_b = 0.5 if forfeit[a] and forfeit[b] else (1.0 if forfeit[a] else 0.0)
            comparisons[index] = TournamentMatch(a, b, p_b, None)
            return
        prompt = comparison_prompt(
            conversation, responses[a], responses[b], criteria=criteria, reference=reference
        )
        result = await judge.ask(prompt, parse_preference, namespace=namespace)
        comparisons[index] = TournamentMatch(a, b, result.value if result.ok else None, result)

    if concurrent:
        async with anyio.create_task_group() as tg:
            for index, (a, b) in enumerate(pairs):
                tg.start_soon(compare, index, a, b)
    else:
        for index, (a, b) in enumerate(pairs):
            await compare(index, a, b)
    done = tuple(c for c in comparisons if c is not None)
    rewards = win_rates(n, [(c.a, c.b, c.p_b) for c in done], judge.config.fallback_reward)
    return TournamentResult(rewards=tuple(rewards), comparisons=done, wall_s=time.monotonic() - start)
