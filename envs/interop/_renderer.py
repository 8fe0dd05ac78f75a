"""The policy's renderer for an adapted env: by name, for the model whose tokenizer it serves
(the embedded SmolLM2 by default), with the embedded tokenizers registered (offline)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinker_cookbook.renderers import Renderer


def policy_renderer(renderer_name: str | None, model_name_for_tokenizer: str | None) -> Renderer:
    """``renderer_name`` (None: the model's recommended one) for ``model_name_for_tokenizer``."""
    from backend.model import SMOLLM2, register_tokenizers
    from renderers_ext import load_renderer

    register_tokenizers()
    return load_renderer(renderer_name, model_name_for_tokenizer or SMOLLM2)
