"""``forward_backward_custom`` on the local training client (tinker's semantics), and the clear
error every tinker client method without a local counterpart raises (TINY model)."""

from __future__ import annotations

import math

import pytest
import tinker
import torch
from backend_fixtures import TINY, encode, make_service
from tinker import types

from backend import (
    CustomLossError,
    InvalidDatumError,
    LocalServiceClient,
    LocalTrainingClient,
    UnsupportedCallError,
)

BETA = 0.5
PROMPT = "Question: what colour is the sky? Answer:"
CHOSEN = " It is blue on a clear day."
REJECTED = " Bananas, mostly, and also the letter seven."


def pair_datum(prompt: str, answer: str) -> types.Datum:
    """A next-token datum weighted on the answer's tokens only (the cookbook's DPO layout)."""
    p, a = encode(prompt), encode(answer)
    tokens = p + a
    weights = [0.0] * (len(p) - 1) + [1.0] * len(a)
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_torch(torch.tensor(tokens[1:])),
            "weights": types.TensorData.from_torch(torch.tensor(weights)),
        },
    )


def dpo_like_loss(
    data: list[types.Datum], logprobs: list[torch.Tensor]
) -> tuple[torch.Tensor, dict[str, float]]:
    """``-log sigmoid(beta * (w.lp_chosen - w.lp_rejected))`` (no reference: it cancels in the gradient)."""
    w = [d.loss_fn_inputs["weights"].to_torch() for d in data]
    margin = torch.dot(w[0], logprobs[0]) - torch.dot(w[1], logprobs[1])
    loss = -torch.nn.functional.logsigmoid(BETA * margin)
    return loss, {"margin": float(margin.detach())}


@pytest.fixture
def service(tmp_path) -> LocalServiceClient:
    return make_service(tmp_path)


@pytest.fixture
def trainer(service: LocalServiceClient) -> LocalTrainingClient:
    client = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    # One step so that LoRA B is non-zero and every adapter weight has a gradient.
    client.forward_backward([pair_datum(PROMPT, CHOSEN)], "cross_entropy").result()
    client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    return client


def grads(client: LocalTrainingClient) -> list[torch.Tensor]:
    out = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in client.core.params]
    for p in client.core.params:
        p.grad = None
    return out


def direct_logprobs(client: LocalTrainingClient, datum: types.Datum) -> torch.Tensor:
    """Target logprobs straight from the peft model's logits (with a graph), not via the trainer."""
    ids = torch.tensor([datum.model_input.to_ints()])
    logits = client.core.model(input_ids=ids).logits[0].float()
    targets = datum.loss_fn_inputs["target_tokens"].to_torch().long()
    return logits.log_softmax(-1).gather(-1, targets[:, None])[:, 0]


def test_gradient_matches_the_hand_computed_chain_rule(trainer: LocalTrainingClient) -> None:
    data = [pair_datum(PROMPT, CHOSEN), pair_datum(PROMPT, REJECTED)]
    w = [d.loss_fn_inputs["weights"].to_torch() for d in data]

    out = trainer.forward_backward_custom(data, dpo_like_loss).result()
    custom = grads(trainer)

    # By hand: with m = w.lp_c - w.lp_r, dL/dlp_c = -beta * sigmoid(-beta m) * w_c, dL/dlp_r = -dL/dlp_c
    # (with w_r); a cross-entropy pass with weights -dL/dlp has exactly the loss's parameter gradient.
    lp = [o["logprobs"].to_torch() for o in out.loss_fn_outputs]
    m = float(torch.dot(w[0], lp[0]) - torch.dot(w[1], lp[1]))
    s = 1.0 / (1.0 + math.exp(BETA * m))  # sigmoid(-beta m)
    assert out.metrics["loss:sum"] == pytest.approx(math.log1p(math.exp(-BETA * m)), rel=1e-5)
    assert out.metrics["margin"] == pytest.approx(m, rel=1e-5, abs=1e-5)
    hand = [
        types.Datum(
            model_input=d.model_input,
            loss_fn_inputs={
                "target_tokens": d.loss_fn_inputs["target_tokens"],
                "weights": sign * BETA * s * wi,
            },
        )
        for d, wi, sign in zip(data, w, (1.0, -1.0), strict=True)
    ]
    trainer.forward_backward(hand, "cross_entropy").result()
    by_hand = grads(trainer)

    # And independently of the trainer's passes: autograd through the model's logits.
    core = trainer.core
    core.model.train(True)
    lp_direct = [direct_logprobs(trainer, d) for d in data]
    margin = torch.dot(w[0], lp_direct[0]) - torch.dot(w[1], lp_direct[1])
    (-torch.nn.functional.logsigmoid(BETA * margin)).backward()
    direct = grads(trainer)

    assert sum(float(g.abs().sum()) for g in custom) > 0
    for c, h, d in zip(custom, by_hand, direct, strict=True):
        torch.testing.assert_close(c, h, rtol=1e-4, atol=1e-7)
        torch.testing.assert_close(c, d, rtol=1e-3, atol=1e-6)


def test_loss_fn_sees_every_input_and_the_step_follows_its_gradient(trainer: LocalTrainingClient) -> None:
    data = [pair_datum(PROMPT, CHOSEN), pair_datum(PROMPT, REJECTED)]
    seen: dict[str, object] = {}

    def loss_fn(
        batch: list[types.Datum], logprobs: list[torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        seen["n"] = len(batch)
        seen["shapes"] = [tuple(lp.shape) for lp in logprobs]
        seen["leaf"] = all(lp.requires_grad and lp.is_leaf for lp in logprobs)
        return dpo_like_loss(batch, logprobs)

    margins = []
    for _ in range(3):
        out = trainer.forward_backward_custom(data, loss_fn).result()
        trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        margins.append(out.metrics["margin"])
    assert seen == {
        "n": 2,
        "shapes": [(len(d.model_input.to_ints()),) for d in data],
        "leaf": True,
    }
    assert margins[-1] > margins[0]
    assert out.metrics["surrogate_loss:sum"] != out.metrics["loss:sum"]
    assert len(out.loss_fn_outputs) == 2


def test_async_spelling_and_queue_order(trainer: LocalTrainingClient) -> None:
    import asyncio

    data = [pair_datum(PROMPT, CHOSEN), pair_datum(PROMPT, REJECTED)]

    async def run() -> float:
        fut = await trainer.forward_backward_custom_async(data, dpo_like_loss)
        opt = trainer.optim_step(types.AdamParams(learning_rate=1e-2))  # queued behind it
        out = await fut
        await opt
        return out.metrics["loss:sum"]

    assert math.isfinite(asyncio.run(run()))


def test_bad_custom_losses_fail_clearly(trainer: LocalTrainingClient) -> None:
    data = [pair_datum(PROMPT, CHOSEN), pair_datum(PROMPT, REJECTED)]

    def not_a_pair(batch, logprobs):  # type: ignore[no-untyped-def]
        return logprobs[0].sum()

    def ignores_second(batch, logprobs):  # type: ignore[no-untyped-def]
        return logprobs[0].sum(), {}

    def constant(batch, logprobs):  # type: ignore[no-untyped-def]
        return torch.tensor(1.0), {}

    with pytest.raises(CustomLossError, match="must return"):
        trainer.forward_backward_custom(data, not_a_pair).result()
    with pytest.raises(CustomLossError, match="datum 1"):
        trainer.forward_backward_custom(data, ignores_second).result()
    with pytest.raises(CustomLossError, match="no gradient"):
        trainer.forward_backward_custom(data, constant).result()
    no_targets = types.Datum(model_input=types.ModelInput.from_ints([1, 2]), loss_fn_inputs={})
    with pytest.raises(InvalidDatumError, match="target_tokens"):
        trainer.forward_backward_custom([no_targets], dpo_like_loss)  # at the call, not the result
    handle = object.__new__(tinker.LossHandle)
    with pytest.raises(UnsupportedCallError, match="LossHandle"):
        trainer.forward_backward_custom(data, handle)  # type: ignore[arg-type]


def test_tinker_methods_without_a_local_counterpart_name_themselves(
    service: LocalServiceClient, trainer: LocalTrainingClient
) -> None:
    sampler = trainer.save_weights_and_get_sampling_client().result()
    cases = [
        (trainer, "save_weights_external", ("final",)),
        (trainer, "get_telemetry", ()),
        (service, "create_custom_loss", ()),
        (service, "copy_weights", ()),
        (sampler, "get_sampler_handle", ()),
    ]
    for client, name, args in cases:
        assert hasattr(client, name)
        with pytest.raises(UnsupportedCallError, match=rf"tinker\.\w+Client\.{name} is not supported"):
            getattr(client, name)(*args)
    with pytest.raises(AttributeError):
        _ = trainer.no_such_method  # not a tinker method either: a plain AttributeError
