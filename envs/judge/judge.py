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

Judges are created from a picklable :class:`JudgeConfig` whose ``completer`` is a spec string
``"<kind>:<argument>"`` resolved by :func:`make_completer`. Built-in kinds: ``scripted`` (see
:mod:`envs.judge.scripted`), ``local`` (the embedded backend), ``tinker`` (a Tinker sampling
client) and ``openai`` (an OpenAI-compatible chat endpoint); :func:`register_completer` adds more.
A deadline can only interrupt a judge that awaits: a completer that blocks the event loop in
plain Python code cannot be cancelled by any async deadline.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, Renderer, get_text_content

METRIC_PREFIX = "judge/"
"""Prefix of the metrics a judge call reports."""

ScoreParser = Callable[[str], float | None]
"""Turns a judge's reply text into a value, or ``None`` when the reply is unparseable."""
CompleterFactory = Callable[["JudgeConfig", str], MessageCompleter]
"""Builds a completer from a config and the argument after ``"<kind>:"`` in its spec."""


class JudgeStatus(StrEnum):
    """How a :class:`JudgeResult` was obtained."""

    OK = "ok"
    """The judge replied and the reply parsed."""
    CACHED = "cached"
    """Served from the cache; the judge was not called."""
    FALLBACK = "fallback"
    """Every attempt failed (error, timeout or unparseable); the value is the fallback."""


@dataclass(frozen=True)
class JudgeConfig:
    """A picklable description of a guarded completer (a judge, or a simulated user).

    ``completer`` is a spec ``"<kind>:<argument>"``: ``"local:HuggingFaceTB/SmolLM2-135M-Instruct"``,
    ``"tinker:Qwen/Qwen3-8B"``, ``"openai:gpt-4o-mini"`` (with ``base_url``), ``"scripted:score:7"``,
    or a name given to :func:`register_completer`.
    """

    completer: str
    """Completer spec, resolved by :func:`make_completer`."""
    judge_id: str | None = None
    """Cache identity (defaults to ``completer``). Change it when the judge model changes."""
    max_concurrency: int = 16
    """Concurrent calls in flight to this judge (one limiter per judge)."""
    timeout_s: float = 60.0
    """Deadline of one call, in seconds."""
    max_attempts: int = 3
    """Calls before falling back (1 = no retry)."""
    backoff_s: float = 0.25
    """Sleep before the first retry; doubled each retry."""
    backoff_max_s: float = 8.0
    """Cap of the backoff sleep."""
    fallback_reward: float = 0.0
    """Value of a call whose attempts all failed."""
    cache: bool = True
    """Cache parsed results in memory (and on disk with ``cache_path``)."""
    cache_path: str | None = None
    """SQLite file of a persistent cache shared across runs and processes (None: memory only)."""
    max_tokens: int = 256
    """Sampling budget of one reply (model-backed completers)."""
    temperature: float = 0.0
    """Sampling temperature (model-backed completers)."""
    renderer_name: str | None = None
    """Renderer of a ``local``/``tinker`` judge (default: the model's recommended one)."""
    base_url: str | None = None
    """Endpoint of an ``openai`` judge (e.g. ``http://localhost:8000/v1``), or a Tinker URL."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the ``openai`` judge's API key (read lazily)."""
    samples: int = 1
    """Judge replies per verdict, sampled concurrently; the parsed values are averaged
    (self-consistency; use with ``temperature`` > 0). Failed samples are counted, the verdict
    needs one parsed sample."""
    reply_prefix: str = ""
    """``local``/``tinker`` judges: prefill the reply with this text (e.g. ``"Score:"``), so a small
    model only writes the score (:class:`PrefilledSamplingCompleter`). Other kinds ignore it."""

    def __post_init__(self) -> None:
        if not self.completer or not isinstance(self.completer, str):
            raise ValueError(f"JudgeConfig.completer must be a non-empty spec string, got {self.completer!r}")
        if self.max_concurrency < 1:
            raise ValueError(f"JudgeConfig.max_concurrency must be >= 1, got {self.max_concurrency}")
        if not self.timeout_s > 0:
            raise ValueError(f"JudgeConfig.timeout_s must be > 0, got {self.timeout_s}")
        if self.max_attempts < 1:
            raise ValueError(f"JudgeConfig.max_attempts must be >= 1, got {self.max_attempts}")
        if self.backoff_s < 0 or self.backoff_max_s < 0:
            raise ValueError(f"JudgeConfig backoff must be >= 0, got {self.backoff_s}/{self.backoff_max_s}")
        if not math.isfinite(self.fallback_reward):
            raise ValueError(f"JudgeConfig.fallback_reward must be finite, got {self.fallback_reward}")
        if self.samples < 1:
            raise ValueError(f"JudgeConfig.samples must be >= 1, got {self.samples}")
        if self.max_tokens < 1:
            raise ValueError(f"JudgeConfig.max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def id(self) -> str:
        """The judge's identity in cache keys."""
        return self.judge_id or self.completer

    def replace(self, **changes: Any) -> JudgeConfig:
        """A copy with some fields changed (validated)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        unknown = set(changes) - set(values)
        if unknown:
            raise ValueError(f"unknown JudgeConfig field(s): {', '.join(sorted(unknown))}")
        return JudgeConfig(**{**values, **changes})


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


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------
def cache_key(judge_id: str, namespace: str, prompt: Sequence[Message]) -> str:
    """Stable key of a judge call: sha256 of (judge id, task namespace, prompt messages)."""
    payload = json.dumps([judge_id, namespace, list(prompt)], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


class JudgeCache:
    """Parsed judge results by key: an LRU dict in memory, optionally backed by a SQLite file.

    The file is opened in WAL mode with a busy timeout, so several threads and processes can
    share it; a write that loses a race simply keeps the other writer's (equivalent) value.
    """

    def __init__(self, path: str | Path | None = None, *, max_entries: int = 100_000):
        self.path = Path(path).expanduser() if path is not None else None
        self.max_entries = max_entries
        self._memory: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value REAL, reply TEXT)")
            self._conn = conn
        return self._conn

    def get(self, key: str) -> tuple[float, str] | None:
        """The cached ``(value, reply)`` of ``key``, or None."""
        with self._lock:
            hit = self._memory.get(key)
            if hit is not None:
                self._memory.move_to_end(key)
                return hit
            db = self._db()
            if db is None:
                return None
            row = db.execute("SELECT value, reply FROM verdicts WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            hit = (float(row[0]), str(row[1]))
            self._remember(key, hit)
            return hit

    def put(self, key: str, value: float, reply: str) -> None:
        """Store a parsed result."""
        with self._lock:
            self._remember(key, (value, reply))
            db = self._db()
            if db is not None:
                db.execute(
                    "INSERT OR REPLACE INTO verdicts (key, value, reply) VALUES (?, ?, ?)",
                    (key, value, reply),
                )

    def _remember(self, key: str, entry: tuple[float, str]) -> None:
        self._memory[key] = entry
        self._memory.move_to_end(key)
        while len(self._memory) > self.max_entries:
            self._memory.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            db = self._db()
            if db is None:
                return len(self._memory)
            return int(db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def close(self) -> None:
        """Close the file (the memory part stays usable)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_DISK_CACHES: dict[str, JudgeCache] = {}
_DISK_CACHES_LOCK = threading.Lock()


def _shared_cache(path: str) -> JudgeCache:
    resolved = str(Path(path).expanduser().resolve())
    with _DISK_CACHES_LOCK:
        cache = _DISK_CACHES.get(resolved)
        if cache is None:
            cache = _DISK_CACHES[resolved] = JudgeCache(resolved)
        return cache


# --------------------------------------------------------------------------------------------
# Completer registry
# --------------------------------------------------------------------------------------------
_FACTORIES: dict[str, CompleterFactory] = {}


def register_completer(kind: str, factory: CompleterFactory, *, replace: bool = False) -> None:
    """Make ``"<kind>"`` / ``"<kind>:<arg>"`` specs resolve to ``factory(config, arg)``."""
    if not kind or ":" in kind:
        raise ValueError(f"completer kind must be a non-empty name without ':', got {kind!r}")
    if kind in _FACTORIES and not replace:
        raise ValueError(f"completer kind {kind!r} is already registered (pass replace=True)")
    _FACTORIES[kind] = factory


def make_completer(config: JudgeConfig) -> MessageCompleter:
    """Build the live completer a config describes."""
    kind, _, arg = config.completer.partition(":")
    factory = _FACTORIES.get(kind)
    if factory is None:
        known = ", ".join(sorted(_FACTORIES))
        raise ValueError(f"unknown completer kind {kind!r} in {config.completer!r}; known kinds: {known}")
    return factory(config, arg)


def _scripted_factory(config: JudgeConfig, arg: str) -> MessageCompleter:
    from envs.judge.scripted import make_scripted

    return make_scripted(arg)


_LOCAL_SERVICE: Any = None
_LOCAL_LOCK = threading.Lock()


class PrefilledSamplingCompleter(MessageCompleter):
    """Samples a reply that starts with ``prefix`` (prefilled after the generation prompt).

    Small judges rarely follow an output format; prefilling ``"Score:"`` makes the model only
    write the number. The returned message's content includes the prefix.

    Args:
        sampling_client: a ``tinker.SamplingClient`` or ``backend.LocalSamplingClient``.
        renderer: renders the messages and parses the sampled tokens.
        max_tokens: tokens sampled after the prefix.
        temperature: sampling temperature.
        prefix: text the reply starts with.
    """

    def __init__(
        self, sampling_client: Any, renderer: Renderer, *, max_tokens: int, temperature: float, prefix: str
    ):
        self.sampling_client = sampling_client
        self.renderer = renderer
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.prefix = prefix
        self._prefix_tokens = list(renderer.tokenizer.encode(prefix, add_special_tokens=False))

    async def __call__(self, messages: list[Message]) -> Message:
        import tinker

        prompt = self.renderer.build_generation_prompt(messages).to_ints() + self._prefix_tokens
        response = await self.sampling_client.sample_async(
            prompt=tinker.ModelInput.from_ints(prompt),
            num_samples=1,
            sampling_params=tinker.SamplingParams(
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                stop=self.renderer.get_stop_sequences(),
            ),
        )
        parsed, _ = self.renderer.parse_response(list(response.sequences[0].tokens))
        return {"role": "assistant", "content": self.prefix + get_text_content(parsed)}


def _sampling_completer(config: JudgeConfig, model: str, sampling_client: Any) -> MessageCompleter:
    from renderers_ext import get_renderer

    if config.renderer_name is not None:
        renderer_name = config.renderer_name
    else:
        from tinker_cookbook import model_info

        try:
            renderer_name = model_info.get_recommended_renderer_name(model)
        except Exception:
            renderer_name = "qwen3_instruct"
    try:
        renderer = get_renderer(renderer_name, model)
    except Exception:
        from tinker_cookbook import renderers
        from tinker_cookbook.tokenizer_utils import get_tokenizer

        renderer = renderers.get_renderer(renderer_name, get_tokenizer(model), model_name=model)
    if config.reply_prefix:
        return PrefilledSamplingCompleter(
            sampling_client,
            renderer,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            prefix=config.reply_prefix,
        )
    try:  # works with tinker's and the local backend's sampling clients
        from completers import SamplingMessageCompleter

        return SamplingMessageCompleter(
            sampling_client, renderer, max_tokens=config.max_tokens, temperature=config.temperature
        )
    except ImportError:  # pragma: no cover - completers/ is part of the package
        from tinker_cookbook.completers import TinkerMessageCompleter

        return TinkerMessageCompleter(
            sampling_client, renderer, max_tokens=config.max_tokens, temperature=config.temperature
        )


def _local_factory(config: JudgeConfig, model: str) -> MessageCompleter:
    from backend import SMOLLM2, make_service_client

    global _LOCAL_SERVICE
    model = model or SMOLLM2
    with _LOCAL_LOCK:
        if _LOCAL_SERVICE is None:
            _LOCAL_SERVICE = make_service_client("local")
        service = _LOCAL_SERVICE
    sampling_client = service.create_sampling_client(base_model=model).result()
    if config.renderer_name is None:
        config = config.replace(renderer_name="qwen3_instruct")
    return _sampling_completer(config, model, sampling_client)


def _tinker_factory(config: JudgeConfig, model: str) -> MessageCompleter:
    import tinker

    if not model:
        raise ValueError("a tinker judge needs a model: 'tinker:<base model or tinker:// path>'")
    service = tinker.ServiceClient(base_url=config.base_url)
    if model.startswith("tinker://"):
        sampling_client = service.create_sampling_client(model_path=model)
        base_model = sampling_client.get_base_model()
    else:
        sampling_client = service.create_sampling_client(base_model=model)
        base_model = model
    return _sampling_completer(config, base_model, sampling_client)


def _openai_factory(config: JudgeConfig, model: str) -> MessageCompleter:
    from completers.openai_compat import OpenAICompatibleMessageCompleter

    if not model:
        raise ValueError("an openai judge needs a model: 'openai:<model name>'")
    return OpenAICompatibleMessageCompleter(
        model=model,
        base_url=config.base_url or "https://api.openai.com/v1",
        api_key_env=config.api_key_env,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        timeout_s=config.timeout_s,
    )


register_completer("scripted", _scripted_factory)
register_completer("local", _local_factory)
register_completer("tinker", _tinker_factory)
register_completer("openai", _openai_factory)


# --------------------------------------------------------------------------------------------
# The judge
# --------------------------------------------------------------------------------------------
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
            cache = _shared_cache(config.cache_path) if config.cache_path else JudgeCache()
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
