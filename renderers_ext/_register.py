"""Offline registration: cookbook renderers on the embedded SmolLM2 tokenizer, no hub access.

tinker-cookbook renderers pickle as ``(renderer_name, model_name)`` and rebuild their tokenizer
with ``tinker_cookbook.tokenizer_utils.get_tokenizer(model_name)``, which would otherwise go to
the Hugging Face hub. Registering our local tokenizer under the model names we serve makes
``get_renderer`` + pickling work offline (builders must pickle).
"""

from __future__ import annotations

from typing import cast

from tinker_cookbook import renderers, tokenizer_utils
from tinker_cookbook.renderers import Renderer
from tinker_cookbook.renderers.qwen3 import Qwen3Renderer
from tinker_cookbook.tokenizer_utils import Tokenizer

from backend.model import KNOWN_MODELS, SMOLLM2, load_tokenizer

QWEN3_PRESERVE_THINKING = "turngym/qwen3_preserve_thinking"
"""Qwen3 (thinking) renderer that keeps earlier thinking in history: has the extension property."""

_registered = False


def register_offline() -> None:
    """Register the local tokenizers and TurnGym's extra renderers with tinker-cookbook. Idempotent."""
    global _registered
    if _registered:
        return
    for name in KNOWN_MODELS:
        if not tokenizer_utils.is_tokenizer_registered(name):
            tokenizer_utils.register_tokenizer(name, lambda name=name: cast(Tokenizer, load_tokenizer(name)))
    if not renderers.is_renderer_registered(QWEN3_PRESERVE_THINKING):
        renderers.register_renderer(
            QWEN3_PRESERVE_THINKING,
            lambda tokenizer, _image_processor=None: Qwen3Renderer(
                tokenizer, strip_thinking_from_history=False
            ),
        )
    _registered = True


def get_renderer(name: str = "qwen3_instruct", model_name: str = SMOLLM2) -> Renderer:
    """A picklable cookbook renderer by name on a locally served model's tokenizer."""
    register_offline()
    return renderers.get_renderer(name, cast(Tokenizer, load_tokenizer(model_name)), model_name=model_name)
