"""Batch-invariant inference forward of a Llama-family model over a slot KV cache.

The sampling engine runs the model through :class:`SlotDecoder` instead of ``model(...)``:

- **Slot KV cache** (:class:`SlotCache`): preallocated keys and values in chunks of
  :data:`CHUNK` columns (``[layers, chunks, slots, kv_heads, ...]``, so attention's per-chunk
  products read the cache in place); a sequence lives in one slot with its token ``i`` at
  column ``i``. A decode step writes one column per row in place (no per-step concatenation or
  padding copies), and grouped-query attention reads the shared KV heads directly (no
  ``repeat_kv``).
- **Packed prefill**: the new tokens of several sequences are run as one ``[tokens, hidden]``
  batch through the linear layers (no padding); attention is computed per sequence against its
  own slot (query blocks of similar length batched in one product), and only the last position
  of each sequence is unembedded.
- **Batch invariance**: every number a sequence gets depends on its own tokens only, never on
  which other sequences share the pass, whether its prefix came from a cache, or how many of its
  tokens were processed at once. Three rules make that hold on CPU BLAS, where the summation
  order of a matrix product can change with its shape: every linear product has at least
  :data:`MIN_ROWS` rows (BLAS picks a different kernel for a handful of rows; oneDNN only for a
  single row, so with oneDNN :data:`ONEDNN_MIN_ROWS`) and every attention product at least 4,
  attention spans a multiple of :data:`CHUNK` key columns with at least one masked column, and
  the probability-times-value product is summed chunk by chunk in a fixed order
  (zero-probability chunks add exact zeros). So a seeded sample is reproducible whatever the
  batching was.
- **oneDNN products**: the linear layers and the unembedding run through oneDNN with weights
  prepacked once (:class:`Linear`); on CPUs where PyTorch's BLAS (MKL) takes a slower path, such
  as AMD Zen, that is 2-2.5x faster in float32. The query, key and value projections run as one
  product (their weights stacked); the gated MLP's activation and product and the residual
  additions run inside the products' kernels (post-ops). A oneDNN row does not depend
  on how many rows the product has (checked on an AMD Zen 5 for 2..2048 rows, float32 and
  bfloat16, 1 and 2 threads, with and without post-ops; a single row takes a matrix-vector
  kernel). Not on every CPU: on an Intel Xeon with AMX, bfloat16 with 2 threads, a row's result
  changes once the product has more than 32 rows (the 576 x 576 projections and the unembedding;
  float32, or one thread, stay invariant), which made a packed prefill of more than 32 tokens, and
  the sampled runs after it, depend on which requests shared the pass (two runs of one seed
  diverged). So the decoder checks at start (:func:`onednn_rows_vary`, on one weight of each
  shape) and, where rows vary, runs every product in blocks of :data:`ONEDNN_BLOCK_ROWS` rows
  (:attr:`Linear.max_rows`), slower than unblocked (``docs/measurements.md``): the price of
  reproducible runs. Without oneDNN the products fall back to ``F.linear``.

Outputs agree with the model's own forward pass to float rounding (``~1e-5`` in logprobs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

MIN_ROWS = 16
"""Linear products are run with at least this many rows (padding rows are discarded)."""
ONEDNN_MIN_ROWS = 4
"""The same through oneDNN (whose kernel changes for a single row only)."""
CHUNK = 64
"""Attention key columns come in multiples of this; values are summed per chunk of it."""
QUERY_BLOCK = 128
"""Prefill attention handles at most this many query tokens of a sequence at once."""


def round_up(n: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that is ``>= n``."""
    return -(-n // multiple) * multiple


def key_span(length: int) -> int:
    """Key columns attention reads for sequences of at most ``length`` tokens (>= 1 masked)."""
    return round_up(length + 1, CHUNK)


class Linear:
    """``x @ weight.T`` through oneDNN with ``weight`` prepacked (a copy in oneDNN's layout), or
    plain ``F.linear`` on ``weight`` itself where oneDNN cannot run it."""

    def __init__(self, weight: torch.Tensor, use_onednn: bool) -> None:
        self.weight = weight
        self.packed: torch.Tensor | None = None
        if use_onednn:
            with torch.inference_mode():
                self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)

    max_rows: int | None = None
    """Rows per oneDNN product (``None``: all at once). Set where a row's result depends on the
    row count beyond some size (:func:`onednn_rows_vary`): the product then runs in blocks of
    this many rows, the last padded to :data:`ONEDNN_MIN_ROWS`."""

    def _blocks(self, x: torch.Tensor, other: torch.Tensor | None, run: Any) -> torch.Tensor:
        rows = x.shape[0]
        if self.max_rows is None or rows <= self.max_rows:
            return run(x, other)
        outs = []
        for start in range(0, rows, self.max_rows):
            xb = x[start : start + self.max_rows]
            ob = None if other is None else other[start : start + self.max_rows]
            n = xb.shape[0]
            if n < ONEDNN_MIN_ROWS:
                xb = F.pad(xb, (0, 0, 0, ONEDNN_MIN_ROWS - n))
                ob = None if ob is None else F.pad(ob, (0, 0, 0, ONEDNN_MIN_ROWS - n))
            outs.append(run(xb, ob)[:n])
        return torch.cat(outs)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return F.linear(x, self.weight)
        packed = self.packed
        return self._blocks(
            x, None, lambda a, _: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [None], "")
        )

    def silu(self, x: torch.Tensor) -> torch.Tensor:
        """``silu(x @ weight.T)`` (with oneDNN: applied in the product's kernel)."""
        if self.packed is None:
            return F.silu(F.linear(x, self.weight))
        packed = self.packed
        return self._blocks(
            x, None, lambda a, _: torch.ops.mkldnn._linear_pointwise(a, packed, None, "swish", [None], "")
        )

    def mul(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """``(x @ weight.T) * other`` (with oneDNN: in the product's kernel)."""
        if self.packed is None:
            return F.linear(x, self.weight) * other
        packed = self.packed
        return self._blocks(
            x, other, lambda a, o: torch.ops.mkldnn._linear_pointwise.binary(a, o, packed, None, "mul")
        )

    def add(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """``other + x @ weight.T`` (with oneDNN: in the product's kernel)."""
        if self.packed is None:
            return other + F.linear(x, self.weight)
        packed = self.packed
        return self._blocks(
            x, other, lambda a, o: torch.ops.mkldnn._linear_pointwise.binary(a, o, packed, None, "add")
        )


ONEDNN_BLOCK_ROWS = 32
"""Rows per oneDNN product where rows vary with the row count (on an Intel Xeon with AMX in
bfloat16 at 2 threads they did from 33 rows on; up to 32 they matched a 4-row product)."""


def onednn_rows_vary(weights: list[torch.Tensor], rows: tuple[int, ...] = (33, 64, 128, 512)) -> bool:
    """Whether a row of a oneDNN product with one of ``weights`` (prepacked as the decoder runs
    them) differs between a 4-row product and larger ones, at the current dtype and threads."""
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for w in weights:
            lin = Linear(w, True)
            x = torch.randn(max(rows), w.shape[1], generator=gen).to(w.dtype)
            ref = lin(x[:ONEDNN_MIN_ROWS])[0]
            if any(not torch.equal(lin(x[:m])[0], ref) for m in rows):
                return True
    return False


def onednn_linear_works(dtype: torch.dtype) -> bool:
    """Whether oneDNN runs ``dtype`` products here and agrees with ``F.linear`` on a small one."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(MIN_ROWS, 64, generator=gen).to(dtype)
        w = torch.randn(32, 64, generator=gen).to(dtype)
        with torch.inference_mode():
            got = Linear(w, True)(x)
            ref = F.linear(x, w)
    except (RuntimeError, AttributeError):
        return False
    tol = 1e-4 if dtype == torch.float32 else 1e-1
    return got.shape == ref.shape and bool(torch.allclose(got.float(), ref.float(), atol=tol, rtol=tol))


class UnsupportedModelError(ValueError):
    """The model is not a Llama-family causal LM this decoder can run."""


@dataclass
class _Layer:
    input_norm: Any
    qkv: Linear  # the query, key and value projections as one product (their weights stacked)
    o: Linear
    post_norm: Any
    gate: Linear
    up: Linear
    down: Linear


class SlotCache:
    """KV storage of the running sequences, in chunks of :data:`CHUNK` columns: keys transposed,
    ``keys[layer, chunk, slot, kv_head, dim, column]``, and ``values[layer, chunk, slot, kv_head,
    column, dim]`` (column ``c`` of a sequence is column ``c % CHUNK`` of chunk ``c // CHUNK``).

    Why this layout: attention runs one product per chunk of keys and of values, and each reads
    its block in place: a chunk of the first ``n`` slots, ``keys[layer, chunk, :n]``, is
    contiguous. PyTorch's bfloat16 products on CPU copy any operand that is not (a slice of the
    key columns of ``[slot, kv_head, dim, column]`` storage is not), and those copies cost a
    quarter of a bfloat16 decode step; float32 products read strided operands as they are. The
    products' shapes are the ones a contiguous copy would give, so the numbers are the same.

    Grows (never shrinks) to the slots and columns asked for; new storage is zeroed, so columns a
    sequence never wrote hold finite values (masked attention multiplies them by exact zeros).
    Blocks handed in and out (:meth:`read`, :meth:`write`) are ``[layers, 2, kv_heads, n, dim]``
    (keys, then values).
    """

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype) -> None:
        self.shape = (layers, kv_heads, head_dim)
        self.dtype = dtype
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def slots(self) -> int:
        """Slots allocated."""
        return 0 if self.values is None else self.values.shape[2]

    @property
    def capacity(self) -> int:
        """Columns (token positions) per slot."""
        return 0 if self.values is None else self.values.shape[1] * CHUNK

    def ensure(self, slots: int, columns: int) -> None:
        """Make room for ``slots`` slots of ``columns`` positions (copies what is there on growth)."""
        if slots <= self.slots and columns <= self.capacity:
            return
        new_slots = max(slots, self.slots)
        chunks = max(round_up(columns, 256), self.capacity) // CHUNK
        layers, heads, dim = self.shape
        keys = torch.zeros(layers, chunks, new_slots, heads, dim, CHUNK, dtype=self.dtype)
        values = torch.zeros(layers, chunks, new_slots, heads, CHUNK, dim, dtype=self.dtype)
        if self.keys is not None and self.values is not None:
            old_chunks, old_slots = self.keys.shape[1], self.keys.shape[2]
            keys[:, :old_chunks, :old_slots] = self.keys
            values[:, :old_chunks, :old_slots] = self.values
        self.keys, self.values = keys, values

    def release(self) -> None:
        """Drop the storage (the next :meth:`ensure` allocates afresh)."""
        self.keys = self.values = None

    def read(self, slot: int, length: int) -> torch.Tensor:
        """A copy of the first ``length`` columns of ``slot``: ``[layers, 2, kv_heads, length, dim]``."""
        assert self.keys is not None and self.values is not None
        layers, heads, dim = self.shape
        chunks = -(-length // CHUNK)
        # [layers, chunks, kv, dim, CHUNK] -> [layers, kv, chunks * CHUNK, dim]
        keys = self.keys[:, :chunks, slot].permute(0, 2, 1, 4, 3).reshape(layers, heads, -1, dim)
        values = self.values[:, :chunks, slot].permute(0, 2, 1, 3, 4).reshape(layers, heads, -1, dim)
        return torch.stack([keys[:, :, :length], values[:, :, :length]], 1)

    def write(self, slot: int, kv: torch.Tensor) -> None:
        """Put ``kv`` (``[layers, 2, kv_heads, n, dim]``) into the first ``n`` columns of ``slot``."""
        assert self.keys is not None and self.values is not None
        layers, heads, dim = self.shape
        n = kv.shape[3]
        full = n // CHUNK  # whole chunks, then the columns of a last partial one
        if full:
            blocks = kv[:, :, :, : full * CHUNK].reshape(layers, 2, heads, full, CHUNK, dim)
            self.keys[:, :full, slot] = blocks[:, 0].permute(0, 2, 1, 4, 3)
            self.values[:, :full, slot] = blocks[:, 1].permute(0, 2, 1, 3, 4)
        rest = n - full * CHUNK
        if rest:
            self.keys[:, full, slot, :, :, :rest] = kv[:, 0, :, full * CHUNK :].transpose(-1, -2)
            self.values[:, full, slot, :, :rest] = kv[:, 1, :, full * CHUNK :]

    def copy(self, src: int, dst: int, length: int) -> None:
        """Copy the first ``length`` columns of slot ``src`` into slot ``dst``."""
        assert self.keys is not None and self.values is not None
        if src == dst or length <= 0:
            return
        full = length // CHUNK
        if full:
            self.keys[:, :full, dst] = self.keys[:, :full, src]
            self.values[:, :full, dst] = self.values[:, :full, src]
        rest = length - full * CHUNK
        if rest:
            self.keys[:, full, dst, :, :, :rest] = self.keys[:, full, src, :, :, :rest]
            self.values[:, full, dst, :, :rest] = self.values[:, full, src, :, :rest]


@dataclass(frozen=True)
class _QueryBucket:
    """Query blocks of a prefill attended together (:meth:`SlotDecoder._query_buckets`)."""

    slots: torch.Tensor  # [blocks] the slot of each block
    gather: torch.Tensor  # [blocks * longest] packed token of each query row (padding: 0)
    bias: torch.Tensor  # [blocks, 1, rows, span]
    valid: torch.Tensor  # indices of the real query rows in [blocks * longest]
    packed: torch.Tensor  # their packed tokens


@dataclass(frozen=True)
class PrefillRow:
    """New tokens of one sequence: ``tokens`` go to columns ``start .. start + len - 1`` of ``slot``
    (columns before ``start`` already hold the sequence's KV)."""

    slot: int
    start: int
    tokens: list[int]


class SlotDecoder:
    """Inference forward of a Llama-family ``transformers`` model over a :class:`SlotCache`.

    Args:
        model: a ``LlamaForCausalLM``-like model (RMSNorm, rotary positions, grouped-query
            attention, gated MLP, no biases). Its weights are read, never changed; with oneDNN
            the linear ones (and the unembedding) are also kept prepacked, a copy of their size.
        onednn: run the products through oneDNN (``None``: where it works, see
            :func:`onednn_linear_works`); ``False`` uses ``F.linear`` on the model's weights.
    """

    def __init__(self, model: Any, onednn: bool | None = None) -> None:
        config = model.config
        inner = getattr(model, "model", None)
        layers = getattr(inner, "layers", None)
        if inner is None or layers is None or not hasattr(inner, "rotary_emb"):
            raise UnsupportedModelError(
                f"the local sampler runs Llama-family models; {type(model).__name__} is not one"
            )
        if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
            raise UnsupportedModelError("the local sampler does not run models with linear biases")
        from transformers.activations import ACT2FN

        self.n_heads = int(config.num_attention_heads)
        self.n_kv = int(config.num_key_value_heads)
        self.head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // self.n_heads)
        self.groups = self.n_heads // self.n_kv
        self.scaling = self.head_dim**-0.5
        self.act = ACT2FN[config.hidden_act]
        self.silu = config.hidden_act == "silu"
        self.embed = inner.embed_tokens.weight
        self.dtype = self.embed.dtype
        self.norm = inner.norm
        self.onednn = onednn_linear_works(self.dtype) if onednn is None else onednn
        self.min_rows = ONEDNN_MIN_ROWS if self.onednn else MIN_ROWS
        self.lm_head = Linear(model.lm_head.weight, self.onednn)
        self.vocab_size = int(model.lm_head.weight.shape[0])
        self.layers = [
            _Layer(
                input_norm=layer.input_layernorm,
                qkv=Linear(
                    torch.cat(
                        [
                            layer.self_attn.q_proj.weight.detach(),
                            layer.self_attn.k_proj.weight.detach(),
                            layer.self_attn.v_proj.weight.detach(),
                        ]
                    ),
                    self.onednn,
                ),
                o=Linear(layer.self_attn.o_proj.weight, self.onednn),
                post_norm=layer.post_attention_layernorm,
                gate=Linear(layer.mlp.gate_proj.weight, self.onednn),
                up=Linear(layer.mlp.up_proj.weight, self.onednn),
                down=Linear(layer.mlp.down_proj.weight, self.onednn),
            )
            for layer in layers
        ]
        self.block_rows: int | None = None
        """Rows per oneDNN product, where rows vary with the row count (else ``None``)."""
        if self.onednn and self.layers:
            first = self.layers[0]
            shapes = [
                first.qkv.weight,
                first.o.weight,
                first.gate.weight,
                first.down.weight,
                self.lm_head.weight,
            ]
            if onednn_rows_vary(shapes):
                self.block_rows = ONEDNN_BLOCK_ROWS
                for lin in [
                    self.lm_head,
                    *(getattr(la, n) for la in self.layers for n in ["qkv", "o", "gate", "up", "down"]),
                ]:
                    lin.max_rows = ONEDNN_BLOCK_ROWS
        self.context_length = int(getattr(config, "max_position_embeddings", 2048))
        with torch.inference_mode():
            positions = torch.arange(self.context_length)[None, :]
            cos, sin = inner.rotary_emb(self.embed[:1], positions)
        self.cos = cos[0].to(self.dtype)  # [context, head_dim]
        half = self.head_dim // 2
        # sin with rotate_half's sign folded in: x * cos + roll(x, half) * sin_rot is HF's
        # x * cos + rotate_half(x) * sin, bit for bit, in one op fewer.
        sin = sin[0].to(self.dtype)
        self.sin_rot = torch.cat([-sin[:, :half], sin[:, half:]], -1)

    def new_cache(self) -> SlotCache:
        """An empty cache shaped for this model."""
        return SlotCache(len(self.layers), self.n_kv, self.head_dim, self.dtype)

    # ------------------------------------------------------------------ passes
    def prefill(self, cache: SlotCache, rows: list[PrefillRow]) -> torch.Tensor:
        """Run the new tokens of ``rows`` (one packed pass), write their KV into their slots, and
        return the float32 logits of each row's last token, ``[len(rows), vocab]``."""
        tokens: list[int] = []
        slots: list[int] = []
        positions: list[int] = []
        for row in rows:
            tokens += row.tokens
            slots += [row.slot] * len(row.tokens)
            positions += range(row.start, row.start + len(row.tokens))
        buckets = self._query_buckets(rows)

        def attend(layer: int, q: torch.Tensor) -> torch.Tensor:
            assert cache.keys is not None and cache.values is not None
            out = q.new_zeros(q.shape[0], self.n_heads * self.head_dim)
            for b in buckets:
                n, count = b.slots.shape[0], b.gather.shape[0] // b.slots.shape[0]
                # [n, kv, count * groups, dim]: query (t, g) of kv head h is row t * groups + g.
                qs = q[b.gather].view(n, count, self.n_kv, self.groups, self.head_dim)
                qs = qs.permute(0, 2, 1, 3, 4).reshape(n, self.n_kv, count * self.groups, self.head_dim)
                chunks = b.bias.shape[-1] // CHUNK
                keys = cache.keys[layer, :chunks].index_select(1, b.slots)  # [chunks, n, kv, dim, CHUNK]
                values = cache.values[layer, :chunks].index_select(1, b.slots)
                att = self._attention(qs, keys, values, b.bias)
                att = att.view(n, self.n_kv, count, self.groups, self.head_dim).permute(0, 2, 1, 3, 4)
                out[b.packed] = att.reshape(n * count, -1)[b.valid]
            return out

        hidden = self._run(cache, tokens, slots, positions, attend)
        ends = torch.tensor([0, *(len(r.tokens) for r in rows)]).cumsum(0)[1:] - 1
        return self._logits(hidden[ends])

    def decode(self, cache: SlotCache, tokens: list[int], positions: list[int]) -> torch.Tensor:
        """One token for each of the sequences in slots ``0 .. len(tokens) - 1`` (``positions[i]``
        is where token ``i`` goes); returns float32 logits ``[len(tokens), vocab]``."""
        batch = len(tokens)
        pos = torch.tensor(positions)
        span = key_span(max(positions) + 1)
        bias = _mask_bias(torch.arange(span)[None, :] <= pos[:, None])[:, None, None, :]
        gp = max(self.groups, 4)  # a product with fewer rows would take another BLAS kernel
        # A kv head's queries, padded with zero rows to gp (filled in place each layer).
        qs = torch.zeros(batch, self.n_kv, gp, self.head_dim, dtype=self.dtype)

        def attend(layer: int, q: torch.Tensor) -> torch.Tensor:
            assert cache.keys is not None and cache.values is not None
            keys = cache.keys[layer, :, :batch]  # [chunks, batch, kv, dim, CHUNK]
            values = cache.values[layer, :, :batch]
            qs[:, :, : self.groups] = q[:batch].view(batch, self.n_kv, self.groups, self.head_dim)
            att = self._attention(qs, keys, values, bias)[:, :, : self.groups].reshape(batch, -1)
            if q.shape[0] == batch:
                return att
            return torch.cat([att, att.new_zeros(q.shape[0] - batch, att.shape[1])])  # padding rows

        hidden = self._run(cache, tokens, list(range(batch)), positions, attend)
        return self._logits(hidden[:batch])

    # ------------------------------------------------------------------ pieces
    def _query_buckets(self, rows: list[PrefillRow]) -> list[_QueryBucket]:
        """The query blocks of a prefill (at most :data:`QUERY_BLOCK` tokens of a sequence each)
        in buckets of blocks at least half as long as the bucket's longest: one batched attention
        per bucket and layer, where a product per block cost more in calls than in arithmetic."""
        blocks: list[tuple[int, int, int, int]] = []  # (slot, first packed token, count, position)
        offset = 0
        for row in rows:
            count = len(row.tokens)
            blocks += [
                (row.slot, offset + q0, min(count - q0, QUERY_BLOCK), row.start + q0)
                for q0 in range(0, count, QUERY_BLOCK)
            ]
            offset += count
        blocks.sort(key=lambda b: -b[2])
        buckets = []
        i = 0
        while i < len(blocks):
            j = i + 1
            while j < len(blocks) and 2 * blocks[j][2] >= blocks[i][2]:
                j += 1
            buckets.append(self._query_bucket(blocks[i:j]))
            i = j
        return buckets

    def _query_bucket(self, blocks: list[tuple[int, int, int, int]]) -> _QueryBucket:
        slot, first, count, start = (torch.tensor(c) for c in zip(*blocks, strict=True))
        longest = int(count.max())
        t = torch.arange(longest)
        valid = t[None, :] < count[:, None]  # [blocks, longest]: real query tokens
        gather = torch.where(valid, first[:, None] + t, 0).reshape(-1)
        # Bias [blocks, 1, rows, span] (see _mask_bias): row t * groups + g of a block sees
        # columns <= its position; padding rows (past the block's tokens, and up to 4 rows: see
        # decode) see column 0 only.
        rows = torch.arange(max(longest * self.groups, 4))
        token = rows // self.groups
        cols = torch.arange(key_span(int((start + count).max())))
        seen = cols <= (start[:, None] + token)[:, :, None]
        visible = torch.where((token < count[:, None])[:, :, None], seen, cols == 0)
        flat = valid.reshape(-1).nonzero()[:, 0]
        return _QueryBucket(slot, gather, _mask_bias(visible)[:, None], flat, gather[flat])

    def _attention(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        """``q [b, kv, m, d]`` against the cache's chunks ``keys [chunks, b, kv, d, CHUNK]``
        (transposed) and ``values [chunks, b, kv, CHUNK, d]`` (:class:`SlotCache`); ``bias``
        (:func:`_mask_bias`) broadcasts to ``[b, kv, m, span]`` and says how many chunks are
        read (``span / CHUNK``). Rows of ``q`` beyond the bias's rows are padding."""
        m = q.shape[2]
        if bias.shape[-2] > m:  # the mask was padded for a short query block
            q = torch.cat([q, q.new_zeros(*q.shape[:2], bias.shape[-2] - m, q.shape[3])], 2)
        chunks = range(bias.shape[-1] // CHUNK)
        # One product per chunk of keys, each reading its block in place; a score's sum over
        # the head dimension is the same whichever columns share its product.
        scores = torch.cat([torch.matmul(q, keys[c]) for c in chunks], -1)
        scores = scores.float().mul_(self.scaling).add_(bias)
        probs = torch.softmax(scores, -1).to(values.dtype)
        b, h, rows, span = probs.shape
        # Sum over keys chunk by chunk in a fixed order: invariant to how many masked chunks
        # follow (each adds exact zeros).
        p3 = probs.view(b * h, rows, span)
        dim = values.shape[-1]
        out = torch.bmm(p3[:, :, :CHUNK], values[0].reshape(b * h, CHUNK, dim))
        for c in chunks[1:]:
            out.baddbmm_(p3[:, :, c * CHUNK : (c + 1) * CHUNK], values[c].reshape(b * h, CHUNK, dim))
        return out.view(b, h, rows, -1)[:, :, :m]

    def _run(
        self,
        cache: SlotCache,
        tokens: list[int],
        slots: list[int],
        positions: list[int],
        attend: Any,
    ) -> torch.Tensor:
        n = len(tokens)
        rows = max(n, self.min_rows)
        ids = torch.tensor(tokens + [0] * (rows - n))
        pos = torch.tensor(positions + [0] * (rows - n))
        slot_idx = torch.tensor(slots)
        write_pos = pos[:n]
        chunk, column = write_pos // CHUNK, write_pos % CHUNK
        cos = self.cos[pos][:, None, :]
        sin_rot = self.sin_rot[pos][:, None, :]
        heads = self.n_heads + self.n_kv  # rotated: the queries and the keys
        hidden = F.embedding(ids, self.embed)
        d = self.head_dim
        assert cache.keys is not None and cache.values is not None
        for i, layer in enumerate(self.layers):
            x = layer.input_norm(hidden)
            qkv = layer.qkv(x)
            qk = qkv[:, : heads * d].view(rows, heads, d)
            qk = qk * cos + torch.roll(qk, d // 2, -1) * sin_rot
            q, k = qk[:, : self.n_heads], qk[:, self.n_heads :]
            v = qkv[:, heads * d :].view(rows, self.n_kv, d)
            cache.keys[i][chunk, slot_idx, :, :, column] = k[:n]
            cache.values[i][chunk, slot_idx, :, column] = v[:n]
            hidden = layer.o.add(attend(i, q), hidden)
            x = layer.post_norm(hidden)
            if self.silu:  # the activation, product and residual run in the products' kernels
                hidden = layer.down.add(layer.up.mul(x, layer.gate.silu(x)), hidden)
            else:
                hidden = hidden + layer.down(self.act(layer.gate(x)) * layer.up(x))
        return self.norm(hidden)

    def _logits(self, last: torch.Tensor) -> torch.Tensor:
        n = last.shape[0]
        if n < self.min_rows:
            last = torch.cat([last, last.new_zeros(self.min_rows - n, last.shape[1])])
        return self.lm_head(last)[:n].float()


def _mask_bias(visible: torch.Tensor) -> torch.Tensor:
    """Float32 ``0`` where ``visible``, ``-inf`` elsewhere: added to attention scores, the same
    numbers as filling the hidden ones with ``-inf`` (a finite score plus 0 is itself), and ~10x
    cheaper per layer than ``masked_fill_`` with a broadcast mask (``docs/measurements.md``)."""
    return torch.zeros(visible.shape).masked_fill_(visible.logical_not(), float("-inf"))
