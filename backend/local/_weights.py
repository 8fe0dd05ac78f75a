"""Base-model cache and LoRA merging for sampler copies."""

from __future__ import annotations

import copy
import threading
from typing import Any

import torch

from backend.model import load_model

_lock = threading.Lock()
_pristine: dict[str, Any] = {}


def pristine_base(name: str) -> Any:
    """The base model ``name``, loaded once per process and never modified (eval mode)."""
    with _lock:
        model = _pristine.get(name)
        if model is None:
            model = load_model(name).eval()
            for p in model.parameters():
                p.requires_grad_(False)
            _pristine[name] = model
        return model


def fresh_base(name: str) -> Any:
    """A private copy of the base model ``name`` (for training or merging)."""
    return copy.deepcopy(pristine_base(name))


def merged_model(name: str, adapter: dict[str, torch.Tensor], scaling: float) -> Any:
    """A copy of base model ``name`` with the LoRA ``adapter`` merged in: ``W += scaling * B @ A``.

    ``adapter`` uses peft state-dict names (``base_model.model.<module>.lora_A.weight``).
    """
    model = fresh_base(name)
    modules = dict(model.named_modules())
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in adapter.items():
        for part in ("lora_A", "lora_B"):
            marker = f".{part}."
            if marker in key:
                module = key.split(marker)[0].removeprefix("base_model.model.")
                pairs.setdefault(module, {})[part] = value
    with torch.no_grad():
        for module, ab in pairs.items():
            if module not in modules or "lora_A" not in ab or "lora_B" not in ab:
                raise KeyError(f"adapter entry {module!r} does not match a module of {name}")
            weight = modules[module].weight
            weight += scaling * (ab["lora_B"].to(weight.dtype) @ ab["lora_A"].to(weight.dtype))
    return model.eval()
