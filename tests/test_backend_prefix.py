"""Shared-prefix training passes (backend.local._prefix): the plan, the layout, and the exactness of
``forward_backward`` / ``forward`` / ``forward_backward_custom`` against the plain padded passes on
random prefix trees (TINY model, LoRA B made non-zero so every adapter weight gets a gradient)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest
import torch
from backend_fixtures import TINY
from hypothesis import given, settings
from hypothesis import strategies as st
from tinker import types

from backend.local import _prefix
from backend.local._prefix import TreeLayout, common_prefix, plan, prefix_bound
from backend.local._trainer import TrainerCore

VOCAB = 200  # token ids drawn below this: collisions make shared prefixes likely


@st.composite
def prefix_trees(draw: st.DrawFn, max_datums: int = 10) -> list[list[int]]:
    """Token lists grown from a random trie: each datum extends a prefix of an earlier one (or
    starts fresh), so datums share prefixes, some are prefixes of others, some share nothing."""
    seqs: list[list[int]] = []
    for _ in range(draw(st.integers(1, max_datums))):
        if seqs and draw(st.booleans()):
            parent = seqs[draw(st.integers(0, len(seqs) - 1))]
            keep = draw(st.integers(0, len(parent)))
            tail = draw(st.lists(st.integers(0, VOCAB - 1), min_size=0 if keep else 1, max_size=12))
            seq = parent[:keep] + tail
        else:
            seq = draw(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=40))
        seqs.append(seq if seq else [0])
    return seqs


def trie_nodes(seqs: list[list[int]]) -> int:
    return len({tuple(s[: i + 1]) for s in seqs for i in range(len(s))})


@pytest.mark.explore
@given(prefix_trees(), st.integers(1, 120))
def test_plan_computes_each_trie_node_once_within_its_budget(seqs: list[list[int]], budget: int) -> None:
    assert prefix_bound(seqs) == trie_nodes(seqs)
    p = plan(seqs, budget)
    placed = sorted([i for c in p.chunks for i in c.order] + list(p.plain))
    assert placed == list(range(len(seqs)))
    for c in p.chunks:
        assert len(c.order) >= 2
        assert c.tokens <= budget
        assert c.shared[0] == 0
        for k in range(1, len(c.order)):
            a, b = seqs[c.order[k - 1]], seqs[c.order[k]]
            assert a <= b
            assert c.shared[k] == common_prefix(a, b) > 0
        # A chunk computes its own trie.
        assert c.tokens == trie_nodes([seqs[i] for i in c.order])
    assert p.plain_tokens == sum(len(seqs[i]) for i in p.plain)
    unlimited = plan(seqs, 10**9)
    assert unlimited.tokens == prefix_bound(seqs)


@pytest.mark.explore
@given(prefix_trees(), st.integers(1, 70))
def test_layout_paths_rebuild_every_datum(seqs: list[list[int]], block: int) -> None:
    ordered = sorted(seqs)
    shared = [0] + [common_prefix(a, b) for a, b in itertools.pairwise(ordered)]
    old = _prefix.QUERY_BLOCK
    _prefix.QUERY_BLOCK = block
    try:
        layout = TreeLayout.build(ordered, shared)
    finally:
        _prefix.QUERY_BLOCK = old
    assert len(layout.ids) == trie_nodes(ordered)
    for seq, path in zip(ordered, layout.paths, strict=True):
        assert layout.ids[path].tolist() == seq
        assert layout.positions[path].tolist() == list(range(len(seq)))
    # Every packed token is a query exactly once.
    slots = sum(b.q_index.numel() for b in layout.buckets)
    assert sorted(set(layout.out_index.tolist())) == sorted(layout.out_index.tolist())
    assert int(layout.out_index.max()) < slots
    for b in layout.buckets:
        assert bool(b.mask.any(-1).all())  # no query row without a key (padding rows see key 0)


# --------------------------------------------------------------------------- exactness


@pytest.fixture(scope="module")
def core() -> TrainerCore:
    core = TrainerCore(TINY, rank=4, seed=0)
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(1)
        for name, p in core.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.1)
    return core


def make_data(seqs: list[list[int]], seed: int) -> list[types.Datum]:
    rng = random.Random(seed)
    data = []
    for s in seqs:
        n = len(s)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(s),
                loss_fn_inputs={  # type: ignore[dict-item]
                    "target_tokens": [rng.randrange(VOCAB) for _ in range(n)],
                    "weights": [rng.choice([0.0, 0.0, 1.0, 0.5]) for _ in range(n)],
                    "logprobs": [rng.uniform(-6.0, -0.1) for _ in range(n)],
                    "advantages": [rng.choice([0.0, 0.0, rng.uniform(-1.0, 1.0)]) for _ in range(n)],
                },
            )
        )
    return data


Run = Callable[[TrainerCore], types.ForwardBackwardOutput]


def compare(
    core: TrainerCore, run: Run, *, rel: float, dtype: str = "float32", each: list[Run] | None = None
) -> None:
    """``run`` with shared prefixes and without: same per-datum outputs, loss and gradients.

    ``each``: ``run`` one datum at a time; where given, the whole gradient's tolerance is taken
    relative to the sum of their gradient norms when that is larger than the sum's norm (the
    datums' gradients cancel; float rounding scales with the terms summed, not with their sum)."""
    results = []
    core.compute_dtype = dtype
    try:
        for share in (False, True):
            core.share_prefixes = share
            core.model.zero_grad(set_to_none=True)
            out = run(core)
            grads = {n: p.grad.clone() for n, p in core.model.named_parameters() if p.grad is not None}
            results.append((out, grads))
    finally:
        core.share_prefixes = True
        core.compute_dtype = "float32"
        core.model.zero_grad(set_to_none=True)
    (flat, flat_grads), (shared, shared_grads) = results
    assert flat.metrics.keys() == shared.metrics.keys()
    for key, value in flat.metrics.items():
        assert shared.metrics[key] == pytest.approx(value, rel=rel, abs=rel)
    assert len(flat.loss_fn_outputs) == len(shared.loss_fn_outputs)
    for a, b in zip(flat.loss_fn_outputs, shared.loss_fn_outputs, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            x, y = a[key].to_torch(), b[key].to_torch()
            assert x.shape == y.shape
            assert float((x - y).abs().max()) <= rel * max(1.0, float(x.abs().max()))
    assert flat_grads.keys() == shared_grads.keys()
    if not flat_grads:  # nothing weighted: no gradient either way
        return
    # Relative over all adapter weights, and per weight tensor with a looser bound (a tensor
    # holds fewer, more cancelling terms; one whose gradient is zero in exact arithmetic, the
    # queries of one-token sequences, carries rounding noise only: its floor is part of the whole).
    flat_all = torch.cat([g.reshape(-1) for g in flat_grads.values()])
    shared_all = torch.cat([shared_grads[name].reshape(-1) for name in flat_grads])
    total = float(flat_all.norm())
    scale = total
    if each is not None:
        core.share_prefixes = False
        terms = 0.0
        for one in each:
            core.model.zero_grad(set_to_none=True)
            one(core)
            terms += sum(float(p.grad.norm()) ** 2 for p in core.params if p.grad is not None) ** 0.5
        core.share_prefixes = True
        core.model.zero_grad(set_to_none=True)
        scale = max(total, terms)
    assert float((flat_all - shared_all).norm()) <= rel * scale
    for name, g in flat_grads.items():
        scale = max(float(g.norm()), 1e-2 * total, 1e-30)
        assert float((g - shared_grads[name]).norm()) <= 5 * rel * scale, name


LOSSES = ["cross_entropy", "importance_sampling", "ppo"]


@pytest.mark.derandomize
@settings(max_examples=25)
@given(prefix_trees(), st.sampled_from(LOSSES), st.sampled_from([3, 64]), st.sampled_from([24, 1024]))
def test_shared_prefix_pass_equals_the_plain_pass(
    core: TrainerCore, seqs: list[list[int]], loss: str, block: int, budget: int
) -> None:
    data = make_data(seqs, seed=len(seqs))
    old = _prefix.QUERY_BLOCK, core.max_tokens_per_pass
    _prefix.QUERY_BLOCK, core.max_tokens_per_pass = block, budget
    try:
        config = {"clip_low_threshold": 0.9}
        compare(
            core,
            lambda c: c.forward_backward(data, loss, config, backward=True),
            rel=1e-5,
            each=[lambda c, d=d: c.forward_backward([d], loss, config, backward=True) for d in data],
        )
    finally:
        _prefix.QUERY_BLOCK, core.max_tokens_per_pass = old


# A datum that is a prefix of another, a duplicate, a group after one prompt, one sharing nothing.
PROMPT = list(range(10, 40))
FIXED = [
    [*PROMPT, 1, 2, 3, 4],
    [*PROMPT, 1, 2, 3, 4, 5, 6],
    [*PROMPT, 1, 2, 3, 4, 5, 6],
    PROMPT[:12],
    [*PROMPT, 7, 8],
    [*PROMPT, 1, 9, 9, 9, 9, 9, 9, 9, 9],
    [150, 151, 152, 153],
]


@pytest.mark.parametrize("loss", LOSSES)
def test_fixed_tree_forward_backward_and_forward(core: TrainerCore, loss: str) -> None:
    data = make_data(FIXED, seed=0)
    items = core.prepare(data, loss)
    p = core.plan(items)
    assert p.tokens == prefix_bound(FIXED) < sum(len(s) for s in FIXED)
    assert p.plain == (6,)  # shares nothing
    compare(core, lambda c: c.forward_backward(data, loss, None, backward=True), rel=1e-5)
    compare(core, lambda c: c.forward_backward(data, loss, None, backward=False), rel=1e-5)


def test_nothing_shared_falls_back_to_the_plain_pass(core: TrainerCore) -> None:
    seqs = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    p = core.plan(core.prepare(make_data(seqs, 0), "cross_entropy"))
    assert p.chunks == ()
    assert sorted(p.plain) == [0, 1, 2]


def test_custom_loss_equals_the_plain_pass(core: TrainerCore) -> None:
    data = make_data(FIXED, seed=3)

    def loss_fn(
        batch: list[types.Datum], logprobs: list[torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        total = sum(((lp - 0.1 * i) ** 2).sum() for i, lp in enumerate(logprobs))
        assert isinstance(total, torch.Tensor)
        return total, {"n": float(len(batch))}

    compare(core, lambda c: c.forward_backward_custom(data, loss_fn), rel=1e-5)


def test_bfloat16_matches_within_its_rounding(core: TrainerCore) -> None:
    data = make_data(FIXED, seed=1)
    compare(
        core,
        lambda c: c.forward_backward(data, "importance_sampling", None, backward=True),
        rel=3e-2,
        dtype="bfloat16",
    )


@pytest.mark.parametrize("loss", LOSSES)
def test_shared_pass_skips_the_graph_of_unweighted_positions_exactly(core: TrainerCore, loss: str) -> None:
    data = make_data(FIXED, seed=2)

    # The plain pass with every position's graph against the shared pass without the unweighted ones.
    results = []
    for selective, share in ((False, False), (True, True)):
        core.share_prefixes, core.selective_unembedding = share, selective
        core.model.zero_grad(set_to_none=True)
        out = core.forward_backward(data, loss, None, backward=True)
        results.append((out, [p.grad.clone() for p in core.params if p.grad is not None]))
    core.share_prefixes = core.selective_unembedding = True
    core.model.zero_grad(set_to_none=True)
    (full, full_grads), (sel, sel_grads) = results
    for a, b in zip(full.loss_fn_outputs, sel.loss_fn_outputs, strict=True):
        torch.testing.assert_close(b["logprobs"].to_torch(), a["logprobs"].to_torch(), rtol=1e-5, atol=1e-5)
    assert len(full_grads) == len(sel_grads) > 0
    for g_full, g_sel in zip(full_grads, sel_grads, strict=True):
        assert float((g_full - g_sel).norm()) <= 1e-5 * float(g_full.norm())


def test_training_passes_gather_without_atomic_accumulation(
    core: TrainerCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No training pass gathers by advanced indexing: on CPU its backward adds a repeated index's
    gradients with atomics, in an order that follows thread timing, so one seed trained other
    weights on a loaded machine. ``index_select`` (backward: ``index_add_``, in index order) does not."""
    seen: set[str] = set()
    original = torch.Tensor.backward

    def backward(self: torch.Tensor, *args: object, **kwargs: object) -> None:
        stack, visited = [self.grad_fn], set()
        while stack:
            node = stack.pop()
            if node is None or node in visited:
                continue
            visited.add(node)
            seen.add(type(node).__name__)
            stack.extend(next_fn for next_fn, _ in node.next_functions)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.Tensor, "backward", backward)
    data = make_data(FIXED, seed=4)  # shared chunks and one datum on the plain path
    assert core.plan(core.prepare(data, "importance_sampling")).plain
    core.model.zero_grad(set_to_none=True)
    core.forward_backward(data, "importance_sampling", None, backward=True)
    core.model.zero_grad(set_to_none=True)
    assert "IndexSelectBackward0" in seen  # the walk saw the gathers
    assert not {name for name in seen if name.startswith("IndexBackward")}, sorted(seen)
