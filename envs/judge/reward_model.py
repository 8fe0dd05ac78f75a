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
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.judge.text import RESPONSE_A_TAG, RESPONSE_B_TAG, ROLE_NAMES

if TYPE_CHECKING:
    from tinker_cookbook.preference.types import Comparison, PreferenceModel

    from envs.judge.config import JudgeConfig

__all__ = ["PreferenceModelJudge", "comparison_from_prompt", "load_preference_model", "rm_judge"]

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


def load_preference_model(
    path: str, *, renderer_name: str | None = None, base_url: str | None = None, service: Any = None
) -> PreferenceModel:
    """The cookbook's ``PreferenceModelFromChatRenderer`` on the sampler weights at ``path``
    (``local://`` on the embedded backend, ``tinker://`` on a service)."""
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
    return PreferenceModelFromChatRenderer(renderer, client)


class PreferenceModelJudge(MessageCompleter):
    """Answers a pairwise comparison prompt with a preference model's verdict."""

    def __init__(self, model: PreferenceModel) -> None:
        self.model = model

    async def __call__(self, messages: list[Message]) -> Message:
        score = await self.model(comparison_from_prompt(messages))  # -1: A, 1: B, 0: tie
        choice = "A" if score < 0 else "B" if score > 0 else "tie"
        return {"role": "assistant", "content": f"Preferred: {choice}"}


def rm_judge(config: JudgeConfig, path: str) -> MessageCompleter:
    """The completer of the judge spec ``rm:<path>`` (a built-in kind of the registry)."""
    if not path:
        raise ValueError("a reward-model judge needs its weights: 'rm:<local:// or tinker:// sampler path>'")
    return PreferenceModelJudge(
        load_preference_model(path, renderer_name=config.renderer_name, base_url=config.base_url)
    )
