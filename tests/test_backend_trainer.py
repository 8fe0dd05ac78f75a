"""Local training client: losses, optimizer, checkpoints, errors, cookbook compatibility (TINY)."""

from __future__ import annotations

import asyncio
import math
import warnings

import pytest
import torch
from backend_fixtures import TINY, ce_datum, encode, make_service, rl_datum
from tinker import types

from backend import (
    CheckpointNotFoundError,
    InvalidDatumError,
    LocalServiceClient,
    LocalTrainingClient,
    UnknownLossError,
    UnknownModelError,
)

SEQ = "The quick brown fox jumps over the lazy dog, again and again."


@pytest.fixture
def service(tmp_path) -> LocalServiceClient:
    return make_service(tmp_path)


@pytest.fixture
def trainer(service: LocalServiceClient) -> LocalTrainingClient:
    return service.create_lora_training_client(TINY, rank=4, seed=0).result()


def seq_logprob(client: LocalTrainingClient, tokens: list[int]) -> float:
    out = client.forward([ce_datum(tokens)], "cross_entropy").result()
    return float(out.loss_fn_outputs[0]["logprobs"].to_torch().sum())


def test_cross_entropy_steps_lower_the_loss(trainer: LocalTrainingClient) -> None:
    datum = ce_datum(encode(SEQ))
    losses = []
    for _ in range(4):
        out = trainer.forward_backward([datum], "cross_entropy").result()
        trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        losses.append(out.metrics["loss:sum"])
    assert isinstance(out, types.ForwardBackwardOutput)
    assert losses[-1] < losses[0] - 1.0
    lp = out.loss_fn_outputs[0]["logprobs"].to_torch()
    assert lp.shape == (len(encode(SEQ)) - 1,)
    assert out.metrics["loss:sum"] == pytest.approx(-float(lp.sum()), rel=1e-5)


def test_weights_select_the_trained_tokens(trainer: LocalTrainingClient) -> None:
    tokens = encode(SEQ)
    n = len(tokens) - 1
    weights = [0.0] * (n // 2) + [1.0] * (n - n // 2)
    out = trainer.forward([ce_datum(tokens, weights)], "cross_entropy").result()
    lp = out.loss_fn_outputs[0]["logprobs"].to_torch()
    assert out.metrics["loss:sum"] == pytest.approx(-float((lp * torch.tensor(weights)).sum()), rel=1e-5)


def test_importance_sampling_raises_logprob_of_rewarded_sequence(trainer: LocalTrainingClient) -> None:
    sampler = trainer.save_weights_and_get_sampling_client().result()
    p = encode("Say something:")
    s = sampler.sample(types.ModelInput.from_ints(p), 1, types.SamplingParams(max_tokens=8, stop=[], seed=4))
    seq = s.result().sequences[0]
    assert seq.logprobs is not None
    tokens = p + seq.tokens
    n_prompt = len(p) - 1
    sampled_lp = [0.0] * n_prompt + seq.logprobs
    adv = [0.0] * n_prompt + [1.0] * len(seq.tokens)
    before = seq_logprob(trainer, tokens)
    out = trainer.forward_backward([rl_datum(tokens, sampled_lp, adv)], "importance_sampling").result()
    # On-policy: ratio 1 on every sampled token, so the loss is -sum(advantages).
    assert out.metrics["loss:sum"] == pytest.approx(-len(seq.tokens), rel=1e-3)
    trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    assert seq_logprob(trainer, tokens) > before


def test_ppo_runs_and_clips(trainer: LocalTrainingClient) -> None:
    tokens = encode(SEQ)
    n = len(tokens) - 1
    lp = trainer.forward([ce_datum(tokens)], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    # Sampler logprobs 1 nat lower -> ratio e (> 1.2): positive advantages are clipped at 1.2.
    datum = rl_datum(tokens, [x - 1.0 for x in lp], [1.0] * n)
    out = trainer.forward_backward([datum], "ppo").result()
    assert out.metrics["loss:sum"] == pytest.approx(-1.2 * n, rel=1e-4)
    cfg = trainer.forward([datum], "ppo", {"clip_low_threshold": 0.5, "clip_high_threshold": 2.0}).result()
    assert cfg.metrics["loss:sum"] == pytest.approx(-2.0 * n, rel=1e-4)
    step = trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    assert isinstance(step, types.OptimStepResponse)
    assert step.metrics is not None and step.metrics["optim/grad_norm"] == 0.0  # clipped branch: no gradient
    # Negative advantages: min() takes the unclipped ratio * A, which has a gradient.
    neg = rl_datum(tokens, [x - 1.0 for x in lp], [-1.0] * n)
    out = trainer.forward_backward([neg], "ppo").result()
    assert out.metrics["loss:sum"] == pytest.approx(math.e * n, rel=1e-4)
    step = trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    assert step.metrics is not None and step.metrics["optim/grad_norm"] > 0


def test_batch_of_unequal_lengths_matches_single_passes(service: LocalServiceClient) -> None:
    small = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    small.core.max_tokens_per_pass = 1  # one datum per pass
    big = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    data = [ce_datum(encode(SEQ[: 10 * (i + 1)])) for i in range(4)]
    a = small.forward(data, "cross_entropy").result()
    b = big.forward(data, "cross_entropy").result()
    assert a.metrics["loss:sum"] == pytest.approx(b.metrics["loss:sum"], rel=1e-5)
    for x, y in zip(a.loss_fn_outputs, b.loss_fn_outputs, strict=True):
        assert torch.allclose(x["logprobs"].to_torch(), y["logprobs"].to_torch(), atol=1e-5)


def test_grad_clip_and_weight_decay(service: LocalServiceClient) -> None:
    datum = ce_datum(encode(SEQ))
    deltas = {}
    for clip in (0.0, 1e-6):
        client = service.create_lora_training_client(TINY, rank=4, seed=0).result()
        before = [p.detach().clone() for p in client.core.params]
        client.forward_backward([datum], "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=1e-2, eps=1e-8, grad_clip_norm=clip)).result()
        deltas[clip] = sum(
            float((p.detach() - q).abs().sum()) for p, q in zip(client.core.params, before, strict=True)
        )
    assert deltas[1e-6] < deltas[0.0]  # Adam with clipped grads: eps dominates, far smaller steps
    # AdamW's decoupled decay: with identical gradients, p(wd) - p(no wd) = -lr * wd * p_before.
    after = {}
    for wd in (0.0, 0.5):
        client = service.create_lora_training_client(TINY, rank=4, seed=0).result()
        before = [p.detach().clone() for p in client.core.params]
        client.forward_backward([datum], "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=0.1, weight_decay=wd)).result()
        after[wd] = [p.detach().clone() for p in client.core.params]
    for p0, p_wd, p_plain in zip(before, after[0.5], after[0.0], strict=True):
        assert torch.allclose(p_wd - p_plain, -0.1 * 0.5 * p0, atol=1e-6)


def test_save_load_sample_identical(service: LocalServiceClient) -> None:
    trainer = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    for _ in range(2):
        trainer.forward_backward([ce_datum(encode(SEQ))], "cross_entropy").result()
        trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    path = trainer.save_weights_for_sampler("s1").result().path
    assert path.startswith("local://")
    params = types.SamplingParams(max_tokens=10, stop=[], seed=7)
    p = types.ModelInput.from_ints(encode("Sampling after training"))
    live = trainer.save_weights_and_get_sampling_client().result().sample(p, 1, params).result().sequences[0]
    loaded = (
        service.create_sampling_client(model_path=path).result().sample(p, 1, params).result().sequences[0]
    )
    base = service.create_sampling_client(base_model=TINY).result()
    assert live.tokens == loaded.tokens
    assert live.logprobs is not None and loaded.logprobs is not None
    assert max(abs(a - b) for a, b in zip(live.logprobs, loaded.logprobs, strict=True)) < 1e-5
    scored_base = base.compute_logprobs(types.ModelInput.from_ints(p.to_ints() + live.tokens)).result()
    gaps = [abs(a - b) for a, b in zip(live.logprobs, scored_base[p.length :], strict=True) if b is not None]
    assert max(gaps) > 1e-3  # the sampler really uses the trained LoRA weights
    # The sampler agrees with the training forward on the same tokens.
    fwd = trainer.forward([ce_datum(p.to_ints() + live.tokens)], "cross_entropy").result()
    train_lp = fwd.loss_fn_outputs[0]["logprobs"].tolist()[p.length - 1 :]
    assert max(abs(a - b) for a, b in zip(live.logprobs, train_lp, strict=True)) < 1e-4


def test_state_roundtrip_restores_optimizer_moments(service: LocalServiceClient) -> None:
    trainer = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    datum = ce_datum(encode(SEQ))
    trainer.forward_backward([datum], "cross_entropy").result()
    trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    path = trainer.save_state("ckpt-1").result().path
    assert trainer.core.optimizer is not None
    moments = [s["exp_avg_sq"].clone() for s in trainer.core.optimizer.state.values()]
    weights = [p.detach().clone() for p in trainer.core.params]

    resumed = service.create_training_client_from_state_with_optimizer(path).result()
    assert resumed.core.optimizer is not None
    got = [s["exp_avg_sq"] for s in resumed.core.optimizer.state.values()]
    assert all(torch.equal(a, b) for a, b in zip(moments, got, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(weights, resumed.core.params, strict=True))

    other = service.create_lora_training_client(TINY, rank=4, seed=1).result()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other.load_state_with_optimizer(path).result()
    assert other.core.optimizer is not None
    assert all(
        torch.equal(a, s["exp_avg_sq"])
        for a, s in zip(moments, other.core.optimizer.state.values(), strict=True)
    )
    other.load_state(path).result()  # weights only: optimizer reset, as in Tinker
    assert other.core.optimizer is None
    assert all(torch.equal(a, b) for a, b in zip(weights, other.core.params, strict=True))
    # Both continue identically.
    for client in (trainer, resumed):
        client.forward_backward([datum], "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    assert all(torch.allclose(a, b) for a, b in zip(trainer.core.params, resumed.core.params, strict=True))


def test_bad_inputs_raise_clear_errors(service: LocalServiceClient, trainer: LocalTrainingClient) -> None:
    tokens = encode(SEQ)
    with pytest.raises(UnknownLossError, match="unknown loss_fn 'nope'"):
        trainer.forward_backward([ce_datum(tokens)], "nope")  # type: ignore[arg-type]
    with pytest.raises(InvalidDatumError, match="empty model_input"):
        trainer.forward_backward(
            [types.Datum(model_input=types.ModelInput.from_ints([]), loss_fn_inputs={"target_tokens": []})],  # type: ignore[dict-item]
            "cross_entropy",
        )
    with pytest.raises(InvalidDatumError, match="empty list"):
        trainer.forward_backward([], "cross_entropy")
    short = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs={"target_tokens": tokens[1:-1]}
    )  # type: ignore[dict-item]
    with pytest.raises(InvalidDatumError, match=r"has \d+ entries but model_input has"):
        trainer.forward_backward([short], "cross_entropy")
    with pytest.raises(InvalidDatumError, match="needs loss_fn_inputs"):
        trainer.forward_backward([ce_datum(tokens)], "importance_sampling")
    with pytest.raises(UnknownModelError, match="unknown local base model"):
        service.create_lora_training_client("no/such-model")
    with pytest.raises(UnknownModelError):
        service.create_sampling_client(base_model="no/such-model")
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint"):
        service.create_sampling_client(model_path="local://nothing/sampler_weights/here")
    with pytest.raises(CheckpointNotFoundError):
        trainer.load_state("local://nothing/weights/here")
    with pytest.raises(CheckpointNotFoundError):
        service.create_training_client_from_state("local://nothing/weights/here")
    # Errors leave the client usable.
    assert trainer.forward([ce_datum(tokens)], "cross_entropy").result().metrics["loss:sum"] > 0


def test_cookbook_train_step_runs_on_local_client(trainer: LocalTrainingClient) -> None:
    from tinker_cookbook.rl.train import train_step

    sampler = trainer.save_weights_and_get_sampling_client().result()
    p = encode("Cookbook:")
    data = []
    for seed in range(4):
        seq = sampler.sample(
            types.ModelInput.from_ints(p), 1, types.SamplingParams(max_tokens=6, stop=[], seed=seed)
        )
        s = seq.result().sequences[0]
        assert s.logprobs is not None
        n_prompt = len(p) - 1
        adv = 1.0 if seed % 2 else -1.0
        data.append(
            rl_datum(p + s.tokens, [0.0] * n_prompt + s.logprobs, [0.0] * n_prompt + [adv] * len(s.tokens))
        )
    metrics: dict[str, float] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logprobs = asyncio.run(
            train_step(data, trainer, 1e-3, 2, "importance_sampling", metrics=metrics)  # type: ignore[arg-type]
        )
    assert len(logprobs) == len(data)
    assert trainer.core.step == 2


def test_async_deprecated_spellings(trainer: LocalTrainingClient, service: LocalServiceClient) -> None:
    async def run() -> float:
        fut = await trainer.forward_backward_async([ce_datum(encode(SEQ))], "cross_entropy")
        opt = await trainer.optim_step_async(types.AdamParams(learning_rate=1e-3))
        out = await fut.result_async()
        await opt
        client = await service.create_sampling_client_async(base_model=TINY)
        res = await client.sample_async(
            types.ModelInput.from_ints(encode("a")), 1, types.SamplingParams(max_tokens=2)
        )
        assert len(res.sequences[0].tokens) >= 1
        return out.metrics["loss:sum"]

    assert asyncio.run(run()) > 0
    assert trainer.get_info().lora_rank == 4
    assert trainer.get_tokenizer().encode("<|im_end|>") == [2]


@pytest.mark.parametrize("loss_fn", ["importance_sampling", "ppo", "cross_entropy"])
def test_unweighted_positions_skip_the_graph_but_not_the_gradient(loss_fn: str) -> None:
    """The trainer unembeds zero-weight positions without autograd; values and gradients stay exact."""
    from backend.local._trainer import TrainerCore

    long = encode(SEQ)
    short = encode("Say something short.")
    data = []
    for tokens in (long, short):
        n = len(tokens) - 1
        half = n // 2
        if loss_fn == "cross_entropy":
            data.append(ce_datum(tokens, [0.0] * half + [1.0] * (n - half)))
        else:
            data.append(rl_datum(tokens, [-2.0] * n, [0.0] * half + [0.7] * (n - half)))
    data.append(rl_datum(short, [-2.0] * (len(short) - 1), [0.0] * (len(short) - 1)))  # weight 0 throughout
    if loss_fn == "cross_entropy":
        data[-1] = ce_datum(short, [0.0] * (len(short) - 1))

    def grads_and_logprobs(selective: bool) -> tuple[list[torch.Tensor], list[list[float]]]:
        core = TrainerCore(TINY, rank=4, seed=0, max_tokens_per_pass=10_000)
        with torch.no_grad():  # B != 0, so both LoRA factors get gradients
            for p in core.params:
                p.add_(0.01 * torch.randn_like(p))
        core.selective_unembedding = selective
        core.share_prefixes = False  # the padded path (tests/test_backend_prefix.py: the shared one)
        out = core.forward_backward(data, loss_fn, None, backward=True)
        grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in core.params]
        return grads, [o["logprobs"].tolist() for o in out.loss_fn_outputs]

    torch.manual_seed(0)
    full_grads, full_lp = grads_and_logprobs(False)
    torch.manual_seed(0)
    sel_grads, sel_lp = grads_and_logprobs(True)
    for a, b in zip(full_lp, sel_lp, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    assert any(float(g.abs().sum()) > 0 for g in full_grads)
    for g_full, g_sel in zip(full_grads, sel_grads, strict=True):
        torch.testing.assert_close(g_sel, g_full, rtol=1e-4, atol=1e-6)
