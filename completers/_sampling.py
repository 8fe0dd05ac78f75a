"""Token and message completers over a sampling client of either backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import tinker
from tinker_cookbook import renderers
from tinker_cookbook.completers import MessageCompleter, StopCondition, TokenCompleter, TokensWithLogprobs


class SamplingClientLike(Protocol):
    """What the completers need: ``sample`` returning an awaitable of a ``SampleResponse``.

    Both ``tinker.SamplingClient`` and :class:`backend.LocalSamplingClient` satisfy it.
    """

    def sample(
        self, prompt: tinker.ModelInput, num_samples: int, sampling_params: tinker.SamplingParams
    ) -> Any: ...


@dataclass
class SamplingTokenCompleter(TokenCompleter):
    """:class:`TokenCompleter` that samples one completion from a sampling client.

    Same behaviour as the cookbook's ``TinkerTokenCompleter`` (per-call ``max_tokens`` takes the
    minimum; ``context_window`` caps ``max_tokens`` to the room left), for either backend.
    """

    sampling_client: SamplingClientLike
    max_tokens: int
    temperature: float = 1.0
    context_window: int | None = None

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        """Sample tokens after ``model_input`` until a ``stop`` condition or the token budget."""
        budget = self.max_tokens if max_tokens is None else min(self.max_tokens, max_tokens)
        if self.context_window is not None:
            budget = min(budget, self.context_window - model_input.length)
            if budget <= 0:
                raise ValueError(
                    f"Prompt length ({model_input.length}) exceeds context window ({self.context_window})."
                )
        params = tinker.SamplingParams(stop=stop, max_tokens=budget, temperature=self.temperature)
        response = await self.sampling_client.sample(model_input, 1, params)
        seq = response.sequences[0]
        return TokensWithLogprobs(tokens=seq.tokens, maybe_logprobs=seq.logprobs, stop_reason=seq.stop_reason)


class SamplingMessageCompleter(MessageCompleter):
    """:class:`MessageCompleter` that renders messages, samples, and parses the reply.

    Args:
        sampling_client: a tinker or local sampling client.
        renderer: converts messages to tokens and back (e.g. ``qwen3_instruct`` for SmolLM2).
        max_tokens: most tokens per reply.
        stop_condition: defaults to the renderer's stop sequences.
        temperature: sampling temperature.
    """

    def __init__(
        self,
        sampling_client: SamplingClientLike,
        renderer: renderers.Renderer,
        max_tokens: int,
        stop_condition: StopCondition | None = None,
        temperature: float = 1.0,
    ) -> None:
        self.sampling_client = sampling_client
        self.renderer = renderer
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.stop_condition = renderer.get_stop_sequences() if stop_condition is None else stop_condition

    async def __call__(self, messages: list[renderers.Message]) -> renderers.Message:
        """The assistant's reply to ``messages``."""
        model_input = self.renderer.build_generation_prompt(messages)
        params = tinker.SamplingParams(
            temperature=self.temperature, max_tokens=self.max_tokens, stop=self.stop_condition
        )
        response = await self.sampling_client.sample(model_input, 1, params)
        parsed, _ = self.renderer.parse_response(response.sequences[0].tokens)
        result: renderers.Message = {"role": "assistant", "content": parsed["content"]}
        if "tool_calls" in parsed:
            result["tool_calls"] = parsed["tool_calls"]
        return result
