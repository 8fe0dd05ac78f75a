"""Renderers by name for any model, on tokenizers resolved the cookbook's way.

- :func:`load_renderer`: a picklable cookbook renderer for ``(renderer name, model name)``; the
  tokenizer comes from ``tinker_cookbook.tokenizer_utils.get_tokenizer`` (a registered factory,
  a local model folder, the local Hugging Face cache, or the hub when online).
- :func:`recommended_renderer_name`: the cookbook's recommendation for the model
  (``model_info``); for a model the cookbook does not list, the renderer whose rendering of a
  probe conversation is token for token the model's own chat template.
- :func:`register_renderers`: TurnGym's extra renderers in the cookbook's registry. Explicit and
  idempotent (:func:`load_renderer` calls it); importing this package registers nothing.

Nothing here knows the backend. The embedded models' tokenizers (served from a local folder)
are registered with ``tokenizer_utils`` by ``backend.register_tokenizers()``, which the local
backend, the training loop, the gymnasium adapter and the checker call; a worker process that
unpickles renderers of an embedded model calls it first (e.g. as a ``ProcessPoolExecutor``
initializer).
"""

from __future__ import annotations

import functools
from typing import Any, cast

from tinker_cookbook import model_info, renderers, tokenizer_utils
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.renderers.qwen3 import Qwen3Renderer
from tinker_cookbook.tokenizer_utils import Tokenizer

QWEN3_PRESERVE_THINKING = "turngym/qwen3_preserve_thinking"
"""Qwen3 (thinking) renderer that keeps earlier thinking in history: has the extension property."""
PROBE_RENDERERS = ("qwen3_instruct", "llama3")
"""Renderers tried, in order, against the chat template of a model the cookbook does not list
(``qwen3_instruct`` renders plain ChatML)."""
_PROBE: list[Message] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi! What is 2 + 2?"},
    {"role": "assistant", "content": "4."},
    {"role": "user", "content": "And 3 + 3?"},
]


class UnknownRendererError(ValueError):
    """No renderer is known for a model (the message is one line and says what to pass)."""


class TokenizerNotFoundError(OSError):
    """A model's tokenizer cannot be loaded (the message is one line and says where it was looked for)."""


class _Qwen3PreserveThinkingRenderer(Qwen3Renderer):
    """:data:`QWEN3_PRESERVE_THINKING`; unpickles through :func:`load_renderer`, which registers it."""

    def __init__(self, tokenizer: Tokenizer):
        super().__init__(tokenizer, strip_thinking_from_history=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (load_renderer, (QWEN3_PRESERVE_THINKING, self._model_name))


def register_renderers() -> None:
    """Register TurnGym's renderers (:data:`QWEN3_PRESERVE_THINKING`) with tinker-cookbook. Idempotent."""
    if not renderers.is_renderer_registered(QWEN3_PRESERVE_THINKING):
        renderers.register_renderer(
            QWEN3_PRESERVE_THINKING,
            lambda tokenizer, _image_processor=None: _Qwen3PreserveThinkingRenderer(tokenizer),
        )


def _tokenizer(model_name: str) -> Tokenizer:
    """The model's tokenizer through ``tinker_cookbook.tokenizer_utils`` (cached there).

    Raises:
        TokenizerNotFoundError: one line naming the model and where it was looked for.
    """
    try:
        return tokenizer_utils.get_tokenizer(model_name)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TokenizerNotFoundError(
            f"cannot load the tokenizer of {model_name!r} ({first[:160]}): it is not registered "
            "(TurnGym's embedded models: call backend.register_tokenizers()), not a local folder, and "
            "not in the local Hugging Face cache (HF_HUB_CACHE) while the hub is offline"
        ) from None


@functools.cache
def recommended_renderer_name(model_name: str) -> str:
    """The renderer to use for ``model_name`` when none is given.

    The cookbook's recommendation (``model_info.get_recommended_renderer_name``) when it lists the
    model; otherwise the first of :data:`PROBE_RENDERERS` whose rendering of a probe conversation
    (system, user, assistant, user, generation prompt) equals the tokens of the model's own chat
    template (SmolLM2's ChatML template: ``qwen3_instruct``).

    Raises:
        UnknownRendererError: neither applies (one line: pass a renderer name).
    """
    try:
        return model_info.get_recommended_renderer_name(model_name)
    except (ValueError, KeyError):  # ConfigurationError is a ValueError: a model it does not list
        pass
    tokenizer = _tokenizer(model_name)
    reference = _template_tokens(tokenizer)
    if reference is not None:
        for name in PROBE_RENDERERS:
            try:
                rendered = renderers.get_renderer(name, tokenizer).build_generation_prompt(_PROBE).to_ints()
            except Exception:  # a renderer that cannot handle this tokenizer does not match
                continue
            if rendered == reference:
                return name
    raise UnknownRendererError(
        f"no renderer known for model {model_name!r}: tinker-cookbook's model_info does not list it and "
        f"its chat template matches none of {', '.join(PROBE_RENDERERS)}; pass renderer_name=<name>"
    )


def _template_tokens(tokenizer: Any) -> list[int] | None:
    """The probe rendered by the tokenizer's own chat template (None without a usable template)."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    try:
        text = tokenizer.apply_chat_template(_PROBE, tokenize=False, add_generation_prompt=True)
    except Exception:
        return None
    if not isinstance(text, str):
        return None
    return list(tokenizer.encode(text, add_special_tokens=False))


def load_renderer(name: str | None, model_name: str) -> Renderer:
    """A picklable cookbook renderer ``name`` on ``model_name``'s tokenizer.

    ``name=None``: :func:`recommended_renderer_name`. The renderer pickles as its two names and
    is rebuilt the same way on unpickling (tinker-cookbook's convention: builders must pickle).
    """
    register_renderers()
    tokenizer = _tokenizer(model_name)
    resolved = name or recommended_renderer_name(model_name)
    return renderers.get_renderer(resolved, cast(Tokenizer, tokenizer), model_name=model_name)
