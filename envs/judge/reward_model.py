"""A learned preference (reward) model as a pairwise judge: the judge spec ``rm:<sampler path>``.

The model is one the cookbook's RLHF step 2 trains (``ChatDatasetBuilderFromComparisons`` +
``supervised.train``): it reads the prompt, ``==== Completion A ====``, the first answer,
``==== Completion B ====``, the second, ``==== Preference ====`` (the cookbook's
``ComparisonRendererFromChatRenderer``) and writes ``A``, ``B`` or ``Tie``. Here the cookbook's own
``PreferenceModelFromChatRenderer`` scores each comparison, so a reward model trained on a service
works unchanged.

:class:`PreferenceModelJudge` is a ``MessageCompleter`` for the pairwise env: it reads our
comparison prompt (:func:`~envs.judge.pairwise.comparison_prompt`: the conversation and the two
response blocks; the reference answers, if any, are *not* shown to the model), asks the preference
model and answers ``Preferred: A|B|tie`` (:func:`~envs.judge.pairwise.parse_preference`). The spec
``rm:local://...`` loads the weights on the embedded backend (any ``local://`` path: relative to
the checkpoint root of the process, or ``local:///abs/folder``), ``rm:tinker://...`` on the service
``judge.base_url`` points at; ``judge.renderer_name`` is the renderer the model was trained with
(default: the base model's recommended one).

By default the verdict is :class:`SymmetricPreferenceModel`'s, not the cookbook's greedy token: a
small reward model's greedy verdict often follows the A/B order more than the answers (an answer
that wins as A and loses as B scores 1/2, a group of such verdicts gives RL no signal). The
symmetric model reads the label's log-odds, ``d = log p(B) - log p(A)``, in both orders and takes
``(d(x, y) - d(y, x)) / 2``: a bias toward one position adds the same amount to both and cancels,
and the verdict is graded (a probability that B is better), so close answers still differ.
The judge passes that probability on (``{"preferred": ..., "p_b": ...}``).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import TYPE_CHECKING, Any

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.judge.text import RESPONSE_A_TAG, RESPONSE_B_TAG, ROLE_NAMES

if TYPE_CHECKING:
    from tinker_cookbook.preference.types import Comparison, PreferenceModel

    from envs.judge.config import JudgeConfig

__all__ = [
    "PreferenceModelJudge",
    "SymmetricPreferenceModel",
    "comparison_from_prompt",
    "load_preference_model",
    "rm_judge",
]

_ROLES = {name: role for role, name in ROLE_NAMES.items()}
_ROLE_RE = re.compile(r"^({}): ".format("|".join(map(re.escape, ROLE_NAMES.values()))), re.MULTILINE)


def _block(text: str, tag: str) -> str | None:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return match.group(1) if match else None


def _messages(block: str, default_role: str) -> list[Message]:
    parts = _ROLE_RE.split(block)
    if len(parts) == 1:
        return [{"role": default_role, "content": block.strip()}]  # type: ignore[typeddict-item]
    return [
        {"role": _ROLES[name], "content": text.strip()}  # type: ignore[typeddict-item]
        for name, text in zip(parts[1::2], parts[2::2], strict=True)
    ]


def comparison_from_prompt(messages: list[Message]) -> Comparison:
    """The cookbook ``Comparison`` a pairwise comparison prompt describes (without its reference)."""
    from tinker_cookbook.preference.types import Comparison

    text = "\n".join(get_text_content(m) for m in messages)
    conversation = _block(text, "conversation")
    block_a, block_b = _block(text, RESPONSE_A_TAG), _block(text, RESPONSE_B_TAG)
    if conversation is None or block_a is None or block_b is None:
        raise ValueError("a preference model compares two responses; the prompt has no response blocks")
    return Comparison(
        prompt_conversation=_messages(conversation, "user"),
        completion_A=_messages(block_a, "assistant"),
        completion_B=_messages(block_b, "assistant"),
    )


class SymmetricPreferenceModel:
    """A cookbook ``PreferenceModel`` that scores a comparison in both orders, from the label's
    log-odds, so a position bias cancels (see the module docstring).

    ``__call__`` returns the cookbook's score in [-1, 1] (-1: A is better, 1: B is better),
    ``2 * p_b - 1`` with ``p_b = sigmoid((d(A, B) - d(B, A)) / 2)`` and
    ``d(x, y) = log p("B" | x, y) - log p("A" | x, y)``. Swapping A and B negates the score.

    Each order costs one sampled token, as the cookbook's model (greedy, ``max_tokens=1``; the
    sampler batches them): the label it writes and that label's probability ``p``; the other
    label gets ``1 - p`` (a reward model trained on ``A`` / ``B`` puts its mass on the two), and
    a reply that is neither label says nothing (``d = 0``). Exact logprobs of both labels would
    take two prompt-logprob passes per order, which the embedded backend runs one at a time.
    """

    def __init__(self, convo_renderer: Any, sampling_client: Any) -> None:
        from tinker_cookbook.preference.types import (
            Comparison,
            ComparisonRendererFromChatRenderer,
            LabeledComparison,
        )

        self.comparison_renderer = ComparisonRendererFromChatRenderer(convo_renderer)
        self.sampling_client = sampling_client
        probe = Comparison(
            prompt_conversation=[{"role": "user", "content": "?"}],
            completion_A=[{"role": "assistant", "content": "a"}],
            completion_B=[{"role": "assistant", "content": "b"}],
        )
        # the label tokens as the cookbook trains them (its example ends at the label's first token)
        self._labels = {
            self.comparison_renderer.to_model_input_weights(LabeledComparison(comparison=probe, label=label))[
                0
            ].to_ints()[-1]: label
            for label in ("A", "B")
        }
        if len(self._labels) != 2:
            raise ValueError("the renderer gives the labels A and B the same first token")

    async def _log_odds_one_order(self, comparison: Comparison) -> float:
        """``d = log p(B) - log p(A)`` in the order given, from one greedy label token."""
        import tinker

        response = await self.sampling_client.sample_async(
            prompt=self.comparison_renderer.build_generation_prompt(comparison),
            num_samples=1,
            sampling_params=tinker.SamplingParams(temperature=0.0, max_tokens=1),
        )
        sequence = response.sequences[0]
        label = self._labels.get(sequence.tokens[0]) if sequence.tokens else None
        if label is None:
            return 0.0
        if not sequence.logprobs:
            raise ValueError("the preference model's sampler returned no logprob for its label")
        p = min(max(math.exp(sequence.logprobs[0]), 1e-6), 1.0 - 1e-6)
        d = math.log(p) - math.log1p(-p)  # log-odds of the label written
        return d if label == "B" else -d

    async def log_odds_b(self, comparison: Comparison) -> float:
        """``(d(A, B) - d(B, A)) / 2``: how much more likely B is the better answer (log-odds)."""
        forward, backward = await asyncio.gather(
            self._log_odds_one_order(comparison), self._log_odds_one_order(comparison.swap())
        )
        return (forward - backward) / 2

    async def probability_b(self, comparison: Comparison) -> float:
        """The probability that B is the better answer, order-symmetric."""
        x = await self.log_odds_b(comparison)
        return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))

    async def __call__(self, comparison: Comparison) -> float:
        return 2.0 * await self.probability_b(comparison) - 1.0


def load_preference_model(
    path: str,
    *,
    renderer_name: str | None = None,
    base_url: str | None = None,
    service: Any = None,
    symmetric: bool = True,
) -> PreferenceModel | SymmetricPreferenceModel:
    """The preference model on the sampler weights at ``path`` (``local://`` on the embedded
    backend, ``tinker://`` on a service): :class:`SymmetricPreferenceModel`, or with
    ``symmetric=False`` the cookbook's ``PreferenceModelFromChatRenderer`` (one greedy label
    token, in the order given)."""
    import tinker
    from tinker_cookbook import model_info
    from tinker_cookbook.preference.types import PreferenceModelFromChatRenderer

    from renderers_ext import load_renderer

    local = path.startswith("local://")
    if service is None:
        if local:
            from backend import make_service_client

            service = make_service_client("local")
        else:
            service = tinker.ServiceClient(base_url=base_url)
    client = service.create_sampling_client(model_path=path)
    if local and not hasattr(type(client), "sample_async"):
        client = client.result()  # the local service answers with a future
    base_model = client.get_base_model()
    renderer = load_renderer(
        renderer_name or model_info.get_recommended_renderer_name(base_model), base_model
    )
    if symmetric:
        return SymmetricPreferenceModel(renderer, client)
    return PreferenceModelFromChatRenderer(renderer, client)


class PreferenceModelJudge(MessageCompleter):
    """Answers a pairwise comparison prompt with a preference model's verdict: ``Preferred: A|B|tie``
    for a model with hard verdicts, ``{"preferred": "A|B|tie", "p_b": <probability>}`` for a graded
    one (:class:`SymmetricPreferenceModel`), which the pairwise env reads as a soft win."""

    def __init__(self, model: PreferenceModel | SymmetricPreferenceModel) -> None:
        self.model = model

    async def __call__(self, messages: list[Message]) -> Message:
        comparison = comparison_from_prompt(messages)
        if isinstance(self.model, SymmetricPreferenceModel):
            p_b = await self.model.probability_b(comparison)
            choice = "A" if p_b < 0.5 else "B" if p_b > 0.5 else "tie"
            return {"role": "assistant", "content": json.dumps({"preferred": choice, "p_b": round(p_b, 6)})}
        score = await self.model(comparison)  # -1: A, 1: B, 0: tie
        choice = "A" if score < 0 else "B" if score > 0 else "tie"
        return {"role": "assistant", "content": f"Preferred: {choice}"}


def rm_judge(config: JudgeConfig, path: str) -> MessageCompleter:
    """The completer of the judge spec ``rm:<path>`` (a built-in kind of the registry)."""
    if not path:
        raise ValueError("a reward-model judge needs its weights: 'rm:<local:// or tinker:// sampler path>'")
    return PreferenceModelJudge(
        load_preference_model(path, renderer_name=config.renderer_name, base_url=config.base_url)
    )
