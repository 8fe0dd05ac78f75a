"""Sampling engine: one model served with continuous (dynamic) batching on the compute thread.

How a request flows:

1. ``submit_sample`` validates it, fixes its seed (see below) and puts it on a queue; while the
   engine has work it runs in rounds (:meth:`SamplerEngine._step`) queued one after the other on
   the backend's compute thread (:mod:`._device`), interleaved with other work there; an engine
   idle for a short while releases its KV cache.
2. Between decode steps the engine admits every waiting request that fits the batch and
   prefills them **together**: each request takes the longest KV prefix it finds in a small LRU
   (the previous turn of a conversation, a prompt shared by a group), identical prompts are
   prefilled once, and a prompt that shares a long prefix with another one admitted at the same
   time waits one pass to reuse it; the remaining new tokens of all requests run as one packed
   forward pass (:class:`~._decoder.SlotDecoder`). Each sample of a request gets its own slot of
   the KV cache.
3. Each decode step feeds every live row's last token at once; each row samples with its own
   temperature / top-k / top-p and seeded generator and finishes on a stop id, a stop string, or
   ``max_tokens``. Finished rows leave the batch and their KV (prompt + completion) goes into
   the prefix LRU, so the next turn of a conversation only prefills the new suffix.
4. Rows of a request whose future was cancelled are dropped at the next step.

Returned logprobs are those of the model's untempered distribution (``log_softmax`` of the raw
logits), i.e. the same quantity ``forward`` / ``compute_logprobs`` return for those tokens.

Reproducibility: the decoder is batch-invariant (a sequence's numbers never depend on what else
is in the batch or on prefix reuse), and every sample draws from its own generator. Its seed is
``SamplingParams.seed`` when given (as on Tinker); otherwise it is derived from the engine's seed,
the prompt, and how many earlier requests of this engine had the same prompt (mixed by
``backend.seeding.mix_seed``, as every seed in TurnGym). So an engine
created with a seed gives the same tokens for the same requests, however they were batched. The
same *multiset* of requests, that is: of two requests with one prompt, whichever arrives first
gets the first seed, and arrival order is timing. Callers that need each sample to go to the same
caller every time give seeds (the training loop seeds each request by its place in the batch:
``rollout.EngineConfig.seed`` and ``training.SeededTokenCompleter``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import queue
import secrets
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tinker import types

from backend.seeding import SEED_BITS, mix_seed

from . import _device as device
from ._decoder import PrefillRow, SlotCache, SlotDecoder, key_span
from ._errors import PromptTooLongError
from ._futures import safe_set_exception, safe_set_result

logger = logging.getLogger(__name__)

PREFILL_TOKENS = 2048
"""Most new tokens one prefill pass runs (a longer prompt runs alone)."""
SHARED_PREFIX_WAIT = 16
"""A prompt sharing at least this many more tokens with another one admitted at the same time
than it finds in the prefix LRU waits one pass, then reuses that prompt's KV."""
GATHER_QUIET_S = 0.01
GATHER_MAX_S = 0.1
"""An idle engine woken by a request keeps taking requests until none came for
``GATHER_QUIET_S`` (at most ``GATHER_MAX_S``), so a burst is prefilled in one pass."""


@dataclass
class SamplerStats:
    """Counters of a sampling engine (cumulative since creation or the last reset)."""

    prefilled_tokens: int = 0
    """Prompt tokens run through the model during prefill."""
    reused_tokens: int = 0
    """Prompt tokens whose KV came from the prefix cache (or an identical prompt) instead of a prefill."""
    generated_tokens: int = 0
    """Tokens sampled."""
    decode_steps: int = 0
    """Batched decode forward passes."""
    decode_rows: int = 0
    """Sum of the batch sizes of all decode steps (``decode_rows / decode_steps`` = mean batch)."""
    prefill_passes: int = 0
    """Batched prefill forward passes."""
    prefill_s: float = 0.0
    """Wall-clock seconds spent in prefill passes."""
    decode_s: float = 0.0
    """Wall-clock seconds spent in decode steps (forward and sampling)."""
    settle_s: float = 0.0
    """Wall-clock seconds spent handing finished rows back (prefix-cache copies, slot moves)."""
    requests: int = 0
    """Sample / logprob requests served."""

    @property
    def mean_batch_size(self) -> float:
        """Average number of rows per decode step."""
        return self.decode_rows / self.decode_steps if self.decode_steps else 0.0


@dataclass
class _Request:
    prompt: list[int]
    num_samples: int
    params: types.SamplingParams
    max_tokens: int
    stop_ids: frozenset[int]
    stop_strs: tuple[str, ...]
    include_prompt_logprobs: bool
    future: Future[Any]
    seed: int = 0
    kind: str = "sample"  # or "logprobs"
    results: dict[int, types.SampledSequence] = field(default_factory=dict)
    prompt_logprobs: list[float | None] | None = None


@dataclass
class _Row:
    request: _Request
    index: int
    generator: torch.Generator
    pos: int  # tokens whose KV is in the row's cache slot
    generated: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str | None = None


class _PrefixCache:
    """LRU of KV blocks keyed by the token sequences they encode, bounded by total tokens.

    A block is ``[layers, 2, kv_heads, tokens, head_dim]`` (see :class:`~._decoder.SlotCache`).
    """

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._entries: OrderedDict[int, tuple[np.ndarray, torch.Tensor]] = OrderedDict()
        self._tokens = 0
        self._next_key = 0

    def lookup(self, prompt: np.ndarray) -> tuple[int, torch.Tensor | None]:
        """Longest common prefix (at most ``len(prompt) - 1`` tokens) with any cached sequence."""
        best, best_key = 0, None
        limit = len(prompt) - 1
        for key, (tokens, _) in self._entries.items():
            n = min(len(tokens), limit)
            if n <= best:
                continue
            lcp = common_prefix(tokens[:n], prompt[:n])
            if lcp > best:
                best, best_key = lcp, key
        if best_key is None or best == 0:
            return 0, None
        self._entries.move_to_end(best_key)
        return best, self._entries[best_key][1][:, :, :, :best]

    def add(self, tokens: list[int], kv: torch.Tensor) -> None:
        if self.max_tokens <= 0 or not tokens or len(tokens) > self.max_tokens:
            return
        arr = np.asarray(tokens, dtype=np.int64)
        # An entry that is a prefix of the new one is redundant.
        for key, (old, _) in list(self._entries.items()):
            if len(old) <= len(arr) and np.array_equal(old, arr[: len(old)]):
                del self._entries[key]
                self._tokens -= len(old)
            elif len(old) > len(arr) and np.array_equal(old[: len(arr)], arr):
                self._entries.move_to_end(key)
                return
        self._entries[self._next_key] = (arr, kv)
        self._next_key += 1
        self._tokens += len(arr)
        while self._tokens > self.max_tokens and self._entries:
            _, (old, _) = self._entries.popitem(last=False)
            self._tokens -= len(old)

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0

    def __len__(self) -> int:
        return len(self._entries)


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two token arrays."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def normalize_stop(
    stop: str | list[str] | list[int] | Any | None, eos_id: int | None
) -> tuple[frozenset[int], tuple[str, ...]]:
    """Split ``SamplingParams.stop`` into stop token ids and stop strings.

    ``None`` stops at the model's end-of-sequence token; an empty list disables stopping
    (generation runs to ``max_tokens``).
    """
    if stop is None:
        return (frozenset([eos_id]) if eos_id is not None else frozenset()), ()
    if isinstance(stop, str):
        return frozenset(), (stop,)
    ids = frozenset(int(s) for s in stop if isinstance(s, int))
    strs = tuple(str(s) for s in stop if isinstance(s, str) and s)
    return ids, strs


@dataclass
class _Planned:
    """A request admitted in this round: the slot of its first sample and how it gets its prompt KV."""

    request: _Request
    slot: int
    reused: int = 0
    cached: torch.Tensor | None = None  # KV of the reused prefix, from the LRU
    leader: _Planned | None = None  # an identical prompt prefilled in the same pass
    array: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


class SamplerEngine:
    """A causal LM served on the compute thread with continuous batching and KV prefix reuse.

    Args:
        model: a Llama-family ``transformers`` causal LM (put in eval mode; never trained here).
        tokenizer: its tokenizer (used to detect stop strings).
        base_model: name reported by ``get_base_model``.
        max_batch_size: most rows decoded together; further requests wait for a free slot.
        prefix_cache_tokens: total tokens of KV kept in the prefix LRU (0 disables reuse).
        idle_exit_s: the KV cache is released after this long without work.
        seed: seed of the requests that carry none (``None``: a random one).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        base_model: str,
        *,
        max_batch_size: int = 64,
        prefix_cache_tokens: int = 32768,
        idle_exit_s: float = 2.0,
        seed: int | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.base_model = base_model
        self.max_batch_size = max_batch_size
        self.decoder = SlotDecoder(self.model)
        self.context_length = self.decoder.context_length
        eos = getattr(model.config, "eos_token_id", None)
        self.eos_id: int | None = eos[0] if isinstance(eos, list) else eos
        self.seed = seed if seed is not None else secrets.randbits(SEED_BITS)
        self.stats = SamplerStats()
        self._prefix = _PrefixCache(prefix_cache_tokens)
        self._idle_exit_s = idle_exit_s
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._waiting: list[_Request] = []  # admitted later, when the batch has room
        self._lock = threading.Lock()
        self._scheduled = False  # a round (_step) is queued or running on the compute thread
        self._woken = False
        self._idle_since = time.monotonic()
        self._idle_timer: threading.Timer | None = None
        self._prompt_counts: dict[bytes, int] = {}
        # Running batch: row i lives in slot i of the cache.
        self._rows: list[_Row] = []
        self._cache: SlotCache = self.decoder.new_cache()

    # ----------------------------------------------------------------- submission
    def submit_sample(
        self,
        prompt: list[int],
        num_samples: int,
        params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
    ) -> Future[types.SampleResponse]:
        """Queue a sampling request; validation errors are raised here, in the caller's thread."""
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        self._check_prompt(prompt)
        room = self.context_length - len(prompt)
        max_tokens = params.max_tokens if params.max_tokens is not None else room
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if len(prompt) + max_tokens > self.context_length:
            raise PromptTooLongError(
                f"prompt ({len(prompt)} tokens) + max_tokens ({max_tokens}) exceeds the context "
                f"window of {self.base_model} ({self.context_length} tokens)"
            )
        stop_ids, stop_strs = normalize_stop(params.stop, self.eos_id)
        fut: Future[types.SampleResponse] = Future()
        req = _Request(
            prompt=list(prompt),
            num_samples=num_samples,
            params=params,
            max_tokens=max_tokens,
            stop_ids=stop_ids,
            stop_strs=stop_strs,
            include_prompt_logprobs=include_prompt_logprobs,
            future=fut,
        )
        req.seed = params.seed if params.seed is not None else self._derived_seed(req.prompt)
        self._enqueue(req)
        return fut

    def _derived_seed(self, prompt: list[int]) -> int:
        """Seed of a request without one: engine seed x prompt x earlier requests of that prompt."""
        key = hashlib.blake2b(np.asarray(prompt, dtype=np.int64).tobytes(), digest_size=16).digest()
        with self._lock:
            count = self._prompt_counts.get(key, 0)
            self._prompt_counts[key] = count + 1
        return mix_seed(self.seed, key, count)

    def submit_logprobs(self, prompt: list[int]) -> Future[list[float | None]]:
        """Queue a prompt-logprob computation (``[None, lp(t1 | t0), lp(t2 | t0 t1), ...]``)."""
        self._check_prompt(prompt)
        fut: Future[list[float | None]] = Future()
        req = _Request(
            prompt=list(prompt),
            num_samples=1,
            params=types.SamplingParams(max_tokens=1),
            max_tokens=1,
            stop_ids=frozenset(),
            stop_strs=(),
            include_prompt_logprobs=True,
            future=fut,
            kind="logprobs",
        )
        self._enqueue(req)
        return fut

    def _check_prompt(self, prompt: list[int]) -> None:
        if len(prompt) == 0:
            raise ValueError("the prompt is empty")
        if len(prompt) >= self.context_length:
            raise PromptTooLongError(
                f"prompt of {len(prompt)} tokens does not fit the context window of "
                f"{self.base_model} ({self.context_length} tokens)"
            )
        vocab = self.decoder.vocab_size
        bad = [t for t in prompt if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"prompt has token ids outside the vocabulary (size {vocab}): {bad[:5]}")

    def _enqueue(self, req: _Request) -> None:
        with self._lock:
            self._queue.put(req)
            if self._scheduled:
                return
            self._scheduled = True
            self._woken = True  # from idle: gather the burst before the first pass
        self._schedule()

    def _schedule(self) -> None:
        """Queue the next :meth:`_step` on the compute thread."""
        try:
            device.submit(self._step)
        except RuntimeError:  # the interpreter is shutting down
            with self._lock:
                self._scheduled = False
            self._fail_all(RuntimeError("interpreter shutting down"))

    def reset_stats(self) -> None:
        """Zero the counters of :attr:`stats`."""
        self.stats = SamplerStats()

    def clear_prefix_cache(self) -> None:
        """Drop every cached KV prefix (the next prompts are prefilled in full)."""
        with self._lock:
            self._prefix.clear()

    @property
    def prefix_cache_tokens(self) -> int:
        """Token budget of the prefix LRU; setting it to 0 disables reuse."""
        return self._prefix.max_tokens

    @prefix_cache_tokens.setter
    def prefix_cache_tokens(self, value: int) -> None:
        with self._lock:
            self._prefix.max_tokens = value
            if value <= 0:
                self._prefix.clear()

    # ----------------------------------------------------------------- rounds
    def _step(self) -> None:
        """One round on the compute thread: take new requests, admit and prefill what fits, decode
        one token for every live row; then queue the next round while there is work (other work
        on the compute thread, a trainer call or another engine's round, runs in between)."""
        with torch.inference_mode():
            self._take_new_requests()
            self._drop_cancelled()
            try:
                self._admit()
                if self._rows:
                    self._decode_step()
            except Exception as exc:  # fail the batch, keep the engine alive
                logger.exception("sampling step failed")
                self._fail_batch(exc)
        with self._lock:
            busy = bool(self._rows or self._waiting) or not self._queue.empty()
            if not busy:
                self._scheduled = False
                self._idle_since = time.monotonic()
                self._arm_idle_release(self._idle_exit_s)
        if busy:
            self._schedule()

    def _take_new_requests(self) -> None:
        """Move queued requests to the waiting list.

        Woken from idle, keep taking requests until none came for ``GATHER_QUIET_S`` (at most
        ``GATHER_MAX_S``): they tend to come in bursts (every conversation's next turn after a
        batch ends together), and a burst is prefilled in one pass.
        """
        if self._woken:
            self._woken = False
            deadline = time.monotonic() + GATHER_MAX_S
            while time.monotonic() < deadline:
                try:
                    self._waiting.append(self._queue.get(timeout=GATHER_QUIET_S))
                except queue.Empty:
                    break
        self._drain_queue()

    def _drain_queue(self) -> None:
        """Move every queued request to the waiting list, without waiting."""
        while True:
            try:
                self._waiting.append(self._queue.get_nowait())
            except queue.Empty:
                break

    def _arm_idle_release(self, delay: float) -> None:
        """(Under the lock.) Release the KV cache once the engine has been idle ``idle_exit_s``.

        The timer holds the engine weakly and hands the check to the compute thread, so no timer
        thread ever drops the engine's last reference: that would free the model's tensors on
        the timer's daemon thread, and one caught inside torch's deallocator by interpreter exit
        aborts the process ("terminate called without an active exception")."""
        if self._idle_timer is None:
            timer = threading.Timer(delay, _queue_idle_check, args=(weakref.ref(self),))
            timer.daemon = True
            self._idle_timer = timer
            timer.start()

    def _idle_check(self) -> None:
        """(On the compute thread.) Release the KV cache if still idle, or re-arm the timer."""
        with self._lock:
            self._idle_timer = None
            if self._scheduled:
                return  # busy again: re-armed when it next goes idle
            left = self._idle_since + self._idle_exit_s - time.monotonic()
            if left > 0:
                self._arm_idle_release(left)
                return
            self._cache.release()

    def _fail_all(self, exc: BaseException) -> None:
        """Fail every request of the engine (running, waiting and queued)."""
        self._fail_batch(exc)
        self._drain_queue()
        for req in self._waiting:
            safe_set_exception(req.future, exc)
        self._waiting = []

    def _admit(self) -> None:
        """Admit the waiting requests that fit (in order) and prefill them together."""
        admitted: list[_Request] = []
        still_waiting: list[_Request] = []
        rows = len(self._rows)
        for req in self._waiting:
            if req.future.cancelled():
                continue
            if req.kind == "logprobs":
                self._serve_logprobs(req)
                continue
            if still_waiting or (rows > 0 and rows + req.num_samples > self.max_batch_size):
                still_waiting.append(req)  # first come, first served
                continue
            admitted.append(req)
            rows += req.num_samples
        self._waiting = still_waiting
        pending = admitted
        while pending:
            pending = self._prefill_wave(pending)

    def _serve_logprobs(self, req: _Request) -> None:
        self.stats.requests += 1
        try:
            safe_set_result(req.future, self._prompt_logprobs(req.prompt))
        except Exception as exc:
            logger.exception("logprob request failed")
            safe_set_exception(req.future, exc)

    def _prompt_logprobs(self, prompt: list[int]) -> list[float | None]:
        """Logprobs of every prompt token from one clean forward pass of the model."""
        logits = self.model(input_ids=torch.tensor([prompt])).logits[0, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(prompt[1:])[:, None])[:, 0]
        self.stats.prefilled_tokens += len(prompt)
        return [None, *lp.tolist()]

    def _prefill_wave(self, requests: list[_Request]) -> list[_Request]:
        """Prefill as many of ``requests`` as one pass allows; returns those left for the next pass."""
        plans: list[_Planned] = []
        later: list[_Request] = []
        by_prompt: dict[bytes, _Planned] = {}
        budget = PREFILL_TOKENS
        slot = len(self._rows)
        for req in requests:
            arr = np.asarray(req.prompt, dtype=np.int64)
            key = arr.tobytes()
            leader = by_prompt.get(key)
            if leader is not None:  # identical prompt: copy the leader's KV after the pass
                plans.append(_Planned(req, slot, len(req.prompt), leader=leader, array=arr))
                slot += req.num_samples
                continue
            with self._lock:
                reused, cached = self._prefix.lookup(arr)
            shared = max((common_prefix(p.array, arr) for p in plans if p.leader is None), default=0)
            new_tokens = len(req.prompt) - reused
            wait_for_shared = self._prefix.max_tokens > 0 and shared >= reused + SHARED_PREFIX_WAIT
            if wait_for_shared or (plans and new_tokens > budget):
                later.append(req)  # reuses the other prompt's KV next pass / waits for room
                continue
            plan = _Planned(req, slot, reused, cached, array=arr)
            plans.append(plan)
            by_prompt[key] = plan
            budget -= new_tokens
            slot += req.num_samples
        if not plans:
            return later
        self._cache.ensure(slot, max(key_span(len(p.request.prompt) + p.request.max_tokens) for p in plans))
        leaders = [p for p in plans if p.leader is None]
        for p in leaders:
            if p.cached is not None:
                self._cache.write(p.slot, p.cached)
            p.cached = None
        t0 = time.perf_counter()
        logits = self.decoder.prefill(
            self._cache,
            [PrefillRow(p.slot, p.reused, p.request.prompt[p.reused :]) for p in leaders],
        )
        self.stats.prefill_passes += 1
        self.stats.prefill_s += time.perf_counter() - t0
        last = {id(p): logits[i] for i, p in enumerate(leaders)}
        for p in leaders:
            self.stats.prefilled_tokens += len(p.request.prompt) - p.reused
            self.stats.reused_tokens += p.reused
            self._remember(p.request.prompt, p.slot, len(p.request.prompt))
        for p in plans:
            req = p.request
            self.stats.requests += 1
            source = p.leader or p
            if p.leader is not None:
                self.stats.reused_tokens += len(req.prompt)
            for i in range(req.num_samples):
                self._cache.copy(source.slot, p.slot + i, len(req.prompt))
            if req.include_prompt_logprobs:
                req.prompt_logprobs = self._prompt_logprobs(req.prompt)
            rows = [
                _Row(request=req, index=i, generator=_generator(req.seed, i), pos=len(req.prompt))
                for i in range(req.num_samples)
            ]
            self._sample_rows(rows, last[id(source)].expand(req.num_samples, -1))
            self._rows.extend(rows)
        self._settle()
        return later

    def _decode_step(self) -> None:
        t0 = time.perf_counter()
        rows = self._rows
        logits = self.decoder.decode(self._cache, [r.generated[-1] for r in rows], [r.pos for r in rows])
        self.stats.decode_steps += 1
        self.stats.decode_rows += len(rows)
        for r in rows:
            r.pos += 1
        self._sample_rows(rows, logits)
        self.stats.decode_s += time.perf_counter() - t0
        self._settle()

    def _settle(self) -> None:
        """Hand finished rows back (their KV into the prefix LRU) and close the gaps they leave."""
        if all(r.finish is None for r in self._rows):
            return
        t0 = time.perf_counter()
        for slot, r in enumerate(self._rows):
            if r.finish is not None:
                self._finish(r, slot)
        self._compact([i for i, r in enumerate(self._rows) if r.finish is None])
        self.stats.settle_s += time.perf_counter() - t0

    def _compact(self, keep: list[int]) -> None:
        """Keep the rows at ``keep``; live rows move down into free slots (row i stays in slot i)."""
        kept = set(keep)
        order = list(range(len(self._rows)))
        free = [i for i in order if i not in kept]
        live_tail = [i for i in reversed(order) if i in kept]
        for hole in free:
            if not live_tail or live_tail[0] < hole:
                break
            src = live_tail.pop(0)
            self._cache.copy(src, hole, self._rows[src].pos)
            order[hole], order[src] = src, hole
        self._rows = [self._rows[order[i]] for i in range(len(keep))]

    def _drop_cancelled(self) -> None:
        if any(r.request.future.cancelled() for r in self._rows):
            self._compact([i for i, r in enumerate(self._rows) if not r.request.future.cancelled()])

    def _fail_batch(self, exc: BaseException) -> None:
        for r in self._rows:
            safe_set_exception(r.request.future, exc)
        self._rows = []

    # ----------------------------------------------------------------- sampling
    def _sample_rows(self, rows: list[_Row], logits: torch.Tensor) -> None:
        logp = torch.log_softmax(logits, dim=-1)
        n = len(rows)
        tokens = [0] * n
        drawn: list[int] = []  # rows that draw (the others are greedy)
        weights: dict[int, torch.Tensor] = {}  # drawn row -> its log-probabilities (unnormalised)
        tempered: dict[float, list[int]] = {}  # temperature -> drawn rows with no top-k / top-p
        plain = True  # every drawn row samples the untempered distribution
        for i, r in enumerate(rows):
            params = r.request.params
            if params.temperature <= 0:
                tokens[i] = int(torch.argmax(logits[i]))
                continue
            drawn.append(i)
            if params.temperature == 1 and params.top_k <= 0 and params.top_p >= 1:
                weights[i] = logp[i]
                continue
            plain = False
            if params.top_k <= 0 and params.top_p >= 1:  # one batched op per temperature, below
                tempered.setdefault(float(params.temperature), []).append(i)
                continue
            scores = logits[i] / params.temperature
            if 0 < params.top_k < scores.shape[-1]:
                kth = torch.topk(scores, params.top_k).values[-1]
                scores = scores.masked_fill(scores < kth, float("-inf"))
            if params.top_p < 1:
                sorted_scores, order = torch.sort(scores, descending=True)
                cum = torch.softmax(sorted_scores, -1).cumsum(-1)
                drop = cum - torch.softmax(sorted_scores, -1) >= params.top_p
                drop[0] = False
                scores = scores.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
            weights[i] = torch.log_softmax(scores, -1)
        if drawn:
            for temperature, group in tempered.items():
                for i, row in zip(group, torch.log_softmax(logits[group] / temperature, -1), strict=True):
                    weights[i] = row
            logw = logp if plain and len(drawn) == n else torch.stack([weights[i] for i in drawn])
            uniforms = [
                float(torch.rand((), dtype=torch.float64, generator=rows[i].generator)) for i in drawn
            ]
            for i, tok in zip(drawn, draw_categorical(logw.exp(), uniforms).tolist(), strict=True):
                tokens[i] = tok
        chosen = logp.gather(1, torch.tensor(tokens)[:, None])[:, 0].tolist()
        for i, r in enumerate(rows):
            tok = tokens[i]
            r.generated.append(tok)
            r.logprobs.append(chosen[i])
            self.stats.generated_tokens += 1
            r.finish = self._stop_reason(r, tok)

    def _stop_reason(self, r: _Row, tok: int) -> str | None:
        req = r.request
        if tok in req.stop_ids:
            return "stop"
        if req.stop_strs:
            longest = max(len(s) for s in req.stop_strs)
            tail = self.tokenizer.decode(r.generated[-(longest + 4) :], skip_special_tokens=False)
            if any(s in tail for s in req.stop_strs):
                return "stop"
        if len(r.generated) >= req.max_tokens:
            return "length"
        return None

    def _remember(self, tokens: list[int], slot: int, length: int) -> None:
        if self._prefix.max_tokens <= 0 or length > self._prefix.max_tokens:
            return
        kv = self._cache.read(slot, length)
        with self._lock:
            self._prefix.add(tokens[:length], kv)

    def _finish(self, r: _Row, slot: int) -> None:
        req = r.request
        # The slot holds prompt + generated[:-1] (the last sampled token was never fed).
        self._remember(req.prompt + r.generated[:-1], slot, r.pos)
        req.results[r.index] = types.SampledSequence(
            stop_reason=r.finish,  # type: ignore[arg-type]
            sequence_id=uuid.uuid4().hex,
            tokens_np=np.asarray(r.generated, dtype=np.int32),
            logprobs_np=np.asarray(r.logprobs, dtype=np.float32),
        )
        if len(req.results) == req.num_samples:
            prompt_lp = None
            if req.prompt_logprobs is not None:
                prompt_lp = np.asarray(
                    [np.nan if x is None else x for x in req.prompt_logprobs], dtype=np.float32
                )
            resp = types.SampleResponse(
                sequences=[req.results[i] for i in range(req.num_samples)],
                prompt_logprobs_np=prompt_lp,
            )
            safe_set_result(req.future, resp)


def draw_categorical(weights: torch.Tensor, uniforms: list[float]) -> torch.Tensor:
    """One index per row of ``weights`` (``[rows, n]``, non-negative, unnormalised), row ``i``
    drawn with probability proportional to its weights by inverting its cumulative sum (float64)
    at ``uniforms[i]`` (in ``[0, 1)``). Zero-weight indices are never drawn.

    Each row uses one uniform from its own generator (an exponential race, as
    ``torch.multinomial`` runs, draws one number per vocabulary entry: ~10x the cost of the whole
    draw here), and a row's result depends on its own weights and uniform only.
    """
    cdf = weights.double().cumsum_(-1)
    total = cdf[:, -1]
    if not bool((torch.isfinite(total) & (total > 0)).all()):
        raise RuntimeError("sampling weights contain inf or nan, or sum to zero")
    x = torch.tensor(uniforms, dtype=torch.float64) * total
    index = torch.searchsorted(cdf, x[:, None], right=True)[:, 0]
    # x < total, so index < n but where u * total rounds up to the total; there the draw is the
    # first index reaching the total (the last one with weight). Only those rows are searched for
    # it: an argmax over every row cost ~1 ms a decode step of 32 rows (a vocabulary of 49k).
    past = index == cdf.shape[-1]
    if bool(past.any()):
        index[past] = cdf[past].argmax(-1)
    return index


def _generator(seed: int, index: int) -> torch.Generator:
    """The generator of sample ``index`` of a request with ``seed``."""
    gen = torch.Generator()
    gen.manual_seed(mix_seed(seed, index) if index else seed & ((1 << 63) - 1))
    return gen


def _queue_idle_check(ref: weakref.ref[SamplerEngine]) -> None:
    """(On a timer thread.) Queue the engine's idle check on the compute thread."""
    with contextlib.suppress(RuntimeError):  # shutting down: nothing to release
        device.submit(functools.partial(_idle_check, ref))


def _idle_check(ref: weakref.ref[SamplerEngine]) -> None:
    engine = ref()
    if engine is not None:
        engine._idle_check()


def wait_idle(engine: SamplerEngine, timeout: float = 10.0) -> bool:
    """Wait until ``engine`` has no queued or running work (for tests and benchmarks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if engine._queue.empty() and not engine._rows and not engine._waiting:
            return True
        time.sleep(0.01)
    return False
