"""The judge wrapper: any ``MessageCompleter`` as a judge that cannot stall training.

:class:`Judge` wraps a completer (the embedded model, a Tinker model, an OpenAI-compatible
endpoint, a scripted judge...) with:

- a concurrency cap: one ``anyio.CapacityLimiter`` per judge (per event loop), shared by every
  env and group that uses the judge (:func:`get_judge` hands out one live judge per config);
- a per-call deadline (``anyio.fail_after``);
- retries with exponential backoff on errors, timeouts and unparseable replies; after the last
  attempt a configurable fallback value (:attr:`JudgeConfig.fallback_reward`);
- a cache keyed by (judge id, task namespace, prompt): in memory, and optionally in a SQLite
  file (WAL mode, safe for concurrent threads and processes), so re-evaluations cost nothing.
  Fallbacks are never cached.

Every call returns a :class:`JudgeResult` whose :meth:`~JudgeResult.metrics` count the retries,
timeouts, errors, unparseable replies, fallbacks and cache hits; :attr:`Judge.stats` keeps the
running totals.

Judges are created from a picklable :class:`~envs.judge.config.JudgeConfig` whose ``completer``
is a spec string ``"<kind>:<argument>"`` resolved by :func:`envs.judge.registry.make_completer`
(the cache lives in :mod:`envs.judge.cache`).
A deadline can only interrupt a judge that awaits: a completer that blocks the event loop in
plain Python code cannot be cancelled by any async deadline.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.judge.cache import JudgeCache, cache_key, shared_cache
from envs.judge.config import JudgeConfig
from envs.judge.registry import make_completer

METRIC_PREFIX = "judge/"
"""Prefix of the metrics a judge call reports."""

ScoreParser = Callable[[str], float | None]
"""Turns a judge's reply text into a value, or ``None`` when the reply is unparseable."""


class JudgeStatus(StrEnum):
    """How a :class:`JudgeResult` was obtained."""

    OK = "ok"
    """The judge replied and the reply parsed."""
    CACHED = "cached"
    """Served from the cache; the judge was not called."""
    FALLBACK = "fallback"
    """Every attempt failed (error, timeout or unparseable); the value is the fallback."""


@dataclass(frozen=True)
class JudgeResult:
    """The outcome of one guarded judge call."""

    value: float
    """The parsed value, or the config's fallback when ``status`` is ``FALLBACK``."""
    status: JudgeStatus
    """How the value was obtained."""
    reply: str = ""
    """The (last) reply text of the judge, if any."""
    attempts: int = 0
    """Calls made to the completer (0 on a cache hit)."""
    timeouts: int = 0
    """Attempts that ran past the deadline."""
    errors: int = 0
    """Attempts where the completer raised."""
    unparseable: int = 0
    """Attempts whose reply did not parse."""
    latency_s: float = 0.0
    """Wall time of the call, queueing and backoff included."""
    error: str = ""
    """One line describing the last failure (empty when none)."""

    @property
    def ok(self) -> bool:
        """True unless the value is a fallback."""
        return self.status is not JudgeStatus.FALLBACK

    @property
    def retries(self) -> int:
        """Attempts after the first."""
        return max(0, self.attempts - 1)

    def metrics(self, prefix: str = METRIC_PREFIX) -> dict[str, float]:
        """Counters of this call as trainer metrics (summed by the caller over several calls)."""
        return {
            f"{prefix}calls": 1.0,
            f"{prefix}attempts": float(self.attempts),
            f"{prefix}retries": float(self.retries),
            f"{prefix}timeouts": float(self.timeouts),
            f"{prefix}errors": float(self.errors),
            f"{prefix}unparseable": float(self.unparseable),
            f"{prefix}fallback": float(self.status is JudgeStatus.FALLBACK),
            f"{prefix}cache_hit": float(self.status is JudgeStatus.CACHED),
            f"{prefix}latency_s": self.latency_s,
        }


def sum_metrics(results: Sequence[JudgeResult], prefix: str = METRIC_PREFIX) -> dict[str, float]:
    """Sum the counters of several calls (latency is the maximum, i.e. the wall time if concurrent)."""
    total: dict[str, float] = {}
    for result in results:
        for key, value in result.metrics(prefix).items():
            if key.endswith("latency_s"):
                total[key] = max(total.get(key, 0.0), value)
            else:
                total[key] = total.get(key, 0.0) + value
    return total


@dataclass
class JudgeStats:
    """Running totals of a live :class:`Judge` (mutable; read :meth:`snapshot`)."""

    calls: int = 0
    cache_hits: int = 0
    attempts: int = 0
    retries: int = 0
    timeouts: int = 0
    errors: int = 0
    unparseable: int = 0
    fallbacks: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0

    def add(self, result: JudgeResult) -> None:
        """Count one finished call."""
        self.calls += 1
        self.cache_hits += result.status is JudgeStatus.CACHED
        self.attempts += result.attempts
        self.retries += result.retries
        self.timeouts += result.timeouts
        self.errors += result.errors
        self.unparseable += result.unparseable
        self.fallbacks += result.status is JudgeStatus.FALLBACK

    def snapshot(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class _Flight:
    done: anyio.Event
    result: JudgeResult | None = None


class Judge:
    """A guarded judge: concurrency cap, deadline, retries, fallback, cache (see the module doc).

    Args:
        config: what to call and how to guard it.
        completer: a live completer to use instead of building one from ``config.completer``
            (the config still names the judge in cache keys).
        cache: the cache to use (default: a private in-memory cache, backed by the shared file
            cache of ``config.cache_path`` when set).
    """

    def __init__(
        self,
        config: JudgeConfig,
        completer: MessageCompleter | None = None,
        *,
        cache: JudgeCache | None = None,
    ):
        self.config = config
        self._completer = completer
        self._completer_lock = threading.Lock()
        if cache is None and config.cache:
            cache = shared_cache(config.cache_path) if config.cache_path else JudgeCache()
        self.cache = cache if config.cache else None
        self.stats = JudgeStats()
        self._limiters: dict[Any, anyio.CapacityLimiter] = {}
        self._in_flight: dict[tuple[Any, str], _Flight] = {}

    @property
    def completer(self) -> MessageCompleter:
        """The wrapped completer (built on first use; :meth:`ask` builds it in a worker thread).

        A completer that cannot be built (unknown kind, missing package...) raises: that is a
        configuration error, not a judge fault to fall back from."""
        if self._completer is None:
            with self._completer_lock:
                if self._completer is None:
                    self._completer = make_completer(self.config)
        return self._completer

    def limiter(self) -> anyio.CapacityLimiter:
        """This judge's capacity limiter in the running event loop."""
        token = anyio.lowlevel.current_token()
        limiter = self._limiters.get(token)
        if limiter is None:
            # Forget limiters of closed loops (one per test/asyncio.run) so they do not pile up.
            self._limiters = {t: lim for t, lim in self._limiters.items() if not _loop_closed(t)}
            limiter = self._limiters[token] = anyio.CapacityLimiter(self.config.max_concurrency)
        return limiter

    def _backoff(self, retry: int) -> float:
        return min(self.config.backoff_max_s, self.config.backoff_s * (2 ** (retry - 1)))

    async def ask(
        self,
        prompt: Sequence[Message],
        parse: ScoreParser,
        *,
        namespace: str = "",
        use_cache: bool = True,
    ) -> JudgeResult:
        """Call the judge on ``prompt`` and parse its reply, guarded; never raises for judge faults.

        Args:
            prompt: the messages sent to the judge.
            parse: reply text -> value, or None when unparseable (an exception counts as None).
            namespace: what the value means (e.g. rubric fingerprint + parser); part of the cache key.
            use_cache: consult and fill the cache (when the config enables it). With the cache on,
                identical concurrent calls share one judge call (single flight); its fallback too.
        """
        start = time.monotonic()
        if not (use_cache and self.cache is not None):
            result = await self._call(prompt, parse, "", start)
            self.stats.add(result)
            return result
        cache = self.cache
        key = cache_key(self.config.id, namespace, prompt)
        flight_key = (anyio.lowlevel.current_token(), key)
        while True:  # single flight: identical concurrent calls wait for the first one
            hit = cache.get(key)
            if hit is not None:
                result = JudgeResult(value=hit[0], status=JudgeStatus.CACHED, reply=hit[1])
                self.stats.add(result)
                return result
            flight = self._in_flight.get(flight_key)
            if flight is None:
                break
            await flight.done.wait()
            if flight.result is not None and not flight.result.ok:
                shared = flight.result
                result = JudgeResult(
                    value=shared.value,
                    status=JudgeStatus.FALLBACK,
                    reply=shared.reply,
                    latency_s=time.monotonic() - start,
                    error=f"shared: {shared.error}",
                )
                self.stats.add(result)
                return result
            # the first call succeeded (now cached) or was cancelled (then this one calls)
        flight = _Flight(anyio.Event())
        self._in_flight[flight_key] = flight
        try:
            flight.result = await self._call(prompt, parse, key, start)
        finally:
            del self._in_flight[flight_key]
            flight.done.set()
        self.stats.add(flight.result)
        return flight.result

    async def _call(
        self, prompt: Sequence[Message], parse: ScoreParser, key: str, start: float
    ) -> JudgeResult:
        cfg = self.config
        completer = self._completer
        if completer is None:  # building one may load a model: keep it off the event loop
            completer = await anyio.to_thread.run_sync(lambda: self.completer)
        attempts = timeouts = errors = unparseable = 0
        reply_text, error = "", ""
        for attempt in range(cfg.max_attempts):
            if attempt:
                await anyio.sleep(self._backoff(attempt))
            attempts += 1
            outcomes = await self._attempt(completer, prompt, parse)
            values: list[float] = []
            texts: list[str] = []
            for kind, text, detail in outcomes:
                if kind == "ok":
                    values.append(float(detail))
                    texts.append(text)
                    continue
                timeouts += kind == "timeout"
                errors += kind == "error"
                unparseable += kind == "unparseable"
                error, reply_text = detail, text or reply_text
            if not values:
                continue
            reply_text = "\n---\n".join(texts)
            result = JudgeResult(
                value=sum(values) / len(values),
                status=JudgeStatus.OK,
                reply=reply_text,
                attempts=attempts,
                timeouts=timeouts,
                errors=errors,
                unparseable=unparseable,
                latency_s=time.monotonic() - start,
            )
            if key and self.cache is not None:
                self.cache.put(key, result.value, reply_text)
            return result
        result = JudgeResult(
            value=cfg.fallback_reward,
            status=JudgeStatus.FALLBACK,
            reply=reply_text,
            attempts=attempts,
            timeouts=timeouts,
            errors=errors,
            unparseable=unparseable,
            latency_s=time.monotonic() - start,
            error=error,
        )
        return result

    async def _attempt(
        self, completer: MessageCompleter, prompt: Sequence[Message], parse: ScoreParser
    ) -> list[tuple[str, str, str]]:
        """``config.samples`` guarded calls, concurrently."""
        if self.config.samples == 1:
            return [await self._once(completer, prompt, parse)]
        outcomes: list[tuple[str, str, str]] = [("error", "", "not run")] * self.config.samples

        async def one(index: int) -> None:
            outcomes[index] = await self._once(completer, prompt, parse)

        async with anyio.create_task_group() as tg:
            for index in range(self.config.samples):
                tg.start_soon(one, index)
        return outcomes

    async def _once(
        self, completer: MessageCompleter, prompt: Sequence[Message], parse: ScoreParser
    ) -> tuple[str, str, str]:
        """One guarded completer call: ``(kind, reply text, value or error)``; kind is ``ok``,
        ``timeout``, ``error`` or ``unparseable``."""
        cfg = self.config
        async with self.limiter():
            self.stats.in_flight += 1
            self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
            try:
                with anyio.fail_after(cfg.timeout_s):
                    reply = await completer(list(prompt))
            except TimeoutError:
                return "timeout", "", f"timeout after {cfg.timeout_s:g}s"
            except Exception as exc:
                return "error", "", f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            finally:
                self.stats.in_flight -= 1
        text = _reply_text(reply)
        try:
            value = parse(text)
        except Exception:  # a parser that raises is one more unparseable reply
            value = None
        if value is None or not math.isfinite(value):
            return "unparseable", text, f"unparseable reply: {text[:120]!r}"
        return "ok", text, repr(float(value))


def _reply_text(reply: Any) -> str:
    if isinstance(reply, str):
        return reply
    try:
        return get_text_content(reply)
    except Exception:
        return str(reply.get("content", "")) if isinstance(reply, dict) else str(reply)


def _loop_closed(token: Any) -> bool:
    is_closed = getattr(getattr(token, "native_token", None), "is_closed", None)
    return bool(is_closed()) if callable(is_closed) else False


_JUDGES: dict[JudgeConfig, Judge] = {}
_JUDGES_LOCK = threading.Lock()


def get_judge(config: JudgeConfig) -> Judge:
    """The process-wide live judge of ``config`` (one limiter, one cache, one completer per config)."""
    with _JUDGES_LOCK:
        judge = _JUDGES.get(config)
        if judge is None:
            judge = _JUDGES[config] = Judge(config)
        return judge


def clear_judges() -> None:
    """Forget every live judge made by :func:`get_judge` (tests; after changing a registry entry)."""
    with _JUDGES_LOCK:
        _JUDGES.clear()
