"""Test doubles of the judge package: deterministic scripted judges (``MessageCompleter`` s).

For tests and benchmarks, not production: importing this module registers the ``scripted``
completer kind (:func:`register_scripted_judges`), so a :class:`~envs.judge.config.JudgeConfig`
can name a scripted judge by spec. Each judge counts its calls and the peak number of calls in
flight. By spec (``"scripted:<arg>"``, resolved by :func:`make_scripted`):

====================  ===========================================================================
``score:7``           always ``"Score: 7/10"`` (``score:3:5`` -> ``"Score: 3/5"``)
``reply:<text>``      always ``<text>``
``garbage``           an unparseable reply
``raises``            raises ``RuntimeError``
``hangs``             never answers (awaits forever; only a deadline ends it)
``prefers_a``         always ``"Preferred: A"`` (maximal position bias)
``prefers_b``         always ``"Preferred: B"``
``longer``            prefers the longer of the two responses of a pairwise prompt (tie if equal)
``sleep:50[:<inner>]``  sleeps 50 ms, then answers like ``<inner>`` (default ``score:7``)
``flaky:2[:<inner>]``   raises on its first 2 calls, then answers like ``<inner>``
====================  ===========================================================================
"""

from __future__ import annotations

import re
from abc import abstractmethod

import anyio
from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.judge.config import JudgeConfig
from envs.judge.pairwise import RESPONSE_A_TAG, RESPONSE_B_TAG
from envs.judge.registry import register_completer

__all__ = [
    "SCRIPTED_NAMES",
    "ConstantJudge",
    "FlakyJudge",
    "GarbageJudge",
    "HangingJudge",
    "LongerJudge",
    "PreferenceJudge",
    "RaisingJudge",
    "ScriptedJudge",
    "SleepingJudge",
    "make_scripted",
    "register_scripted_judges",
]

SCRIPTED_NAMES = (
    "score",
    "reply",
    "garbage",
    "raises",
    "hangs",
    "prefers_a",
    "prefers_b",
    "longer",
    "sleep",
    "flaky",
)
"""The behaviours :func:`make_scripted` knows."""


class ScriptedJudge(MessageCompleter):
    """Base of the scripted judges: counts calls and concurrency, delegates the text to :meth:`reply`."""

    def __init__(self) -> None:
        self.calls = 0
        """Calls received so far."""
        self.in_flight = 0
        """Calls currently running."""
        self.peak_in_flight = 0
        """Most calls that ran at the same time."""

    async def __call__(self, messages: list[Message]) -> Message:
        self.calls += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            text = await self.reply(messages)
        finally:
            self.in_flight -= 1
        return {"role": "assistant", "content": text}

    @abstractmethod
    async def reply(self, messages: list[Message]) -> str:
        """The reply text to ``messages``."""


class ConstantJudge(ScriptedJudge):
    """Always answers ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    async def reply(self, messages: list[Message]) -> str:
        return self.text


class GarbageJudge(ConstantJudge):
    """Always answers something no score or preference parser accepts."""

    def __init__(self) -> None:
        super().__init__("Hmm, hard to say. Both have merits; the weather is lovely today.")


class RaisingJudge(ScriptedJudge):
    """Always raises ``RuntimeError`` (a judge endpoint that is down)."""

    async def reply(self, messages: list[Message]) -> str:
        raise RuntimeError("scripted judge failure")


class HangingJudge(ScriptedJudge):
    """Never answers: awaits forever (a stuck connection). Only a deadline ends the call."""

    async def reply(self, messages: list[Message]) -> str:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


class PreferenceJudge(ConstantJudge):
    """Always prefers the same position: ``"A"`` (maximal position bias) or ``"B"``."""

    def __init__(self, position: str = "A") -> None:
        if position not in ("A", "B"):
            raise ValueError(f"position must be 'A' or 'B', got {position!r}")
        super().__init__(f"Preferred: {position}")


def _tagged(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return match.group(1) if match else ""


class LongerJudge(ScriptedJudge):
    """Prefers the longer response of a pairwise prompt (a position-independent judge)."""

    async def reply(self, messages: list[Message]) -> str:
        text = "\n".join(get_text_content(m) for m in messages)
        a, b = len(_tagged(text, RESPONSE_A_TAG)), len(_tagged(text, RESPONSE_B_TAG))
        return "Preferred: " + ("A" if a > b else "B" if b > a else "tie")


class SleepingJudge(ScriptedJudge):
    """Sleeps ``delay_ms`` (an endpoint's latency), then answers like ``inner``."""

    def __init__(self, delay_ms: float, inner: ScriptedJudge) -> None:
        super().__init__()
        self.delay_s = delay_ms / 1000.0
        self.inner = inner

    async def reply(self, messages: list[Message]) -> str:
        await anyio.sleep(self.delay_s)
        return await self.inner.reply(messages)


class FlakyJudge(ScriptedJudge):
    """Raises on its first ``failures`` calls, then answers like ``inner``."""

    def __init__(self, failures: int, inner: ScriptedJudge) -> None:
        super().__init__()
        self.failures = failures
        self.inner = inner

    async def reply(self, messages: list[Message]) -> str:
        if self.calls <= self.failures:
            raise ConnectionError(f"scripted flaky failure {self.calls}/{self.failures}")
        return await self.inner.reply(messages)


def make_scripted(spec: str) -> ScriptedJudge:
    """Build a scripted judge from its spec (the part after ``"scripted:"``; table in the module doc)."""
    name, _, rest = spec.partition(":")
    try:
        if name == "score":
            score, _, scale = rest.partition(":")
            return ConstantJudge(f"Score: {float(score):g}/{float(scale or 10):g}")
        if name == "reply":
            return ConstantJudge(rest)
        if name == "garbage":
            return GarbageJudge()
        if name == "raises":
            return RaisingJudge()
        if name == "hangs":
            return HangingJudge()
        if name in ("prefers_a", "prefers_b"):
            return PreferenceJudge(name[-1].upper())
        if name == "longer":
            return LongerJudge()
        if name in ("sleep", "flaky"):
            number, _, inner = rest.partition(":")
            inner_judge = make_scripted(inner or "score:7")
            if name == "sleep":
                return SleepingJudge(float(number), inner_judge)
            return FlakyJudge(int(number), inner_judge)
    except ValueError as exc:
        raise ValueError(f"bad scripted judge spec {spec!r}: {exc}") from None
    raise ValueError(f"unknown scripted judge {name!r} in {spec!r}; known: {', '.join(SCRIPTED_NAMES)}")


def _scripted_factory(config: JudgeConfig, arg: str) -> MessageCompleter:
    return make_scripted(arg)


def register_scripted_judges() -> None:
    """Make ``"scripted:<arg>"`` completer specs resolve to :func:`make_scripted` (idempotent;
    done when this module is imported)."""
    register_completer("scripted", _scripted_factory, replace=True)


register_scripted_judges()
