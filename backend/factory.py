"""Pick the backend: the real Tinker service or the embedded local one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import tinker

from backend.local._service import LocalServiceClient
from backend.model import BackendName


def resolve_backend(backend: BackendName = "auto") -> Literal["local", "tinker"]:
    """``"auto"`` means ``"tinker"`` when ``TINKER_API_KEY`` is set (non-empty), else ``"local"``."""
    if backend == "auto":
        return "tinker" if os.environ.get("TINKER_API_KEY") else "local"
    if backend not in ("local", "tinker"):
        raise ValueError(f"unknown backend {backend!r}; use 'auto', 'local' or 'tinker'")
    return backend


def make_service_client(
    backend: BackendName = "auto",
    *,
    root: str | Path | None = None,
    **kwargs: Any,
) -> LocalServiceClient | tinker.ServiceClient:
    """A service client for ``backend``.

    - ``"tinker"``: a real ``tinker.ServiceClient(**kwargs)``, untouched.
    - ``"local"``: :class:`~backend.LocalServiceClient` (``root`` and ``kwargs`` are passed on:
      ``max_batch_size``, ``prefix_cache_tokens``, ``max_tokens_per_pass``, ``lora_alpha``,
      ``compute_dtype``, ``seed``).
    - ``"auto"``: Tinker when ``TINKER_API_KEY`` is set, otherwise local.
    """
    if resolve_backend(backend) == "tinker":
        return tinker.ServiceClient(**kwargs)
    return LocalServiceClient(root, **kwargs)
