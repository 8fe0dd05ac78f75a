"""Sampling engine: one model in a background worker thread with continuous (dynamic) batching.

How a request flows:

1. ``submit`` validates it and puts it on a queue; the worker thread starts on demand and exits
   after a short idle period (so engines of dropped sampling clients can be garbage-collected).
2. The worker admits new requests between decode steps: it prefills the prompt (batch 1, reusing
   the longest cached KV prefix from a small LRU), samples the first token, repeats the KV for
   ``num_samples`` rows and merges the rows into the running batch by left-padding the KV
   tensors to a common length (attention mask zeros over the padding, explicit position ids).
3. Each decode step feeds every live row's last token at once; each row samples with its own
   temperature / top-k / top-p / seeded generator and finishes on a stop id, a stop string, or
   ``max_tokens``. Finished rows leave the batch and their KV (prompt + completion) goes into the
   prefix LRU, so the next turn of a conversation only prefills the new suffix.
4. Rows of a request whose future was cancelled are dropped at the next step.

Returned logprobs are those of the model's untempered distribution (``log_softmax`` of the raw
logits), i.e. the same quantity ``forward`` / ``compute_logprobs`` return for those tokens.
"""

from __future__ import annotations

import atexit
import logging
import queue
import random
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

from ._errors import PromptTooLongError
from ._futures import safe_set_exception, safe_set_result

logger = logging.getLogger(__name__)

_live_threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_shutting_down = threading.Event()


@atexit.register
def _stop_workers() -> None:
    # Let worker threads leave their torch calls before the interpreter tears down.
    _shutting_down.set()
    for thread in list(_live_threads):
        thread.join(timeout=5.0)


KV = list[tuple[torch.Tensor, torch.Tensor]]
"""Per-layer (keys, values), each ``[batch, kv_heads, seq, head_dim]``."""


@dataclass
class SamplerStats:
    """Counters of a sampling engine (cumulative since creation or the last reset)."""

    prefilled_tokens: int = 0
    """Prompt tokens run through the model during prefill."""
    reused_tokens: int = 0
    """Prompt tokens whose KV came from the prefix cache instead of a prefill."""
    generated_tokens: int = 0
    """Tokens sampled."""
    decode_steps: int = 0
    """Batched decode forward passes."""
    decode_rows: int = 0
    """Sum of the batch sizes of all decode steps (``decode_rows / decode_steps`` = mean batch)."""
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
    kind: str = "sample"  # or "logprobs"
    results: dict[int, types.SampledSequence] = field(default_factory=dict)
    prompt_logprobs: list[float | None] | None = None


@dataclass
class _Row:
    request: _Request
    index: int
    generator: torch.Generator | None
    pos: int  # real tokens whose KV is in the batch cache
    generated: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str | None = None


class _PrefixCache:
    """LRU of KV caches keyed by the token sequences they encode, bounded by total tokens."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._entries: OrderedDict[int, tuple[np.ndarray, KV]] = OrderedDict()
        self._tokens = 0
        self._next_key = 0

    def lookup(self, prompt: np.ndarray) -> tuple[int, KV | None]:
        """Longest common prefix (at most ``len(prompt) - 1`` tokens) with any cached sequence."""
        best, best_key = 0, None
        limit = len(prompt) - 1
        for key, (tokens, _) in self._entries.items():
            n = min(len(tokens), limit)
            if n <= best:
                continue
            diff = np.flatnonzero(tokens[:n] != prompt[:n])
            lcp = int(diff[0]) if diff.size else n
            if lcp > best:
                best, best_key = lcp, key
        if best_key is None or best == 0:
            return 0, None
        self._entries.move_to_end(best_key)
        kv = self._entries[best_key][1]
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in kv]

    def add(self, tokens: list[int], kv: KV) -> None:
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


class SamplerEngine:
    """A causal LM served from a worker thread with continuous batching and KV prefix reuse.

    Args:
        model: a ``transformers`` causal LM (put in eval mode; never trained here).
        tokenizer: its tokenizer (used to detect stop strings).
        base_model: name reported by ``get_base_model``.
        max_batch_size: most rows decoded together; further requests wait for a free slot.
        prefix_cache_tokens: total tokens of KV kept in the prefix LRU (0 disables reuse).
        idle_exit_s: the worker thread exits after this long without work.
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
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.base_model = base_model
        self.max_batch_size = max_batch_size
        self.context_length = int(getattr(model.config, "max_position_embeddings", 2048))
        eos = getattr(model.config, "eos_token_id", None)
        self.eos_id: int | None = eos[0] if isinstance(eos, list) else eos
        self.pad_id = int(getattr(model.config, "pad_token_id", None) or 0)
        self.stats = SamplerStats()
        self._prefix = _PrefixCache(prefix_cache_tokens)
        self._idle_exit_s = idle_exit_s
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._waiting: list[_Request] = []  # admitted later, when the batch has room
        self._lock = threading.Lock()
        self._running = False
        self._idle_since = time.monotonic()
        self._rng = random.Random()
        # Running batch.
        self._rows: list[_Row] = []
        self._kv: KV | None = None
        self._mask: torch.Tensor | None = None  # [B, T] 1 = real token

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
        self._enqueue(req)
        return fut

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
        vocab = int(self.model.config.vocab_size)
        bad = [t for t in prompt if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"prompt has token ids outside the vocabulary (size {vocab}): {bad[:5]}")

    def _enqueue(self, req: _Request) -> None:
        with self._lock:
            self._queue.put(req)
            if not self._running:
                self._running = True
                thread = threading.Thread(target=self._loop, name="turngym-sampler", daemon=True)
                _live_threads.add(thread)
                thread.start()

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

    # ----------------------------------------------------------------- worker
    def _loop(self) -> None:
        try:
            with torch.inference_mode():
                while not _shutting_down.is_set():
                    if not self._take_new_requests():
                        return
                    self._drop_cancelled()
                    if self._rows:
                        try:
                            self._decode_step()
                        except Exception as exc:  # fail the batch, keep the engine alive
                            logger.exception("decode step failed")
                            self._fail_batch(exc)
        except BaseException:
            with self._lock:
                self._running = False
            raise
        with self._lock:
            self._running = False
        for r in self._rows:
            safe_set_exception(r.request.future, RuntimeError("interpreter shutting down"))

    def _take_new_requests(self) -> bool:
        """Admit queued requests; returns False when the worker should exit (idle)."""
        new: list[_Request] = []
        if not self._rows and not self._waiting:
            try:
                new.append(self._queue.get(timeout=min(self._idle_exit_s, 0.25)))
            except queue.Empty:
                if time.monotonic() - self._idle_since < self._idle_exit_s and not _shutting_down.is_set():
                    return True
                with self._lock:
                    if self._queue.empty():
                        self._running = False
                        return False
                return True
        while True:
            try:
                new.append(self._queue.get_nowait())
            except queue.Empty:
                break
        self._waiting.extend(new)
        still_waiting: list[_Request] = []
        for req in self._waiting:
            if req.future.cancelled():
                continue
            if (
                req.kind == "sample"
                and self._rows
                and len(self._rows) + req.num_samples > self.max_batch_size
            ):
                still_waiting.append(req)
                continue
            try:
                self._admit(req)
            except Exception as exc:
                logger.exception("request failed")
                safe_set_exception(req.future, exc)
        self._waiting = still_waiting
        self._idle_since = time.monotonic()
        return True

    def _forward(self, input_ids: torch.Tensor, kv: KV | None, **kwargs: Any) -> tuple[torch.Tensor, KV]:
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=kv) if kv else DynamicCache()
        out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True, **kwargs)
        new_kv: KV = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        return out.logits, new_kv

    def _admit(self, req: _Request) -> None:
        self.stats.requests += 1
        prompt = req.prompt
        if req.include_prompt_logprobs:
            logits = self.model(input_ids=torch.tensor([prompt])).logits[0, :-1].float()
            lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(prompt[1:])[:, None])[:, 0]
            req.prompt_logprobs = [None, *lp.tolist()]
            self.stats.prefilled_tokens += len(prompt)
            if req.kind == "logprobs":
                safe_set_result(req.future, req.prompt_logprobs)
                return
        with self._lock:
            reused, past = self._prefix.lookup(np.asarray(prompt, dtype=np.int64))
        suffix = prompt[reused:]
        positions = torch.arange(reused, len(prompt))[None, :]
        logits, kv = self._forward(torch.tensor([suffix]), past, position_ids=positions)
        self.stats.prefilled_tokens += len(suffix)
        self.stats.reused_tokens += reused
        self._remember(prompt, kv)
        last = logits[:, -1].float()
        n = req.num_samples
        rows = [
            _Row(request=req, index=i, generator=self._make_generator(req.params.seed, i), pos=len(prompt))
            for i in range(n)
        ]
        self._sample_rows(rows, last.expand(n, -1))
        live = [r for r in rows if r.finish is None]
        for r in rows:
            if r.finish is not None:
                self._finish(r, [(k[0:1], v[0:1]) for k, v in kv])
        if not live:
            return
        kv_live = [(k.expand(len(live), -1, -1, -1), v.expand(len(live), -1, -1, -1)) for k, v in kv]
        self._merge(live, kv_live)

    def _make_generator(self, seed: int | None, index: int) -> torch.Generator:
        gen = torch.Generator()
        gen.manual_seed((seed * 1_000_003 + index) if seed is not None else self._rng.getrandbits(62))
        return gen

    def _merge(self, rows: list[_Row], kv: KV) -> None:
        new_len = kv[0][0].shape[2]
        new_mask = torch.ones(len(rows), new_len, dtype=torch.long)
        if self._kv is None or self._mask is None or not self._rows:
            self._rows = rows
            self._kv = [(k.contiguous(), v.contiguous()) for k, v in kv]
            self._mask = new_mask
            return
        old_len = self._kv[0][0].shape[2]
        total = max(old_len, new_len)

        def pad(t: torch.Tensor, length: int) -> torch.Tensor:
            if length == total:
                return t
            shape = list(t.shape)
            shape[2] = total - length
            return torch.cat([t.new_zeros(shape), t], dim=2)

        self._kv = [
            (
                torch.cat([pad(ko, old_len), pad(kn, new_len)], 0),
                torch.cat([pad(vo, old_len), pad(vn, new_len)], 0),
            )
            for (ko, vo), (kn, vn) in zip(self._kv, kv, strict=True)
        ]
        mo = torch.cat([self._mask.new_zeros(len(self._rows), total - old_len), self._mask], 1)
        mn = torch.cat([new_mask.new_zeros(len(rows), total - new_len), new_mask], 1)
        self._mask = torch.cat([mo, mn], 0)
        self._rows = self._rows + rows

    def _decode_step(self) -> None:
        assert self._kv is not None and self._mask is not None
        rows = self._rows
        input_ids = torch.tensor([[r.generated[-1]] for r in rows])
        positions = torch.tensor([[r.pos] for r in rows])
        mask = torch.cat([self._mask, self._mask.new_ones(len(rows), 1)], 1)
        logits, kv = self._forward(input_ids, self._kv, attention_mask=mask, position_ids=positions)
        self._kv, self._mask = kv, mask
        self.stats.decode_steps += 1
        self.stats.decode_rows += len(rows)
        for r in rows:
            r.pos += 1
        self._sample_rows(rows, logits[:, -1].float())
        if any(r.finish is not None for r in rows):
            for i, r in enumerate(rows):
                if r.finish is not None:
                    self._finish(r, [(k[i : i + 1, :, -r.pos :], v[i : i + 1, :, -r.pos :]) for k, v in kv])
            self._keep([i for i, r in enumerate(rows) if r.finish is None])

    def _keep(self, keep: list[int]) -> None:
        """Keep only the rows at ``keep``; trim KV columns that are padding for every row."""
        if not keep:
            self._rows, self._kv, self._mask = [], None, None
            return
        assert self._kv is not None and self._mask is not None
        if len(keep) != len(self._rows):
            idx = torch.tensor(keep)
            self._rows = [self._rows[i] for i in keep]
            self._mask = self._mask[idx]
            self._kv = [(k[idx], v[idx]) for k, v in self._kv]
        longest = max(r.pos for r in self._rows)
        if longest < self._mask.shape[1]:
            self._mask = self._mask[:, -longest:]
            self._kv = [(k[:, :, -longest:], v[:, :, -longest:]) for k, v in self._kv]

    def _drop_cancelled(self) -> None:
        if any(r.request.future.cancelled() for r in self._rows):
            self._keep([i for i, r in enumerate(self._rows) if not r.request.future.cancelled()])

    def _fail_batch(self, exc: BaseException) -> None:
        for r in self._rows:
            safe_set_exception(r.request.future, exc)
        self._rows, self._kv, self._mask = [], None, None

    # ----------------------------------------------------------------- sampling
    def _sample_rows(self, rows: list[_Row], logits: torch.Tensor) -> None:
        logp = torch.log_softmax(logits, dim=-1)
        for i, r in enumerate(rows):
            params = r.request.params
            if params.temperature <= 0:
                tok = int(torch.argmax(logits[i]))
            elif params.temperature == 1 and params.top_k <= 0 and params.top_p >= 1:
                tok = int(torch.multinomial(logp[i].exp(), 1, generator=r.generator))
            else:
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
                tok = int(torch.multinomial(torch.softmax(scores, -1), 1, generator=r.generator))
            r.generated.append(tok)
            r.logprobs.append(float(logp[i, tok]))
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

    def _remember(self, tokens: list[int], kv: KV) -> None:
        if self._prefix.max_tokens <= 0:
            return
        copy = [(k.clone(), v.clone()) for k, v in kv]
        with self._lock:
            self._prefix.add(tokens, copy)

    def _finish(self, r: _Row, kv: KV) -> None:
        req = r.request
        # KV covers prompt + generated[:-1] (the last sampled token was never fed).
        seq = req.prompt + r.generated[:-1]
        if kv[0][0].shape[2] == len(seq):
            self._remember(seq, kv)
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


def wait_idle(engine: SamplerEngine, timeout: float = 10.0) -> bool:
    """Wait until ``engine`` has no queued or running work (for tests and benchmarks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if engine._queue.empty() and not engine._rows and not engine._waiting:
            return True
        time.sleep(0.01)
    return False
