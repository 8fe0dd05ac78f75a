"""Shared-prefix passes: datums of a batch that share a token prefix compute that prefix once.

A GRPO-style batch is groups of sequences that start from one prompt (and often coincide for a
few turns more). Causal attention makes the hidden state at position ``t`` a function of tokens
``0..t`` only, so every datum that carries the same first ``t + 1`` tokens gets the same hidden
states there: they need computing once, and the gradient that reaches them is the sum of what
each datum sends back, exactly what separate passes would accumulate.

How (:func:`plan` then :class:`TreeLayout`):

- The datums are sorted by their tokens; each one shares with its predecessor the longest
  common prefix ``s`` (in sorted order that is its longest prefix in common with any earlier
  datum), so its *new* tokens are those from ``s`` on. The new tokens of all datums, one after
  the other, are the nodes of the batch's prefix trie: the fewest tokens that can be computed.
- One pass runs those packed tokens as a single sequence through the model's own layers, each
  with its position in its datum (RoPE). Linear layers, norms and the MLP see each trie node
  once. Attention (:func:`tree_attention`, registered with transformers'
  ``AttentionInterface``) gives each datum's new tokens the keys and values of its whole path:
  the query blocks of a datum attend, causally, to the packed keys gathered along its path.
  A key or value shared by several datums is gathered into each of their rows, so the gradient
  flows back into the one prefix computation from every continuation.
- Logprobs are computed once per distinct (trie node, target token) and handed to each datum
  at its positions; the losses are the usual per-datum ones.

A batch is cut into passes of at most a token budget, preferring cuts where the sorted
neighbours share least (between groups), so sharing is rarely lost at a cut. Datums that share
nothing with a neighbour take the plain padded path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

TREE_ATTENTION = "turngym_prefix_tree"
"""Name of :func:`tree_attention` in transformers' ``AttentionInterface``."""

QUERY_BLOCK = 64
"""Query tokens of one datum attended together (one row of an attention product)."""
BUCKET_KEY_RATIO = 0.5
"""Rows whose key spans are within this ratio of the longest share one attention product."""


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefix_bound(token_lists: Sequence[Sequence[int]]) -> int:
    """Tokens of the batch's prefix trie: each distinct prefix computed once, the least any
    shared-prefix pass can compute."""
    ordered = sorted(token_lists, key=list)
    total = 0
    prev: Sequence[int] = ()
    for tokens in ordered:
        total += len(tokens) - common_prefix(prev, tokens)
        prev = tokens
    return total


@dataclass(frozen=True)
class Chunk:
    """Datums run together: ``order`` indexes the batch, sorted by tokens; ``shared[k]`` is how
    many leading tokens datum ``order[k]`` takes from ``order[k - 1]`` (0 for the first)."""

    order: tuple[int, ...]
    shared: tuple[int, ...]
    lengths: tuple[int, ...]

    @property
    def tokens(self) -> int:
        """Tokens this chunk computes."""
        return sum(n - s for n, s in zip(self.lengths, self.shared, strict=True))


@dataclass(frozen=True)
class Plan:
    """A batch split into shared-prefix chunks and datums run plainly."""

    chunks: tuple[Chunk, ...]
    plain: tuple[int, ...]
    plain_tokens: int

    @property
    def tokens(self) -> int:
        """Tokens computed by the whole plan (the plain ones unpadded)."""
        return sum(c.tokens for c in self.chunks) + self.plain_tokens


def plan(token_lists: Sequence[Sequence[int]], budget: int) -> Plan:
    """Split a batch into chunks of datums that share prefixes, each computing at most
    ``budget`` tokens where it can (a chunk holds at least one datum), cut where sorted
    neighbours share least; datums that share nothing with a neighbour run plainly."""
    n = len(token_lists)
    order = sorted(range(n), key=lambda i: list(token_lists[i]))
    lengths = [len(token_lists[i]) for i in order]
    shared = [0] + [common_prefix(token_lists[order[k - 1]], token_lists[order[k]]) for k in range(1, n)]

    # Runs of sorted neighbours that share at least one token.
    runs: list[list[int]] = []
    for k in range(n):
        if k == 0 or shared[k] == 0:
            runs.append([k])
        else:
            runs[-1].append(k)

    chunks: list[Chunk] = []
    plain: list[int] = []

    def emit(ks: list[int]) -> None:
        if len(ks) == 1:
            plain.append(order[ks[0]])
            return
        chunks.append(
            Chunk(
                order=tuple(order[k] for k in ks),
                shared=(0, *(shared[k] for k in ks[1:])),
                lengths=tuple(lengths[k] for k in ks),
            )
        )

    def cost(ks: list[int]) -> int:
        return lengths[ks[0]] + sum(lengths[k] - shared[k] for k in ks[1:])

    for run in runs:
        current: list[int] = []
        total = 0
        for k in run:
            current.append(k)
            total += lengths[k] - (shared[k] if len(current) > 1 else 0)
            while total > budget and len(current) > 1:
                # Cut before the datum that shares least with its predecessor (the latest of equals).
                cut = min(range(1, len(current)), key=lambda j: (shared[current[j]], -j))
                emit(current[:cut])
                current = current[cut:]
                total = cost(current)
        emit(current)
    return Plan(
        chunks=tuple(chunks), plain=tuple(plain), plain_tokens=sum(len(token_lists[i]) for i in plain)
    )


@dataclass(frozen=True)
class _Bucket:
    q_index: torch.Tensor  # [rows, queries] packed index of each query (padding: 0)
    k_index: torch.Tensor  # [rows, keys] packed index of each key (padding: 0)
    mask: torch.Tensor  # [rows, 1, queries, keys] bool: may attend


@dataclass(frozen=True)
class TreeLayout:
    """A chunk's packed tokens and the indices its attention and logprobs gather with.

    ``ids``/``positions``: the packed tokens and their positions in their datums;
    ``paths[k]``: the packed index of each position of the chunk's ``k``-th datum;
    ``buckets``: attention products (rows of query blocks, keys along each row's path);
    ``out_index``: where each packed token's attention output lies in the buckets' outputs,
    concatenated.
    """

    ids: torch.Tensor
    positions: torch.Tensor
    paths: tuple[torch.Tensor, ...]
    buckets: tuple[_Bucket, ...]
    out_index: torch.Tensor

    @classmethod
    def build(cls, tokens: Sequence[Sequence[int]], shared: Sequence[int]) -> TreeLayout:
        """Layout of datums ``tokens`` (sorted, each sharing ``shared[k]`` tokens with the one before)."""
        ids: list[int] = []
        positions: list[torch.Tensor] = []
        paths: list[torch.Tensor] = []
        blocks: list[tuple[int, int, int]] = []  # (datum, first query position, end)
        offset = 0
        for k, (seq, s) in enumerate(zip(tokens, shared, strict=True)):
            n = len(seq)
            new = torch.arange(offset, offset + n - s)
            paths.append(torch.cat([paths[-1][:s], new]) if s else new)
            ids.extend(seq[s:])
            positions.append(torch.arange(s, n))
            offset += n - s
            blocks.extend((k, a, min(a + QUERY_BLOCK, n)) for a in range(s, n, QUERY_BLOCK))
        blocks.sort(key=lambda b: -b[2])
        buckets: list[_Bucket] = []
        out_index = torch.empty(offset, dtype=torch.long)
        start = 0
        flat = 0
        while start < len(blocks):
            keys = blocks[start][2]
            stop = start
            while stop < len(blocks) and blocks[stop][2] >= BUCKET_KEY_RATIO * keys:
                stop += 1
            rows = blocks[start:stop]
            queries = max(e - a for _, a, e in rows)
            q_index = torch.zeros((len(rows), queries), dtype=torch.long)
            k_index = torch.zeros((len(rows), keys), dtype=torch.long)
            q_pos = torch.zeros((len(rows), queries), dtype=torch.long)
            for r, (k, a, e) in enumerate(rows):
                path = paths[k]
                q_index[r, : e - a] = path[a:e]
                k_index[r, :e] = path[:e]
                q_pos[r, : e - a] = torch.arange(a, e)
                out_index[path[a:e]] = torch.arange(flat + r * queries, flat + r * queries + e - a)
            # Causal along the path; a padding query (position 0) attends to key 0 only.
            mask = (torch.arange(keys)[None, None, :] <= q_pos[:, :, None]).unsqueeze(1)
            buckets.append(_Bucket(q_index, k_index, mask))
            flat += len(rows) * queries
            start = stop
        return cls(
            ids=torch.tensor(ids, dtype=torch.long),
            positions=torch.cat(positions),
            paths=tuple(paths),
            buckets=tuple(buckets),
            out_index=out_index,
        )


def tree_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention of a packed :class:`TreeLayout` (``kwargs["prefix_tree"]``): ``query``/``key``/
    ``value`` are ``[1, heads, packed, dim]``; returns ``[1, packed, heads, dim]``."""
    layout: TreeLayout | None = kwargs.get("prefix_tree")
    if layout is None:
        raise RuntimeError(f"{TREE_ATTENTION} attention needs the prefix_tree layout")
    q, k, v = query[0], key[0], value[0]
    heads, dim = q.shape[0], q.shape[-1]
    outs = []
    for b in layout.buckets:
        qb, kb, vb = _gather_rows(q, b.q_index), _gather_rows(k, b.k_index), _gather_rows(v, b.k_index)
        out = F.scaled_dot_product_attention(
            qb, kb, vb, attn_mask=b.mask, dropout_p=dropout, scale=scaling, enable_gqa=kb.shape[1] != heads
        )
        outs.append(out.transpose(1, 2).reshape(-1, heads, dim))
    return torch.cat(outs).index_select(0, layout.out_index).unsqueeze(0), None


def _gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[:, index].transpose(0, 1)`` for ``x`` ``[heads, packed, dim]`` and a 2-D ``index``, by
    ``index_select``: its backward sums a shared key's gradients in index order (``index_add_``),
    where advanced indexing's backward adds them with atomics on CPU, in an order that changes
    with thread timing (so a loaded machine trained other weights from the same seed)."""
    rows = x.index_select(1, index.reshape(-1))
    return rows.view(x.shape[0], *index.shape, x.shape[-1]).transpose(0, 1)


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(TREE_ATTENTION, tree_attention)


@contextlib.contextmanager
def tree_attention_on(config: Any) -> Iterator[None]:
    """Within the block, the model with ``config`` runs :func:`tree_attention`."""
    _register()
    previous = config._attn_implementation
    config._attn_implementation = TREE_ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = previous
