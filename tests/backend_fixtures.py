"""Shared helpers for the local-backend tests (fixtures are defined in each test module)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tinker import types

from backend import TINY, LocalServiceClient, load_tokenizer


def make_service(tmp_path: os.PathLike[str] | str, **kwargs: object) -> LocalServiceClient:
    """A local service client whose checkpoints go under ``tmp_path``."""
    return LocalServiceClient(tmp_path, **kwargs)  # type: ignore[arg-type]


def encode(text: str) -> list[int]:
    """Token ids of ``text`` with the embedded tokenizer."""
    return list(load_tokenizer().encode(text))


def prompt(text: str) -> types.ModelInput:
    """``text`` as a ``ModelInput``."""
    return types.ModelInput.from_ints(encode(text))


def ce_datum(tokens: list[int], weights: list[float] | None = None) -> types.Datum:
    """Next-token cross-entropy datum over ``tokens``."""
    inputs: dict[str, list[int] | list[float]] = {"target_tokens": tokens[1:]}
    if weights is not None:
        inputs["weights"] = weights
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs)  # type: ignore[arg-type]


def rl_datum(tokens: list[int], sampled_logprobs: list[float], advantages: list[float]) -> types.Datum:
    """RL datum (importance_sampling / ppo) over ``tokens``; lists are aligned with ``tokens[1:]``."""
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "logprobs": sampled_logprobs, "advantages": advantages},  # type: ignore[dict-item]
    )


__all__ = ["TINY", "ce_datum", "encode", "make_service", "prompt", "rl_datum"]
